package sample

import "testing"

func TestPasses(t *testing.T) { t.Log("passing output, not shown") }

func TestFails(t *testing.T) { t.Error("the failure message") }

func TestSkips(t *testing.T) { t.Skip("Redis not reachable") }

func TestParent(t *testing.T) {
	t.Run("skipped", func(t *testing.T) { t.Skip("allowed reason") })
	t.Run("passes", func(t *testing.T) {})
}
