package state

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

func staleID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// TestStaleTasks: the unfinished tasks older than the cut, oldest first,
// at most limit; finished, rejected and custom-state tasks never.
func TestStaleTasks(t *testing.T) {
	s := New(Config{MaxTasks: 100})
	at := func(i int) float64 { return 1000 + float64(i) }
	s.Apply(taskEv(t, "sent", staleID(0), "client", at(0), map[string]any{"name": "t"}))  // PENDING
	s.Apply(taskEv(t, "started", staleID(1), "w", at(1), nil))                            // STARTED
	s.Apply(succeededTask(t, staleID(2), "t", "w", at(2))...)                             // SUCCESS
	s.Apply(taskEv(t, "received", staleID(3), "w", at(3), map[string]any{"name": "t"}))   // RECEIVED
	s.Apply(taskEv(t, "retried", staleID(4), "w", at(4), nil))                            // RETRY
	s.Apply(taskEv(t, "rejected", staleID(5), "w", at(5), nil))                           // REJECTED
	s.Apply(taskEv(t, "failed", staleID(6), "w", at(6), nil))                             // FAILURE
	s.Apply(taskEv(t, "progress", staleID(7), "w", at(7), nil))                           // custom PROGRESS
	s.Apply(taskEv(t, "started", staleID(8), "w", at(8), nil))                            // STARTED, recent
	s.Apply(taskEv(t, "revoked", staleID(9), "w", at(9), nil))                            // REVOKED
	s.Apply(taskEv(t, "received", staleID(10), "w", at(10), map[string]any{"name": "t"})) // RECEIVED,
	s.Apply(taskEv(t, "started", staleID(10), "w", 1000.5, nil))                          // its latest event older

	cut := time.Unix(1008, 0)
	for _, tc := range []struct {
		name  string
		limit int
		want  []int
	}{
		{"all", 100, []int{0, 10, 1, 3, 4}},
		{"bounded", 2, []int{0, 10}},
		{"one", 1, []int{0}},
		{"none", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.StaleTasks(context.Background(), cut, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, i := range tc.want {
				want = append(want, staleID(i))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("StaleTasks(%d) (-want +got):\n%s", tc.limit, diff)
			}
		})
	}
}

// TestReconciledEvent: an event made from the result backend finishes the
// task, keeps its worker and neither creates nor revives a worker; for a
// task the state no longer has it does nothing.
func TestReconciledEvent(t *testing.T) {
	s := New(Config{MaxTasks: 100, Now: func() time.Time { return time.Unix(2000, 0) }})
	s.Apply(taskEv(t, "started", staleID(1), "w@h", 1000, nil))
	e := taskEv(t, "succeeded", staleID(1), "stamen-reconcile", 1500, map[string]any{"result": "3"})
	e.Reconciled = true
	gone := taskEv(t, "succeeded", staleID(2), "stamen-reconcile", 1500, nil)
	gone.Reconciled = true
	s.Apply(e, gone)

	task, ok := s.Task(staleID(1))
	if !ok || task.State != taskrec.Success || task.Worker != "w@h" || task.Result != "3" || task.Succeeded != 1500 {
		t.Errorf("reconciled task: %+v", task)
	}
	if _, ok := s.Task(staleID(2)); ok {
		t.Error("a reconciled event created a task the state did not have")
	}
	for _, w := range s.Workers() {
		if w.Hostname == "stamen-reconcile" {
			t.Errorf("a reconciled event created a worker: %+v", w)
		}
		if w.Hostname == "w@h" && len(w.Heartbeats) != 1 {
			t.Errorf("a reconciled event touched the worker's heartbeats: %v", w.Heartbeats)
		}
	}
}

// TestReconciledEventFinishUnknown: with FinishUnknown (PostgreSQL) a
// reconciled event of a task the state does not hold creates it with what
// the event says, and still creates no worker.
func TestReconciledEventFinishUnknown(t *testing.T) {
	s := New(Config{MaxTasks: 100, FinishUnknown: true, Now: func() time.Time { return time.Unix(2000, 0) }})
	e := taskEv(t, "failed", staleID(3), "stamen-reconcile", 1500, map[string]any{"exception": "KeyError('x')"})
	e.Reconciled = true
	s.Apply(e)
	task, ok := s.Task(staleID(3))
	if !ok || task.State != taskrec.Failure || task.Exception != "KeyError('x')" || task.Has(taskrec.FieldWorker) {
		t.Fatalf("reconciled unknown task: %+v (held %v)", task, ok)
	}
	if ws := s.Workers(); len(ws) != 0 {
		t.Errorf("a reconciled event created workers: %+v", ws)
	}
}
