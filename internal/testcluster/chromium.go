package testcluster

import (
	"os/exec"
	"testing"
)

// Chromium is the browser tests drive headless: Debian's chromium package,
// which scripts/services.sh installs.
const Chromium = "/usr/bin/chromium"

// RequireChromium skips the test unless Chromium is installed. As with
// Require, CI=true or STAMEN_INTEGRATION=1 turn a missing browser into a
// failure, and -short skips only when neither is set.
func RequireChromium(t testing.TB) {
	t.Helper()
	SkipIfShort(t, "testcluster: browser test")
	if _, err := exec.LookPath(Chromium); err != nil {
		msg := "testcluster: no headless browser here: " + err.Error() +
			"\nRun `make test`, or `bash scripts/services.sh` (as root), which installs Debian's chromium."
		if strict() {
			t.Fatal(msg + "\n(failing instead of skipping because CI=true or STAMEN_INTEGRATION=1)")
		}
		t.Skip(msg)
	}
}
