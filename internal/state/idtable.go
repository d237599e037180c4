package state

import (
	"encoding/binary"
	"math/bits"
)

// idTable finds the slot of a canonical task id. It is an open-addressing
// table of slot numbers with linear probing; the ids themselves stay in
// the slots. A Go map[[16]byte]uint32 costs over 40 bytes a task once its
// load factor and overflow are counted; this costs 8 to 16, which is a
// fifth of the whole record at a million tasks.
type idTable struct {
	cells []uint32 // slot+1; 0 is empty
	n     int
	mask  uint64
}

func newIDTable() idTable {
	return idTable{cells: make([]uint32, 1024), mask: 1023}
}

// hashID mixes the id's two halves: Celery's ids are random, but nothing
// forces a client to send random ones.
func hashID(id *[16]byte) uint64 {
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(id[:8])^0x9e3779b97f4a7c15, binary.LittleEndian.Uint64(id[8:])^0xc2b2ae3d27d4eb4f)
	return hi ^ lo
}

func (t *idTable) get(id *[16]byte, slots *slab) (uint32, bool) {
	for h := hashID(id) & t.mask; ; h = (h + 1) & t.mask {
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
	for h := hashID(&slots.at(i).id) & t.mask; ; h = (h + 1) & t.mask {
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
	h := hashID(&slots.at(i).id) & t.mask
	for t.cells[h] != i+1 {
		h = (h + 1) & t.mask
	}
	t.n--
	hole := h
	for j := (hole + 1) & t.mask; t.cells[j] != 0; j = (j + 1) & t.mask {
		home := hashID(&slots.at(t.cells[j]-1).id) & t.mask
		// Move cell j into the hole unless its home lies cyclically in
		// (hole, j], where it would no longer be found.
		if (j-home)&t.mask >= (j-hole)&t.mask {
			t.cells[hole] = t.cells[j]
			hole = j
		}
	}
	t.cells[hole] = 0
}
