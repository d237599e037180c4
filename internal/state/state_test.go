package state

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/tasksearch"
)

// ev builds an event the way the decoder would, from JSON-ish fields.
func ev(t testing.TB, fields map[string]any) celery.Event {
	t.Helper()
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := celery.DecodeEvents(raw)
	if err != nil {
		t.Fatal(err)
	}
	return evs[0]
}

// taskEv is a task event of a worker (or, for "sent", of a client).
func taskEv(t testing.TB, kind, uuid, host string, ts float64, extra map[string]any) celery.Event {
	t.Helper()
	f := map[string]any{"type": "task-" + kind, "uuid": uuid, "hostname": host, "timestamp": ts, "clock": int(ts * 10)}
	for k, v := range extra {
		f[k] = v
	}
	e := ev(t, f)
	e.LocalReceived = ts
	return e
}

// succeededTask is received, started and succeeded, as in Flower's tests.
func succeededTask(t testing.TB, uuid, name, worker string, ts float64) []celery.Event {
	return []celery.Event{
		taskEv(t, "received", uuid, worker, ts, map[string]any{"name": name, "args": "(1,)", "kwargs": "{}"}),
		taskEv(t, "started", uuid, worker, ts+0.1, nil),
		taskEv(t, "succeeded", uuid, worker, ts+0.2, map[string]any{"result": "1", "runtime": 0.1}),
	}
}

func ids(tasks []taskrec.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.UUID
	}
	return out
}

func names(tasks []taskrec.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.Name
	}
	return out
}

// TestFlowerPagination mirrors Flower's TaskTests.test_tasks_pagination.
func TestFlowerPagination(t *testing.T) {
	s := New(Config{})
	for i, n := range []string{"task1", "task2", "task3", "task4"} {
		s.Apply(succeededTask(t, fmt.Sprintf("%d", i+1), n, "worker1", float64(100+i))...)
	}
	tests := []struct {
		q    Query
		want []string
	}{
		{Query{Limit: 4, SortBy: "name"}, []string{"task1", "task2", "task3", "task4"}},
		{Query{Limit: 4, Offset: 1, SortBy: "name"}, []string{"task2", "task3", "task4"}},
		{Query{Limit: 4, Offset: -1, SortBy: "name"}, []string{"task1", "task2", "task3", "task4"}},
		{Query{Limit: 2, Offset: 1, SortBy: "name"}, []string{"task2", "task3"}},
		{Query{Limit: 4, SortBy: "name", Search: "task"}, []string{"task1", "task2", "task3", "task4"}},
		{Query{Limit: 4, SortBy: "name", Search: "task1"}, []string{"task1"}},
		{Query{Limit: NoLimit}, []string{"task4", "task3", "task2", "task1"}},
	}
	for _, tc := range tests {
		got, err := s.Tasks(tc.q)
		if err != nil {
			t.Fatalf("%+v: %v", tc.q, err)
		}
		if diff := cmp.Diff(tc.want, names(got)); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.q, diff)
		}
	}
	_, err := s.Tasks(Query{Limit: NoLimit, Search: "ab"})
	var se *tasksearch.Error
	if !errorsAs(err, &se) || se.Error() != "Substring search terms must contain at least 3 characters at position 0." {
		t.Errorf("search=ab: %v", err)
	}
}

func errorsAs(err error, target **tasksearch.Error) bool {
	se, ok := err.(*tasksearch.Error)
	*target = se
	return ok
}

func TestTasksQuery(t *testing.T) {
	s := New(Config{})
	// t1: SUCCESS on W1 received at 100; t2: FAILURE on w2 received at 200;
	// t3: only sent (no worker, no received); t4: STARTED on w1, received
	// at 300, no name; t5 and t6 share a timestamp.
	s.Apply(succeededTask(t, "t1", "proj.Add", "W1@h", 100)...)
	s.Apply(
		taskEv(t, "received", "t2", "w2@h", 200, map[string]any{"name": "proj.mail"}),
		taskEv(t, "failed", "t2", "w2@h", 201, map[string]any{"exception": "E()"}),
		taskEv(t, "sent", "t3", "gen1@h", 250, map[string]any{"name": "proj.add"}),
		taskEv(t, "received", "t4", "w1@h", 300, nil),
		taskEv(t, "started", "t4", "w1@h", 301, nil),
		taskEv(t, "received", "t5", "w1@h", 50, map[string]any{"name": "b"}),
		taskEv(t, "received", "t6", "w1@h", 50, map[string]any{"name": "a"}),
	)
	at := func(sec int64) *time.Time { tm := time.Unix(sec, 0); return &tm }
	tests := []struct {
		name string
		q    Query
		want []string
	}{
		{"newest first, ties by id desc", Query{Limit: NoLimit}, []string{"t4", "t3", "t2", "t1", "t6", "t5"}},
		{"limit", Query{Limit: 2}, []string{"t4", "t3"}},
		{"offset and limit", Query{Limit: 2, Offset: 2}, []string{"t2", "t1"}},
		{"offset past the end", Query{Limit: NoLimit, Offset: 10}, nil},
		{"limit 0", Query{Limit: 0}, nil},
		{"negative limit", Query{Limit: -5}, nil},
		{"worker, case-insensitive", Query{Limit: NoLimit, Worker: "w1@H"}, []string{"t4", "t1", "t6", "t5"}},
		{"worker All", Query{Limit: NoLimit, Worker: "All"}, []string{"t4", "t3", "t2", "t1", "t6", "t5"}},
		{"unknown worker", Query{Limit: NoLimit, Worker: "nobody"}, nil},
		{"task name", Query{Limit: NoLimit, TaskName: "PROJ.ADD"}, []string{"t3", "t1"}},
		{"state", Query{Limit: NoLimit, State: "failure"}, []string{"t2"}},
		{"state and worker", Query{Limit: NoLimit, State: "RECEIVED", Worker: "w1@h"}, []string{"t6", "t5"}},
		{"received from", Query{Limit: NoLimit, ReceivedStart: at(150)}, []string{"t4", "t3", "t2"}},
		{"received until", Query{Limit: NoLimit, ReceivedEnd: at(150)}, []string{"t3", "t1", "t6", "t5"}},
		{"received between", Query{Limit: NoLimit, ReceivedStart: at(60), ReceivedEnd: at(250)}, []string{"t3", "t2", "t1"}},
		{"sort name, folded, ties by id", Query{Limit: NoLimit, SortBy: "name"}, []string{"t4", "t6", "t5", "t1", "t3", "t2"}},
		{"sort -name", Query{Limit: NoLimit, SortBy: "-name"}, []string{"t2", "t3", "t1", "t5", "t6", "t4"}},
		{"sort state", Query{Limit: NoLimit, SortBy: "state"}, []string{"t2", "t3", "t5", "t6", "t4", "t1"}},
		{"sort -state", Query{Limit: NoLimit, SortBy: "-state"}, []string{"t1", "t4", "t6", "t5", "t3", "t2"}},
		{"sort received", Query{Limit: NoLimit, SortBy: "received"}, []string{"t3", "t5", "t6", "t1", "t2", "t4"}},
		{"sort -received", Query{Limit: NoLimit, SortBy: "-received"}, []string{"t4", "t2", "t1", "t6", "t5", "t3"}},
		{"sort started", Query{Limit: NoLimit, SortBy: "started"}, []string{"t2", "t3", "t5", "t6", "t1", "t4"}},
		{"sort -started, paged", Query{Limit: 2, Offset: 1, SortBy: "-started"}, []string{"t1", "t6"}},
		{"search then sort", Query{Limit: NoLimit, SortBy: "name", Search: "w1@h"}, []string{"t4", "t6", "t5", "t1"}},
		{"filters and search", Query{Limit: 1, Worker: "w1@h", Search: "received"}, []string{"t6"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Tasks(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ids(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"-", "runtime", "Name", "--name", "name ", "timestamp"} {
		if _, err := s.Tasks(Query{Limit: NoLimit, SortBy: bad}); err == nil {
			t.Errorf("sort_by %q accepted", bad)
		}
	}
}

func TestTaskChildrenAndRecordsAreCopies(t *testing.T) {
	s := New(Config{})
	s.Apply(
		taskEv(t, "received", "child1", "w@h", 2, map[string]any{"parent_id": "root", "root_id": "root"}),
		taskEv(t, "received", "root", "w@h", 1, nil),
		taskEv(t, "received", "child2", "w@h", 3, map[string]any{"parent_id": "root", "root_id": "root"}),
		taskEv(t, "started", "child2", "w@h", 4, nil),
	)
	root, _ := s.Task("root")
	if diff := cmp.Diff([]string{"child1", "child2"}, root.Children); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
	root.Children[0] = "changed"
	if again, _ := s.Task("root"); again.Children[0] != "child1" {
		t.Error("a returned record shares memory with the state")
	}
	if _, ok := s.Task("nope"); ok {
		t.Error("unknown task found")
	}
}

func TestEviction(t *testing.T) {
	s := New(Config{MaxTasks: 3})
	s.Apply(taskEv(t, "received", "p", "w@h", 1, nil))
	for i := range 4 {
		id := fmt.Sprintf("c%d", i)
		s.Apply(taskEv(t, "received", id, "w@h", float64(10+i), map[string]any{"parent_id": "p", "name": id}))
	}
	// p and c0 went, oldest first.
	if s.Len() != 3 {
		t.Fatalf("Len() = %d, want 3", s.Len())
	}
	got, _ := s.Tasks(Query{Limit: NoLimit})
	if diff := cmp.Diff([]string{"c3", "c2", "c1"}, ids(got)); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	// A task name goes with its last task (Celery keeps every name).
	if diff := cmp.Diff([]string{"c1", "c2", "c3"}, s.TaskTypes()); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
	// The children wait for p again; when it comes back it finds them,
	// without the evicted c0.
	s.Apply(taskEv(t, "started", "c3", "w@h", 20, nil))
	s.Apply(taskEv(t, "received", "p", "w@h", 21, nil))
	p, ok := s.Task("p")
	if !ok {
		t.Fatal("p missing")
	}
	slices.Sort(p.Children)
	if diff := cmp.Diff([]string{"c2", "c3"}, p.Children); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
	if len(s.children) != 1 {
		t.Errorf("children lists left: %v", s.children)
	}
}

// TestEvictionAtScale streams many more tasks than MaxTasks through the
// state, with parents, and checks the bookkeeping stays bounded.
func TestEvictionAtScale(t *testing.T) {
	const max, total = 5000, 60000
	s := New(Config{MaxTasks: max})
	for i := range total {
		extra := map[string]any{"name": "t"}
		if i%10 != 0 {
			extra["parent_id"] = fmt.Sprintf("%d", i-i%10) // a group of ten
		}
		if i%7 == 0 {
			extra["parent_id"] = "never-seen"
		}
		s.Apply(taskEv(t, "received", fmt.Sprintf("%d", i), "w@h", float64(i), extra))
	}
	if s.Len() != max {
		t.Fatalf("Len() = %d, want %d", s.Len(), max)
	}
	if n := len(s.slots.Pages) << taskrec.PageBits; n > 2*max+1<<taskrec.PageBits {
		t.Errorf("%d slots for %d tasks", n, max)
	}
	if n := len(s.children["never-seen"]); n > max {
		t.Errorf("%d pending children kept for %d tasks", n, max)
	}
	if s.arena.Bytes > 4*max*64+2*taskrec.ChunkSize {
		t.Errorf("arena holds %d bytes for %d small tasks", s.arena.Bytes, max)
	}
	got, _ := s.Tasks(Query{Limit: 3})
	if diff := cmp.Diff([]string{"59999", "59998", "59997"}, ids(got)); diff != "" {
		t.Errorf("newest (-want +got):\n%s", diff)
	}
	p, _ := s.Task("59990")
	if len(p.Children) != 8 { // 59991..59999 but 59997 went to never-seen
		t.Errorf("children %v", p.Children)
	}
	n := 0
	s.newestFirst(s.sources(&filter{}), func(uint32) bool { n++; return true })
	if n != max {
		t.Errorf("order index holds %d, want %d", n, max)
	}
}

func TestWorkerLiveness(t *testing.T) {
	now := 1000.0
	s := New(Config{Now: func() time.Time { return time.Unix(0, int64(now*1e9)) }})
	hb := func(kind string, lr, freq float64) celery.Event {
		e := ev(t, map[string]any{"type": "worker-" + kind, "hostname": "w@h", "timestamp": lr - 0.1, "freq": freq, "active": 1})
		e.LocalReceived = lr
		return e
	}
	alive := func() bool {
		ws := s.Workers()
		if len(ws) != 1 {
			t.Fatalf("%d workers", len(ws))
		}
		if ws[0].Alive != ws[0].AliveAt(time.Unix(0, int64(now*1e9))) {
			t.Error("Alive and AliveAt disagree")
		}
		return ws[0].Alive
	}
	s.Apply(hb("online", 1000, 2))
	for _, tc := range []struct {
		at   float64
		want bool
	}{{1000, true}, {1003.9, true}, {1004, false}} {
		now = tc.at
		if got := alive(); got != tc.want {
			t.Errorf("alive at %v = %v, want %v", tc.at, got, tc.want)
		}
	}
	s.Apply(hb("heartbeat", 1010, 5))
	now = 1019
	if !alive() {
		t.Error("dead within 2×freq of a heartbeat")
	}
	s.Apply(hb("offline", 1011, 5))
	if alive() {
		t.Error("alive after worker-offline")
	}
	// A task event is a heartbeat too (of the event's own timestamp).
	s.Apply(taskEv(t, "started", "x", "w@h", 1018, nil))
	if !alive() {
		t.Error("task event did not count as a heartbeat")
	}
	if diff := cmp.Diff([]string{"w@h"}, s.WorkerNames()); diff != "" {
		t.Error(diff)
	}
	// Events without LocalReceived use Config.Now.
	s2 := New(Config{Now: func() time.Time { return time.Unix(500, 0) }})
	s2.Apply(ev(t, map[string]any{"type": "worker-heartbeat", "hostname": "a@h", "timestamp": 1, "freq": 2}))
	if ws := s2.Workers(); len(ws) != 1 || !slices.Equal(ws[0].Heartbeats, []float64{500}) {
		t.Errorf("workers %+v", ws)
	}
}

func TestMaxWorkers(t *testing.T) {
	s := New(Config{MaxWorkers: 2})
	for _, h := range []string{"a@h", "b@h", "c@h"} {
		s.Apply(ev(t, map[string]any{"type": "worker-online", "hostname": h, "timestamp": 1}))
	}
	if diff := cmp.Diff([]string{"b@h", "c@h"}, s.WorkerNames()); diff != "" {
		t.Error(diff)
	}
}

func TestIgnoredEvents(t *testing.T) {
	s := New(Config{})
	s.Apply(
		ev(t, map[string]any{"uuid": "u", "hostname": "h", "timestamp": 1}),                         // no type
		ev(t, map[string]any{"type": "task-started", "hostname": "h", "timestamp": 1}),              // no uuid
		ev(t, map[string]any{"type": "task-started", "uuid": "u", "timestamp": 1}),                  // no hostname
		ev(t, map[string]any{"type": "task-started", "uuid": "u", "hostname": "h"}),                 // no timestamp
		ev(t, map[string]any{"type": "task-started", "uuid": nil, "hostname": "h", "timestamp": 1}), // null uuid
		ev(t, map[string]any{"type": "worker-heartbeat", "timestamp": 1}),                           // no hostname
		ev(t, map[string]any{"type": "worker-heartbeat", "hostname": "h"}),                          // no timestamp
		ev(t, map[string]any{"type": "other-thing", "uuid": "u", "hostname": "h", "timestamp": 1}),  // other group
		ev(t, map[string]any{"type": "worker-offline", "hostname": "never-seen", "timestamp": 1}),   // unknown, leaving
		ev(t, map[string]any{"type": "taskstarted", "uuid": "u", "hostname": "h", "timestamp": 1}),  // no dash
	)
	s.Apply()
	if s.Len() != 0 || len(s.Workers()) != 0 {
		t.Errorf("%d tasks, workers %v", s.Len(), s.WorkerNames())
	}
}

// TestReplayWireFixtures feeds every captured event (Redis and AMQP) to one
// state, in timestamp order, and checks what it made of them.
func TestReplayWireFixtures(t *testing.T) {
	files, err := filepath.Glob("../../testdata/celery-wire/event-*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v", err)
	}
	var events []celery.Event
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			BodyRaw *string `json:"body_raw"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatal(err)
		}
		var evs []celery.Event
		if rec.BodyRaw != nil {
			evs, err = celery.DecodeEvents([]byte(*rec.BodyRaw))
		} else {
			evs, err = celery.DecodeEventEnvelope(data)
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i := range evs {
			evs[i].LocalReceived = evs[i].Timestamp + 0.001
		}
		events = append(events, evs...)
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].Timestamp < events[j].Timestamp })
	s := New(Config{Now: fixedNow(1795368812.5)})
	s.Apply(events...)

	check := func(id string, want taskrec.Task) {
		t.Helper()
		got, ok := s.Task(id)
		if !ok {
			t.Errorf("task %s missing", id)
			return
		}
		opts := cmpopts.IgnoreFields(taskrec.Task{}, "Received", "Sent", "Started", "Succeeded", "Failed",
			"Retried", "Revoked", "Timestamp", "Runtime", "Traceback", "Set", "Args", "Kwargs", "RootID", "Retries")
		if diff := cmp.Diff(want, got, opts, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("task %s (-want +got):\n%s", id, diff)
		}
	}
	// The Redis capture follows one task from the client to its result.
	check("d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a", taskrec.Task{UUID: "d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a",
		Name: "harness.add", State: taskrec.Success, Worker: "w3@vm", Result: "5", Exchange: "", RoutingKey: "celery",
		Clock: 37, Client: "gen30734@vm"})
	check("faaa6805-bab5-4e5b-a90a-effd905114fa", taskrec.Task{UUID: "faaa6805-bab5-4e5b-a90a-effd905114fa",
		Name: "harness.add", State: taskrec.Success, Worker: "a1@vm", Result: "5", RoutingKey: "celery",
		Clock: 28, Client: "gen32136@vm"})
	check("f9ff778e-d030-41ce-81d7-e070c7e26f69", taskrec.Task{UUID: "f9ff778e-d030-41ce-81d7-e070c7e26f69",
		State: taskrec.Failure, Worker: "w3@vm", Exception: "ValueError('kaput')", Clock: 41})
	check("39b21972-af24-44c5-8e2e-b4b1d4b7fed0", taskrec.Task{UUID: "39b21972-af24-44c5-8e2e-b4b1d4b7fed0",
		State: taskrec.Retry, Worker: "w4@vm", Exception: "RuntimeError('attempt 1 failed')", Clock: 41})
	check("a6fb0ade-a516-405e-95b6-182d8f484c21", taskrec.Task{UUID: "a6fb0ade-a516-405e-95b6-182d8f484c21",
		State: taskrec.Revoked, Worker: "w1@vm", Clock: 51})
	check("b65d47fc-4853-450c-b905-d4b4e4aa5cc5", taskrec.Task{UUID: "b65d47fc-4853-450c-b905-d4b4e4aa5cc5",
		State: taskrec.Success, Worker: "w3@vm", Result: "0", Clock: 59})

	d7, _ := s.Task("d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a")
	for f, want := range map[taskrec.Field]float64{taskrec.FieldSent: 1795368799.271146, taskrec.FieldReceived: 1795368799.2726183,
		taskrec.FieldStarted: 1795368799.2743063, taskrec.FieldSucceeded: 1795368799.2873719, taskrec.FieldTimestamp: 1795368799.2873719,
		taskrec.FieldRuntime: 0.011460792000434594} {
		got := map[taskrec.Field]float64{taskrec.FieldSent: d7.Sent, taskrec.FieldReceived: d7.Received, taskrec.FieldStarted: d7.Started,
			taskrec.FieldSucceeded: d7.Succeeded, taskrec.FieldTimestamp: d7.Timestamp, taskrec.FieldRuntime: d7.Runtime}[f]
		if !d7.Has(f) || got != want {
			t.Errorf("field %b = %v (set %v), want %v", f, got, d7.Has(f), want)
		}
	}
	if diff := cmp.Diff([]string{"harness.add"}, s.TaskTypes()); diff != "" {
		t.Errorf("types: %s", diff)
	}
	workers := map[string]Worker{}
	for _, w := range s.Workers() {
		workers[w.Hostname] = w
	}
	if w := workers["cap@vm"]; len(w.Heartbeats) != 0 || w.PID != 31354 || w.Clock != 158 || w.Alive {
		t.Errorf("cap@vm after worker-offline: %+v", w)
	}
	if w := workers["a1@vm"]; w.Freq != 2 || w.SWVer != "5.2.6" || !slices.Equal(w.Loadavg, []float64{2.77, 1.6, 0.75}) {
		t.Errorf("a1@vm: %+v", w)
	}
	if w := workers["w3@vm"]; w.Freq != defaultFreq || len(w.Heartbeats) != maxHeartbeats {
		t.Errorf("w3@vm, known from task events only: %+v", w)
	}
	for _, name := range []string{"w1@vm", "w3@vm", "w4@vm", "a1@vm", "cap@vm"} {
		if _, ok := workers[name]; !ok {
			t.Errorf("worker %s missing", name)
		}
	}
}

// TestConcurrentUse runs readers against the ingest goroutine (for -race).
func TestConcurrentUse(t *testing.T) {
	s := New(Config{MaxTasks: 500})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Tasks(Query{Limit: 10, Search: "name:task"}); err != nil {
					t.Error(err)
					return
				}
				_, _ = s.Tasks(Query{Limit: 10, SortBy: "-received"})
				if task, ok := s.Task("5"); ok {
					_, _ = task.MarshalJSON()
				}
				_ = s.Workers()
				_ = s.TaskTypes()
				_ = s.WorkerNames()
				_ = s.Len()
			}
		}()
	}
	for i := range 3000 {
		s.Apply(succeededTask(t, fmt.Sprintf("%d", i%700), "task", fmt.Sprintf("w%d@h", i%3), float64(i))...)
	}
	close(stop)
	wg.Wait()
}

func TestTaskName(t *testing.T) {
	s := New(Config{})
	s.Apply(taskEv(t, "received", "a", "w@h", 1, map[string]any{"name": "proj.add"}))
	s.Apply(taskEv(t, "started", "b", "w@h", 2, nil))
	for _, tc := range []struct {
		id, want string
		known    bool
	}{{"a", "proj.add", true}, {"b", "", true}, {"c", "", false}} {
		if got, known := s.TaskName(tc.id); got != tc.want || known != tc.known {
			t.Errorf("TaskName(%q) = %q, %v; want %q, %v", tc.id, got, known, tc.want, tc.known)
		}
	}
}
