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

// The README's "Run it" section: the start line's URLs, the worker's
// command line and the API calls, as a new user copies them.
var (
	readmeStartLine = regexp.MustCompile(`broker_url=(redis://\S+) result_backend=(redis://\S+)`)
	readmeWorker    = regexp.MustCompile("`(celery -A proj [^`]+)`")
	readmeCurl      = regexp.MustCompile(`(?m)^curl -s (?:-X (\w+) )?127\.0\.0\.1:5555(\S+)(?: -d '([^']*)')?$`)
)

// readmeProj is the `proj` app of the README's worker command: an app that
// takes its broker and result backend from the command line.
const readmeProj = `from celery import Celery

app = Celery("proj")


@app.task(name="proj.add")
def add(x, y):
    return x + y
`

// TestReadmeRunIt follows the README's "Run it" as written, against the
// binary and a real Celery worker (the system's 5.2 and 5.6): stamen on
// its embedded broker, the worker started by the README's own command
// line with the URLs stamen logged, then the README's calls. The worker
// runs the task the README sends and its result is 5. Only the ports
// differ from the README's, so that the test shares no port.
func TestReadmeRunIt(t *testing.T) {
	testcluster.Require(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "## Run it")
	if start < 0 {
		t.Fatal(`README.md has no "## Run it" section`)
	}
	section = section[start:]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	m := readmeWorker.FindStringSubmatch(section)
	if m == nil {
		t.Fatalf("no `celery -A proj ...` command in the README's Run it:\n%s", section)
	}
	workerArgs := strings.Fields(m[1])
	curls := readmeCurl.FindAllStringSubmatch(section, -1)
	if len(curls) == 0 {
		t.Fatal("no curl call in the README's Run it")
	}
	bin := buildBinary(t)

	for _, release := range []string{testcluster.Celery52, testcluster.Celery56} {
		t.Run("celery"+release, func(t *testing.T) {
			testcluster.RequireCelery(t, release)
			brokerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			port := freePort(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--port", fmt.Sprint(port), "--embedded_broker_address", brokerAddr,
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

			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "proj.py"), []byte(readmeProj), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"-m"}
			for _, a := range workerArgs {
				a = strings.Replace(a, "redis://:PASSWORD@127.0.0.1:6380/0", broker, 1)
				a = strings.Replace(a, "redis://:PASSWORD@127.0.0.1:6380/1", backend, 1)
				args = append(args, a)
			}
			worker := exec.CommandContext(ctx, testcluster.Python, args...)
			worker.Dir = dir
			worker.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
			if release != testcluster.Celery52 {
				worker.Env = append(worker.Env, "PYTHONPATH="+filepath.Join(testcluster.CeleryCache(), release, "root", "usr", "lib", "python3", "dist-packages"))
			}
			worker.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			out := &syncBuffer{}
			worker.Stdout, worker.Stderr = out, out
			if err := worker.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- worker.Wait() }()
			defer func() {
				_ = syscall.Kill(-worker.Process.Pid, syscall.SIGKILL) // the pool's children too
				<-exited
			}()

			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			call := func(method, path, body string) (int, string) {
				t.Helper()
				req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, path, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			defer func() {
				if t.Failed() {
					t.Logf("worker output:\n%s", out.String())
				}
			}()
			testcluster.Eventually(t, 15*time.Second, "stamen answering /healthcheck", func() bool {
				resp, err := http.Get(base + "/healthcheck")
				if err == nil {
					resp.Body.Close()
				}
				return err == nil
			})
			// The README's calls in order; the first (the workers) until
			// the worker shows, the others once.
			var taskID string
			for i, c := range curls {
				method, path, body := c[1], c[2], c[3]
				if method == "" {
					method = http.MethodGet
				}
				var status int
				var got string
				testcluster.Eventually(t, 60*time.Second, method+" "+path+" listing the README's worker", func() bool {
					select {
					case err := <-exited:
						exited <- err // for the deferred wait
						t.Fatalf("the README's worker command %q exited: %v", m[1], err)
					default:
					}
					status, got = call(method, path, body)
					return i > 0 || (status == http.StatusOK && strings.Contains(got, `"proj.add"`))
				})
				if status != http.StatusOK {
					t.Fatalf("%s %s: %d %s", method, path, status, got)
				}
				var v struct {
					TaskID string `json:"task-id"`
				}
				if json.Unmarshal([]byte(got), &v) == nil && v.TaskID != "" {
					taskID = v.TaskID
				}
			}
			if taskID == "" {
				t.Fatal("none of the README's calls sent a task")
			}
			var got string
			testcluster.Eventually(t, 30*time.Second, "the README's task "+taskID+" SUCCESS", func() bool {
				_, got = call(http.MethodGet, "/api/task/result/"+taskID, "")
				return strings.Contains(got, `"SUCCESS"`)
			})
			if !strings.Contains(got, `"result":5`) {
				t.Fatalf("the README's task answered %s, want result 5", got)
			}
		})
	}
}
