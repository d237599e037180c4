package state

import "slices"

// item is one task in an index: its order key (the timestamp) and its slot.
type item struct {
	key  float64
	slot uint32
}

// blockSize bounds a block of an index. Inserting moves at most this many
// 16-byte items, and a block filled by appends is full, so the index costs
// close to 16 bytes a task.
const blockSize = 256

// index keeps a set of tasks sorted by (key, id) ascending, so that
// GET /api/tasks reads its newest-first pages from the end. It is a list
// of sorted blocks rather than a tree: tasks arrive in time order, which
// makes nearly every insert an append to the last block, and the items
// hold no pointers, so a million of them cost the garbage collector
// nothing to scan.
type index struct {
	blocks [][]item
	n      int
}

// less orders two items; ties on the key go by task id.
type lessFunc func(a, b item) bool

// find returns the block that holds, or would hold, it.
func (x *index) find(it item, less lessFunc) int {
	// The first block whose last item is not before it.
	i, _ := slices.BinarySearchFunc(x.blocks, it, func(b []item, t item) int {
		if less(b[len(b)-1], t) {
			return -1
		}
		return 1
	})
	return min(i, len(x.blocks)-1)
}

func position(b []item, it item, less lessFunc) int {
	i, _ := slices.BinarySearchFunc(b, it, func(e, t item) int {
		if less(e, t) {
			return -1
		}
		return 1
	})
	return i
}

func (x *index) insert(it item, less lessFunc) {
	x.n++
	if len(x.blocks) == 0 {
		// Small at first: the indexes of passing states (RECEIVED,
		// STARTED) empty and refill all the time.
		x.blocks = append(x.blocks, append(make([]item, 0, 4), it))
		return
	}
	bi := x.find(it, less)
	b := x.blocks[bi]
	pos := position(b, it, less)
	if len(b) < blockSize {
		x.blocks[bi] = slices.Insert(b, pos, it)
		return
	}
	if pos == len(b) && bi == len(x.blocks)-1 {
		// The common case, a task newer than all: a fresh block keeps the
		// full one full.
		x.blocks = append(x.blocks, append(make([]item, 0, blockSize), it))
		return
	}
	// Split the full block in two halves, then insert in the right one.
	right := append(make([]item, 0, blockSize), b[blockSize/2:]...)
	left := b[:blockSize/2]
	x.blocks[bi] = left
	x.blocks = slices.Insert(x.blocks, bi+1, right)
	if pos <= len(left) {
		x.blocks[bi] = slices.Insert(left, pos, it)
	} else {
		x.blocks[bi+1] = slices.Insert(right, pos-len(left), it)
	}
}

// remove takes it out; it must be in the index with exactly that key.
func (x *index) remove(it item, less lessFunc) bool {
	if len(x.blocks) == 0 {
		return false
	}
	bi := x.find(it, less)
	b := x.blocks[bi]
	pos := position(b, it, less)
	if pos == len(b) || b[pos] != it {
		return false
	}
	x.n--
	b = slices.Delete(b, pos, pos+1)
	x.blocks[bi] = b
	switch {
	case len(b) == 0:
		x.blocks = slices.Delete(x.blocks, bi, bi+1)
	case len(b) < blockSize/4 && bi+1 < len(x.blocks) && len(b)+len(x.blocks[bi+1]) <= blockSize:
		// Merge a sparse block into its neighbour so that deletes, which
		// eviction makes as common as inserts, do not leave the index
		// mostly empty blocks.
		x.blocks[bi] = append(b, x.blocks[bi+1]...)
		x.blocks = slices.Delete(x.blocks, bi+1, bi+2)
	}
	return true
}

// cursor walks an index from the newest item to the oldest.
type cursor struct {
	x     *index
	bi, i int
}

func (x *index) newest() cursor {
	c := cursor{x: x, bi: len(x.blocks) - 1}
	if c.bi >= 0 {
		c.i = len(x.blocks[c.bi]) - 1
	}
	return c
}

// peek returns the current item; ok is false past the oldest.
func (c *cursor) peek() (item, bool) {
	if c.bi < 0 {
		return item{}, false
	}
	return c.x.blocks[c.bi][c.i], true
}

func (c *cursor) next() {
	c.i--
	if c.i < 0 {
		c.bi--
		if c.bi >= 0 {
			c.i = len(c.x.blocks[c.bi]) - 1
		}
	}
}

// pos is a position in an index: block and item. The end of the index is
// {len(blocks), 0}.
type pos struct{ bi, i int }

// bound returns the position of the first item whose key is at least key
// (after false) or greater than key (after true), ids aside.
func (x *index) bound(key float64, after bool) pos {
	below := func(k float64) bool { return k < key || after && k == key }
	bi, _ := slices.BinarySearchFunc(x.blocks, key, func(b []item, _ float64) int {
		if below(b[len(b)-1].key) {
			return -1
		}
		return 1
	})
	if bi == len(x.blocks) {
		return pos{bi, 0}
	}
	i, _ := slices.BinarySearchFunc(x.blocks[bi], key, func(e item, _ float64) int {
		if below(e.key) {
			return -1
		}
		return 1
	})
	return pos{bi, i}
}

// count is the number of items from p up to, not including, q.
func (x *index) count(p, q pos) int {
	switch {
	case p.bi > q.bi:
		return 0
	case p.bi == q.bi:
		return max(q.i-p.i, 0)
	}
	n := len(x.blocks[p.bi]) - p.i
	for bi := p.bi + 1; bi < q.bi && bi < len(x.blocks); bi++ {
		n += len(x.blocks[bi])
	}
	return n + q.i
}

// walk calls fn with the items from p up to, not including, q, forward or
// backward, until fn returns false.
func (x *index) walk(p, q pos, backward bool, fn func(item) bool) {
	if !backward {
		for bi, i := p.bi, p.i; bi < q.bi || bi == q.bi && i < q.i; {
			if i >= len(x.blocks[bi]) {
				bi, i = bi+1, 0
				continue
			}
			if !fn(x.blocks[bi][i]) {
				return
			}
			i++
		}
		return
	}
	bi, i := q.bi, q.i-1
	for bi > p.bi || bi == p.bi && i >= p.i {
		if i < 0 {
			bi--
			if bi >= 0 {
				i = len(x.blocks[bi]) - 1
			}
			continue
		}
		if !fn(x.blocks[bi][i]) {
			return
		}
		i--
	}
}

// all is the whole index, for walk.
func (x *index) all() (pos, pos) { return pos{}, pos{len(x.blocks), 0} }
