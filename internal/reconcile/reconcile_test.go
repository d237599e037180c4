package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

func taskID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// event builds an event as a worker sends it.
func event(t *testing.T, typ string, i int, ts float64) celery.Event {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"type": typ, "uuid": taskID(i), "hostname": "w@h", "timestamp": ts, "name": "t"})
	evs, err := celery.DecodeEvents(raw)
	if err != nil {
		t.Fatal(err)
	}
	return evs[0]
}

// backend is a result backend in memory that counts its requests.
type backend struct {
	docs    map[string]*celery.Result
	batches []int
	fail    error
}

func (b *backend) Results(ctx context.Context, ids []string) ([]*celery.Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("lookup without a deadline")
	}
	if b.fail != nil {
		return nil, b.fail
	}
	b.batches = append(b.batches, len(ids))
	out := make([]*celery.Result, len(ids))
	for i, id := range ids {
		out[i] = b.docs[id]
	}
	return out, nil
}

func str(s string) *string { return &s }

func success(id string) *celery.Result {
	return &celery.Result{TaskID: id, Status: celery.StateSuccess, Result: json.RawMessage(`[1, "a"]`), DateDone: str("2026-01-02T03:04:05.5")}
}

// setup is a state with tasks 0..n-1 STARTED at 1000+i, and a reconciler
// over it whose clock reads 5000.
func setup(t *testing.T, n int, b *backend, cfg Config) (*state.State, *Reconciler) {
	t.Helper()
	s := state.New(state.Config{MaxTasks: 1000})
	for i := range n {
		s.Apply(event(t, "task-started", i, 1000+float64(i)))
	}
	cfg.Source, cfg.Results = s, b
	cfg.Apply = func(_ context.Context, evs []celery.Event) { s.Apply(evs...) }
	cfg.Now = func() time.Time { return time.Unix(5000, 0) }
	return s, New(cfg)
}

func states(s *state.State, n int) map[string]int {
	out := map[string]int{}
	for i := range n {
		task, _ := s.Task(taskID(i))
		out[task.State]++
	}
	return out
}

// TestRound: a round reads at most MaxLookups documents, Batch at a time,
// oldest first, finishes the tasks whose documents are final and leaves
// the rest, and finished tasks are never looked up again.
func TestRound(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tasks      int
		docs       func(i int) *celery.Result
		maxLookups int
		batch      int
		rounds     int
		wantLooked []int // per round
		wantStates map[string]int
		batches    []int
	}{
		{
			name: "bounded per round", tasks: 25, docs: func(i int) *celery.Result { return success(taskID(i)) },
			maxLookups: 10, batch: 4, rounds: 4,
			wantLooked: []int{10, 10, 5, 0}, wantStates: map[string]int{"SUCCESS": 25},
			batches: []int{4, 4, 2, 4, 4, 2, 4, 1},
		},
		{
			name: "unresolved not asked again within After", tasks: 6,
			docs: func(i int) *celery.Result {
				if i%2 == 0 {
					return nil // no document yet: still running, or ignore_result
				}
				return success(taskID(i))
			},
			maxLookups: 2, batch: 10, rounds: 4,
			wantLooked: []int{2, 2, 2, 0}, wantStates: map[string]int{"SUCCESS": 3, "STARTED": 3},
			batches: []int{2, 2, 2},
		},
		{
			name: "not final", tasks: 4,
			docs: func(i int) *celery.Result {
				return &celery.Result{TaskID: taskID(i), Status: []string{"PENDING", "STARTED", "RETRY", "PROGRESS"}[i]}
			},
			maxLookups: 10, batch: 10, rounds: 2,
			wantLooked: []int{4, 0}, wantStates: map[string]int{"STARTED": 4},
			batches: []int{4},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{docs: map[string]*celery.Result{}}
			for i := range tc.tasks {
				if d := tc.docs(i); d != nil {
					b.docs[taskID(i)] = d
				}
			}
			s, r := setup(t, tc.tasks, b, Config{MaxLookups: tc.maxLookups, Batch: tc.batch, After: time.Minute})
			var looked []int
			for range tc.rounds {
				st, err := r.Round(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				looked = append(looked, st.Looked)
			}
			if !slices.Equal(looked, tc.wantLooked) {
				t.Errorf("looked up per round: %v, want %v", looked, tc.wantLooked)
			}
			if !slices.Equal(b.batches, tc.batches) {
				t.Errorf("batches: %v, want %v", b.batches, tc.batches)
			}
			if got := states(s, tc.tasks); fmt.Sprint(got) != fmt.Sprint(tc.wantStates) {
				t.Errorf("states: %v, want %v", got, tc.wantStates)
			}
		})
	}
}

// TestRoundLeavesFinished: tasks that finished by their own events are
// neither looked up nor changed, whatever the backend says of them.
func TestRoundLeavesFinished(t *testing.T) {
	b := &backend{docs: map[string]*celery.Result{}}
	s, r := setup(t, 3, b, Config{})
	s.Apply(event(t, "task-failed", 0, 1100), event(t, "task-revoked", 1, 1100))
	for i := range 3 {
		b.docs[taskID(i)] = success(taskID(i))
	}
	if _, err := r.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.batches, []int{1}) {
		t.Errorf("batches: %v, want only the unfinished task", b.batches)
	}
	for i, want := range []string{"FAILURE", "REVOKED", "SUCCESS"} {
		if task, _ := s.Task(taskID(i)); task.State != want {
			t.Errorf("task %d: %s, want %s", i, task.State, want)
		}
	}
}

// TestKick: a kick covers the tasks unfinished at that moment, however
// recent, and asks again about those a lookup left unresolved.
func TestKick(t *testing.T) {
	b := &backend{docs: map[string]*celery.Result{}}
	now := time.Unix(5000, 0)
	s, r := setup(t, 2, b, Config{After: time.Hour})
	r.cfg.Now = func() time.Time { return now }
	// Recent: the periodic round does not look.
	s.Apply(event(t, "task-started", 2, 4999))
	st, err := r.Round(context.Background())
	if err != nil || st.Looked != 2 {
		t.Fatalf("round: %+v %v", st, err)
	}
	b.docs[taskID(0)] = success(taskID(0))
	b.docs[taskID(2)] = &celery.Result{TaskID: taskID(2), Status: celery.StateFailure,
		Result: json.RawMessage(`{"exc_type": "ValueError", "exc_message": ["boom"], "exc_module": "builtins"}`), Traceback: str("Traceback ...")}
	r.Kick()
	st, err = r.Round(context.Background())
	if err != nil || st.Looked != 3 || st.Reconciled != 2 || !st.Exhausted {
		t.Fatalf("round after the kick: %+v %v", st, err)
	}
	if task, _ := s.Task(taskID(2)); task.State != "FAILURE" || task.Exception != "ValueError('boom')" || task.Traceback != "Traceback ..." {
		t.Errorf("task 2: %+v", task)
	}
	if task, _ := s.Task(taskID(0)); task.State != "SUCCESS" || task.Result != "[1, 'a']" || task.Worker != "w@h" {
		t.Errorf("task 0: %+v", task)
	}
}

// TestRoundBackendDown: a failed lookup is an error, and the round is not
// taken as done.
func TestRoundBackendDown(t *testing.T) {
	b := &backend{fail: errors.New("connection refused")}
	_, r := setup(t, 3, b, Config{})
	st, err := r.Round(context.Background())
	if err == nil || st.Exhausted {
		t.Fatalf("round: %+v %v", st, err)
	}
}

// TestEvent: what each result document becomes.
func TestEvent(t *testing.T) {
	now := time.Unix(7000, 0)
	for _, tc := range []struct {
		name string
		res  *celery.Result
		want map[string]any // nil: no event
	}{
		{"none", nil, nil},
		{"pending", celery.PendingResult("x"), nil},
		{"started", &celery.Result{Status: "STARTED"}, nil},
		{"retry", &celery.Result{Status: "RETRY"}, nil},
		{"unreadable", &celery.Result{Unreadable: &celery.UnreadableResultError{Serializer: "pickle"}}, nil},
		{"success", success("x"), map[string]any{"type": "task-succeeded", "result": "[1, 'a']", "timestamp": 1767323045.5}},
		{"success 5.6 date", &celery.Result{Status: "SUCCESS", Result: json.RawMessage(`null`), DateDone: str("2026-01-02T03:04:05.5+00:00")},
			map[string]any{"type": "task-succeeded", "result": "None", "timestamp": 1767323045.5}},
		{"failure", &celery.Result{Status: "FAILURE", Result: json.RawMessage(`{"exc_type": "KeyError", "exc_message": ["k"]}`), Traceback: str("tb")},
			map[string]any{"type": "task-failed", "exception": "KeyError('k')", "traceback": "tb", "timestamp": 7000.0}},
		{"revoked", &celery.Result{Status: "REVOKED", DateDone: str("bad")}, map[string]any{"type": "task-revoked", "timestamp": 7000.0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := Event("x", tc.res, now)
			if ok != (tc.want != nil) {
				t.Fatalf("ok = %v", ok)
			}
			if !ok {
				return
			}
			var raw map[string]any
			if err := json.Unmarshal(e.Raw, &raw); err != nil {
				t.Fatal(err)
			}
			if !e.Reconciled || raw[RawMarker] != true || e.Hostname != Hostname || e.UUID != "x" {
				t.Errorf("not marked: %+v %s", e, e.Raw)
			}
			for k, v := range tc.want {
				if raw[k] != v {
					t.Errorf("%s = %v, want %v", k, raw[k], v)
				}
			}
		})
	}
}

// TestRun: a kick makes Run look at once, and Run stops with ctx.
func TestRun(t *testing.T) {
	b := &backend{docs: map[string]*celery.Result{taskID(0): success(taskID(0))}}
	done := make(chan struct{})
	s, r := setup(t, 1, b, Config{Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { defer close(done); r.Run(ctx) }()
	r.Kick()
	testcluster.Eventually(t, 5*time.Second, "a kick reconciling the task", func() bool {
		task, _ := s.Task(taskID(0))
		return task.State == "SUCCESS"
	})
	cancel()
	<-done
}

// TestRunAfterKickGoesOn: after a kick, rounds follow each other a Pause
// apart until every task unfinished at the kick was looked up, each
// within MaxLookups; then Run waits for the Interval.
func TestRunAfterKickGoesOn(t *testing.T) {
	b := &backend{docs: map[string]*celery.Result{}}
	for i := range 25 {
		b.docs[taskID(i)] = success(taskID(i))
	}
	s, r := setup(t, 25, b, Config{Interval: time.Hour, Pause: 10 * time.Millisecond, MaxLookups: 10, After: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	r.Kick()
	testcluster.Eventually(t, 5*time.Second, "a kick reconciling all 25 tasks", func() bool {
		return states(s, 25)["SUCCESS"] == 25
	})
	cancel()
	<-done
	for _, n := range b.batches {
		if n > 10 {
			t.Errorf("a round read %d documents, beyond MaxLookups", n)
		}
	}
	if looked, done := r.Totals(); looked != 25 || done != 25 {
		t.Errorf("totals: %d looked up, %d reconciled", looked, done)
	}
}
