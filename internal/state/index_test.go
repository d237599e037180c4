package state

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
	less := func(a, b item) bool { return a.key < b.key || a.key == b.key && a.slot < b.slot }
	for _, tc := range []struct {
		name string
		keys int // distinct keys: few means many ties
	}{{"ties", 7}, {"spread", 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.keys)))
			var x index
			var model []item
			in := map[uint32]float64{}
			for step := range 20000 {
				s := uint32(rng.IntN(1500))
				if k, ok := in[s]; ok {
					if !x.remove(item{k, s}, less) {
						t.Fatalf("step %d: remove of %d failed", step, s)
					}
					model = slices.DeleteFunc(model, func(it item) bool { return it.slot == s })
					delete(in, s)
					continue
				}
				// Mostly newer keys, as tasks arrive; some anywhere.
				k := float64(step)
				if rng.IntN(3) == 0 {
					k = float64(rng.IntN(tc.keys))
				}
				it := item{k, s}
				x.insert(it, less)
				i, _ := slices.BinarySearchFunc(model, it, func(a, b item) int {
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
				var got []item
				for c := x.newest(); ; c.next() {
					it, ok := c.peek()
					if !ok {
						break
					}
					got = append(got, it)
				}
				slices.Reverse(got)
				if diff := cmp.Diff(model, got, cmp.AllowUnexported(item{})); diff != "" || x.n != len(model) {
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
