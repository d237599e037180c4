package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFlag: `stamen --version` prints the version, commit and build
// date a build stamped (as `make dist` does) and exits 0 without starting
// anything. Only the link differs from buildBinary's build, so the
// compiled packages are shared.
func TestVersionFlag(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "stamen")
	pkg := "github.com/stamen-dev/stamen/internal/version"
	cmd := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-X "+pkg+".version=v9.8.7 -X "+pkg+".commit=0123abcd -X "+pkg+".date=2026-01-02T03:04:05Z", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("stamen --version: %v\n%s", err, out)
	}
	for _, want := range []string{"stamen v9.8.7", "commit 0123abcd", "built 2026-01-02T03:04:05Z", "go1."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stamen --version printed %q, which lacks %q", out, want)
		}
	}
}
