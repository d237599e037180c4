package pg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// permutations calls fn with every order of 0..n-1.
func permutations(n int, fn func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			fn(append([]int(nil), p...))
			return
		}
		for i := k; i < n; i++ {
			p[k], p[i] = p[i], p[k]
			rec(k + 1)
			p[k], p[i] = p[i], p[k]
		}
	}
	rec(0)
}

// info is a stored task's record as task info shows it, with its id
// replaced, to compare tasks written under different ids.
func info(t *testing.T, s *pg.Store, id string) string {
	t.Helper()
	tk, ok, err := s.Task(context.Background(), id)
	if err != nil || !ok {
		t.Fatalf("Task(%s): %v, %v", id, ok, err)
	}
	tk.UUID = "x"
	b, _ := tk.MarshalJSON()
	return string(b)
}

// TestUpsertsConverge: a task's events reaching replicas in any order and
// split between them any way (here: each event seen by its own replica,
// each record written twice, in every order of the writes) end in the
// same row, the row of one replica that saw them all in order.
func TestUpsertsConverge(t *testing.T) {
	s := openStore(t, newDB(t))
	for _, c := range []struct {
		name   string
		events func(id string) []celery.Event
	}{
		{"succeeded", func(id string) []celery.Event {
			return []celery.Event{
				taskEv(t, "sent", id, "client@h", 10, map[string]any{"name": "proj.add", "args": "(1, 2)", "kwargs": "{}"}),
				taskEv(t, "received", id, "w@h", 11, map[string]any{"name": "proj.add", "args": "(1, 2)", "kwargs": "{}", "retries": 0}),
				taskEv(t, "started", id, "w@h", 12, nil),
				taskEv(t, "succeeded", id, "w@h", 13, map[string]any{"result": "3", "runtime": 0.5}),
			}
		}},
		{"failed", func(id string) []celery.Event {
			return []celery.Event{
				taskEv(t, "received", id, "w@h", 21, map[string]any{"name": "proj.boom", "args": "()", "kwargs": "{'a': 1}"}),
				taskEv(t, "started", id, "w@h", 22, nil),
				taskEv(t, "failed", id, "w@h", 23, map[string]any{"exception": "KeyError('x')", "traceback": "Traceback ..."}),
			}
		}},
		{"retried then succeeded", func(id string) []celery.Event {
			return []celery.Event{
				taskEv(t, "received", id, "w@h", 31, map[string]any{"name": "proj.flaky", "args": "()", "kwargs": "{}"}),
				taskEv(t, "started", id, "w@h", 32, nil),
				taskEv(t, "retried", id, "w@h", 33, map[string]any{"exception": "Retry()"}),
				taskEv(t, "started", id, "w2@h", 34, nil),
				taskEv(t, "succeeded", id, "w2@h", 35, map[string]any{"result": "'ok'", "runtime": 0.1}),
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// One replica that saw everything in order.
			ref := fmt.Sprintf("ref-%s", c.name)
			st := state.New(state.Config{TrackChanges: true})
			st.Apply(c.events(ref)...)
			drainTo(t, st, s)
			want := info(t, s, ref)
			if inMem, _ := st.Task(ref); inMem.State != taskrec.Success && inMem.State != taskrec.Failure {
				t.Fatalf("reference state %s", inMem.State)
			}

			n := len(c.events("x"))
			perm := 0
			permutations(n, func(order []int) {
				perm++
				id := fmt.Sprintf("p%d-%s", perm, c.name)
				evs := c.events(id)
				for _, i := range order {
					for range 2 { // duplicates: two replicas saw it
						r := state.New(state.Config{TrackChanges: true})
						r.Apply(evs[i])
						drainTo(t, r, s)
					}
				}
				if got := info(t, s, id); got != want {
					t.Fatalf("order %v:\ngot  %s\nwant %s", order, got, want)
				}
			})
			// Two replicas splitting the events between them, writing
			// after each event (competing consumers).
			id := "split-" + c.name
			evs := c.events(id)
			a := state.New(state.Config{TrackChanges: true})
			b := state.New(state.Config{TrackChanges: true})
			for i := len(evs) - 1; i >= 0; i-- {
				r := a
				if i%2 == 1 {
					r = b
				}
				r.Apply(evs[i])
				drainTo(t, r, s)
			}
			if got := info(t, s, id); got != want {
				t.Fatalf("split replicas:\ngot  %s\nwant %s", got, want)
			}
		})
	}
}

// TestRetainDeletesInBatches: retention by count keeps the newest tasks
// and by age drops the old ones, a bounded number of rows per DELETE.
func TestRetainDeletesInBatches(t *testing.T) {
	s := openStore(t, newDB(t))
	st := state.New(state.Config{TrackChanges: true})
	for i := range 23 {
		st.Apply(taskEv(t, "received", fmt.Sprintf("t%02d", i), "w@h", 100+float64(i), map[string]any{"name": fmt.Sprintf("n%d", i)}))
	}
	drainTo(t, st, s)
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		r       pg.Retention
		now     time.Time
		removed int64
		deletes int64 // statements
		oldest  string
	}{
		{"by count", pg.Retention{MaxTasks: 15, Batch: 3}, time.Unix(200, 0), 8, 3, "t08"},
		{"again: nothing to do", pg.Retention{MaxTasks: 15, Batch: 3}, time.Unix(200, 0), 0, 0, "t08"},
		{"by age", pg.Retention{MaxAge: 10 * time.Second, Batch: 5}, time.Unix(120, 0), 2, 1, "t10"},
	} {
		before := s.Deletes()
		n, err := s.Retain(ctx, c.r, c.now)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n != c.removed || s.Deletes()-before != c.deletes {
			t.Errorf("%s: removed %d in %d statements, want %d in %d", c.name, n, s.Deletes()-before, c.removed, c.deletes)
		}
		ids, _, err := listPG(t, s, state.Query{Limit: state.NoLimit, SortBy: "received"})
		if err != nil || len(ids) == 0 || ids[0] != c.oldest || ids[len(ids)-1] != "t22" {
			t.Errorf("%s: left %v (%v), want %s..t22", c.name, ids, err, c.oldest)
		}
	}
	types, err := s.TaskTypes(ctx)
	if err != nil || len(types) != 13 {
		t.Errorf("task types after retention: %v (%v), want the 13 left", types, err)
	}
}

// TestStaleTasks: the reconciliation hook lists the non-terminal tasks
// older than the bound, oldest first, at most limit.
func TestStaleTasks(t *testing.T) {
	s := openStore(t, newDB(t))
	st := state.New(state.Config{TrackChanges: true})
	st.Apply(
		taskEv(t, "received", "old-received", "w@h", 100, nil),
		taskEv(t, "started", "old-started", "w@h", 101, nil),
		taskEv(t, "succeeded", "old-done", "w@h", 99, nil),
		taskEv(t, "started", "young", "w@h", 500, nil),
		taskEv(t, "retried", "old-retry", "w@h", 102, nil),
	)
	drainTo(t, st, s)
	for _, c := range []struct {
		limit int
		want  string
	}{{10, "[old-received old-started old-retry]"}, {2, "[old-received old-started]"}, {0, "[]"}} {
		ids, err := s.StaleTasks(context.Background(), time.Unix(400, 0), c.limit)
		if err != nil || fmt.Sprint(ids) != c.want && !(c.want == "[]" && len(ids) == 0) {
			t.Errorf("StaleTasks(limit %d) = %v, %v; want %s", c.limit, ids, err, c.want)
		}
	}
}
