package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// TestDrainRestoreRoundTrip keeps a model store up to date from Drain
// while random events stream in, then restores a new state from it: the
// two states must list the same records, in the same order, with the
// same children and task types. It does so twice: with Drain, and with
// DrainInto handed back each drain's buffer, as a flush does, which must
// encode into that buffer and leave every record as Drain writes it.
func TestDrainRestoreRoundTrip(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("reuse=%t", reuse), func(t *testing.T) { drainRestoreRoundTrip(t, reuse) })
	}
}

func drainRestoreRoundTrip(t *testing.T, reuse bool) {
	kinds := []string{"sent", "received", "started", "succeeded", "failed", "retried", "revoked", "custom"}
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 5))
		max := 20 + rng.IntN(200)
		s := New(Config{MaxTasks: max, TrackChanges: true})
		store := map[uint64][]byte{}
		var types []string
		var buf []byte
		reused := 0
		drain := func() {
			var c Changes
			if !reuse {
				c = s.Drain()
			} else {
				c = s.DrainInto(buf)
				if cap(buf) >= cap(c.Buf) && cap(buf) > 0 {
					if &buf[:1][0] != &c.Buf[:1][0] {
						t.Fatalf("seed %d: DrainInto did not encode into the buffer it was given", seed)
					}
					reused++
				}
				buf = c.Buf
			}
			for _, r := range c.Tasks {
				store[r.Seq] = slices.Clone(r.Data)
			}
			for seq := range store {
				if seq < c.FirstSeq {
					delete(store, seq)
				}
			}
			types = append(types, c.Types...)
		}
		for step := range 1500 {
			fields := map[string]any{
				"type":      "task-" + kinds[rng.IntN(len(kinds))],
				"uuid":      randomID(rng) + fmt.Sprint(rng.IntN(30)),
				"hostname":  fmt.Sprintf("w%d@h", rng.IntN(3)),
				"timestamp": float64(step) + rng.Float64(),
				"args":      "(1, 'é')",
			}
			if rng.IntN(3) == 0 {
				fields["parent_id"] = randomID(rng) + fmt.Sprint(rng.IntN(30))
			}
			if rng.IntN(4) == 0 {
				fields["name"] = fmt.Sprintf("n%d", rng.IntN(4))
			}
			if rng.IntN(5) == 0 {
				fields["exchange"], fields["routing_key"] = "celery", "q"
			}
			s.Apply(ev(t, fields))
			if rng.IntN(50) == 0 {
				drain()
			}
		}
		drain()
		if reuse && reused == 0 {
			t.Fatalf("seed %d: no drain had room in the buffer it was given", seed)
		}
		if len(store) != s.Len() {
			t.Fatalf("seed %d: store holds %d records, state %d tasks", seed, len(store), s.Len())
		}

		r := New(Config{MaxTasks: max})
		seqs := make([]uint64, 0, len(store))
		for seq := range store {
			seqs = append(seqs, seq)
		}
		slices.Sort(seqs)
		for _, seq := range seqs {
			if err := r.Restore(seq, store[seq]); err != nil {
				t.Fatalf("seed %d: restore %d: %v", seed, seq, err)
			}
		}
		for _, name := range types {
			r.RestoreType(name)
		}
		checkInvariants(t, r)
		want, _ := s.Tasks(Query{Limit: NoLimit})
		got, _ := r.Tasks(Query{Limit: NoLimit})
		for _, list := range [][]taskrec.Task{want, got} {
			for i := range list {
				slices.Sort(list[i].Children)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: restored tasks differ (-want +got):\n%s", seed, diff)
		}
		if diff := cmp.Diff(s.TaskTypes(), r.TaskTypes()); diff != "" {
			t.Fatalf("seed %d: types (-want +got):\n%s", seed, diff)
		}
		// The restored state goes on numbering where the first stopped.
		s.Apply(ev(t, map[string]any{"type": "task-received", "uuid": "new", "hostname": "w@h", "timestamp": 1e6}))
		r.Apply(ev(t, map[string]any{"type": "task-received", "uuid": "new", "hostname": "w@h", "timestamp": 1e6}))
		if a, b := s.Drain(), r.Drain(); a.FirstSeq != b.FirstSeq {
			t.Fatalf("seed %d: first live task %d, restored %d", seed, a.FirstSeq, b.FirstSeq)
		}
	}
}

func TestExpire(t *testing.T) {
	s := New(Config{MaxTasks: 10})
	// Created in this order; "slow" is old but still running.
	for i, tc := range []struct {
		id string
		ts float64
	}{{"a", 100}, {"b", 110}, {"slow", 120}, {"c", 130}, {"d", 300}} {
		s.Apply(taskEv(t, "received", tc.id, "w@h", tc.ts, map[string]any{"clock": i}))
	}
	s.Apply(taskEv(t, "started", "slow", "w@h", 400, nil))

	if n := s.Expire(time.Unix(200, 0)); n != 2 {
		t.Errorf("Expire evicted %d, want a and b", n)
	}
	got, _ := s.Tasks(Query{Limit: NoLimit})
	if diff := cmp.Diff([]string{"slow", "d", "c"}, ids(got)); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
	if n := s.Expire(time.Unix(1000, 0)); n != 3 || s.Len() != 0 {
		t.Errorf("Expire evicted %d, left %d", n, s.Len())
	}
	checkInvariants(t, s)
	// Numbering goes on: the next task is still the newest.
	s.Apply(taskEv(t, "received", "e", "w@h", 500, nil))
	if got, _ := s.Tasks(Query{Limit: NoLimit}); len(got) != 1 {
		t.Errorf("after expiry: %v", ids(got))
	}
	checkInvariants(t, s)
}

// TestDrainWhileApplying drains while events stream in on another
// goroutine, each Drain large enough that its encoding lets go of the
// lock between chunks (drainChunk): the records it hands out must still
// keep a store the state's exact copy once the events stop, including the
// tasks evicted, and the slots reused, between two chunks.
func TestDrainWhileApplying(t *testing.T) {
	const size, n = 600, 20000
	s := New(Config{MaxTasks: size, TrackChanges: true})
	evs := make([]celery.Event, 0, n)
	for i := range n {
		kind := []string{"received", "started", "succeeded"}[i%3]
		// Every third event starts a new task; the others update the
		// last few, so that both creation and change race the drain.
		id := fmt.Sprintf("t%d", i/3-i%3*(i%7))
		evs = append(evs, taskEv(t, kind, id, "w@h", float64(i), map[string]any{"name": fmt.Sprintf("n%d", i%5)}))
	}
	store := map[uint64][]byte{}
	drain := func() int {
		c := s.Drain()
		for i, r := range c.Tasks {
			if r.Seq < c.FirstSeq || (i > 0 && r.Seq <= c.Tasks[i-1].Seq) {
				t.Fatalf("record %d of %d: seq %d, first live %d", i, len(c.Tasks), r.Seq, c.FirstSeq)
			}
			store[r.Seq] = slices.Clone(r.Data)
		}
		for seq := range store {
			if seq < c.FirstSeq {
				delete(store, seq)
			}
		}
		return len(c.Tasks)
	}
	// The events go in rounds of 300 new tasks; each round's changes are
	// drained while the next round is applied.
	const round = 900
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		for i := range evs {
			s.Apply(evs[i])
			if (i+1)%round == 0 {
				applied <- struct{}{}
			}
		}
	}()
	largest := 0
	for range applied {
		largest = max(largest, drain())
	}
	drain()
	if largest <= drainChunk {
		t.Fatalf("the largest drain held %d tasks: never more than one chunk (%d)", largest, drainChunk)
	}
	r := New(Config{MaxTasks: size})
	seqs := slices.Sorted(maps.Keys(store))
	for _, seq := range seqs {
		if err := r.Restore(seq, store[seq]); err != nil {
			t.Fatalf("restore %d: %v", seq, err)
		}
	}
	checkInvariants(t, r)
	want, _ := s.Tasks(Query{Limit: NoLimit})
	got, _ := r.Tasks(Query{Limit: NoLimit})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("restored tasks differ (-want +got):\n%s", diff)
	}
}
