package state

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
)

// detachedKey is the sort key of one match of an unpaged list sorted by
// name, state or started, in 40 bytes. It is compared without the state,
// so that every match is sorted after the read lock is released: sorting
// a million sortKeys, whose names and ids are read from the state, held
// the lock for about a second, which ingestion and every reader queued
// behind its waiting write lock waited for.
type detachedKey struct {
	num float64 // started
	// rank is 0 for a task without the value; otherwise 1 for started,
	// or 1 + the folded name's or state's number among the selection's
	// strings, which sortDetached turns into 1 + its rank among them.
	rank uint32
	// text is 0 for a canonical uuid, else 1 + the id's index in texts.
	text uint32
	uuid [16]byte
	seq  uint64
}

// detachedSort gathers the detachedKeys of a selection.
type detachedSort struct {
	field string
	keys  []detachedKey
	strs  []string          // the folded names or states met, by number
	nums  map[string]uint32 // and their numbers
	texts []string          // the ids that are not canonical uuids
}

// add keeps the key of the task in slot i; the caller holds the read lock.
func (d *detachedSort) add(s *State, i uint32, v *view) {
	k := s.keyOf(i, d.field, v)
	dk := detachedKey{num: k.num, seq: s.seqOf(i)}
	if k.val != 0 {
		dk.rank = 1
		if d.field == "name" || d.field == "state" {
			// The symbol's number may be another string's after the
			// lock is released; the string itself is immutable.
			str := s.sym.str(k.val - 1)
			n, ok := d.nums[str]
			if !ok {
				n = uint32(len(d.strs))
				d.strs = append(d.strs, str)
				d.nums[str] = n
			}
			dk.rank = 1 + n
		}
	}
	if sl := s.slots.at(i); sl.hasTextID() {
		d.texts = append(d.texts, s.textIDs[i])
		dk.text = uint32(len(d.texts))
	} else {
		dk.uuid = sl.id
	}
	d.keys = append(d.keys, dk)
}

// sorted sorts the keys as compareKeys orders sortKeys (descending when
// desc) and returns them; it needs no lock.
func (d *detachedSort) sorted(desc bool) []detachedKey {
	if len(d.strs) > 0 {
		byString := make([]uint32, len(d.strs))
		for n := range byString {
			byString[n] = uint32(n)
		}
		slices.SortFunc(byString, func(a, b uint32) int { return strings.Compare(d.strs[a], d.strs[b]) })
		rank := make([]uint32, len(d.strs))
		for r, n := range byString {
			rank[n] = uint32(r)
		}
		for j := range d.keys {
			if k := &d.keys[j]; k.rank != 0 {
				k.rank = 1 + rank[k.rank-1]
			}
		}
	}
	order := d.compare
	if desc {
		order = func(a, b detachedKey) int { return d.compare(b, a) }
	}
	slices.SortFunc(d.keys, order)
	return d.keys
}

func (d *detachedSort) compare(a, b detachedKey) int {
	if (a.rank == 0) != (b.rank == 0) {
		if a.rank != 0 {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(a.num, b.num); c != 0 {
		return c
	}
	if c := cmp.Compare(a.rank, b.rank); c != 0 {
		return c
	}
	if a.text == 0 && b.text == 0 {
		return bytes.Compare(a.uuid[:], b.uuid[:])
	}
	return strings.Compare(d.id(a), d.id(b))
}

// id is the task id as compareIDs compares it.
func (d *detachedSort) id(k detachedKey) string {
	if k.text != 0 {
		return d.texts[k.text-1]
	}
	return formatUUID(k.uuid)
}

// sortDetached selects every match of p, sorted by name, state or
// started, and sorts them with the read lock released; the caller holds
// the lock, and holds it again on return. total is the number of
// candidates in xs, the indexes that hold every match.
//
// Over more than minChunkedChunks chunks of candidates the matches are
// gathered selectChunk tasks per read lock, newest first, from the tasks
// there were when it began: each task as it was when its chunk was read.
// That is an unpaged list's contract anyway (see TaskList): a task
// changed after its chunk was read keeps its place and is written as it
// is then, one evicted before it is written is left out.
func (s *State) sortDetached(p *plan, xs []*index, total int) []uint64 {
	d := &detachedSort{field: p.spec.field, keys: make([]detachedKey, 0, total), nums: map[string]uint32{}}
	f := p.f
	if total > minChunkedChunks*selectChunk {
		s.chunksDown(s.created, func(from, to uint64) {
			if !f.resolve(&s.sym) {
				return // the symbols of a filter are gone: nothing matches
			}
			for seq := from; seq < to; seq++ {
				if i, ok := s.liveSlot(seq); ok && s.match(f, i) {
					d.add(s, i, &f.v)
				}
			}
		})
	} else {
		s.newestFirst(xs, func(i uint32) bool {
			if s.match(f, i) {
				d.add(s, i, &f.v)
			}
			return true
		})
	}
	var out []uint64
	s.unlocked(func() {
		keys := d.sorted(p.spec.desc)
		keys = keys[min(p.offset, len(keys)):]
		out = make([]uint64, len(keys))
		for j, k := range keys {
			out[j] = k.seq
		}
	})
	return out
}
