package state

import "hash/maphash"

// idTable finds the slot of a canonical task id. It is an open-addressing
// table of slot numbers with linear probing; the ids themselves stay in
// the slots. A Go map[[16]byte]uint32 costs over 40 bytes a task once its
// load factor and overflow are counted; this costs 8 to 16, which is a
// fifth of the whole record at a million tasks.
type idTable struct {
	cells []uint32 // slot+1; 0 is empty
	n     int
	mask  uint64
	seed  maphash.Seed
}

func newIDTable() idTable {
	return idTable{cells: make([]uint32, 1024), mask: 1023, seed: maphash.MakeSeed()}
}

// hash places an id. Celery's ids are random, but any client chooses the
// ids it sends: with a fixed hash, ids made to collide pile up in one
// probe run and every lookup walks it. The table's own random seed, which
// no client can learn, keeps chosen ids as spread as random ones, as it
// does for Go's maps.
func (t *idTable) hash(id *[16]byte) uint64 {
	return maphash.Bytes(t.seed, id[:])
}

func (t *idTable) get(id *[16]byte, slots *slab) (uint32, bool) {
	for h := t.hash(id) & t.mask; ; h = (h + 1) & t.mask {
		c := t.cells[h]
		if c == 0 {
			return 0, false
		}
		if slots.at(c-1).id == *id {
			return c - 1, true
		}
	}
}

// put adds slot i, whose id is not in the table.
func (t *idTable) put(i uint32, slots *slab) {
	if (t.n+1)*2 > len(t.cells) {
		t.grow(slots)
	}
	t.n++
	t.insert(i, slots)
}

func (t *idTable) insert(i uint32, slots *slab) {
	for h := t.hash(&slots.at(i).id) & t.mask; ; h = (h + 1) & t.mask {
		if t.cells[h] == 0 {
			t.cells[h] = i + 1
			return
		}
	}
}

func (t *idTable) grow(slots *slab) {
	old := t.cells
	t.cells = make([]uint32, 2*len(old))
	t.mask = uint64(len(t.cells) - 1)
	for _, c := range old {
		if c != 0 {
			t.insert(c-1, slots)
		}
	}
}

// remove takes out slot i (which must be in the table) while its id is
// still in the slot. Later cells of the probe run shift back into the
// hole, so lookups need no tombstones.
func (t *idTable) remove(i uint32, slots *slab) {
	h := t.hash(&slots.at(i).id) & t.mask
	for t.cells[h] != i+1 {
		h = (h + 1) & t.mask
	}
	t.n--
	hole := h
	for j := (hole + 1) & t.mask; t.cells[j] != 0; j = (j + 1) & t.mask {
		home := t.hash(&slots.at(t.cells[j]-1).id) & t.mask
		// Move cell j into the hole unless its home lies cyclically in
		// (hole, j], where it would no longer be found.
		if (j-home)&t.mask >= (j-hole)&t.mask {
			t.cells[hole] = t.cells[j]
			hole = j
		}
	}
	t.cells[hole] = 0
}
