package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

var (
	// readmeStartLine is the start line the README shows, and stamen logs.
	readmeStartLine = regexp.MustCompile(`broker_url=(redis://\S+) result_backend=(redis://\S+)`)
	// readmeBlock is a fenced sh block.
	readmeBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")
)

// The URLs and address of the README, replaced by the test's own.
const (
	readmeBroker  = "redis://:PASSWORD@127.0.0.1:6380/0"
	readmeBackend = "redis://:PASSWORD@127.0.0.1:6380/1"
	readmeAPI     = "127.0.0.1:5555"
)

// readmeSection is the README's section that starts with heading.
func readmeSection(t *testing.T, readme, heading string) string {
	t.Helper()
	start := strings.Index(readme, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("README.md has no %q section", heading)
	}
	s := readme[start+1:]
	if end := strings.Index(s[len(heading):], "\n## "); end >= 0 {
		s = s[:len(heading)+end]
	}
	return s
}

// readmeCommands is every line of the fenced sh blocks of section.
func readmeCommands(section string) []string {
	var out []string
	for _, m := range readmeBlock.FindAllStringSubmatch(section, -1) {
		for line := range strings.Lines(m[1]) {
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	return out
}

// TestReadmeRunIt follows the README as a new user does, against the
// binary and real Celery workers (the system's 5.2 and 5.6): "Run it"
// starts stamen on its embedded broker (the test starts the binary it
// built, with the same flags, and reads the URLs from the start line the
// README shows); then every command of the "Five-minute tour" runs as
// written, through bash, in the repository: the quickstart worker, send.py,
// and the curl calls. Only the password, the ports and python3 (the
// interpreter of the Celery release under test) differ from the README's.
// Each step's effect is checked: the tasks send.py sent reach their final
// states, the failures are listed and grouped, the retry sends them again
// and they fail again, and the pool grows by two processes.
func TestReadmeRunIt(t *testing.T) {
	testcluster.Require(t)
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	run := readmeCommands(readmeSection(t, readme, "## Run it"))
	if len(run) != 1 || run[0] != "go run ./cmd/stamen" {
		t.Fatalf("the README's Run it runs %q, want go run ./cmd/stamen (what this test starts)", run)
	}
	if !readmeStartLine.MatchString(readme) || !strings.Contains(readme, "broker_url="+readmeBroker+" result_backend="+readmeBackend) {
		t.Fatalf("the README's start line does not show %s and %s", readmeBroker, readmeBackend)
	}
	tour := readmeCommands(readmeSection(t, readme, "## Five-minute tour"))
	if len(tour) != 9 {
		t.Fatalf("the README's tour has %d commands; this test knows 9:\n%s", len(tour), strings.Join(tour, "\n"))
	}
	setup, worker, send, curls := tour[:2], tour[2], tour[3], tour[4:]
	if !strings.HasPrefix(setup[0], "cd ") || !strings.HasPrefix(setup[1], "export ") ||
		!strings.Contains(worker, " worker ") || !strings.Contains(send, "send.py") {
		t.Fatalf("the tour's commands are not cd, export, the worker, send.py: %q", tour[:4])
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)

	for _, release := range []string{testcluster.Celery52, testcluster.Celery56} {
		t.Run("celery"+release, func(t *testing.T) {
			testcluster.RequireCelery(t, release)
			brokerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			api := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			_, port, _ := strings.Cut(api, ":")
			cmd := exec.CommandContext(ctx, bin, "--port", port, "--embedded_broker_address", brokerAddr,
				"--db", filepath.Join(t.TempDir(), "stamen.db"))
			cmd.Env = append(os.Environ(), "STAMEN_EMBEDDED_BROKER_PASSWORD=")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}()
			// The URLs the start line shows, with the generated password.
			var broker, backend string
			lines := bufio.NewScanner(stderr)
			for broker == "" && lines.Scan() {
				if u := readmeStartLine.FindStringSubmatch(lines.Text()); u != nil {
					broker, backend = u[1], u[2]
				}
			}
			if broker == "" {
				t.Fatalf("stamen logged no embedded broker URLs (%v)", lines.Err())
			}
			go func() { _, _ = io.Copy(io.Discard, stderr) }()

			// What the reader changes: the password (and here the ports).
			local := strings.NewReplacer(readmeBroker, broker, readmeBackend, backend, readmeAPI, api)
			prelude := local.Replace(strings.Join(setup, "\n"))
			// python3 is the interpreter of the release under test.
			pybin := t.TempDir()
			if err := os.Symlink(testcluster.Python, filepath.Join(pybin, "python3")); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), "PATH="+pybin+":"+os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1")
			if release != testcluster.Celery52 {
				env = append(env, "PYTHONPATH="+filepath.Join(testcluster.CeleryCache(), release, "root", "usr", "lib", "python3", "dist-packages"))
			}
			shell := func(command string) *exec.Cmd {
				c := exec.CommandContext(ctx, "bash", "-euc", prelude+"\n"+local.Replace(command))
				c.Dir, c.Env = root, env
				return c
			}
			// sh runs one of the tour's commands to its end: its output.
			sh := func(command string) string {
				t.Helper()
				out, err := shell(command).CombinedOutput()
				if err != nil {
					t.Fatalf("the README's %q: %v\n%s", command, err, out)
				}
				return string(out)
			}

			w := shell(worker)
			w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			wout := &syncBuffer{}
			w.Stdout, w.Stderr = wout, wout
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- w.Wait() }()
			defer func() {
				_ = syscall.Kill(-w.Process.Pid, syscall.SIGKILL) // the pool's children too
				<-exited
				if t.Failed() {
					t.Logf("worker output:\n%s", wout.String())
				}
			}()

			base := "http://" + api
			get := func(path string) string {
				t.Helper()
				resp, err := http.Get(base + path)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return string(b)
			}
			// states counts the tasks of name by state.
			states := func(name string) map[string]int {
				t.Helper()
				var tasks map[string]struct{ State string }
				if err := json.Unmarshal([]byte(get("/api/tasks?taskname="+name)), &tasks); err != nil {
					t.Fatalf("/api/tasks?taskname=%s: %v", name, err)
				}
				n := map[string]int{}
				for _, task := range tasks {
					n[task.State]++
				}
				return n
			}
			testcluster.Eventually(t, 15*time.Second, "stamen answering /healthcheck", func() bool {
				resp, err := http.Get(base + "/healthcheck")
				if err == nil {
					resp.Body.Close()
				}
				return err == nil
			})
			// The worker alive by its events: stamen hears what it sends.
			testcluster.Eventually(t, 60*time.Second, "the tour's worker quickstart@tour online", func() bool {
				select {
				case err := <-exited:
					exited <- err // for the deferred wait
					t.Fatalf("the README's worker command %q exited: %v", worker, err)
				default:
				}
				return strings.Contains(get("/api/workers?status=1"), `"quickstart@tour": true`)
			})

			// 2. send.py: every task reaches its final state.
			if out := sh(send); !strings.Contains(out, "sent 10 tasks and a chain of 3") {
				t.Fatalf("send.py printed %q", out)
			}
			testcluster.Eventually(t, 60*time.Second, "send.py's tasks finished", func() bool {
				return states("tasks.add")["SUCCESS"] == 8 && states("tasks.fail")["FAILURE"] == 2 &&
					states("tasks.flaky")["SUCCESS"] == 1
			})
			var results []float64
			var added map[string]struct{ Result string }
			if err := json.Unmarshal([]byte(get("/api/tasks?taskname=tasks.add")), &added); err != nil {
				t.Fatal(err)
			}
			for _, task := range added {
				var r float64
				if json.Unmarshal([]byte(task.Result), &r) == nil {
					results = append(results, r)
				}
			}
			if !containsFloat(results, 10) {
				t.Errorf("no tasks.add returned 10, the chain's end: %v", results)
			}

			// 3. The failures, listed and grouped.
			if out := sh(curls[0]); strings.Count(out, `"state": "FAILURE"`)+strings.Count(out, `"state":"FAILURE"`) != 2 ||
				!strings.Contains(out, "this task fails on purpose") {
				t.Errorf("the README's %q: %s", curls[0], out)
			}
			var failures struct {
				Groups []struct {
					Taskname  string
					Exception string `json:"exception_type"`
					Count     int
				}
			}
			if out := sh(curls[1]); json.Unmarshal([]byte(out), &failures) != nil || len(failures.Groups) != 1 ||
				failures.Groups[0].Taskname != "tasks.fail" || failures.Groups[0].Exception != "ValueError" || failures.Groups[0].Count != 2 {
				t.Errorf("the README's %q: %s, want one group of 2 ValueError in tasks.fail", curls[1], out)
			}

			// 4. The retry sends both again; they fail again.
			var retry struct {
				Matched int
				Retried map[string]string
			}
			if out := sh(curls[2]); json.Unmarshal([]byte(out), &retry) != nil || retry.Matched != 2 || len(retry.Retried) != 2 {
				t.Fatalf("the README's %q: %s, want 2 retried", curls[2], out)
			}
			testcluster.Eventually(t, 30*time.Second, "the retried tasks failed again", func() bool {
				return states("tasks.fail")["FAILURE"] == 4
			})

			// 5. The pool grows from 2 processes to 4.
			if out := sh(curls[3]); !strings.Contains(out, "Growing 'quickstart@tour' worker's pool by 2") {
				t.Fatalf("the README's %q: %s", curls[3], out)
			}
			var info map[string]struct {
				Stats struct {
					Pool struct{ Processes []int }
				}
			}
			testcluster.Eventually(t, 30*time.Second, "the pool at 4 processes", func() bool {
				out := sh(curls[4])
				return json.Unmarshal([]byte(out), &info) == nil && len(info["quickstart@tour"].Stats.Pool.Processes) == 4
			})
		})
	}
}

func containsFloat(xs []float64, x float64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
