package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// Mirrors Flower's own metrics test: after worker-online, a heartbeat with
// active=1 and a task received, started 3 s later and succeeded.
func TestFlowerMetrics(t *testing.T) {
	m := New()
	for _, e := range []Event{
		{Type: "worker-online", Worker: "worker1"},
		{Type: "worker-heartbeat", Worker: "worker1", Active: 1},
		{Type: "task-received", UUID: "a", Task: "task1", Worker: "worker1", Timestamp: 100},
		{Type: "task-started", UUID: "a", Task: "task1", Worker: "worker1", Timestamp: 103},
	} {
		m.Observe(e)
	}
	body := scrape(t, m)
	for _, want := range []string{
		`flower_events_total{task="task1",type="task-received",worker="worker1"} 1`,
		`flower_events_total{task="task1",type="task-started",worker="worker1"} 1`,
		`flower_worker_online{worker="worker1"} 1`,
		`flower_worker_number_of_currently_executing_tasks{worker="worker1"} 1`,
		`flower_task_prefetch_time_seconds{task="task1",worker="worker1"} 3`,
		`flower_worker_prefetched_tasks{task="task1",worker="worker1"} 0`,
		`stamen_events_ingested_total{kind="task"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q", want)
		}
	}
	m.Observe(Event{Type: "task-succeeded", UUID: "a", Task: "task1", Worker: "worker1", Runtime: 0.5})
	m.Observe(Event{Type: "worker-offline", Worker: "worker1"})
	body = scrape(t, m)
	for _, want := range []string{
		`flower_task_prefetch_time_seconds{task="task1",worker="worker1"} 0`,
		`flower_task_runtime_seconds_count{task="task1",worker="worker1"} 1`,
		`flower_worker_online{worker="worker1"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q", want)
		}
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(w.Body)
	return string(b)
}

// A series appears once an event sets it, as with Flower: the cache of
// children must not make the others show up as zeros.
func TestSeriesAppearOnFirstUse(t *testing.T) {
	m := New()
	for _, e := range []Event{
		{Type: "worker-online", Worker: "w2"},
		{Type: "task-received", UUID: "b", Task: "eta.task", Worker: "w2", Timestamp: 100, HasETA: true},
		{Type: "task-succeeded", UUID: "c", Task: "other.task", Worker: "w2"},
	} {
		m.Observe(e)
	}
	body := scrape(t, m)
	for _, absent := range []string{
		`flower_worker_number_of_currently_executing_tasks{worker="w2"}`,
		`flower_worker_prefetched_tasks{task="eta.task"`,
		`flower_task_runtime_seconds_count{task="eta.task"`,
		`flower_task_runtime_seconds_count{task="other.task"`,
		`flower_task_prefetch_time_seconds{task="other.task"`,
	} {
		if strings.Contains(body, absent) {
			t.Errorf("unexpected series %q in:\n%s", absent, body)
		}
	}
	if want := `flower_worker_online{worker="w2"} 1`; !strings.Contains(body, want) {
		t.Errorf("missing %q", want)
	}
}
