package workercount

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// event decodes an event from its JSON fields, as the broker's decoder
// hands it on.
func event(t *testing.T, fields map[string]any) celery.Event {
	t.Helper()
	if _, ok := fields["timestamp"]; !ok {
		fields["timestamp"] = 1700000000.5
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := celery.DecodeEvents(raw)
	if err != nil || len(evs) != 1 {
		t.Fatalf("decode %s: %v %d", raw, err, len(evs))
	}
	return evs[0]
}

func task(t *testing.T, typ, host, id string) celery.Event {
	return event(t, map[string]any{"type": typ, "hostname": host, "uuid": id})
}

// TestCountsByWorkerAndKind: each task event a worker sent counts once
// under its hostname and kind; task-sent, worker events, the reconciler's
// events and malformed ones are numbered but not counted.
func TestCountsByWorkerAndKind(t *testing.T) {
	c := New(10, time.Unix(1700000000, 0))
	reconciled := task(t, "task-succeeded", "w1@h", "t9")
	reconciled.Reconciled = true
	evs := []celery.Event{
		task(t, "task-sent", "client@h", "t1"),
		task(t, "task-received", "w1@h", "t1"),
		task(t, "task-started", "w1@h", "t1"),
		task(t, "task-retried", "w1@h", "t1"),
		task(t, "task-received", "w1@h", "t1"),
		task(t, "task-started", "w1@h", "t1"),
		task(t, "task-succeeded", "w1@h", "t1"),
		task(t, "task-received", "w2@h", "t2"),
		task(t, "task-failed", "w2@h", "t2"),
		task(t, "task-revoked", "w2@h", "t3"),
		task(t, "task-rejected", "w2@h", "t4"),
		event(t, map[string]any{"type": "worker-heartbeat", "hostname": "w3@h"}),
		event(t, map[string]any{"type": "task-failed", "hostname": "w3@h"}),                                 // no uuid
		event(t, map[string]any{"type": "task-failed", "uuid": "t5"}),                                       // no hostname
		event(t, map[string]any{"type": "task-failed", "hostname": "w3@h", "uuid": "t5", "timestamp": nil}), // no timestamp
		reconciled,
	}
	if first := c.Add(evs[:3]); first != 1 {
		t.Errorf("first batch numbered from %d, want 1", first)
	}
	if first := c.Add(evs[3:]); first != 4 {
		t.Errorf("second batch numbered from %d, want 4", first)
	}
	s := c.Snapshot()
	if s.Seq != uint64(len(evs)) {
		t.Errorf("seq %d, want %d", s.Seq, len(evs))
	}
	want := map[string]Counts{
		"w1@h": {Received: 2, Started: 2, Succeeded: 1, Retried: 1},
		"w2@h": {Received: 1, Failed: 1, Revoked: 1, Rejected: 1},
	}
	if fmt.Sprint(s.Workers) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", s.Workers, want)
	}
	if s.Instance != c.Instance() || len(s.Instance) != 12 || !s.Since.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("instance %q since %v", s.Instance, s.Since)
	}
	if New(1, time.Now()).Instance() == c.Instance() {
		t.Error("two counters share an instance name")
	}
	// A snapshot is a copy.
	c.Add([]celery.Event{task(t, "task-succeeded", "w1@h", "t6")})
	if s.Workers["w1@h"][Succeeded] != 1 {
		t.Error("a snapshot changed after it was taken")
	}
}

// TestBoundForgetsTheLongestSilent: beyond the bound the worker whose
// latest task event came longest ago is forgotten, and what it had counted
// is reported as dropped.
func TestBoundForgetsTheLongestSilent(t *testing.T) {
	c := New(2, time.Now())
	c.Add([]celery.Event{
		task(t, "task-received", "a@h", "1"), task(t, "task-succeeded", "a@h", "1"),
		task(t, "task-received", "b@h", "2"),
		task(t, "task-started", "a@h", "1"), // a is heard from after b
	})
	c.Add([]celery.Event{task(t, "task-received", "c@h", "3")})
	s := c.Snapshot()
	if _, kept := s.Workers["b@h"]; kept || len(s.Workers) != 2 || s.Workers["a@h"][Started] != 1 || s.Workers["c@h"][Received] != 1 {
		t.Errorf("kept %v, want a@h and c@h", s.Workers)
	}
	if s.DroppedWorkers != 1 || s.DroppedEvents != 1 {
		t.Errorf("dropped %d workers, %d events; want 1, 1", s.DroppedWorkers, s.DroppedEvents)
	}
	// Many invented hostnames stay within the bound.
	var evs []celery.Event
	for i := range 100 {
		evs = append(evs, task(t, "task-received", fmt.Sprintf("x%d@h", i), "x"))
	}
	c.Add(evs)
	if s := c.Snapshot(); len(s.Workers) != 2 || s.DroppedWorkers != 101 || s.DroppedEvents != 1+3+1+98 {
		t.Errorf("after 100 new hostnames: %d kept, dropped %d workers, %d events", len(s.Workers), s.DroppedWorkers, s.DroppedEvents)
	}
}
