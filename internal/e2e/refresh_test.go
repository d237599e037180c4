package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/inspect"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestWorkersRefreshWaitsOnlyForSilentWorkers: GET /api/workers?refresh=1
// returns as soon as every worker alive by heartbeat answered every
// inspect command, without waiting the inspect timeout; it waits the
// timeout only when one of them is silent (SIGSTOP), and names it in
// X-Stamen-Timed-Out while the others' fresh info is there.
func TestWorkersRefreshWaitsOnlyForSilentWorkers(t *testing.T) {
	testcluster.Require(t)
	testcluster.FlushRedisDB(t, 5)
	broker := testcluster.RedisURL(5)

	ws := make([]*testcluster.Worker, 3)
	var wg sync.WaitGroup
	for i, name := range []string{"rf1", "rf2", "rf3"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i] = testcluster.StartWorker(t, testcluster.WorkerOptions{Name: name, Broker: broker, Concurrency: 1})
		}()
	}
	wg.Wait()
	for _, w := range ws {
		if w == nil {
			t.FailNow()
		}
	}
	silent := ws[2]

	t.Run("all answer", func(t *testing.T) {
		const timeout = 10 * time.Second
		a, c := startRefreshStamen(t, broker, timeout)
		awaitAlive(t, a, c, ws...)

		began := time.Now()
		r := c.get("/api/workers", q("refresh", "true"))
		took := time.Since(began)
		body := c.mustOK(r)
		if took >= timeout/2 {
			t.Fatalf("refresh=1 took %s with every worker alive and answering; the inspect timeout is %s", took, timeout)
		}
		if h := r.Header.Get("X-Stamen-Timed-Out"); h != "" {
			t.Errorf("X-Stamen-Timed-Out = %q, want none", h)
		}
		for _, w := range ws {
			assertFresh(t, body, w.Name, began)
		}
		t.Logf("refresh=1 answered in %s (inspect timeout %s)", took, timeout)
	})

	t.Run("one stopped", func(t *testing.T) {
		const timeout = 2 * time.Second
		a, c := startRefreshStamen(t, broker, timeout)
		awaitAlive(t, a, c, ws...)
		// Stop it right after a heartbeat, so that it is still alive by
		// heartbeat (for twice the 2 s interval) when the refresh starts.
		eventually(t, 15*time.Second, silent.Name+" heartbeat just received", func() bool {
			for _, w := range a.State.Workers() {
				if w.Hostname == silent.Name && w.Alive && len(w.Heartbeats) > 0 {
					last := time.Unix(0, int64(w.Heartbeats[len(w.Heartbeats)-1]*1e9))
					return time.Since(last) < 300*time.Millisecond
				}
			}
			return false
		})
		if err := syscall.Kill(silent.Pid(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(silent.Pid(), syscall.SIGCONT) })

		began := time.Now()
		r := c.get("/api/workers", q("refresh", "true"))
		took := time.Since(began)
		body := c.mustOK(r)
		if took < timeout {
			t.Errorf("refresh=1 answered after %s, before the %s inspect timeout, with %s silent", took, timeout, silent.Name)
		}
		if got := r.Header.Get("X-Stamen-Timed-Out"); got != silent.Name {
			t.Errorf("X-Stamen-Timed-Out = %q, want %q", got, silent.Name)
		}
		for _, w := range ws[:2] {
			assertFresh(t, body, w.Name, began)
		}
		t.Logf("refresh=1 answered in %s (inspect timeout %s), timed out: %s", took, timeout, r.Header.Get("X-Stamen-Timed-Out"))
	})
}

// startRefreshStamen runs stamen in process on broker with the given
// inspect timeout.
func startRefreshStamen(t *testing.T, broker string, timeout time.Duration) (*app.App, *api) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, app.Config{BrokerURL: broker, ResultBackend: broker, InspectTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	return a, &api{t: t, base: srv.URL, hc: &http.Client{Timeout: 60 * time.Second}}
}

// awaitAlive waits until stamen has each worker alive by heartbeat and has
// cached its answers to every inspect command (without asking for a
// refresh, which is what is under test).
func awaitAlive(t *testing.T, a *app.App, c *api, ws ...*testcluster.Worker) {
	t.Helper()
	eventually(t, 45*time.Second, "every worker alive and inspected", func() bool {
		status := c.mustOK(c.get("/api/workers", q("status", "true")))
		cached := c.mustOK(c.get("/api/workers", nil))
		for _, w := range ws {
			info, _ := cached[w.Name].(map[string]any)
			if status[w.Name] != true || len(info) != len(inspect.Methods)+1 {
				return false
			}
		}
		return true
	})
}

// assertFresh checks that the worker's info has every inspect method and
// was received after since.
func assertFresh(t *testing.T, body map[string]any, worker string, since time.Time) {
	t.Helper()
	info, ok := body[worker].(map[string]any)
	if !ok {
		t.Errorf("no info for %s in %v", worker, keys(body))
		return
	}
	var missing []string
	for _, m := range inspect.Methods {
		if _, ok := info[m]; !ok {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s info lacks %s", worker, strings.Join(missing, ", "))
	}
	ts, _ := info["timestamp"].(float64)
	if ts < float64(since.UnixMicro())/1e6 {
		t.Errorf("%s info is dated %f, before the refresh began (%f): not refreshed", worker, ts, float64(since.UnixMicro())/1e6)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
