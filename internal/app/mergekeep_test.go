package app

import (
	"testing"

	"github.com/stamen-dev/stamen/internal/store"
)

// TestMergeKeepEvicted: the records left unwritten by a failed flush are
// kept for PostgreSQL even when their tasks were evicted from the hot set
// since (their sequence numbers are below the newer batch's FirstSeq), and
// only what exceeds the bound is dropped and counted.
func TestMergeKeepEvicted(t *testing.T) {
	rec := func(seqs ...uint64) []store.Task {
		var out []store.Task
		for _, s := range seqs {
			out = append(out, store.Task{Seq: s, Data: []byte{byte(s)}})
		}
		return out
	}
	older := store.Batch{FirstSeq: 0, Tasks: rec(1, 2, 3)}
	newer := store.Batch{FirstSeq: 10, Tasks: rec(3, 10, 11)}
	for _, tc := range []struct {
		max      int
		wantSeqs []uint64
		wantLost int
	}{
		{0, []uint64{1, 2, 3, 10, 11}, 0},
		{100, []uint64{1, 2, 3, 10, 11}, 0},
		{3, []uint64{3, 10, 11}, 2},
	} {
		b, lost := mergeKeep(older, newer, tc.max)
		var got []uint64
		for _, r := range b.Tasks {
			got = append(got, r.Seq)
		}
		if lost != tc.wantLost || len(got) != len(tc.wantSeqs) {
			t.Errorf("max %d: seqs %v lost %d, want %v lost %d", tc.max, got, lost, tc.wantSeqs, tc.wantLost)
			continue
		}
		for i := range got {
			if got[i] != tc.wantSeqs[i] {
				t.Errorf("max %d: seqs %v, want %v", tc.max, got, tc.wantSeqs)
				break
			}
		}
		if b.FirstSeq != 10 {
			t.Errorf("max %d: FirstSeq %d, want 10", tc.max, b.FirstSeq)
		}
	}
}
