package taskrec

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestIDTableAgainstMap adds and removes random and clustered ids, many
// colliding in the table, and checks every lookup against a Go map.
func TestIDTableAgainstMap(t *testing.T) {
	const slots = 5000
	var sl Slab
	sl.Ensure(slots - 1)
	tab := NewIDTable()
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
		s := sl.At(i)
		if s.Live() {
			tab.Remove(i, &sl)
			delete(model, *sl.ID(i))
			s.Set = 0
		} else {
			id := idOf(step)
			if _, dup := model[id]; dup {
				continue
			}
			*sl.ID(i), s.Set = id, SlotLive
			tab.Put(i, &sl)
			model[id] = i
		}
		if step%500 != 0 {
			continue
		}
		if tab.n != len(model) {
			t.Fatalf("step %d: table holds %d, want %d", step, tab.n, len(model))
		}
		for id, want := range model {
			if got, ok := tab.Get(&id, &sl); !ok || got != want {
				t.Fatalf("step %d: get = %d, %v; want %d", step, got, ok, want)
			}
		}
		missing := idOf(step + 1)
		if _, ok := model[missing]; !ok {
			if _, ok := tab.Get(&missing, &sl); ok {
				t.Fatalf("step %d: found an id never added", step)
			}
		}
	}
}

// floodIDs are n ids in the shape that collided in one bucket under the
// table's former fixed hash: the first eight bytes vary, the last eight
// are fixed.
func floodIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-%04x-%04x-4feb-d4273daeb2c2", i*2654435761%(1<<32), i%65536, (i/65536)%65536)
	}
	return ids
}

// TestIDTableResistsFlooding adds ids a client can choose freely, all of
// a shape that shares half its bytes, and counts the cells each lookup
// probes: a seeded hash spreads them as it spreads random ids, a fixed
// one let a client pile them on one probe run (n/2 probes on average).
func TestIDTableResistsFlooding(t *testing.T) {
	const n = 20000
	var sl Slab
	sl.Ensure(n - 1)
	tab := NewIDTable()
	for i, text := range floodIDs(n) {
		id, ok := ParseUUID(text)
		if !ok {
			t.Fatalf("%s is not a canonical uuid", text)
		}
		s := sl.At(uint32(i))
		*sl.ID(uint32(i)), s.Set = id, SlotLive
		tab.Put(uint32(i), &sl)
	}
	total, longest := 0, 0
	for i := range n {
		id := *sl.ID(uint32(i))
		p := tab.probes(&id, &sl)
		total += p
		longest = max(longest, p)
	}
	// Linear probing at a load of at most a half averages 1.5 probes for
	// a hit; a run of 200 has a probability far below 1e-30.
	if avg := float64(total) / n; avg > 3 || longest > 200 {
		t.Errorf("lookups of %d crafted ids probe %.1f cells on average, %d at most; want about 1.5", n, avg, longest)
	}
}

// probes counts the cells a lookup of id visits.
func (t *IDTable) probes(id *[16]byte, slots *Slab) int {
	n := 1
	for h := t.hash(id) & t.mask; ; h = (h + 1) & t.mask {
		c := t.cells[h]
		if c == 0 || *slots.ID(c - 1) == *id {
			return n
		}
		n++
	}
}
