// Package testcluster starts and stops real Celery workers for tests.
//
// Workers are Debian's python3-celery (5.2.6; or 5.5 or 5.6, see
// WorkerOptions.Celery) run by /usr/bin/python3 on the sample app
// testdata/celeryapp/stamen_testapp.py, against a redis-server private to
// the test process and a vhost of its own on the RabbitMQ (127.0.0.1:5672,
// guest/guest) that scripts/services.sh installs and starts (see
// namespace.go). Every test that needs them calls Require first:
//
//	func TestSomething(t *testing.T) {
//		testcluster.Require(t)
//		testcluster.FlushRedisDB(t, 14)
//		w := testcluster.StartWorker(t, testcluster.WorkerOptions{
//			Name: "w1", Broker: testcluster.RedisURL(14), Backend: testcluster.RedisURL(15),
//		})
//		// ... talk to w.Name over the broker; the worker is stopped when the test ends.
//	}
//
// The package is meant for tests only.
package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/redact"
)

// Python is the interpreter the workers run with: Debian's, for which the
// python3-celery package is installed. A python3 earlier on PATH (pyenv, a
// virtualenv) usually has no Celery.
const Python = "/usr/bin/python3"

const (
	amqpAddr = "127.0.0.1:5672"

	readyTimeout = 60 * time.Second
	stopGrace    = 10 * time.Second
	logTailLines = 40
)

// SkipIfShort skips a slow test in -short mode, unless CI=true or
// STAMEN_INTEGRATION=1 ask for every test to run, -short or not.
func SkipIfShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() && !strict() {
		t.Skip(what + ": skipped in -short mode")
	}
}

// strict reports whether missing prerequisites must fail tests instead of
// skipping them: on CI and whenever the integration tests were asked for.
func strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv("STAMEN_INTEGRATION") == "1"
}

var (
	celeryOnce sync.Once
	celeryErr  error
)

func checkCelery() error {
	celeryOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, Python, "-c", "import celery, kombu, redis, amqp")
		cmd.Env = pythonEnv(nil)
		out, err := cmd.CombinedOutput()
		if err != nil {
			celeryErr = fmt.Errorf("%s cannot import celery, kombu, redis, amqp: %v: %s", Python, err, bytes.TrimSpace(lastLines(out, 5)))
		}
	})
	return celeryErr
}

func checkTCP(what, addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return fmt.Errorf("%s not reachable on %s: %v", what, addr, err)
	}
	return c.Close()
}

// Require skips the test unless real Celery workers can run here: Debian's
// Celery importable by /usr/bin/python3, this process's Redis (RequireRedis)
// and its RabbitMQ vhost (RequireRabbitMQ). When CI=true or
// STAMEN_INTEGRATION=1 (as `make test` sets) a missing prerequisite fails
// the test instead. Under `go test -short` the test is skipped unless
// CI=true or STAMEN_INTEGRATION=1: -short alone touches no server.
func Require(t testing.TB) {
	t.Helper()
	SkipIfShort(t, "testcluster: integration test")
	var problems []string
	if err := checkCelery(); err != nil {
		problems = append(problems, err.Error())
	}
	if _, err := ensureRedis(); err != nil {
		problems = append(problems, "Redis: "+err.Error())
	}
	if err := checkRabbitMQ(); err != nil {
		problems = append(problems, err.Error())
	}
	missing(t, "real Celery workers cannot run here", problems)
}

// RequireRedis is Require for a test that needs only Redis: it starts this
// process's redis-server (see RedisURL), once.
func RequireRedis(t testing.TB) {
	t.Helper()
	SkipIfShort(t, "testcluster: needs Redis")
	if _, err := ensureRedis(); err != nil {
		missing(t, "no Redis for the tests", []string{err.Error()})
	}
}

// RequireRabbitMQ is Require for a test that needs only RabbitMQ: it checks
// the server on 127.0.0.1:5672 and creates this process's vhost, Vhost,
// once.
func RequireRabbitMQ(t testing.TB) {
	t.Helper()
	SkipIfShort(t, "testcluster: needs RabbitMQ")
	if err := checkRabbitMQ(); err != nil {
		missing(t, "no RabbitMQ for the tests", []string{err.Error()})
	}
}

func checkRabbitMQ() error {
	if err := checkTCP("RabbitMQ", amqpAddr); err != nil {
		return err
	}
	if err := ensureVhost(); err != nil {
		return fmt.Errorf("RabbitMQ vhost %s: %w", Vhost, err)
	}
	return nil
}

// missing fails the test (strict mode) or skips it when problems is not
// empty.
func missing(t testing.TB, what string, problems []string) {
	t.Helper()
	if len(problems) == 0 {
		return
	}
	msg := "testcluster: " + what + ":\n  " + strings.Join(problems, "\n  ") +
		"\nRun `make test`, or `bash scripts/services.sh` (as root) to install and start Redis, RabbitMQ and python3-celery."
	if strict() {
		t.Fatal(msg + "\n(failing instead of skipping because CI=true or STAMEN_INTEGRATION=1)")
	}
	t.Skip(msg)
}

// RedisAddr is the address of this test process's private redis-server,
// started on first use and killed when the process exits, so that no other
// package or run shares its databases. Call Require or RequireRedis first:
// they fail or skip the test cleanly when it cannot start, where RedisAddr
// panics.
func RedisAddr() string {
	addr, err := ensureRedis()
	if err != nil {
		panic("testcluster: no Redis (call Require or RequireRedis first): " + err.Error())
	}
	return addr
}

// RedisURL is the URL of database db on this test process's Redis (see
// RedisAddr).
func RedisURL(db int) string {
	return fmt.Sprintf("redis://%s/%d", RedisAddr(), db)
}

// AMQPURL is the URL of vhost on the local test RabbitMQ as guest/guest.
// Tests use Vhost, their process's own; "" or "/" is the default vhost.
func AMQPURL(vhost string) string {
	if vhost == "" || vhost == "/" {
		return "amqp://guest:guest@" + amqpAddr + "//"
	}
	return "amqp://guest:guest@" + amqpAddr + "/" + url.PathEscape(vhost)
}

// FlushRedisDB empties database db of this test process's Redis, failing
// the test when it cannot.
func FlushRedisDB(t testing.TB, db int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: RedisAddr(), DB: db, DialTimeout: 5 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("testcluster: FLUSHDB on %s: %v", RedisURL(db), err)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	freePorts.Lock()
	defer freePorts.Unlock()
	// The kernel may hand the same free port to two listens in a row: a
	// test asking for two ports (a broker's and stamen's) then gave both
	// the same, and one of them could not listen. A port is handed out
	// once per process.
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testcluster: find a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !freePorts.given[port] {
			freePorts.given[port] = true
			return port
		}
	}
	t.Fatal("testcluster: no free port not handed out before")
	return 0
}

// freePorts are the ports FreePort handed out.
var freePorts = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

// Hostname is the host part of the node names (Celery's %h).
func Hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// repoRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod.
func repoRoot() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				rootDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = errors.New("no go.mod in the working directory or any parent")
				return
			}
			dir = parent
		}
	})
	return rootDir, rootErr
}

// pythonEnv is the environment for /usr/bin/python3: the test's, minus what
// would redirect the interpreter or Celery, plus extra ("KEY=VALUE").
func pythonEnv(extra []string) []string {
	drop := map[string]bool{
		"PYTHONHOME": true, "PYTHONPATH": true, "PYTHONSTARTUP": true,
		"VIRTUAL_ENV": true, "CELERY_BROKER_URL": true, "CELERY_RESULT_BACKEND": true,
		"CELERY_CONFIG_MODULE": true,
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	// No __pycache__ in testdata/, and logs as they happen.
	env = append(env, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	return append(env, extra...)
}

// WorkerOptions describes one Celery worker.
type WorkerOptions struct {
	// Name is the short worker name, e.g. "w1". The node name becomes
	// "<Name>-<random hex>@<Hostname()>" so that concurrent test runs on
	// the same broker do not collide; a Name containing "@" is used as the
	// node name exactly. Default "worker".
	Name string
	// Broker is the broker URL (RedisURL, AMQPURL, an embedded broker's).
	// Default RedisURL(0).
	Broker string
	// Backend is the result backend. Default: "rpc://" for an amqp://
	// broker, else the broker URL.
	Backend string
	// Concurrency is prefork's -c. When both Concurrency and Autoscale are
	// unset the worker runs with -c 1 (Celery's own default, the number of
	// CPUs, would make pool sizes differ between machines).
	Concurrency int
	// Autoscale is --autoscale, "max,min", e.g. "4,2".
	Autoscale string
	// PoolRestarts turns on worker_pool_restarts (the pool_restart control
	// command fails without it).
	PoolRestarts bool
	// Queues are the queues consumed (-Q); default Celery's "celery".
	Queues []string
	// ExtraArgs are appended to the worker's command line.
	ExtraArgs []string
	// Env adds "KEY=VALUE" entries to the worker's environment.
	Env []string
	// Celery is the Celery release the worker runs: Celery52 (default, the
	// system's), Celery55 or Celery56 (see CeleryCache). StartWorker checks
	// the release in the worker's start-up banner.
	Celery string
	// StopGrace is how long Stop (and the cleanup) waits after SIGTERM
	// before SIGKILL; default 10s. Celery's warm shutdown waits for running
	// tasks.
	StopGrace time.Duration
}

// Worker is a running Celery worker started by StartWorker.
type Worker struct {
	// Name is the node name, "name@host", as workers report it.
	Name string
	// Broker and Backend are the URLs the worker was started with.
	Broker, Backend string
	// CeleryRelease is the exact Celery release it runs, e.g. "5.6.3".
	CeleryRelease string

	t       testing.TB
	cmd     *exec.Cmd
	logPath string
	outPath string
	grace   time.Duration
	done    chan struct{} // closed when the main process has been reaped
	waitErr error         // set before done is closed
	pingEnv []string      // the environment ping.py needs for this worker (waitReady)

	stopOnce sync.Once
}

// defaultBackend is the result backend a worker or client uses when none is
// given: rpc:// on RabbitMQ, else the broker.
func defaultBackend(broker string) string {
	if strings.HasPrefix(broker, "amqp") || strings.HasPrefix(broker, "pyamqp") {
		return "rpc://"
	}
	return broker
}

// nodeName builds the node name for a short name (see WorkerOptions.Name).
func nodeName(name string) string {
	if name == "" {
		name = "worker"
	}
	if strings.Contains(name, "@") {
		return name
	}
	return name + "-" + randomHex(3) + "@" + Hostname()
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// fileSafe turns a node name into something usable in a file name.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

// StartWorker starts a Celery worker on the sample app (from
// testdata/celeryapp), in its own process group, and returns once it answers
// a control ping on its broker (60s at most). A cleanup registered on t stops
// it: SIGTERM, up to StopGrace (10s) for the warm shutdown, then SIGKILL to
// the whole process group. When the worker fails to start the test fails
// with the last lines of its log.
//
// StartWorker may be called from several goroutines to start workers in
// parallel; on failure it then calls t.Fatal from that goroutine, which ends
// only the goroutine, so the caller should check for a nil *Worker.
func StartWorker(t testing.TB, opts WorkerOptions) *Worker {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("testcluster: find the repository root: %v", err)
	}
	appDir := filepath.Join(root, "testdata", "celeryapp")
	if _, err := os.Stat(filepath.Join(appDir, "stamen_testapp.py")); err != nil {
		t.Fatalf("testcluster: sample app missing: %v", err)
	}

	if opts.Broker == "" {
		opts.Broker = RedisURL(0)
	}
	if opts.Backend == "" {
		opts.Backend = defaultBackend(opts.Broker)
	}
	celeryExtra, err := celeryEnv(opts.Celery)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	release, err := celeryRelease(opts.Celery)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = stopGrace
	}
	node := nodeName(opts.Name)
	dir := os.Getenv("STAMEN_TEST_LOG_DIR") // keep the logs after the test
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testcluster: STAMEN_TEST_LOG_DIR: %v", err)
	}
	base := filepath.Join(dir, fileSafe(node))

	args := []string{
		"-m", "celery", "-A", "stamen_testapp", "worker",
		"-n", node, "-E", "-l", "INFO",
		"--pidfile", base + ".pid", "--logfile", base + ".log",
		"-P", "prefork",
	}
	switch {
	case opts.Concurrency > 0:
		args = append(args, "-c", strconv.Itoa(opts.Concurrency))
	case opts.Autoscale == "":
		args = append(args, "-c", "1")
	}
	if opts.Autoscale != "" {
		args = append(args, "--autoscale", opts.Autoscale)
	}
	if len(opts.Queues) > 0 {
		args = append(args, "-Q", strings.Join(opts.Queues, ","))
	}
	args = append(args, opts.ExtraArgs...)

	restarts := "0"
	if opts.PoolRestarts {
		restarts = "1"
	}
	env := pythonEnv(append(append(celeryExtra,
		"STAMEN_TEST_BROKER="+opts.Broker,
		"STAMEN_TEST_BACKEND="+opts.Backend,
		"STAMEN_TEST_POOL_RESTARTS="+restarts,
	), opts.Env...))

	out, err := os.Create(base + ".out") // banner, warnings, tracebacks before logging starts
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	defer out.Close() // the child has its own copy

	cmd := exec.Command(Python, args...)
	cmd.Dir = appDir
	cmd.Env = env
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If the test binary dies without running cleanups (a -timeout
		// panic, a signal), the worker is told to shut down.
		Pdeathsig: syscall.SIGTERM,
	}
	w := &Worker{
		Name: node, Broker: opts.Broker, Backend: opts.Backend, CeleryRelease: release,
		t: t, cmd: cmd, logPath: base + ".log", outPath: base + ".out",
		grace: opts.StopGrace, done: make(chan struct{}),
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("testcluster: start %s: %v", node, err)
	}
	go func() {
		w.waitErr = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		w.stop(false)
		if t.Failed() {
			t.Logf("testcluster: %s log (%s), last lines:\n%s", node, w.logPath, w.tail(20))
		}
	})

	w.pingEnv = append(append([]string{}, celeryExtra...), opts.Env...)
	if err := w.waitReady(appDir, readyTimeout, w.pingEnv); err != nil {
		w.stop(false)
		t.Fatalf("testcluster: worker %s did not become ready: %v\n%s", node, err, w.tail(logTailLines))
	}
	if err := w.checkBanner(); err != nil {
		w.stop(false)
		t.Fatalf("testcluster: worker %s: %v\n%s", node, err, w.tail(logTailLines))
	}
	t.Logf("testcluster: %s ready after %s (Celery %s, pid %d, broker %s, backend %s)",
		node, time.Since(start).Round(10*time.Millisecond), release, cmd.Process.Pid, redact.String(opts.Broker), redact.String(opts.Backend))
	return w
}

// waitReady runs ping.py until the worker answers, the worker exits, or the
// timeout passes. env is the worker's extra environment: ping.py runs the
// worker's Celery release (kombu 5.2 and 5.3+ name a sentinel broker's
// control channel differently) and takes the broker_transport_options of
// its STAMEN_TEST_CONF.
func (w *Worker) waitReady(appDir string, timeout time.Duration, env []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	ping := exec.CommandContext(ctx, Python, "ping.py",
		"--broker", w.Broker, "--timeout", strconv.Itoa(int(timeout/time.Second)), w.Name)
	ping.Dir = appDir
	ping.Env = pythonEnv(append([]string{"CELERY_BROKER_URL=" + w.Broker}, env...))
	var buf bytes.Buffer
	ping.Stdout = &buf
	ping.Stderr = &buf
	if err := ping.Start(); err != nil {
		return fmt.Errorf("start ping.py: %v", err)
	}
	pinged := make(chan error, 1)
	go func() { pinged <- ping.Wait() }()
	select {
	case err := <-pinged:
		if err != nil {
			return fmt.Errorf("ping.py: %v: %s", err, bytes.TrimSpace(buf.Bytes()))
		}
		return nil
	case <-w.done:
		cancel()
		<-pinged
		return fmt.Errorf("worker exited before answering ping: %v", w.waitErr)
	}
}

// Stop shuts the worker down gracefully: SIGTERM to the main process (Celery's
// warm shutdown, which waits for running tasks and sends worker-offline), then
// after StopGrace SIGKILL to the whole process group. It returns once the
// worker has exited. Calling it again does nothing.
func (w *Worker) Stop() {
	w.t.Helper()
	w.stop(true)
}

// Kill SIGKILLs the worker's whole process group, as in a crash (no
// worker-offline event), and returns once the main process has exited.
func (w *Worker) Kill() {
	w.stopOnce.Do(func() {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
	})
}

func (w *Worker) stop(logKill bool) {
	w.stopOnce.Do(func() {
		pid := w.cmd.Process.Pid
		select {
		case <-w.done:
		default:
			_ = syscall.Kill(pid, syscall.SIGTERM)
			select {
			case <-w.done:
			case <-time.After(w.grace):
				if logKill {
					w.t.Logf("testcluster: %s still running %s after SIGTERM; SIGKILL", w.Name, w.grace)
				}
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				<-w.done
			}
		}
		// Pool processes left behind by the main process, if any.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	})
}

// Ping returns nil once the worker answers a control ping sent by Celery's
// own client through the worker's broker, or an error when it does not
// within timeout (whole seconds) or has exited.
func (w *Worker) Ping(timeout time.Duration) error {
	return w.waitReady(w.cmd.Dir, timeout, w.pingEnv)
}

// Alive reports whether the worker's main process is still running.
func (w *Worker) Alive() bool {
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// Pid is the process id of the worker's main process (also its process
// group id).
func (w *Worker) Pid() int { return w.cmd.Process.Pid }

// LogPath is the worker's Celery log file (--logfile). Stdout and stderr,
// Celery's banner and Python tracebacks, are in the same path with ".out"
// instead of ".log". The files are removed with the test's temporary
// directory unless STAMEN_TEST_LOG_DIR names a directory to keep them in.
func (w *Worker) LogPath() string { return w.logPath }

// tail returns the last lines of the worker's stdout/stderr and log file.
func (w *Worker) tail(n int) string {
	var b strings.Builder
	for _, p := range []string{w.outPath, w.logPath} {
		data, err := os.ReadFile(p)
		fmt.Fprintf(&b, "--- %s", p)
		switch {
		case err != nil:
			fmt.Fprintf(&b, " (%v)\n", err)
		case len(bytes.TrimSpace(data)) == 0:
			b.WriteString(" (empty)\n")
		default:
			b.WriteString("\n")
			b.Write(lastLines(data, n))
			b.WriteString("\n")
		}
	}
	return b.String()
}

// lastLines returns the last n lines of data.
func lastLines(data []byte, n int) []byte {
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return bytes.Join(lines, []byte("\n"))
}
