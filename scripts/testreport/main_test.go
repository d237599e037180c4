package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestReport runs go test -json on a sample package with a passing, a
// failing and two skipped tests and reads its output as scripts/test.sh does.
func TestReport(t *testing.T) {
	cmd := exec.Command("go", "test", "-json", "-count=1", ".")
	cmd.Dir = "testdata/sample"
	cmd.Env = append(cmd.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.Output()
	if err == nil {
		t.Fatal("the sample package passed: its failing test did not run")
	}
	var console, log bytes.Buffer
	r := newReport(&console, &log, false)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		r.line(sc.Text())
	}
	for _, want := range []string{"--- FAIL: TestFails", "the failure message", "FAIL\tsample"} {
		if !strings.Contains(console.String(), want) {
			t.Errorf("console lacks %q:\n%s", want, console.String())
		}
	}
	if strings.Contains(console.String(), "passing output") {
		t.Errorf("console shows a passing test's output:\n%s", console.String())
	}
	if !strings.Contains(log.String(), "passing output") || !strings.Contains(log.String(), "--- SKIP: TestSkips") {
		t.Errorf("log is not the whole output:\n%s", log.String())
	}
	got := map[string]string{}
	for _, s := range r.skipped {
		got[s.name] = s.reason
	}
	if len(got) != 2 || !strings.Contains(got["sample TestSkips"], "Redis not reachable") ||
		!strings.Contains(got["sample TestParent/skipped"], "allowed reason") {
		t.Errorf("skipped = %q", got)
	}
	bad := unexpected(r.skipped, []*regexp.Regexp{regexp.MustCompile(`^sample TestParent/skipped$`)})
	if len(bad) != 1 || bad[0].name != "sample TestSkips" {
		t.Errorf("unexpected skips = %v, want only sample TestSkips", bad)
	}
}

// TestNotJSON: a line go test did not encode (a build error) is passed on.
func TestNotJSON(t *testing.T) {
	var console, log bytes.Buffer
	r := newReport(&console, &log, false)
	r.line("# sample\n./x.go:1: syntax error")
	if !strings.Contains(console.String(), "syntax error") || !strings.Contains(log.String(), "syntax error") {
		t.Errorf("console %q, log %q", console.String(), log.String())
	}
}
