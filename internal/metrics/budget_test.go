package metrics

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// flowerSeries counts the flower_* series of a scrape as Prometheus
// stores them: a histogram's buckets, sum and count each.
func flowerSeries(body string) int {
	n := 0
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "flower_") {
			n++
		}
	}
	return n
}

// churn sends, for each of workers worker hostnames, a heartbeat and a
// task of one of names task names, received, started and succeeded.
func churn(m *Metrics, workers, names int) {
	for i := range workers {
		worker, task, id := fmt.Sprintf("celery@pod-%d", i), fmt.Sprintf("proj.t%d", i%names), fmt.Sprint(i)
		m.Observe(Event{Type: "worker-heartbeat", Worker: worker, Active: 1})
		m.Observe(Event{Type: "task-received", UUID: id, Task: task, Worker: worker, Timestamp: 1})
		m.Observe(Event{Type: "task-started", UUID: id, Task: task, Worker: worker, Timestamp: 2})
		m.Observe(Event{Type: "task-succeeded", UUID: id, Task: task, Worker: worker, Runtime: 0.5})
	}
}

// TestSeriesBudget: however many workers and task names churn through,
// Flower's series stay within the budget but for the "other" ones (one
// histogram, two gauges, an event counter per type), what did not fit is
// counted by label, and the series still agree with what was observed.
// Forgetting the workers frees the budget for new ones.
func TestSeriesBudget(t *testing.T) {
	m := New(nil)
	const budget = 2000
	m.SetLimits(Limits{MaxSeries: budget})
	churn(m, 20000, 5000)
	body := scrape(t, m)
	other := len(DefaultRuntimeBuckets) + 3 + 2 + 3
	if got := flowerSeries(body); got > budget+other {
		t.Fatalf("%d flower series, budget %d (+%d for other)", got, budget, other)
	}
	if got := m.series; got > budget+other {
		t.Fatalf("%d series counted, budget %d", got, budget)
	}
	for _, want := range []string{`stamen_metrics_folded_total{label="worker"}`, `stamen_metrics_folded_total{label="worker_gauges"}`,
		`stamen_metrics_series_budget 2000`, `flower_events_total{task="other",type="task-received",worker="other"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	// Every task-received event is counted once, under whichever labels.
	ms := testcluster.ParseMetrics(t, strings.NewReader(body))
	if got := ms.Sum("flower_events_total", map[string]string{"type": "task-received"}); got != 20000 {
		t.Errorf("%v task-received events counted, want 20000", got)
	}

	m.Retain(func(string) bool { return false }, func(string) bool { return false })
	if got := flowerSeries(scrape(t, m)); got > other {
		t.Fatalf("%d flower series left once every worker and name is forgotten, want at most the %d of other", got, other)
	}
	m.Observe(Event{Type: "worker-heartbeat", Worker: "celery@new", Active: 1})
	m.Observe(Event{Type: "task-received", UUID: "n", Task: "proj.new", Worker: "celery@new", Timestamp: 1})
	body = scrape(t, m)
	for _, want := range []string{`flower_worker_online{worker="celery@new"} 1`,
		`flower_events_total{task="proj.new",type="task-received",worker="celery@new"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("a worker new after the purge is folded: missing %s", want)
		}
	}
}

// TestNoTaskWorker: without the worker label on per-task series, a task
// name's series are one set whatever the number of workers, the events
// all counted there; the per-worker gauges keep the label.
func TestNoTaskWorker(t *testing.T) {
	m := New(nil)
	m.SetLimits(Limits{NoTaskWorker: true, MaxSeries: 1 << 30})
	churn(m, 1000, 5)
	body := scrape(t, m)
	if want := `flower_events_total{task="proj.t0",type="task-received",worker=""} 200`; !strings.Contains(body, want) {
		t.Errorf("missing %s", want)
	}
	if want := `flower_task_runtime_seconds_count{task="proj.t3",worker=""} 200`; !strings.Contains(body, want) {
		t.Errorf("missing %s", want)
	}
	if strings.Contains(body, `flower_events_total{task="proj.t0",type="task-received",worker="celery@`) {
		t.Error("a per-task series carries a worker")
	}
	if want := `flower_worker_online{worker="celery@pod-7"} 1`; !strings.Contains(body, want) {
		t.Errorf("missing %s", want)
	}
	// 5 names: 3 event series, a histogram and 2 gauges each; 2 gauges a
	// worker.
	if got, want := flowerSeries(body), 5*(3+len(DefaultRuntimeBuckets)+3+2)+2*1000; got != want {
		t.Errorf("%d flower series, want %d", got, want)
	}
}

// TestScrapeDuringRetain: a scrape while workers and tasks are forgotten
// finishes. Retain holds the metrics' lock while it deletes label values,
// which waits for a vector that a scrape in progress is reading; a gauge
// that took that lock at scrape time stalled the scrape, and both waited
// for ever.
func TestScrapeDuringRetain(t *testing.T) {
	m := New(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 300 {
			churn(m, 200, 50)
			var scrapes sync.WaitGroup
			for range 4 {
				scrapes.Go(func() { _, _ = m.reg.Gather() })
			}
			m.Retain(func(string) bool { return false }, func(string) bool { return false })
			scrapes.Wait()
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a scrape and Retain wait for each other: deadlock")
	}
}
