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
	if !Within(within, cond) {
		t.Fatalf("not within %s: %s", within, what)
	}
}

// Within polls cond as Eventually does and reports whether it held before
// within passed, for a caller that acts on a miss instead of failing.
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	pause := 10 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 200*time.Millisecond)
	}
	return true
}
