package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestURLs(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{AMQPURL("stamen-test"), "amqp://guest:guest@127.0.0.1:5672/stamen-test"},
		{AMQPURL("/"), "amqp://guest:guest@127.0.0.1:5672//"},
		{AMQPURL(""), "amqp://guest:guest@127.0.0.1:5672//"},
		{AMQPURL("a/b"), "amqp://guest:guest@127.0.0.1:5672/a%2Fb"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestNodeName(t *testing.T) {
	re := regexp.MustCompile(`^w1-[0-9a-f]{6}@` + regexp.QuoteMeta(Hostname()) + `$`)
	a, b := nodeName("w1"), nodeName("w1")
	if !re.MatchString(a) || !re.MatchString(b) {
		t.Errorf("node names %q, %q do not match %s", a, b, re)
	}
	if a == b {
		t.Errorf("two node names for w1 are both %q", a)
	}
	if got := nodeName("exact@host"); got != "exact@host" {
		t.Errorf("nodeName(exact@host) = %q", got)
	}
	if got := nodeName(""); !strings.HasPrefix(got, "worker-") {
		t.Errorf("nodeName(\"\") = %q", got)
	}
}

func TestFreePort(t *testing.T) {
	if p := FreePort(t); p <= 0 || p > 65535 {
		t.Fatalf("FreePort = %d", p)
	}
}

func TestLastLines(t *testing.T) {
	if got := string(lastLines([]byte("a\nb\nc\n"), 2)); got != "b\nc" {
		t.Errorf("lastLines = %q", got)
	}
	if got := string(lastLines(nil, 2)); got != "" {
		t.Errorf("lastLines(nil) = %q", got)
	}
}

// groupGone reports whether no running process is left in the worker's
// process group. Zombies are not counted: orphaned pool processes are
// reparented to init, which may take a moment to reap them.
func groupGone(w *Worker) bool {
	if errors.Is(syscall.Kill(-w.Pid(), 0), syscall.ESRCH) {
		return true
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[2] == strconv.Itoa(w.Pid()) && f[0] != "Z" && f[0] != "X" {
			return false
		}
	}
	return true
}

// uniqueQueue keeps a test worker from taking tasks published by other tests
// on the same broker (RabbitMQ's vhost is shared with internal/e2e).
func uniqueQueue(w string) string {
	return "testcluster." + strings.ReplaceAll(nodeName(w), "@", ".")
}

func checkStarted(t *testing.T, w *Worker, name string) {
	t.Helper()
	if !w.Alive() {
		t.Fatalf("%s not alive after StartWorker", w.Name)
	}
	if !strings.HasPrefix(w.Name, name+"-") || !strings.HasSuffix(w.Name, "@"+Hostname()) {
		t.Errorf("node name %q, want %s-<suffix>@%s", w.Name, name, Hostname())
	}
	if _, err := os.Stat(w.LogPath()); err != nil {
		t.Errorf("log file: %v", err)
	}
}

func checkStopped(t *testing.T, w *Worker) {
	t.Helper()
	start := time.Now()
	w.Stop()
	t.Logf("Stop took %s", time.Since(start).Round(10*time.Millisecond))
	if w.Alive() {
		t.Fatalf("%s still alive after Stop", w.Name)
	}
	if !groupGone(w) {
		t.Errorf("processes left in group %d after Stop", w.Pid())
	}
	if w.waitErr != nil {
		t.Errorf("warm shutdown should exit 0, got %v", w.waitErr)
	}
	log, err := os.ReadFile(w.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "ready.") {
		t.Errorf("worker log has no 'ready.' line:\n%s", lastLines(log, 20))
	}
	w.Stop() // idempotent
}

// runClient runs a Python snippet with the sample app imported as `app`.
func runClient(t *testing.T, broker, backend, code string) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Python, "-c", "from stamen_testapp import app\n"+code)
	cmd.Dir = filepath.Join(root, "testdata", "celeryapp")
	cmd.Env = pythonEnv([]string{"STAMEN_TEST_BROKER=" + broker, "STAMEN_TEST_BACKEND=" + backend})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// The sample app's tasks as seen by a Python client: results, failures,
// retries.
const clientCode = `
def run(name, *args, **kwargs):
    return app.send_task(name, args=args, kwargs=kwargs, queue=QUEUE)
print(run("stamen.add", 2, 3).get(timeout=20))
print(run("stamen.echo", 1, "x", k="v").get(timeout=20))
print(run("stamen.retry", succeed_on=2).get(timeout=20))
r = run("stamen.fail", "nope")
try:
    r.get(timeout=20)
except ValueError as e:
    print("ValueError", e, r.state)
`

func TestRedisWorker(t *testing.T) {
	t.Parallel()
	Require(t)
	FlushRedisDB(t, 14)
	queue := uniqueQueue("q")
	start := time.Now()
	w := StartWorker(t, WorkerOptions{Name: "tc-redis", Broker: RedisURL(14), Backend: RedisURL(14), Concurrency: 2, Queues: []string{queue}})
	t.Logf("StartWorker took %s", time.Since(start).Round(10*time.Millisecond))
	checkStarted(t, w, "tc-redis")

	out := runClient(t, w.Broker, w.Backend, "QUEUE = "+strconv.Quote(queue)+clientCode)
	want := "5\n{'args': [1, 'x'], 'kwargs': {'k': 'v'}}\n{'attempts': 2}\nValueError nope FAILURE"
	if out != want {
		t.Errorf("client output:\n%s\nwant:\n%s", out, want)
	}
	checkStopped(t, w)
}

func TestAMQPWorker(t *testing.T) {
	t.Parallel()
	Require(t)
	queue := uniqueQueue("q")
	start := time.Now()
	w := StartWorker(t, WorkerOptions{Name: "tc-amqp", Broker: AMQPURL(Vhost), Backend: "rpc://", Queues: []string{queue}})
	t.Logf("StartWorker took %s", time.Since(start).Round(10*time.Millisecond))
	checkStarted(t, w, "tc-amqp")

	out := runClient(t, w.Broker, w.Backend, "QUEUE = "+strconv.Quote(queue)+"\nprint(app.send_task('stamen.add', args=(20, 22), queue=QUEUE).get(timeout=20))")
	if out != "42" {
		t.Errorf("client output %q, want 42", out)
	}
	checkStopped(t, w)
	// The queue is durable: delete it so that runs leave nothing behind.
	runClient(t, w.Broker, w.Backend, "with app.connection_for_write() as c:\n    c.default_channel.queue_delete("+strconv.Quote(queue)+")")
}

func TestKill(t *testing.T) {
	t.Parallel()
	Require(t)
	FlushRedisDB(t, 13) // not 14: TestRedisWorker, in parallel, flushes that
	w := StartWorker(t, WorkerOptions{Name: "tc-kill", Broker: RedisURL(13), Queues: []string{uniqueQueue("q")}, PoolRestarts: true, Autoscale: "3,2"})
	checkStarted(t, w, "tc-kill")
	start := time.Now()
	w.Kill()
	t.Logf("Kill took %s", time.Since(start).Round(10*time.Millisecond))
	if w.Alive() {
		t.Fatal("alive after Kill")
	}
	var ee *exec.ExitError
	if !errors.As(w.waitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("exit after Kill: %v, want killed by SIGKILL", w.waitErr)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !groupGone(w) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !groupGone(w) {
		t.Errorf("processes left in group %d after Kill", w.Pid())
	}
	t.Logf("process group gone %s after Kill", time.Since(start).Round(10*time.Millisecond))
}

// TestStartFailure checks that a worker that cannot start is reported with
// its log, quickly, instead of waiting for the ping timeout.
func TestStartFailure(t *testing.T) {
	t.Parallel()
	Require(t)
	ft := &fakeT{TB: t}
	start := time.Now()
	done := make(chan *Worker)
	go func() {
		var w *Worker
		defer func() { done <- w }()
		w = StartWorker(ft, WorkerOptions{Name: "tc-bad", Broker: RedisURL(13), ExtraArgs: []string{"--no-such-option"}})
	}()
	if w := <-done; w != nil {
		t.Fatal("StartWorker returned a worker for a bad command line")
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("failure took %s to report", time.Since(start))
	}
	t.Logf("reported failure:\n%s", ft.msg)
	if !strings.Contains(ft.msg, "did not become ready") || !strings.Contains(ft.msg, "no-such-option") {
		t.Errorf("failure message lacks the reason or the log:\n%s", ft.msg)
	}
}

// fakeT records a Fatal instead of failing the real test.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
