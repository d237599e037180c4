package state

// order keeps the tasks sorted newest first, the default order of
// GET /api/tasks: by timestamp descending, ties by id descending. It is a
// skip list threaded through the entries, so an event moves its task in
// O(log n) and a page of the default listing costs O(offset+limit) instead
// of sorting every task on every request (Flower's cost, issue #662).
type order struct {
	head  []*entry // first entry of each level
	level int      // levels in use
	seed  uint64   // xorshift state for levels; determinism helps tests
}

// maxLevel bounds the tower height; with p = 1/4 sixteen levels stay
// logarithmic well past 4^16 entries.
const maxLevel = 16

func newOrder() order {
	return order{head: make([]*entry, maxLevel), seed: 0x9e3779b97f4a7c15}
}

// before reports whether a is listed before b.
func before(a, b *entry) bool {
	if a.key != b.key {
		return a.key > b.key
	}
	return a.t.UUID > b.t.UUID
}

func (o *order) randomLevel() int {
	level := 1
	for level < maxLevel {
		o.seed ^= o.seed << 13
		o.seed ^= o.seed >> 7
		o.seed ^= o.seed << 17
		if o.seed&3 != 0 {
			break
		}
		level++
	}
	return level
}

// predecessors fills update with, for each level, the last entry before e
// (nil meaning the head).
func (o *order) predecessors(e *entry, update *[maxLevel]*entry) {
	var x *entry
	for i := o.level - 1; i >= 0; i-- {
		next := o.head[i]
		if x != nil {
			next = x.next[i]
		}
		for next != nil && before(next, e) {
			x = next
			next = x.next[i]
		}
		update[i] = x
	}
}

// insert adds e at e.key. An entry keeps its tower height for life.
func (o *order) insert(e *entry) {
	if e.next == nil {
		e.next = make([]*entry, o.randomLevel())
	}
	var update [maxLevel]*entry
	o.predecessors(e, &update)
	o.level = max(o.level, len(e.next))
	for i := range e.next {
		if p := update[i]; p != nil {
			e.next[i], p.next[i] = p.next[i], e
		} else {
			e.next[i], o.head[i] = o.head[i], e
		}
	}
}

// remove takes e out; e.key must be the key it was inserted with.
func (o *order) remove(e *entry) {
	var update [maxLevel]*entry
	o.predecessors(e, &update)
	for i := range e.next {
		if p := update[i]; p != nil {
			if p.next[i] == e {
				p.next[i] = e.next[i]
			}
		} else if o.head[i] == e {
			o.head[i] = e.next[i]
		}
		e.next[i] = nil
	}
	for o.level > 0 && o.head[o.level-1] == nil {
		o.level--
	}
}

// move re-sorts e after its timestamp changed to key.
func (o *order) move(e *entry, key float64) {
	if e.key == key {
		return
	}
	o.remove(e)
	e.key = key
	o.insert(e)
}

// first is the newest task, nil when there is none.
func (o *order) first() *entry { return o.head[0] }
