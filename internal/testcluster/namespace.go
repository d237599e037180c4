package testcluster

// Every test process has Redis and RabbitMQ namespaces of its own, so that
// the packages go test runs in parallel, and two runs of the same package,
// cannot flush, consume or close what another uses:
//
//   - Redis: a private redis-server on a free loopback port, started on first
//     use (RequireRedis, Require), with all 16 databases to itself;
//   - RabbitMQ: the vhost Vhost, named for the process, created on first use
//     (RequireRabbitMQ, Require) on the shared server, guest with full
//     permissions.
//
// Both go away when the process exits, however it exits (a panic, a
// -timeout, a signal): a reaper shell started on first use reads a pipe whose
// only write end this process holds. The kernel closes that end at exit; the
// reaper then kills the server and deletes the vhost. It runs in a process
// group of its own, so that Ctrl-C reaches the test and not the cleanup, and
// without the test's stdout and stderr, which go test waits for (it would
// report "Test I/O incomplete"); what it says goes to reaperLog.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Vhost is this test process's RabbitMQ vhost. Tests use it only after
// Require or RequireRabbitMQ, which create it.
var Vhost = fmt.Sprintf("stamen-test-%d-%s", os.Getpid(), randomHex(3))

// reaperLog collects what the reapers of every test process say (a vhost
// they could not delete).
var reaperLog = filepath.Join(os.TempDir(), "stamen-testcluster-reaper.log")

const reaperScript = `trap '' INT TERM HUP
pids= vhosts= pgdbs=
while read -r kind arg; do
	case $kind in
	pid) pids="$pids $arg" ;;
	vhost) vhosts="$vhosts $arg" ;;
	pgdb) pgdbs="$pgdbs $arg" ;;
	esac
done
for p in $pids; do kill -KILL "$p" 2>/dev/null; done
for v in $vhosts; do
	timeout 120 rabbitmqctl -q delete_vhost "$v" >/dev/null 2>&1 ||
		echo "$(date -u +%FT%TZ) testcluster reaper: could not delete RabbitMQ vhost $v" >&2
done
for d in $pgdbs; do
	PGPASSWORD=stamen_test PGCONNECT_TIMEOUT=5 timeout 60 psql -q -h "$STAMEN_PG_HOST" -p "$STAMEN_PG_PORT" -U stamen_test -d postgres \
		-c "DROP DATABASE IF EXISTS \"$d\" WITH (FORCE)" >/dev/null 2>&1 ||
		echo "$(date -u +%FT%TZ) testcluster reaper: could not drop PostgreSQL database $d" >&2
done
`

var (
	reaperMu sync.Mutex
	// reaperW is the pipe's write end, kept reachable here for the life of
	// the process: an unreachable *os.File is closed by its finalizer,
	// which would run the cleanup early.
	reaperW   *os.File
	reaperErr error
)

// atExit has the reaper run "kind arg" once this process has exited: kind
// "pid" kills that process, "vhost" deletes that RabbitMQ vhost, "pgdb"
// drops that PostgreSQL database.
func atExit(kind, arg string) error {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	if reaperW == nil && reaperErr == nil {
		reaperW, reaperErr = startReaper()
	}
	if reaperErr != nil {
		return reaperErr
	}
	if _, err := fmt.Fprintf(reaperW, "%s %s\n", kind, arg); err != nil {
		return fmt.Errorf("testcluster: tell the reaper: %w", err)
	}
	return nil
}

func startReaper() (*os.File, error) {
	logf, err := os.OpenFile(reaperLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testcluster: reaper log: %w", err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("testcluster: reaper pipe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", reaperScript)
	pgHost, pgPort, _ := net.SplitHostPort(PostgresAddr)
	cmd.Env = append(os.Environ(), "STAMEN_PG_HOST="+pgHost, "STAMEN_PG_PORT="+pgPort)
	// *os.File, not an io.Reader or io.Writer: exec then starts no copying
	// goroutine, which would outlive the tests (goleak) and hold the pipes.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("testcluster: start the reaper: %w", err)
	}
	// Never waited for: it exits after this process has.
	return w, nil
}

var (
	redisOnce sync.Once
	redisAddr string
	redisErr  error
)

// ensureRedis starts this process's redis-server once and returns its
// address.
func ensureRedis() (string, error) {
	redisOnce.Do(func() {
		if _, err := exec.LookPath("redis-server"); err != nil {
			redisErr = fmt.Errorf("redis-server not found: %w", err)
			return
		}
		// A free port may be taken between the probe and the server's
		// bind: try another one then.
		for range 3 {
			redisAddr, redisErr = startProcessRedis()
			if redisErr == nil {
				return
			}
		}
	})
	return redisAddr, redisErr
}

// startProcessRedis starts a redis-server without persistence on a free
// port and waits (10 s at most) until it answers as itself: the server on
// that port must have the pid just started.
func startProcessRedis() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	// The server logs to an unlinked file: read on failure, gone at exit.
	logf, err := os.CreateTemp("", "stamen-testcluster-redis-*.log")
	if err != nil {
		return "", err
	}
	defer logf.Close()
	os.Remove(logf.Name())
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", os.TempDir(), "--logfile", "")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start redis-server: %w", err)
	}
	// Never waited for either: until this process exits the pid stays a
	// zombie if the server dies, so the reaper cannot kill another process
	// that reused it.
	pid := cmd.Process.Pid
	if err := atExit("pid", strconv.Itoa(pid)); err != nil {
		_ = cmd.Process.Kill()
		return "", err
	}
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ws syscall.WaitStatus
		if p, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); p == pid {
			out, _ := io.ReadAll(io.NewSectionReader(logf, 0, 1<<20))
			return "", fmt.Errorf("redis-server on %s exited with status %d: %s", addr, ws.ExitStatus(), bytes.TrimSpace(lastLines(out, 5)))
		}
		info, err := serverInfo(addr)
		if err == nil && strings.Contains(info, want) {
			return addr, nil
		}
		if err == nil {
			err = errors.New("another server answers on this port")
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return "", fmt.Errorf("redis-server on %s did not answer: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serverInfo is the INFO server section of the Redis on addr. It dials
// first, so that go-redis does not log every refused connection while the
// server starts.
func serverInfo(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return "", err
	}
	conn.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Info(ctx, "server").Result()
}

var (
	vhostOnce sync.Once
	vhostErr  error
)

// ensureVhost creates Vhost once and lets guest use it.
func ensureVhost() error {
	vhostOnce.Do(func() {
		if _, err := exec.LookPath("rabbitmqctl"); err != nil {
			vhostErr = fmt.Errorf("rabbitmqctl not found (the tests create a vhost per run with it): %w", err)
			return
		}
		// Registered first: a vhost half set up is deleted too.
		if vhostErr = atExit("vhost", Vhost); vhostErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, args := range [][]string{
			{"-q", "add_vhost", Vhost},
			{"-q", "set_permissions", "-p", Vhost, "guest", ".*", ".*", ".*"},
		} {
			if out, err := exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput(); err != nil {
				vhostErr = fmt.Errorf("rabbitmqctl %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
				return
			}
		}
	})
	return vhostErr
}
