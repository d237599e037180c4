package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// Mirrors Flower's own metrics test: after worker-online, a heartbeat with
// active=1 and a task received, started 3 s later and succeeded.
func TestFlowerMetrics(t *testing.T) {
	m := New(nil)
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
	m := New(nil)
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

// TestTaskNamesCappedAndForgotten: past MaxTaskNames, names share the
// OtherTask series; Retain deletes the series of forgotten workers and
// names, which frees their slots for new names.
func TestTaskNamesCappedAndForgotten(t *testing.T) {
	m := New(nil)
	m.SetLimits(Limits{MaxSeries: 1 << 30}) // the name cap alone
	const names = MaxTaskNames + 500
	for i := range names {
		task, worker := fmt.Sprintf("t%d", i), fmt.Sprintf("w%d", i%10)
		id := fmt.Sprint(i)
		m.Observe(Event{Type: "worker-heartbeat", Worker: worker, Active: 1})
		m.Observe(Event{Type: "task-received", UUID: id, Task: task, Worker: worker, Timestamp: 1})
		m.Observe(Event{Type: "task-started", UUID: id, Task: task, Worker: worker, Timestamp: 2})
		m.Observe(Event{Type: "task-succeeded", UUID: id, Task: task, Worker: worker, Runtime: 0.5})
	}
	body := scrape(t, m)
	if want := `flower_events_total{task="other",type="task-received",worker="w0"} 50`; !strings.Contains(body, want) {
		t.Errorf("missing %q", want)
	}
	if strings.Contains(body, fmt.Sprintf(`task="t%d"`, MaxTaskNames)) {
		t.Errorf("name %d beyond the cap has series of its own", MaxTaskNames)
	}
	// Three event series, runtime, prefetch and prefetched per name, plus
	// the OtherTask ones per worker, and two per worker.
	perName := 6
	if got, want := m.Series(), perName*(MaxTaskNames+10)+2*10; got != want {
		t.Errorf("%d series, want %d", got, want)
	}

	// Only w0's series and the names t0 to t9 stay.
	m.Retain(func(w string) bool { return w == "w0" }, func(n string) bool { return len(n) == 2 })
	if got, want := m.Series(), perName*(1+1)+2; got != want { // t0 and other on w0
		t.Errorf("after Retain: %d series, want %d:\n%s", got, want, scrape(t, m))
	}
	m.Observe(Event{Type: "task-started", UUID: "nameless", Worker: "w0", Timestamp: 1})
	m.Retain(func(string) bool { return true }, func(string) bool { return false })
	if want := `flower_events_total{task="",type="task-started",worker="w0"} 1`; !strings.Contains(scrape(t, m), want) {
		t.Errorf("the series of nameless tasks went: missing %q", want)
	}
	m.Observe(Event{Type: "task-received", UUID: "new", Task: "fresh", Worker: "w0", Timestamp: 1})
	if want := `flower_events_total{task="fresh",type="task-received",worker="w0"} 1`; !strings.Contains(scrape(t, m), want) {
		t.Errorf("a new name after Retain has no series of its own: missing %q", want)
	}
}

// TestEventTypesCapped: an event's type is whatever its sender wrote; past
// MaxEventTypes types beyond Celery's share the OtherEventType series, so
// that one worker and one task name sending ever new types cannot grow
// flower_events_total (and memory) without bound.
func TestEventTypesCapped(t *testing.T) {
	m := New(nil)
	const capped = 100 // MaxEventTypes
	const types = 20000
	for i := range types {
		m.Observe(Event{Type: fmt.Sprintf("task-custom%d", i), UUID: "1", Task: "t", Worker: "w"})
	}
	for _, typ := range []string{"task-received", "task-succeeded", "worker-whatever"} {
		m.Observe(Event{Type: typ, UUID: "1", Task: "t", Worker: "w"})
	}
	// The capped types and other; received and succeeded; prefetched and
	// prefetch of (w, t).
	if got, max := m.Series(), capped+5; got > max {
		t.Fatalf("%d series after %d event types, want at most %d", got, types, max)
	}
	body := scrape(t, m)
	want := fmt.Sprintf(`flower_events_total{task="t",type="other",worker="w"} %d`, types-capped+1)
	for _, w := range []string{want, `flower_events_total{task="t",type="task-received",worker="w"} 1`,
		`flower_events_total{task="t",type="task-custom0",worker="w"} 1`} {
		if !strings.Contains(body, w) {
			t.Errorf("missing %q", w)
		}
	}
}

// TestMarkOffline: a worker whose heartbeats stopped without a
// worker-offline event (killed, crashed) reads 0 once the state says it
// is offline; one still alive keeps 1, and one never seen online gets no
// series.
func TestMarkOffline(t *testing.T) {
	m := New(nil)
	for _, w := range []string{"alive", "killed", "left"} {
		m.Observe(Event{Type: "worker-heartbeat", Worker: w})
	}
	m.Observe(Event{Type: "worker-offline", Worker: "left"})
	m.Observe(Event{Type: "task-received", UUID: "a", Task: "t", Worker: "tasks-only"})
	m.MarkOffline(func(w string) bool { return w == "alive" })
	body := scrape(t, m)
	for _, tc := range []struct {
		series string
		want   bool
	}{
		{`flower_worker_online{worker="alive"} 1`, true},
		{`flower_worker_online{worker="killed"} 0`, true},
		{`flower_worker_online{worker="left"} 0`, true},
		{`flower_worker_online{worker="tasks-only"}`, false},
	} {
		if got := strings.Contains(body, tc.series); got != tc.want {
			t.Errorf("%s in the scrape: %v, want %v", tc.series, got, tc.want)
		}
	}
	// A heartbeat brings it back.
	m.Observe(Event{Type: "worker-heartbeat", Worker: "killed"})
	if body := scrape(t, m); !strings.Contains(body, `flower_worker_online{worker="killed"} 1`) {
		t.Errorf("a heartbeat after MarkOffline left the worker offline")
	}
}
