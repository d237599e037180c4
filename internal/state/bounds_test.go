package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// churnTask is one task whose every name is its own: task name, worker,
// client, exchange, routing key, custom state, each in mixed case so
// that its casefolded form is a symbol too.
func churnTask(t testing.TB, i int, ts float64) []celery.Event {
	id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	name, worker := fmt.Sprintf("Proj.Task%d", i), fmt.Sprintf("Pod-%d@Host", i)
	return []celery.Event{
		taskEv(t, "sent", id, fmt.Sprintf("gen%d@Client", i), ts, map[string]any{"name": name,
			"exchange": fmt.Sprintf("Ex%d", i), "routing_key": fmt.Sprintf("Rk%d", i)}),
		taskEv(t, "received", id, worker, ts+0.1, map[string]any{"name": name, "args": "()", "kwargs": "{}"}),
		taskEv(t, fmt.Sprintf("Custom%d", i), id, worker, ts+0.2, nil),
		taskEv(t, "succeeded", id, worker, ts+0.3, map[string]any{"result": "1", "runtime": 0.1}),
	}
}

// TestNamesGoWithTheirTasks streams tasks whose names are all distinct
// through a state that keeps 100 of them: the symbols, the task types and
// the workers it holds afterwards are those of 100 tasks, not of every
// task that passed.
func TestNamesGoWithTheirTasks(t *testing.T) {
	const keep, passed = 100, 20000
	clock := time.Unix(1.7e9, 0)
	s := New(Config{MaxTasks: keep, TrackChanges: true, Now: func() time.Time { return clock }})
	ref := New(Config{MaxTasks: keep})
	for i := range passed {
		evs := churnTask(t, i, 1.7e9+float64(i))
		s.Apply(evs...)
		if i >= passed-keep {
			ref.Apply(evs...)
		}
	}
	if got, want := s.Symbols(), ref.Symbols(); got != want {
		t.Errorf("%d symbols after %d tasks passed, want %d as for the %d kept", got, passed, want, keep)
	}
	if got := len(s.TaskTypes()); got != keep {
		t.Errorf("%d task types, want %d", got, keep)
	}
	c := s.Drain()
	if len(c.ForgottenWorkers) != passed-DefaultMaxWorkers {
		t.Errorf("drain: %d workers forgotten, want the %d beyond MaxWorkers", len(c.ForgottenWorkers), passed-DefaultMaxWorkers)
	}
	if len(c.Types) != keep || len(c.ForgottenTypes) != 0 {
		// The names that came and went between two drains are news to
		// no store.
		t.Errorf("drain: %d types came, %d went; want %d and 0", len(c.Types), len(c.ForgottenTypes), keep)
	}
	s.Apply(churnTask(t, passed, 1.7e9+passed)...)
	if c := s.Drain(); len(c.Types) != 1 || len(c.ForgottenTypes) != 1 || c.ForgottenTypes[0] != fmt.Sprintf("Proj.Task%d", passed-keep) {
		t.Errorf("drain after one more task: came %v, went %v", c.Types, c.ForgottenTypes)
	}

	// Every worker is offline (its last event is far behind the clock):
	// purging those silent for an hour leaves none.
	if n := len(s.WorkerNames()); n != DefaultMaxWorkers {
		t.Fatalf("%d workers before the purge, want the %d kept", n, DefaultMaxWorkers)
	}
	clock = time.Unix(1.7e9+passed, 0).Add(2 * time.Hour)
	gone := s.PurgeWorkers(clock.Add(-time.Hour))
	if len(gone) != DefaultMaxWorkers || len(s.WorkerNames()) != 0 || s.KnowsWorker(gone[0]) {
		t.Errorf("purge forgot %d workers, %d left", len(gone), len(s.WorkerNames()))
	}
	if c := s.Drain(); len(c.ForgottenWorkers) != DefaultMaxWorkers {
		t.Errorf("drain after the purge: %d workers forgotten, want %d", len(c.ForgottenWorkers), DefaultMaxWorkers)
	}
}

// TestPurgeKeepsLiveAndRecentWorkers: a worker goes only when it is
// offline and silent longer than the purge age.
func TestPurgeKeepsLiveAndRecentWorkers(t *testing.T) {
	now := time.Unix(1.7e9, 0)
	s := New(Config{Now: func() time.Time { return now }})
	hb := func(host string, at float64, kind string) celery.Event {
		e := ev(t, map[string]any{"type": "worker-" + kind, "hostname": host, "timestamp": at, "freq": 2.0})
		e.LocalReceived = at
		return e
	}
	t0 := float64(now.Unix())
	s.Apply(
		hb("alive@h", t0-1, "heartbeat"), // alive
		hb("left-recently@h", t0-31, "online"),
		hb("left-recently@h", t0-30, "offline"),  // offline for 30 s
		hb("silent-recently@h", t0-50, "online"), // expired, silent 50 s
		hb("gone@h", t0-200, "heartbeat"),        // expired, silent 200 s
	)
	s.Apply(hb("left-long-ago@h", t0-300, "online"), hb("left-long-ago@h", t0-299, "offline"))
	gone := s.PurgeWorkers(now.Add(-100 * time.Second))
	if fmt.Sprint(gone) != "[gone@h left-long-ago@h]" {
		t.Errorf("purged %v, want [gone@h left-long-ago@h]", gone)
	}
	if got := fmt.Sprint(s.WorkerNames()); got != "[alive@h left-recently@h silent-recently@h]" {
		t.Errorf("kept %v", got)
	}
}

// TestPurgeForgetsWorkersSeenInTaskEventsOnly: a worker stamen knows only
// from its task events (a pod whose worker events it never heard) goes
// once silent longer than the purge age, though its task events, counted
// as heartbeats of Celery's default interval, would show it online for
// two minutes; one that sends heartbeats stays while they say it is alive.
func TestPurgeForgetsWorkersSeenInTaskEventsOnly(t *testing.T) {
	now := time.Unix(1.7e9, 0)
	s := New(Config{Now: func() time.Time { return now }})
	t0 := float64(now.Unix())
	task := func(id, host string, at float64) celery.Event {
		e := ev(t, map[string]any{"type": "task-received", "uuid": id, "name": "proj.t", "hostname": host, "timestamp": at})
		e.LocalReceived = at
		return e
	}
	hb := ev(t, map[string]any{"type": "worker-heartbeat", "hostname": "beating@h", "timestamp": t0 - 10, "freq": 30.0})
	hb.LocalReceived = t0 - 10
	s.Apply(task("a", "pod-1@h", t0-10), task("b", "pod-2@h", t0-1), hb, task("c", "beating@h", t0-10))
	if !s.WorkerAlive("pod-1@h") {
		t.Fatal("a worker's task event does not count as a heartbeat")
	}
	gone := s.PurgeWorkers(now.Add(-5 * time.Second))
	if fmt.Sprint(gone) != "[pod-1@h]" {
		t.Errorf("purged %v, want [pod-1@h]", gone)
	}
	if got := fmt.Sprint(s.WorkerNames()); got != "[pod-2@h beating@h]" {
		t.Errorf("kept %v", got)
	}
}

// TestMaxWorkersDropsTheLongestSilent: beyond MaxWorkers, the worker
// whose last event (a heartbeat or a task event) came longest ago goes, as
// from Celery's LRU cache of workers, not the first seen: a live worker is
// not pushed out by a newcomer while a silent one stays.
func TestMaxWorkersDropsTheLongestSilent(t *testing.T) {
	heartbeat := func(host string, ts float64) celery.Event {
		e := ev(t, map[string]any{"type": "worker-heartbeat", "hostname": host, "timestamp": ts, "freq": 2.0})
		e.LocalReceived = ts
		return e
	}
	for _, tc := range []struct {
		name   string
		events func() []celery.Event
		want   []string
	}{
		{"in turn: the first seen goes", func() []celery.Event {
			return []celery.Event{heartbeat("a@h", 100), heartbeat("b@h", 101), heartbeat("c@h", 102)}
		}, []string{"b@h", "c@h"}},
		{"the first seen heartbeats again: the silent one goes", func() []celery.Event {
			return []celery.Event{heartbeat("a@h", 100), heartbeat("b@h", 101), heartbeat("a@h", 102), heartbeat("c@h", 103)}
		}, []string{"a@h", "c@h"}},
		{"a task event counts as a sign of life", func() []celery.Event {
			return []celery.Event{heartbeat("a@h", 100), heartbeat("b@h", 101),
				taskEv(t, "received", "00000000-0000-4000-8000-000000000001", "a@h", 102, map[string]any{"name": "t"}),
				heartbeat("c@h", 103)}
		}, []string{"a@h", "c@h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{MaxTasks: 10, MaxWorkers: 2, TrackChanges: true})
			for _, e := range tc.events() {
				s.Apply(e)
			}
			if got := s.WorkerNames(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("workers %v, want %v", got, tc.want)
			}
		})
	}
}
