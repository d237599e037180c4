package testcluster

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing t (naming what) once within
// has passed: the one way the tests wait for an effect. The pause between
// checks starts at 10 ms and doubles up to 200 ms, so that a quick effect
// is seen at once and a slow one is not polled in a tight loop.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := 10 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 200*time.Millisecond)
	}
}
