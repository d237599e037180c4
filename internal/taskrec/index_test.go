package taskrec

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestIndexAgainstModel drives an index with random inserts and removes,
// many of them on tied keys and in the middle, and compares it after every
// step with a sorted slice.
func TestIndexAgainstModel(t *testing.T) {
	less := func(a, b Item) bool { return a.Key < b.Key || a.Key == b.Key && a.Slot < b.Slot }
	for _, tc := range []struct {
		name string
		keys int // distinct keys: few means many ties
	}{{"ties", 7}, {"spread", 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.keys)))
			var x Index
			var model []Item
			in := map[uint32]float64{}
			for step := range 20000 {
				s := uint32(rng.IntN(1500))
				if k, ok := in[s]; ok {
					if !x.Remove(Item{k, s}, less) {
						t.Fatalf("step %d: remove of %d failed", step, s)
					}
					model = slices.DeleteFunc(model, func(it Item) bool { return it.Slot == s })
					delete(in, s)
					continue
				}
				// Mostly newer keys, as tasks arrive; some anywhere.
				k := float64(step)
				if rng.IntN(3) == 0 {
					k = float64(rng.IntN(tc.keys))
				}
				it := Item{k, s}
				x.Insert(it, less)
				i, _ := slices.BinarySearchFunc(model, it, func(a, b Item) int {
					if less(a, b) {
						return -1
					}
					return 1
				})
				model = slices.Insert(model, i, it)
				in[s] = k
				if step%50 != 0 {
					continue
				}
				var got []Item
				for c := x.Newest(); ; c.Next() {
					it, ok := c.Peek()
					if !ok {
						break
					}
					got = append(got, it)
				}
				slices.Reverse(got)
				if diff := cmp.Diff(model, got, cmp.AllowUnexported(Item{})); diff != "" || x.n != len(model) {
					t.Fatalf("step %d: n %d, model %d (-want +got):\n%s", step, x.n, len(model), diff)
				}
				for _, h := range x.blocks {
					b := x.pool[h]
					if b.len() == 0 || b.len() > blockSize || len(b.slots) != b.len() {
						t.Fatalf("step %d: block of %d items", step, b.len())
					}
				}
			}
		})
	}
}
