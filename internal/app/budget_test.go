package app

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/metrics"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// scrapeSeries is /metrics' body and its number of series as Prometheus
// stores them (every sample line).
func scrapeSeries(t *testing.T, a *App) (string, int) {
	t.Helper()
	w := httptest.NewRecorder()
	a.Handler.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("/metrics answered %d", w.Code)
	}
	body := w.Body.String()
	n := 0
	for line := range strings.SplitSeq(body, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return body, n
}

// churnPods feeds pods worker hostnames named prefix-<i> into a, each
// running one task of one of names task names (received, started,
// succeeded, stamped now), a batch at a time as the Redis broker delivers
// them. The pods are seen in task events only. The events are decoded
// once from a worker's envelope and given each pod's hostname, task id
// and name: the test's time goes to stamen, not to making envelopes.
// check runs after each batch.
func churnPods(t *testing.T, a *App, prefix string, pods, names int, check func(done int)) {
	t.Helper()
	const batch = 500
	var dec celery.EventDecoder
	template, err := dec.Decode(taskEnvelope("00000000-0000-4000-8000-000000000000", "proj.Task", "celery@template", 1, 0))
	if err != nil || len(template) != 3 {
		t.Fatalf("template: %d events, %v", len(template), err)
	}
	evs := make([]celery.Event, 0, 3*batch)
	for start := 0; start < pods; start += batch {
		evs = evs[:0]
		at := float64(time.Now().UnixMicro()) / 1e6
		for i := start; i < min(start+batch, pods); i++ {
			worker, id := fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
			for _, e := range template {
				e.Hostname, e.UUID, e.Timestamp, e.LocalReceived, e.Clock = worker, id, at, at, int64(i)
				if e.Name != "" {
					e.Name = fmt.Sprintf("proj.Task%d", i%names)
				}
				evs = append(evs, e)
			}
		}
		a.ingester.Apply(context.Background(), evs)
		if check != nil {
			check(min(start+batch, pods))
		}
	}
}

// TestScrapeStaysWithinBudget: 100,000 worker hostnames churn through
// stamen (pods, each running one task, seen in task events only), with
// 5,000 task names, under the default series budget: the state keeps the
// last --max_workers of them, and the scrape stays under 10,000 series all
// along, what did not fit counted under worker and task "other". The 1,000
// workers kept (the state scans them for each new one, which the race
// detector makes slow at the default 5,000) hold 23 series each, three
// times the budget.
func TestScrapeStaysWithinBudget(t *testing.T) {
	const pods, names, budget = 100000, 5000, 10000
	a, err := New(context.Background(), Config{EmbeddedAddr: "127.0.0.1:0", MaxWorkers: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	churnPods(t, a, "celery@pod", pods, names, func(done int) {
		if done%20000 == 0 {
			if _, n := scrapeSeries(t, a); n > budget {
				t.Fatalf("%d series after %d pods, budget %d", n, done, budget)
			}
		}
	})
	body, n := scrapeSeries(t, a)
	t.Logf("%d series after %d pods and %d task names; the state keeps %d workers", n, pods, names, len(a.State.WorkerNames()))
	if n > budget {
		t.Fatalf("%d series, budget %d", n, budget)
	}
	for _, want := range []string{`stamen_metrics_folded_total{label="worker"}`, `worker="` + metrics.OtherWorker + `"`,
		`stamen_metrics_series_budget 8000`} {
		if !strings.Contains(body, want) {
			t.Fatalf("the scrape lacks %s", want)
		}
	}
	// Each pod's task was counted, under its own worker or "other", until
	// the pod was forgotten (pushed out of --max_workers).
	ms := testcluster.ParseMetrics(t, strings.NewReader(body))
	if got := ms.Sum("flower_events_total", map[string]string{"type": "task-succeeded", "worker": metrics.OtherWorker}); got == 0 {
		t.Error("no event counted under worker \"other\"")
	}
}

// TestTaskEventWorkersLeaveTheScrape: pods seen in task events only are
// forgotten like the workers that stopped sending heartbeats, once silent
// longer than --purge_offline_workers, and their series leave the scrape
// with them.
func TestTaskEventWorkersLeaveTheScrape(t *testing.T) {
	a, err := New(context.Background(), Config{EmbeddedAddr: "127.0.0.1:0", PurgeOfflineWorkers: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	churnPods(t, a, "celery@short-lived", 50, 5, nil)
	body, _ := scrapeSeries(t, a)
	if want := `flower_task_runtime_seconds_count{task="proj.Task4",worker="celery@short-lived-49"} 1`; !strings.Contains(body, want) {
		t.Fatalf("the scrape lacks %s", want)
	}
	// Celery counts a task event as a heartbeat of its default interval,
	// 60 s: the pods would show online for two minutes. They go sooner.
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(body, `worker="celery@short-lived-`) {
		if time.Now().After(deadline) {
			t.Fatal("pods seen in task events only are still in the scrape 10 s after their last event")
		}
		time.Sleep(100 * time.Millisecond)
		body, _ = scrapeSeries(t, a)
	}
	if a.State.KnowsWorker("celery@short-lived-49") {
		t.Fatal("a pod left the scrape and is still in the state")
	}
}
