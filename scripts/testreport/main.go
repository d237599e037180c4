// Command testreport reads `go test -json` on stdin and prints what a
// plain `go test` would (package results, the output of failed tests), keeps
// the whole output in a log file, and lists the tests that were skipped. With
// -fail-on-skip it exits 1 when a test was skipped that -allow-skip does not
// name: scripts/test.sh runs every test with STAMEN_INTEGRATION=1, where a
// skip means something the tests need was missing and nobody noticed.
//
//	go test -json ./... 2>&1 | testreport -log go-test.log -fail-on-skip
//
// Lines that are not JSON (a build failure's text) are passed through.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, plus
// the build events of go test -json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

type skip struct{ name, reason string }

type report struct {
	console, log io.Writer
	verbose      bool
	// output buffers each running test's lines until it passes (dropped)
	// or fails (printed).
	output  map[string]*strings.Builder
	skipped []skip
}

func newReport(console, log io.Writer, verbose bool) *report {
	return &report{console: console, log: log, verbose: verbose, output: map[string]*strings.Builder{}}
}

func (r *report) line(raw string) {
	var ev event
	if !strings.HasPrefix(raw, "{") || json.Unmarshal([]byte(raw), &ev) != nil {
		fmt.Fprintln(r.console, raw)
		fmt.Fprintln(r.log, raw)
		return
	}
	switch ev.Action {
	case "build-output":
		fmt.Fprint(r.console, ev.Output)
		fmt.Fprint(r.log, ev.Output)
	case "output":
		fmt.Fprint(r.log, ev.Output)
		if r.verbose {
			fmt.Fprint(r.console, ev.Output)
			return
		}
		if ev.Test == "" {
			if ev.Output != "PASS\n" {
				fmt.Fprint(r.console, ev.Output)
			}
			return
		}
		key := ev.Package + " " + ev.Test
		b := r.output[key]
		if b == nil {
			b = &strings.Builder{}
			r.output[key] = b
		}
		b.WriteString(ev.Output)
	case "pass", "fail", "skip":
		if ev.Test == "" {
			return
		}
		key := ev.Package + " " + ev.Test
		out := ""
		if b := r.output[key]; b != nil {
			out = b.String()
		}
		delete(r.output, key)
		if ev.Action == "fail" && !r.verbose {
			fmt.Fprint(r.console, out)
		}
		if ev.Action == "skip" {
			r.skipped = append(r.skipped, skip{key, skipReason(out)})
		}
	}
}

// skipReason is what the test logged, without go test's own lines.
func skipReason(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		lines = append(lines, t)
	}
	return strings.Join(lines, " | ")
}

// unexpected are the skipped tests no pattern in allow matches.
func unexpected(skipped []skip, allow []*regexp.Regexp) []skip {
	var out []skip
	for _, s := range skipped {
		ok := false
		for _, re := range allow {
			if re.MatchString(s.name) {
				ok = true
				break
			}
		}
		if !ok {
			out = append(out, s)
		}
	}
	return out
}

type patterns []*regexp.Regexp

func (p *patterns) String() string { return fmt.Sprint(*p) }
func (p *patterns) Set(s string) error {
	re, err := regexp.Compile(s)
	if err != nil {
		return err
	}
	*p = append(*p, re)
	return nil
}

func main() {
	logPath := flag.String("log", "", "file for the whole output, as go test -v prints it")
	verbose := flag.Bool("v", false, "print the whole output, not only failures")
	failOnSkip := flag.Bool("fail-on-skip", false, "exit 1 when a test not named by -allow-skip was skipped")
	var allow patterns
	flag.Var(&allow, "allow-skip", `regexp on "<package> <test>" of a skip that is expected (repeatable)`)
	flag.Parse()

	log := io.Discard
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
		defer f.Close()
		log = f
	}
	r := newReport(os.Stdout, log, *verbose)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		r.line(sc.Text())
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testreport: read:", err)
		os.Exit(2)
	}
	if len(r.skipped) > 0 {
		fmt.Printf("\n%d skipped tests:\n", len(r.skipped))
		for _, s := range r.skipped {
			fmt.Printf("  %s: %s\n", s.name, s.reason)
		}
	}
	if bad := unexpected(r.skipped, allow); *failOnSkip && len(bad) > 0 {
		fmt.Printf("FAIL: %d tests skipped that must run here (a missing server or tool?); "+
			"fix the cause, or allow the skip with -allow-skip in scripts/test.sh\n", len(bad))
		if f, ok := log.(*os.File); ok {
			f.Close()
		}
		os.Exit(1)
	}
}
