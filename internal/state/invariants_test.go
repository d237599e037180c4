package state

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stamen-dev/stamen/internal/celery"
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
					"uuid":      fmt.Sprintf("u%d", rng.IntN(20)),
					"hostname":  fmt.Sprintf("w%d@h", rng.IntN(5)),
					"timestamp": float64(rng.IntN(30)), // many ties
				}
				if rng.IntN(3) == 0 {
					fields["parent_id"] = fmt.Sprintf("u%d", rng.IntN(25))
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

func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.tasks) > s.maxTasks {
		t.Fatalf("%d tasks, max %d", len(s.tasks), s.maxTasks)
	}
	if n := len(s.created) - s.head; n != len(s.tasks) {
		t.Fatalf("creation list %d, tasks %d", n, len(s.tasks))
	}
	// The index lists every task once, newest first.
	var listed []*entry
	for e := s.order.first(); e != nil; e = e.next[0] {
		listed = append(listed, e)
	}
	want := make([]*entry, 0, len(s.tasks))
	for _, e := range s.tasks {
		want = append(want, e)
		if e.key != orderKey(&e.t) {
			t.Fatalf("task %s indexed at %v, timestamp %v", e.t.UUID, e.key, e.t.Timestamp)
		}
	}
	slices.SortFunc(want, func(a, b *entry) int {
		if c := cmp.Compare(b.key, a.key); c != 0 {
			return c
		}
		return cmp.Compare(b.t.UUID, a.t.UUID)
	})
	if !slices.Equal(listed, want) {
		t.Fatalf("index holds %d entries out of order, want %d", len(listed), len(want))
	}
	for i := 1; i < s.order.level; i++ { // every level is a sorted sublist
		for e := s.order.head[i]; e != nil && e.next[i] != nil; e = e.next[i] {
			if !before(e, e.next[i]) {
				t.Fatalf("level %d out of order", i)
			}
		}
	}
	for id, list := range s.pending {
		if len(list) == 0 {
			t.Fatalf("empty pending list for %s", id)
		}
		if s.tasks[id] != nil {
			t.Fatalf("children wait for %s, which exists", id)
		}
		for i, c := range list {
			if c.evicted || c.pendingOn != id || c.pendingIdx != i {
				t.Fatalf("pending entry %s under %s: evicted=%v on=%q idx=%d/%d", c.t.UUID, id, c.evicted, c.pendingOn, c.pendingIdx, i)
			}
		}
	}
	for _, e := range s.tasks {
		live := 0
		for _, c := range e.children {
			if !c.evicted {
				live++
				if !slices.Contains(c.parents, e) {
					t.Fatalf("%s lists child %s that does not know it", e.t.UUID, c.t.UUID)
				}
			}
		}
		if live != len(e.children)-e.dead {
			t.Fatalf("%s: %d live children, %d listed, %d counted dead", e.t.UUID, live, len(e.children), e.dead)
		}
		for _, p := range e.parents {
			if p.evicted {
				t.Fatalf("%s keeps evicted parent %s", e.t.UUID, p.t.UUID)
			}
		}
	}
	if len(s.workers) > s.maxWorkers || len(s.workers) != len(s.workerCreated) {
		t.Fatalf("%d workers, %d in order, max %d", len(s.workers), len(s.workerCreated), s.maxWorkers)
	}
}
