package state

import (
	"math/rand/v2"
	"testing"
)

// TestIDTableAgainstMap adds and removes random and clustered ids, many
// colliding in the table, and checks every lookup against a Go map.
func TestIDTableAgainstMap(t *testing.T) {
	const slots = 5000
	var sl slab
	sl.ensure(slots - 1)
	tab := newIDTable()
	model := map[[16]byte]uint32{}
	rng := rand.New(rand.NewPCG(7, 7))
	idOf := func(n int) [16]byte {
		var id [16]byte
		if n%3 == 0 { // clustered: only the last byte differs
			id[15] = byte(n)
			id[14] = byte(n >> 8)
		} else {
			for i := range id {
				id[i] = byte(rng.Uint32())
			}
		}
		return id
	}
	for step := range 40000 {
		i := uint32(rng.IntN(slots))
		s := sl.at(i)
		if s.live() {
			tab.remove(i, &sl)
			delete(model, s.id)
			s.set = 0
		} else {
			id := idOf(step)
			if _, dup := model[id]; dup {
				continue
			}
			s.id, s.set = id, slotLive
			tab.put(i, &sl)
			model[id] = i
		}
		if step%500 != 0 {
			continue
		}
		if tab.n != len(model) {
			t.Fatalf("step %d: table holds %d, want %d", step, tab.n, len(model))
		}
		for id, want := range model {
			if got, ok := tab.get(&id, &sl); !ok || got != want {
				t.Fatalf("step %d: get = %d, %v; want %d", step, got, ok, want)
			}
		}
		missing := idOf(step + 1)
		if _, ok := model[missing]; !ok {
			if _, ok := tab.get(&missing, &sl); ok {
				t.Fatalf("step %d: found an id never added", step)
			}
		}
	}
}
