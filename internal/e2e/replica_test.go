package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// A fleet is several stamen processes, the real binary as an operator runs
// it, on one PostgreSQL database and one broker. Replicas are processes, not
// Apps in the test process, so that one can be SIGKILLed and restarted as a
// crash would take it away.

// buildStamen builds cmd/stamen into t's temporary directory (a second or
// two with the build cache) and returns the binary's path.
func buildStamen(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stamen")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/stamen")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/stamen: %v\n%s", err, out)
	}
	return bin
}

// replica is one stamen process of a fleet. It keeps its port across
// restarts, as a load balancer's backend would.
type replica struct {
	t    *testing.T
	name string
	bin  string
	args []string
	port int
	log  string
	api  *api

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// newReplica starts stamen with args (the port is added) and returns once
// it answers /healthcheck; a cleanup registered on t kills it.
func newReplica(t *testing.T, bin, name string, args ...string) *replica {
	t.Helper()
	dir := os.Getenv("STAMEN_TEST_LOG_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	r := &replica{
		t: t, name: name, bin: bin, args: args, port: testcluster.FreePort(t),
		log: filepath.Join(dir, fmt.Sprintf("stamen-%s-%d.log", name, os.Getpid())),
	}
	r.api = &api{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", r.port), hc: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("replica %s log (%s), last lines:\n%s", r.name, r.log, r.tail(40))
		}
	})
	r.start()
	return r
}

// start runs the process (again) and waits until /healthcheck answers 200.
func (r *replica) start() {
	r.t.Helper()
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(r.bin, append(append([]string{}, r.args...), "--port", strconv.Itoa(r.port))...)
	cmd.Env = os.Environ()
	cmd.Stdout, cmd.Stderr = logf, logf
	// A replica must not outlive the test process, even a killed one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start replica %s: %v", r.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	r.mu.Lock()
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()
	probe := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := probe.Get(r.api.base + "/healthcheck"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			r.t.Fatalf("replica %s exited before answering /healthcheck:\n%s", r.name, r.tail(40))
		default:
		}
		if time.Now().After(deadline) {
			r.kill()
			r.t.Fatalf("replica %s did not answer /healthcheck within 30 s:\n%s", r.name, r.tail(40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill takes the process away with SIGKILL, as a crash or an OOM kill
// would: it writes nothing more and flushes nothing. Safe to call from any
// goroutine, and when the process is already gone.
func (r *replica) kill() {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
	default:
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// pid is the running process's id.
func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd.Process.Pid
}

func (r *replica) tail(n int) string {
	b, err := os.ReadFile(r.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// get is a GET that reports a failure to connect as an error instead of
// failing the test, for polls that may run while the replica restarts and
// for goroutines other than the test's.
func (r *replica) get(path string, query url.Values) (int, []byte, error) {
	u := r.api.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	resp, err := r.api.hc.Get(u)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// metric reads one series of the replica's /metrics (0 when absent).
func (r *replica) metric(series string) (float64, error) {
	status, body, err := r.get("/metrics", nil)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d", status)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, nil
}

// canonical renders a JSON object with its top-level keys in the order the
// body has them (the order of /api/tasks is part of its answer) and every
// value re-encoded, so that two bodies compare equal when they say the
// same, whatever their spacing.
func canonical(body []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return "", fmt.Errorf("not a JSON object: %.200s", body)
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; dec.More(); i++ {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", err
		}
		val, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(tok)
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.String(), nil
}

// orderedKeys is the top-level keys of a JSON object in the body's order.
func orderedKeys(body []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, fmt.Sprint(tok))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// answers is what each replica answers to one GET: 200 and a JSON object,
// canonical. ok is false, with why, when one does not answer so.
func answers(rs []*replica, path string, query url.Values) (bodies []string, raw [][]byte, why string) {
	for _, r := range rs {
		status, body, err := r.get(path, query)
		if err != nil {
			return nil, nil, fmt.Sprintf("%s: %v", r.name, err)
		}
		if status != http.StatusOK {
			return nil, nil, fmt.Sprintf("%s: %d %.300s", r.name, status, body)
		}
		c, err := canonical(body)
		if err != nil {
			return nil, nil, fmt.Sprintf("%s: %v", r.name, err)
		}
		bodies, raw = append(bodies, c), append(raw, body)
	}
	return bodies, raw, ""
}

// awaitSame polls GET path?query on every replica until all answer 200
// with the same JSON object and accept holds for it, failing the test after
// within; it returns that body.
func awaitSame(t *testing.T, rs []*replica, within time.Duration, path string, query url.Values, accept func(body []byte) string) []byte {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		bodies, raw, why := answers(rs, path, query)
		if why == "" {
			for i := 1; i < len(bodies); i++ {
				if bodies[i] != bodies[0] {
					why = fmt.Sprintf("%s and %s differ:\n%s: %.600s\n%s: %.600s", rs[0].name, rs[i].name, rs[0].name, bodies[0], rs[i].name, bodies[i])
					break
				}
			}
		}
		if why == "" && accept != nil {
			why = accept(raw[0])
		}
		if why == "" {
			return raw[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s?%s: not the same accepted answer from every replica within %s: %s", path, query.Encode(), within, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
