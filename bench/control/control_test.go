// Package control benchmarks stamen's control plane against Celery's own
// client, on the same machine, in the same run, with real workers: pool
// grow/shrink round trips on Redis and RabbitMQ, and
// GET /api/workers?refresh=1 with three live workers.
//
// It runs the stamen binary as an operator does (built from ./cmd/stamen
// into a temporary directory, or STAMEN_BIN), not the App in process, so
// that HTTP, middleware and the process's own scheduling are in the figures.
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/control/
//
// CONTROL_N sets the round trips per side (default 200).
package control

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// clientScript times n pairs of pool_grow/pool_shrink broadcasts through
// Celery's own client, one worker, reply=True, limit=1, and prints each
// call's duration in milliseconds, one a line. The first pairs warm up the
// connection and the reply queue and are not printed.
const clientScript = `
import sys, time
from stamen_testapp import app
w, n, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def call(cmd):
    t = time.perf_counter()
    r = app.control.broadcast(cmd, arguments={'n': 1}, destination=[w], reply=True, limit=1, timeout=5.0)
    d = (time.perf_counter() - t) * 1000
    if not r or w not in r[0]:
        raise SystemExit('no reply from %s to %s: %r' % (w, cmd, r))
    return d
for _ in range(warm):
    call('pool_grow'); call('pool_shrink')
out = []
for _ in range(n):
    out.append(call('pool_grow')); out.append(call('pool_shrink'))
print('\n'.join('%.4f' % d for d in out))
`

const warmup = 10

func rounds() int {
	if v, err := strconv.Atoi(os.Getenv("CONTROL_N")); err == nil && v > 0 {
		return v
	}
	return 200
}

// BenchmarkControlRoundTrip: POST /api/worker/pool/grow/{w}?n=1 then
// .../shrink/{w}?n=1 through the stamen binary against Celery's client
// doing the same broadcasts, alternating halves of the run between the two
// so that both see the same machine load.
func BenchmarkControlRoundTrip(b *testing.B) {
	testcluster.Require(b)
	bin := stamenBinary(b)
	for _, setup := range []struct {
		name   string
		broker func(b *testing.B) string
	}{
		{"redis", func(b *testing.B) string { testcluster.FlushRedisDB(b, 12); return testcluster.RedisURL(12) }},
		{"amqp", func(b *testing.B) string { return testcluster.AMQPURL(testcluster.Vhost) }},
	} {
		b.Run(setup.name, func(b *testing.B) {
			broker := setup.broker(b)
			w := testcluster.StartWorker(b, testcluster.WorkerOptions{Name: "bench", Broker: broker, Concurrency: 1})
			s := startStamen(b, bin, broker) // the default inspect timeout, 1 s, as an operator runs it
			s.waitWorker(b, w.Name)
			n := rounds()
			var stamen, client []float64
			b.ResetTimer()
			for range b.N {
				for range 2 {
					client = append(client, clientRoundTrips(b, broker, w.Name, n/2)...)
					stamen = append(stamen, s.roundTrips(b, w.Name, n/2)...)
				}
			}
			b.StopTimer()
			sp50, sp99 := pct(stamen, 50), pct(stamen, 99)
			cp50, cp99 := pct(client, 50), pct(client, 99)
			b.ReportMetric(sp50, "stamen-p50-ms")
			b.ReportMetric(sp99, "stamen-p99-ms")
			b.ReportMetric(cp50, "client-p50-ms")
			b.ReportMetric(cp99, "client-p99-ms")
			b.ReportMetric(sp50/cp50, "p50-ratio")
			b.ReportMetric(float64(len(stamen)), "calls")
		})
	}
}

// BenchmarkWorkersRefresh: GET /api/workers?refresh=1 with three live
// workers on Redis and a 10 s inspect timeout, which it must not wait.
func BenchmarkWorkersRefresh(b *testing.B) {
	testcluster.Require(b)
	bin := stamenBinary(b)
	testcluster.FlushRedisDB(b, 12)
	broker := testcluster.RedisURL(12)
	ws := make([]*testcluster.Worker, 3)
	var wg sync.WaitGroup
	for i := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i] = testcluster.StartWorker(b, testcluster.WorkerOptions{Name: fmt.Sprintf("r%d", i), Broker: broker, Concurrency: 1})
		}()
	}
	wg.Wait()
	for _, w := range ws {
		if w == nil {
			b.FailNow()
		}
	}
	s := startStamen(b, bin, broker, "--inspect_timeout", "10000")
	for _, w := range ws {
		s.waitWorker(b, w.Name)
	}
	n := rounds() / 4
	var took []float64
	b.ResetTimer()
	for range b.N {
		for range n {
			t := time.Now()
			body := s.do(b, http.MethodGet, "/api/workers?refresh=1", http.StatusOK)
			took = append(took, ms(time.Since(t)))
			for _, w := range ws {
				if !strings.Contains(body, `"`+w.Name+`"`) {
					b.Fatalf("refresh=1 lacks %s: %.300s", w.Name, body)
				}
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(pct(took, 50), "p50-ms")
	b.ReportMetric(pct(took, 99), "p99-ms")
	b.ReportMetric(float64(len(took)), "calls")
}

func clientRoundTrips(b *testing.B, broker, worker string, n int) []float64 {
	b.Helper()
	out := testcluster.RunClient(b, testcluster.ClientOptions{Broker: broker, Timeout: 5 * time.Minute},
		clientScript, worker, strconv.Itoa(n), strconv.Itoa(warmup))
	var ds []float64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		d, err := strconv.ParseFloat(strings.TrimSpace(sc.Text()), 64)
		if err != nil {
			b.Fatalf("client output %q: %v", sc.Text(), err)
		}
		ds = append(ds, d)
	}
	if len(ds) != 2*n {
		b.Fatalf("client timed %d calls, want %d", len(ds), 2*n)
	}
	return ds
}

type stamen struct {
	base string
	hc   *http.Client
}

func (s *stamen) roundTrips(b *testing.B, worker string, n int) []float64 {
	b.Helper()
	call := func(op string) float64 {
		t := time.Now()
		s.do(b, http.MethodPost, "/api/worker/pool/"+op+"/"+worker+"?n=1", http.StatusOK)
		return ms(time.Since(t))
	}
	for range warmup {
		call("grow")
		call("shrink")
	}
	ds := make([]float64, 0, 2*n)
	for range n {
		ds = append(ds, call("grow"), call("shrink"))
	}
	return ds
}

func (s *stamen) do(b *testing.B, method, path string, want int) string {
	b.Helper()
	req, err := http.NewRequest(method, s.base+path, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		b.Fatalf("%s %s: %v", method, path, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, body)
	}
	return string(body)
}

// waitWorker polls until stamen knows worker from an inspect reply.
func (s *stamen) waitWorker(b *testing.B, worker string) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := s.hc.Get(s.base + "/api/workers?refresh=1&workername=" + worker)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		<-time.After(50 * time.Millisecond)
	}
	b.Fatalf("stamen does not know %s after 60s", worker)
}

// stamenBinary builds cmd/stamen once per benchmark process, unless
// STAMEN_BIN names one.
func stamenBinary(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("STAMEN_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stamen-bench-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "stamen")
		cmd := exec.Command("go", "build", "-o", builtBin, "github.com/stamen-dev/stamen/cmd/stamen")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return builtBin
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

func startStamen(b *testing.B, bin, broker string, args ...string) *stamen {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logPath := filepath.Join(b.TempDir(), "stamen.log")
	logf, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--broker", broker, "--port", strconv.Itoa(port)}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	s := &stamen{base: fmt.Sprintf("http://127.0.0.1:%d", port), hc: &http.Client{Timeout: 30 * time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := s.hc.Get(s.base + "/healthcheck"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			b.Fatalf("stamen exited: %s", log)
		case <-time.After(10 * time.Millisecond):
		}
	}
	b.Fatal("stamen did not answer /healthcheck within 30s")
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the p-th percentile (nearest rank) of xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
