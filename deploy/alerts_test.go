package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestAlertRules: promtool (a pinned Go module) accepts the alert rules,
// as Prometheus would load them, and every metric they name is one the
// dashboard test finds on a real stamen's /metrics or one stamen
// registers.
func TestAlertRules(t *testing.T) {
	testcluster.SkipIfShort(t, "promtool runs as a Go module (minutes to build on a cold cache)")
	path, err := filepath.Abs("../examples/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := goRun(t, promtoolModule, nil, "check", "rules", path)
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules said:\n%s", out)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../internal/metrics/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile("../internal/metrics/ops.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metricRef.FindAllStringSubmatch(string(raw), -1) {
		if !strings.Contains(string(src)+string(ops), `"`+m[1]+`"`) {
			t.Errorf("the rules name %s, which stamen does not export", m[1])
		}
	}
}
