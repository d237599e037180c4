package state

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// TestRandomEventsKeepInvariants throws random, out-of-order, partly
// nonsensical event streams at a small state and checks its bookkeeping
// after every batch: the order index, eviction and pending children.
func TestRandomEventsKeepInvariants(t *testing.T) {
	kinds := []string{"sent", "received", "started", "succeeded", "failed", "retried", "revoked", "rejected", "progress"}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 42))
		s := New(Config{MaxTasks: 1 + rng.IntN(12), MaxWorkers: 3})
		for range 300 {
			var batch []celery.Event
			for range 1 + rng.IntN(4) {
				fields := map[string]any{
					"type":      "task-" + kinds[rng.IntN(len(kinds))],
					"uuid":      randomID(rng),
					"hostname":  fmt.Sprintf("w%d@h", rng.IntN(5)),
					"timestamp": float64(rng.IntN(30)), // many ties
				}
				if rng.IntN(3) == 0 {
					fields["parent_id"] = randomID(rng)
				}
				if rng.IntN(4) == 0 {
					fields["parent_id"] = nil
				}
				if rng.IntN(5) == 0 {
					fields["name"] = fmt.Sprintf("n%d", rng.IntN(3))
				}
				if rng.IntN(6) == 0 {
					fields["clock"] = rng.IntN(100)
				}
				e := ev(t, fields)
				e.LocalReceived = float64(rng.IntN(40))
				batch = append(batch, e)
			}
			s.Apply(batch...)
			checkInvariants(t, s)
		}
	}
}

// randomID is one of 20 ids, half of them in Celery's uuid form, which
// the state stores differently.
func randomID(rng *rand.Rand) string {
	n := rng.IntN(20)
	if n%2 == 0 {
		return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n)
	}
	return fmt.Sprintf("u%d", n)
}

func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.live > s.maxTasks || s.live != s.byUUID.Len()+len(s.byText) || len(s.byText) != len(s.textIDs) {
		t.Fatalf("%d live tasks (max %d), %d + %d ids", s.live, s.maxTasks, s.byUUID.Len(), len(s.byText))
	}
	var live []uint32
	for p := range s.slots.Pages {
		for j := range s.slots.Pages[p] {
			i := uint32(p<<taskrec.PageBits | j)
			sl := s.slots.At(i)
			if !sl.Live() {
				continue
			}
			live = append(live, i)
			if got, ok := s.lookup(s.taskID(i)); !ok || got != i {
				t.Fatalf("slot %d (%s) not found by its id", i, s.taskID(i))
			}
			owner, _, _ := s.arena.Record(sl.Cold)
			if owner != i {
				t.Fatalf("slot %d's record belongs to slot %d", i, owner)
			}
			task := s.load(i, taskrec.CopyText)
			if sl.Key != orderKey(&task) {
				t.Fatalf("task %s indexed at %v, timestamp %v", task.UUID, sl.Key, task.Timestamp)
			}
			if p := parentOf(&task); p != "" && !slices.Contains(s.children[p], i) {
				t.Fatalf("%s is not among the children of its parent %s", task.UUID, p)
			}
		}
	}
	if len(live) != s.live {
		t.Fatalf("%d live slots, counted %d", len(live), s.live)
	}
	// Each index is sorted and holds exactly the tasks placed in it.
	for d := range dims {
		n := 0
		for k, x := range s.dimension(d) {
			count := 0
			var prev *taskrec.Item
			p, q := x.All()
			x.Walk(p, q, false, func(it taskrec.Item) bool {
				if prev != nil && !s.less(*prev, it) {
					t.Fatalf("dimension %d index %d out of order", d, k)
				}
				sl := s.slots.At(it.Slot)
				if !sl.Live() || s.place(d, it.Slot, sl) != (placement{k, it, true}) {
					t.Fatalf("dimension %d index %d holds slot %d wrongly", d, k, it.Slot)
				}
				prev = &it
				count++
				return true
			})
			if count != x.Len() || count == 0 {
				t.Fatalf("dimension %d index %d counts %d, holds %d", d, k, x.Len(), count)
			}
			n += count
		}
		want := 0
		for _, i := range live {
			if s.place(d, i, s.slots.At(i)).ok {
				want++
			}
		}
		if n != want {
			t.Fatalf("dimension %d indexes hold %d tasks, want %d", d, n, want)
		}
	}
	// The union of the state indexes lists every task once, newest first.
	var listed []uint32
	s.newestFirst(s.sources(&filter{}), func(i uint32) bool { listed = append(listed, i); return true })
	want := slices.Clone(live)
	slices.SortFunc(want, func(a, b uint32) int {
		x, y := s.slots.At(a), s.slots.At(b)
		if c := cmp.Compare(y.Key, x.Key); c != 0 {
			return c
		}
		return cmp.Compare(s.taskID(b), s.taskID(a))
	})
	if !slices.Equal(listed, want) {
		t.Fatalf("indexes list %d tasks out of order, want %d", len(listed), len(want))
	}
	for p, list := range s.children {
		if len(list) == 0 {
			t.Fatalf("empty children list for %s", p)
		}
		for _, c := range list {
			task := s.load(c, taskrec.CopyText)
			if !s.slots.At(c).Live() || parentOf(&task) != p {
				t.Fatalf("child %s listed under %s", task.UUID, p)
			}
		}
	}
	if len(s.workers) > s.maxWorkers || len(s.workers) != len(s.workerCreated) {
		t.Fatalf("%d workers, %d in order, max %d", len(s.workers), len(s.workerCreated), s.maxWorkers)
	}
}

// TestBatchesApplyAsSingleEvents: a batch is applied holding a task's
// record across its consecutive events, and letting readers in (releasing
// that record first) when it has held the write lock too long; the state
// must come out exactly as when every event is applied on its own.
func TestBatchesApplyAsSingleEvents(t *testing.T) {
	for _, hold := range []time.Duration{maxWriteHold, 0} {
		t.Run(fmt.Sprintf("max hold %s", hold), func(t *testing.T) {
			defer func(was time.Duration) { maxWriteHold = was }(maxWriteHold)
			maxWriteHold = hold
			batchesApplyAsSingleEvents(t)
		})
	}
}

func batchesApplyAsSingleEvents(t *testing.T) {
	kinds := []string{"sent", "received", "started", "succeeded", "failed", "retried", "revoked", "rejected", "progress"}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := Config{MaxTasks: 1 + rng.IntN(12), MaxWorkers: 3}
		batched, single := New(cfg), New(cfg)
		id := randomID(rng)
		for range 200 {
			var batch []celery.Event
			for range 1 + rng.IntN(4*yieldCheck) {
				if rng.IntN(3) == 0 {
					id = randomID(rng) // else the same task again, as workers batch them
				}
				fields := map[string]any{
					"type":      "task-" + kinds[rng.IntN(len(kinds))],
					"uuid":      id,
					"hostname":  fmt.Sprintf("w%d@h", rng.IntN(5)),
					"timestamp": float64(rng.IntN(30)),
				}
				switch rng.IntN(8) {
				case 0:
					fields["type"] = "worker-heartbeat"
				case 1:
					fields["parent_id"] = randomID(rng)
				case 2:
					fields["parent_id"] = nil
				case 3:
					fields["name"] = fmt.Sprintf("n%d", rng.IntN(3))
				case 4:
					fields["clock"] = rng.IntN(100)
				case 5:
					delete(fields, "timestamp") // ignored, between held events
				}
				e := ev(t, fields)
				e.LocalReceived = float64(1 + rng.IntN(40)) // 0 would stand for the time of Apply
				batch = append(batch, e)
			}
			batched.Apply(batch...)
			for _, e := range batch {
				single.Apply(e)
			}
			checkInvariants(t, batched)
			if diff := gocmp.Diff(snapshotAll(t, single), snapshotAll(t, batched)); diff != "" {
				t.Fatalf("seed %d: batched state differs (-single +batched):\n%s", seed, diff)
			}
		}
	}
}

// stateSnapshot is everything the state answers, for comparing two states.
type stateSnapshot struct {
	Tasks   []taskrec.Task
	Types   []string
	Workers []Worker
}

func snapshotAll(t *testing.T, s *State) stateSnapshot {
	t.Helper()
	tasks, err := s.Tasks(Query{Limit: NoLimit})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tasks {
		full, ok := s.Task(tasks[i].UUID)
		if !ok {
			t.Fatalf("listed task %s not found", tasks[i].UUID)
		}
		tasks[i] = full // with its children
	}
	return stateSnapshot{Tasks: tasks, Types: s.TaskTypes(), Workers: s.Workers()}
}
