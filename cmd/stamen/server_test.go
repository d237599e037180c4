package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestSlowClientsAreCutOff holds connections open the slowloris way, one
// byte at a time, against the server run() builds: the server must hang up
// once its header or request bound has passed, not keep a goroutine per
// trickling client.
func TestSlowClientsAreCutOff(t *testing.T) {
	testcluster.SkipIfShort(t, "waits for the server's read timeouts (30 s)")
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As the task operations do: read the whole body, then answer.
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}), slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	for _, tc := range []struct {
		name string
		// start is sent at once, then trickle one byte at a time.
		start, trickle string
		bound          time.Duration
	}{
		{"headers sent slowly", "POST /api/task/send-task/x HTTP/1.1\r\nHost: stamen\r\nX-Slow: ", "a", readHeaderTimeout},
		{"body sent slowly", "POST /api/task/send-task/x HTTP/1.1\r\nHost: stamen\r\nContent-Length: 100000\r\n\r\n", "{", readTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			if _, err := io.WriteString(conn, tc.start); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(250 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := io.WriteString(conn, tc.trickle); err != nil {
							return
						}
					}
				}
			}()
			// Whatever the server answers, the connection must then end.
			_ = conn.SetReadDeadline(start.Add(tc.bound + 5*time.Second))
			_, err = io.Copy(io.Discard, conn)
			took := time.Since(start)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("still connected %s after the first byte, bound %s", took.Round(time.Millisecond), tc.bound)
			}
			// Not earlier either: then something else cut it, and the bound
			// this test is about went untested.
			if took < tc.bound-time.Second || took > tc.bound+2*time.Second {
				t.Errorf("disconnected after %s, want about %s", took.Round(time.Millisecond), tc.bound)
			}
		})
	}
}

// TestUnauthenticatedAPI runs the binary on a non-loopback address: it
// refuses to start without credentials unless --unauthenticated_api (or
// STAMEN_/FLOWER_UNAUTHENTICATED_API, read as Flower reads it) says so,
// and then serves every operation without credentials; configured
// credentials are still required whatever the switch says.
func TestUnauthenticatedAPI(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	bin := buildBinary(t)
	// Only what each case sets counts.
	for _, k := range []string{"STAMEN_UNAUTHENTICATED_API", "FLOWER_UNAUTHENTICATED_API", "STAMEN_BASIC_AUTH",
		"FLOWER_BASIC_AUTH", "STAMEN_AUTH_TOKEN", "FLOWER_AUTH_TOKEN", "STAMEN_AUTH_FILE", "FLOWER_AUTH_FILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	type call struct {
		method, path string
		creds        bool
		want         int
	}
	open := []call{
		{"GET", "/api/workers", false, 200},
		{"POST", "/api/task/revoke/some-id", false, 200},
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		// wantExit, when set, is the exit status of a refusal and
		// wantMsg what it logs; else calls are made to the running server.
		wantExit int
		wantMsg  string
		calls    []call
	}{
		{name: "no switch", wantExit: 2, wantMsg: "refusing to serve the API without authentication"},
		{name: "switch off in the environment", env: []string{"FLOWER_UNAUTHENTICATED_API=no"},
			wantExit: 2, wantMsg: "refusing to serve the API without authentication"},
		{name: "unreadable switch", env: []string{"FLOWER_UNAUTHENTICATED_API=maybe"},
			wantExit: 2, wantMsg: `invalid FLOWER_UNAUTHENTICATED_API="maybe"`},
		{name: "--unauthenticated_api", args: []string{"--unauthenticated_api"}, calls: open},
		{name: "Flower's spelling and value", env: []string{"FLOWER_UNAUTHENTICATED_API=yes"}, calls: open},
		{name: "STAMEN_ wins over FLOWER_", env: []string{"STAMEN_UNAUTHENTICATED_API=on", "FLOWER_UNAUTHENTICATED_API=no"}, calls: open},
		{name: "a flag overrides an unreadable variable", env: []string{"STAMEN_UNAUTHENTICATED_API=maybe"},
			args: []string{"--unauthenticated-api=true"}, calls: open},
		{name: "credentials still count", env: []string{"STAMEN_BASIC_AUTH=op:op-secret"},
			args: []string{"--unauthenticated_api"}, calls: []call{
				{"GET", "/api/workers", false, 401},
				{"POST", "/api/task/revoke/some-id", false, 401},
				{"GET", "/api/workers", true, 200},
				{"POST", "/api/task/revoke/some-id", true, 200},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The embedded broker on a free port and a private store: no
			// other service needed, nothing left in the source tree.
			args := append([]string{"--address", "0.0.0.0",
				"--embedded_broker_address", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
				"--db", filepath.Join(t.TempDir(), "stamen.db")}, tc.args...)
			env := tc.env
			if tc.wantExit != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, append(args, "--port", fmt.Sprint(freePort(t)))...)
				cmd.Env = append(os.Environ(), env...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != tc.wantExit {
					t.Fatalf("exit: %v, want status %d; stderr: %s", err, tc.wantExit, stderr.String())
				}
				if !strings.Contains(stderr.String(), tc.wantMsg) {
					t.Errorf("want %q in %s", tc.wantMsg, stderr.String())
				}
				return
			}
			cmd, base := startStamenEnv(t, bin, env, args...)
			defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
			for _, c := range tc.calls {
				req, err := http.NewRequest(c.method, base+c.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if c.creds {
					req.SetBasicAuth("op", "op-secret")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.want {
					t.Errorf("%s %s (credentials %v): %d, want %d: %s", c.method, c.path, c.creds, resp.StatusCode, c.want, body)
				}
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer a child process writes to while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestShutdownEndsEventStreams: SIGTERM with an /api/events client
// connected ends the stream at once and the process exits cleanly, instead
// of waiting out the server's 10 s shutdown timeout and logging its error.
func TestShutdownEndsEventStreams(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	bin := buildBinary(t)
	base, logs, stop := runStamen(t, bin)
	resp, err := http.Get(base + "/api/events")
	if err != nil {
		t.Fatalf("/api/events: %v\n%s", err, logs.String())
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/api/events: %d", resp.StatusCode)
	}
	// The stream's opening comment proves the handler is running.
	first := make([]byte, 64)
	if n, err := resp.Body.Read(first); err != nil || !strings.Contains(string(first[:n]), "stamen event stream") {
		t.Fatalf("stream opening: %q, %v", first[:n], err)
	}

	// stop gives it 7 s, well before the server's 10 s shutdown timeout,
	// which a stream that does not end runs out.
	if err := stop(); err != nil {
		t.Fatalf("SIGTERM with a stream open: %v\n%s", err, logs.String())
	}
	// The stream ended rather than being cut mid-event.
	if rest, err := io.ReadAll(resp.Body); err != nil {
		t.Errorf("reading the rest of the stream: %v (%q)", err, rest)
	}
	if l := logs.String(); strings.Contains(l, "msg=shutdown") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
		t.Errorf("the log holds a shutdown error:\n%s", l)
	}
}

// process is a stamen binary the test started.
type process struct {
	cmd    *exec.Cmd
	logs   *lockedBuffer
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// startProcess runs bin with args, its log in logs, and, when the test
// ends, stops it if it still runs (SIGTERM, then a kill after 10 s).
func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), logs: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// awaitUp polls ready until it holds, failing at once if p exits.
func (p *process) awaitUp(t *testing.T, ready func() bool) {
	t.Helper()
	testcluster.Eventually(t, 15*time.Second, "stamen answers", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("stamen exited: %v\n%s", p.err, p.logs.String())
		default:
		}
		return ready()
	})
}

// stop sends SIGTERM and returns the exit error (nil for status 0), or an
// error if p still runs 7 s later.
func (p *process) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(7 * time.Second):
		return errors.New("still running 7 s after SIGTERM")
	}
}

// embeddedArgs are the arguments that start stamen on the embedded broker
// with a private store: no other service needed, nothing left in the
// source tree.
func embeddedArgs(t *testing.T) []string {
	return []string{"--embedded_broker_address", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--db", filepath.Join(t.TempDir(), "stamen.db")}
}

// runStamen starts bin on the embedded broker with args, its log in logs,
// and waits until the API answers. It returns the API's base URL and a
// stop function: SIGTERM, then the exit error (nil for status 0).
func runStamen(t *testing.T, bin string, args ...string) (base string, logs *lockedBuffer, stop func() error) {
	t.Helper()
	port := freePort(t)
	p := startProcess(t, bin, append(append([]string{"--port", fmt.Sprint(port)}, embeddedArgs(t)...), args...)...)
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	p.awaitUp(t, func() bool {
		resp, err := http.Get(base + "/healthcheck")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base, p.logs, p.stop
}

// TestEventStreamsBounded: with --max_event_streams 2, a third /api/events
// client gets 503 JSON at once, and a stream can open again once a client
// has gone.
func TestEventStreamsBounded(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	bin := buildBinary(t)
	base, logs, _ := runStamen(t, bin, "--max_event_streams", "2")
	open := func() *http.Response {
		t.Helper()
		resp, err := http.Get(base + "/api/events")
		if err != nil {
			t.Fatalf("/api/events: %v\n%s", err, logs.String())
		}
		return resp
	}
	var streams []*http.Response
	for range 2 {
		resp := open()
		defer resp.Body.Close()
		first := make([]byte, 64)
		if n, err := resp.Body.Read(first); resp.StatusCode != http.StatusOK || !strings.Contains(string(first[:n]), "stamen event stream") {
			t.Fatalf("stream %d: status %d, %q, %v", len(streams)+1, resp.StatusCode, first[:n], err)
		}
		streams = append(streams, resp)
	}
	third := open()
	body, _ := io.ReadAll(third.Body)
	third.Body.Close()
	var e struct{ Error string }
	if third.StatusCode != http.StatusServiceUnavailable || third.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, "--max_event_streams") {
		t.Fatalf("a third stream: %d %q %s", third.StatusCode, third.Header.Get("Content-Type"), body)
	}
	streams[0].Body.Close()
	testcluster.Eventually(t, 10*time.Second, "a stream opens once a client has gone", func() bool {
		resp := open()
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
