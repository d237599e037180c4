package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDrainRestoreRoundTrip keeps a model store up to date from Drain
// while random events stream in, then restores a new state from it: the
// two states must list the same records, in the same order, with the
// same children and task types.
func TestDrainRestoreRoundTrip(t *testing.T) {
	kinds := []string{"sent", "received", "started", "succeeded", "failed", "retried", "revoked", "custom"}
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 5))
		max := 20 + rng.IntN(200)
		s := New(Config{MaxTasks: max, TrackChanges: true})
		store := map[uint64][]byte{}
		var types []string
		drain := func() {
			c := s.Drain()
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
		for _, list := range [][]Task{want, got} {
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
