package taskrec

import "slices"

// Item is one task in an index: its order key (the timestamp) and its slot.
type Item struct {
	Key  float64
	Slot uint32
}

// blockSize bounds a block of an index. Inserting moves at most this many
// items, and a block filled by appends is full.
const blockSize = 256

// block holds items in two arrays rather than one of items, which would
// pad each to 16 bytes: 12 bytes a task per index.
type block struct {
	keys  []float64
	slots []uint32
}

func newBlock(capacity int) *block {
	return &block{keys: make([]float64, 0, capacity), slots: make([]uint32, 0, capacity)}
}

func (b *block) len() int      { return len(b.keys) }
func (b *block) at(i int) Item { return Item{b.keys[i], b.slots[i]} }
func (b *block) last() Item    { return b.at(len(b.keys) - 1) }
func (b *block) add(it Item)   { b.keys, b.slots = append(b.keys, it.Key), append(b.slots, it.Slot) }
func (b *block) insertAt(i int, it Item) {
	b.keys, b.slots = slices.Insert(b.keys, i, it.Key), slices.Insert(b.slots, i, it.Slot)
}
func (b *block) deleteAt(i int) {
	b.keys, b.slots = slices.Delete(b.keys, i, i+1), slices.Delete(b.slots, i, i+1)
}

// Index keeps a set of tasks sorted by (key, id) ascending, so that
// GET /api/tasks reads its newest-first pages from the end. It is a list
// of sorted blocks rather than a tree: tasks arrive in time order, which
// makes nearly every insert an append to the last block, and the items
// hold no pointers, so a million of them cost the garbage collector
// nothing to scan.
//
// The list holds the blocks by number (into pool), and the oldest block
// goes by reslicing: splitting or dropping a block shifts the list under
// the state's write lock, and at a million tasks (thousands of blocks an
// index) shifting two slice headers a block, with a write barrier each
// while the collector marks, was half of ingestion's time when evictions
// and inserts met old blocks (and the readers wait for that lock).
// Numbers shift as plain memory, four bytes a block.
type Index struct {
	blocks []uint32 // in key order
	pool   []*block // by number; nil when free
	free   []uint32 // numbers of pool to reuse
	spare  []*block // emptied full-size blocks, to reuse
	n      int
}

// maxSpare bounds the emptied blocks an index keeps for reuse.
const maxSpare = 8

// Len is the number of items in the index.
func (x *Index) Len() int { return x.n }

func (x *Index) blk(bi int) *block { return x.pool[x.blocks[bi]] }

// number puts b in the pool and returns its number.
func (x *Index) number(b *block) uint32 {
	if n := len(x.free); n > 0 {
		h := x.free[n-1]
		x.free = x.free[:n-1]
		x.pool[h] = b
		return h
	}
	x.pool = append(x.pool, b)
	return uint32(len(x.pool) - 1)
}

// newBlock is an empty block of that capacity, a spare one when it fits.
func (x *Index) newBlock(capacity int) *block {
	if n := len(x.spare); n > 0 && capacity == blockSize {
		b := x.spare[n-1]
		x.spare = x.spare[:n-1]
		return b
	}
	return newBlock(capacity)
}

// less orders two items; ties on the key go by task id.
type LessFunc func(a, b Item) bool

// find returns the block that holds, or would hold, it.
func (x *Index) find(it Item, less LessFunc) int {
	// The first block whose last item is not before it.
	i, _ := slices.BinarySearchFunc(x.blocks, it, func(h uint32, t Item) int {
		if less(x.pool[h].last(), t) {
			return -1
		}
		return 1
	})
	return min(i, len(x.blocks)-1)
}

// position is where it goes in b: the first item not before it.
func (b *block) position(it Item, less LessFunc) int {
	lo, hi := 0, b.len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if less(b.at(m), it) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Insert adds it in the order of less.
func (x *Index) Insert(it Item, less LessFunc) {
	x.n++
	if len(x.blocks) == 0 {
		// Small at first: the indexes of passing states (RECEIVED,
		// STARTED) empty and refill all the time.
		b := x.newBlock(4)
		b.add(it)
		x.blocks = append(x.blocks, x.number(b))
		return
	}
	bi := x.find(it, less)
	b := x.blk(bi)
	pos := b.position(it, less)
	if b.len() < blockSize {
		b.insertAt(pos, it)
		return
	}
	if pos == b.len() && bi == len(x.blocks)-1 {
		// The common case, a task newer than all: a fresh block keeps the
		// full one full.
		nb := x.newBlock(blockSize)
		nb.add(it)
		x.blocks = append(x.blocks, x.number(nb))
		return
	}
	// Split the full block in two halves, then insert in the right one.
	right := x.newBlock(blockSize)
	right.keys = append(right.keys, b.keys[blockSize/2:]...)
	right.slots = append(right.slots, b.slots[blockSize/2:]...)
	b.keys, b.slots = b.keys[:blockSize/2], b.slots[:blockSize/2]
	if pos <= b.len() {
		b.insertAt(pos, it)
	} else {
		right.insertAt(pos-b.len(), it)
	}
	x.blocks = slices.Insert(x.blocks, bi+1, x.number(right))
}

// Remove takes it out; it must be in the index with exactly that key.
func (x *Index) Remove(it Item, less LessFunc) bool {
	if len(x.blocks) == 0 {
		return false
	}
	bi := x.find(it, less)
	b := x.blk(bi)
	pos := b.position(it, less)
	if pos == b.len() || b.at(pos) != it {
		return false
	}
	x.n--
	b.deleteAt(pos)
	if b.len() == 0 {
		x.dropBlock(bi)
		return true
	}
	// A block that fits in a neighbour joins it, so blocks stay full
	// although every event moves its task out of the newest blocks.
	if bi+1 < len(x.blocks) && x.blk(bi).len()+x.blk(bi+1).len() <= blockSize {
		x.merge(bi)
	}
	if bi > 0 && x.blk(bi-1).len()+x.blk(bi).len() <= blockSize {
		x.merge(bi - 1)
	}
	return true
}

// merge appends block bi+1 to block bi.
func (x *Index) merge(bi int) {
	b, next := x.blk(bi), x.blk(bi+1)
	if bi == 0 && b.len() < next.len() {
		// The oldest block, emptied by evictions: into the next one, so
		// that it is the first block that goes, without a shift.
		next.keys, next.slots = slices.Insert(next.keys, 0, b.keys...), slices.Insert(next.slots, 0, b.slots...)
		x.dropBlock(0)
		return
	}
	b.keys, b.slots = append(b.keys, next.keys...), append(b.slots, next.slots...)
	x.dropBlock(bi + 1)
}

// dropBlock takes block bi out of the list; the first one without moving
// the others.
func (x *Index) dropBlock(bi int) {
	h := x.blocks[bi]
	if b := x.pool[h]; cap(b.keys) == blockSize && len(x.spare) < maxSpare {
		b.keys, b.slots = b.keys[:0], b.slots[:0]
		x.spare = append(x.spare, b)
	}
	x.pool[h] = nil
	x.free = append(x.free, h)
	if bi == 0 {
		x.blocks = x.blocks[1:]
		return
	}
	x.blocks = slices.Delete(x.blocks, bi, bi+1)
}

// Cursor walks an index from the newest item to the oldest.
type Cursor struct {
	x     *Index
	bi, i int
}

// Newest returns a cursor at the newest item.
func (x *Index) Newest() Cursor {
	c := Cursor{x: x, bi: len(x.blocks) - 1}
	if c.bi >= 0 {
		c.i = x.blk(c.bi).len() - 1
	}
	return c
}

// Peek returns the current item; ok is false past the oldest.
func (c *Cursor) Peek() (Item, bool) {
	if c.bi < 0 {
		return Item{}, false
	}
	return c.x.blk(c.bi).at(c.i), true
}

// Next moves the cursor to the next older item.
func (c *Cursor) Next() {
	c.i--
	if c.i < 0 {
		c.bi--
		if c.bi >= 0 {
			c.i = c.x.blk(c.bi).len() - 1
		}
	}
}

// Pos is a position in an index: block and item. The end of the index is
// {len(blocks), 0}.
type Pos struct{ bi, i int }

// Bound returns the position of the first item whose key is at least key
// (after false) or greater than key (after true), ids aside.
func (x *Index) Bound(key float64, after bool) Pos {
	below := func(k float64) bool { return k < key || after && k == key }
	bi, _ := slices.BinarySearchFunc(x.blocks, key, func(h uint32, _ float64) int {
		if b := x.pool[h]; below(b.keys[len(b.keys)-1]) {
			return -1
		}
		return 1
	})
	if bi == len(x.blocks) {
		return Pos{bi, 0}
	}
	i, _ := slices.BinarySearchFunc(x.blk(bi).keys, key, func(k, _ float64) int {
		if below(k) {
			return -1
		}
		return 1
	})
	return Pos{bi, i}
}

// Count is the number of items from p up to, not including, q.
func (x *Index) Count(p, q Pos) int {
	switch {
	case p.bi > q.bi:
		return 0
	case p.bi == q.bi:
		return max(q.i-p.i, 0)
	}
	n := x.blk(p.bi).len() - p.i
	for bi := p.bi + 1; bi < q.bi && bi < len(x.blocks); bi++ {
		n += x.blk(bi).len()
	}
	return n + q.i
}

// Walk calls fn with the items from p up to, not including, q, forward or
// backward, until fn returns false.
func (x *Index) Walk(p, q Pos, backward bool, fn func(Item) bool) {
	if !backward {
		for bi, i := p.bi, p.i; bi < q.bi || bi == q.bi && i < q.i; {
			if i >= x.blk(bi).len() {
				bi, i = bi+1, 0
				continue
			}
			if !fn(x.blk(bi).at(i)) {
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
				i = x.blk(bi).len() - 1
			}
			continue
		}
		if !fn(x.blk(bi).at(i)) {
			return
		}
		i--
	}
}

// All is the whole index, for walk.
func (x *Index) All() (Pos, Pos) { return Pos{}, Pos{len(x.blocks), 0} }
