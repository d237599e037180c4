package taskrec

import "hash/maphash"

// IDTable finds the slot of a canonical task id. It is an open-addressing
// table of slot numbers with linear probing; the ids themselves stay in
// the slots. A Go map[[16]byte]uint32 costs over 40 bytes a task once its
// load factor and overflow are counted; this costs 8 to 16, which is a
// fifth of the whole record at a million tasks.
type IDTable struct {
	cells []uint32 // slot+1; 0 is empty
	n     int
	mask  uint64
	seed  maphash.Seed
}

// NewIDTable returns an empty table.
func NewIDTable() IDTable {
	return IDTable{cells: make([]uint32, 1024), mask: 1023, seed: maphash.MakeSeed()}
}

// hash places an id. Celery's ids are random, but any client chooses the
// ids it sends: with a fixed hash, ids made to collide pile up in one
// probe run and every lookup walks it. The table's own random seed, which
// no client can learn, keeps chosen ids as spread as random ones, as it
// does for Go's maps.
// Len is the number of ids in the table.
func (t *IDTable) Len() int { return t.n }

func (t *IDTable) hash(id *[16]byte) uint64 {
	return maphash.Bytes(t.seed, id[:])
}

// Get returns the slot whose id (in slots) is id.
func (t *IDTable) Get(id *[16]byte, slots *Slab) (uint32, bool) {
	for h := t.hash(id) & t.mask; ; h = (h + 1) & t.mask {
		c := t.cells[h]
		if c == 0 {
			return 0, false
		}
		if *slots.ID(c - 1) == *id {
			return c - 1, true
		}
	}
}

// Put adds slot i, whose id is not in the table.
func (t *IDTable) Put(i uint32, slots *Slab) {
	if (t.n+1)*2 > len(t.cells) {
		t.grow(slots)
	}
	t.n++
	t.insert(i, slots)
}

func (t *IDTable) insert(i uint32, slots *Slab) {
	for h := t.hash(slots.ID(i)) & t.mask; ; h = (h + 1) & t.mask {
		if t.cells[h] == 0 {
			t.cells[h] = i + 1
			return
		}
	}
}

func (t *IDTable) grow(slots *Slab) {
	old := t.cells
	t.cells = make([]uint32, 2*len(old))
	t.mask = uint64(len(t.cells) - 1)
	for _, c := range old {
		if c != 0 {
			t.insert(c-1, slots)
		}
	}
}

// Remove takes out slot i (which must be in the table) while its id is
// still in the slot. Later cells of the probe run shift back into the
// hole, so lookups need no tombstones.
func (t *IDTable) Remove(i uint32, slots *Slab) {
	h := t.hash(slots.ID(i)) & t.mask
	for t.cells[h] != i+1 {
		h = (h + 1) & t.mask
	}
	t.n--
	hole := h
	for j := (hole + 1) & t.mask; t.cells[j] != 0; j = (j + 1) & t.mask {
		home := t.hash(slots.ID(t.cells[j]-1)) & t.mask
		// Move cell j into the hole unless its home lies cyclically in
		// (hole, j], where it would no longer be found.
		if (j-home)&t.mask >= (j-hole)&t.mask {
			t.cells[hole] = t.cells[j]
			hole = j
		}
	}
	t.cells[hole] = 0
}
