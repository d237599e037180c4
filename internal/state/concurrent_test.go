package state

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// The consistency test's tasks: task k has id concurrentID(k), and each
// of its events is a generation g (1 received, 2 started, 3 succeeded)
// that writes args, kwargs, retries, the result and the timestamp
// together, all derived from k and g. A record a reader sees must be one
// generation through and through: any mix is a record half-applied.
const (
	concurrentBase   = 1.7e9
	concurrentMax    = 300 // tasks kept: the writer evicts from batch 15 on
	concurrentBatch  = 20  // new tasks per batch
	concurrentRounds = 150
)

func concurrentID(k int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", k) }

func concurrentTS(k, g int) float64 { return concurrentBase + float64(k) + float64(g)/8 }

// concurrentEvent is generation g of task k. A task names the one before
// it as its parent, so that children lists change under the readers too.
func concurrentEvent(t testing.TB, k, g int) celery.Event {
	kind := [...]string{1: "received", 2: "started", 3: "succeeded"}[g]
	extra := map[string]any{
		"args": fmt.Sprintf("(%d, %d)", k, g), "kwargs": fmt.Sprintf("{'g': %d}", g), "retries": g,
	}
	if g == 1 {
		extra["name"] = fmt.Sprintf("proj.n%d", k%3)
		extra["root_id"] = concurrentID(k)
		if k > 0 {
			extra["parent_id"] = concurrentID(k - 1)
		}
	}
	if g == 3 {
		extra["result"] = fmt.Sprintf("'r%d'", k)
		extra["runtime"] = 0.5
	}
	return taskEv(t, kind, concurrentID(k), fmt.Sprintf("w%d@host", k%4), concurrentTS(k, g), extra)
}

// checkConsistent reports what is wrong with a record a reader saw, or "".
func checkConsistent(r *taskrec.Task) string {
	k, err := strconv.Atoi(strings.TrimPrefix(r.UUID, "00000000-0000-4000-8000-"))
	if err != nil {
		return "unknown id " + r.UUID
	}
	g := r.Retries
	if g < 1 || g > 3 {
		return fmt.Sprintf("generation %d", g)
	}
	state := [...]string{1: taskrec.Received, 2: taskrec.Started, 3: taskrec.Success}[g]
	var bad []string
	check := func(what string, ok bool) {
		if !ok {
			bad = append(bad, what)
		}
	}
	check("state "+r.State, r.State == state)
	check("args "+r.Args, r.Args == fmt.Sprintf("(%d, %d)", k, g))
	check("kwargs "+r.Kwargs, r.Kwargs == fmt.Sprintf("{'g': %d}", g))
	check("timestamp", r.Timestamp == concurrentTS(k, g))
	check("name "+r.Name, r.Name == fmt.Sprintf("proj.n%d", k%3))
	check("worker "+r.Worker, r.Worker == fmt.Sprintf("w%d@host", k%4))
	check("root "+r.RootID, r.RootID == r.UUID)
	check("received", r.Received == concurrentTS(k, 1))
	check("started", (g >= 2) == r.Has(taskrec.FieldStarted) && (g < 2 || r.Started == concurrentTS(k, 2)))
	check("result "+r.Result, (g == 3) == r.Has(taskrec.FieldResult) && (g < 3 || r.Result == fmt.Sprintf("'r%d'", k)))
	check("runtime", (g == 3) == r.Has(taskrec.FieldRuntime))
	if k > 0 {
		check("parent "+r.ParentID, r.ParentID == concurrentID(k-1))
	}
	for _, c := range r.Children {
		check("child "+c, c == concurrentID(k+1))
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("task %d of generation %d: %s", k, g, strings.Join(bad, ", "))
}

// TestConsistentUnderConcurrentWriter walks the task list, as GET
// /api/tasks does (List and Next in chunks), in the orders and with the
// filters the API offers, and reads tasks one by one, while a writer
// applies batches of new tasks, their progress and evictions at the
// bound. No walk may see a task twice, and no record may be seen half
// written. Run with -race, it also finds a reader that reads the state
// outside its lock.
func TestConsistentUnderConcurrentWriter(t *testing.T) {
	s := New(Config{MaxTasks: concurrentMax})
	// Build every batch first, so that the writer is fast enough to race
	// the readers: batch b creates its tasks, starts those of batch b-1 and
	// finishes those of b-2; every fifth task lives its whole life in one
	// batch, which the state applies to a record it holds across events.
	batches := make([][]celery.Event, concurrentRounds)
	for b := range batches {
		var evs []celery.Event
		for k := b * concurrentBatch; k < (b+1)*concurrentBatch; k++ {
			evs = append(evs, concurrentEvent(t, k, 1))
			if k%5 == 0 {
				evs = append(evs, concurrentEvent(t, k, 2), concurrentEvent(t, k, 3))
			}
		}
		for g := 2; g <= 3; g++ {
			prev := b - (g - 1) // the batch whose tasks reach generation g now
			if prev < 0 {
				continue
			}
			for k := prev * concurrentBatch; k < (prev+1)*concurrentBatch; k++ {
				if k%5 != 0 {
					evs = append(evs, concurrentEvent(t, k, g))
				}
			}
		}
		batches[b] = evs
	}
	// The writer yields its lock every few events, as in a long batch, so
	// that readers also come between the events of one batch.
	saved := maxWriteHold
	maxWriteHold = 0
	defer func() { maxWriteHold = saved }()

	queries := []Query{
		{Limit: NoLimit},
		{Limit: 50, Offset: 10},
		{Limit: NoLimit, SortBy: "name"},
		{Limit: 100, SortBy: "-state"},
		{Limit: NoLimit, SortBy: "-received"},
		{Limit: NoLimit, SortBy: "started"},
		{Limit: NoLimit, State: "started"},
		{Limit: NoLimit, TaskName: "proj.n1", SortBy: "-started"},
		{Limit: NoLimit, Worker: "w2@host"},
		{Limit: NoLimit, Search: "result:'r1"},
		{Limit: 30, Search: "state:SUCCESS"},
	}
	var done atomic.Bool
	var walks, seen, applied atomic.Int64
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for n := 0; !done.Load() || n < len(queries); n++ {
				q := queries[(r+n)%len(queries)]
				l, err := s.List(q)
				if err != nil {
					t.Error(err)
					return
				}
				ids := make(map[string]bool)
				for more := true; more; {
					more = l.Next(7, func(task *taskrec.Task) {
						if ids[task.UUID] {
							t.Errorf("walk of %+v: task %s seen twice", q, task.UUID)
						}
						ids[strings.Clone(task.UUID)] = true
						if msg := checkConsistent(task); msg != "" {
							t.Errorf("walk of %+v: %s", q, msg)
						}
					})
				}
				l.Close() // its buffers go to the next walk
				walks.Add(1)
				seen.Add(int64(len(ids)))
				// The task info of the newest tasks, which the writer is
				// changing.
				newest := int(applied.Load())*concurrentBatch - 1
				for k := max(newest-40, 0); k <= newest; k += 4 {
					if task, ok := s.Task(concurrentID(k)); ok {
						if msg := checkConsistent(&task); msg != "" {
							t.Errorf("task info: %s", msg)
						}
					}
				}
				if t.Failed() {
					return
				}
			}
		})
	}
	for _, evs := range batches {
		s.Apply(evs...)
		applied.Add(1)
	}
	done.Store(true)
	wg.Wait()
	if s.Len() != concurrentMax {
		t.Errorf("%d tasks kept, want %d", s.Len(), concurrentMax)
	}
	t.Logf("%d walks saw %d records", walks.Load(), seen.Load())
}

// TestReadersTakeTurns holds ReadersAtOnce lists inside their formatting
// (the callback of Next): every turn is then taken, and the writer still
// applies a batch, since a list formats outside the state's lock. Then
// many lists at once never format more than ReadersAtOnce chunks at a
// time, and all of them finish.
func TestReadersTakeTurns(t *testing.T) {
	s := New(Config{MaxTasks: 1000})
	for k := range 200 {
		s.Apply(concurrentEvent(t, k, 1))
	}
	n := ReadersAtOnce()
	var inside, most atomic.Int64
	enter := func() {
		now := inside.Add(1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
	}
	read := func(hold <-chan struct{}, entered chan<- struct{}) {
		l, err := s.List(Query{Limit: 100})
		if err != nil {
			t.Error(err)
			return
		}
		defer l.Close()
		first := true
		for more := true; more; {
			more = l.Next(256, func(*taskrec.Task) {
				if first {
					first = false
					enter()
					if entered != nil {
						entered <- struct{}{}
					}
					<-hold
					inside.Add(-1)
				}
			})
		}
	}
	wait := func(what string, done <-chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not happen in 30 s", what)
		}
	}

	hold := make(chan struct{})
	entered := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { read(hold, entered) })
	}
	for range n {
		wait("a reader's formatting", entered)
	}
	select {
	case s.turns <- struct{}{}:
		t.Fatalf("a turn was free with %d lists formatting", n)
	default:
	}
	applied := make(chan struct{})
	go func() {
		s.Apply(concurrentEvent(t, 200, 1))
		close(applied)
	}()
	wait("the writer's batch while readers format", applied)
	close(hold)
	wg.Wait()

	most.Store(0)
	open := make(chan struct{})
	close(open)
	for range 8 * n {
		wg.Go(func() {
			for range 20 {
				read(open, nil)
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	wait("every list", done)
	if m := most.Load(); m > int64(n) || m < 1 {
		t.Errorf("%d lists formatted at once, want 1 to %d", m, n)
	}
}
