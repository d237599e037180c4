package state

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// detachedKey is the sort key of one match of an unpaged list sorted by
// name, state or started, in 32 bytes. It is compared without the state,
// so that every match is sorted after the read lock is released: sorting
// a million sortKeys, whose names and ids are read from the state, held
// the lock for 0.4 s on an idle machine and 1 s on a loaded one, which
// ingestion and every reader queued behind its waiting write lock waited
// for. The key is small and compares
// as integers because the sort moves and compares keys some twenty
// million times at a million matches: at 40 bytes, with the id compared
// as bytes, selecting a million by name took 645 ms, against 383 ms
// (BenchmarkListMillion).
type detachedKey struct {
	// value orders as compareKeys orders the field's values: 0 for a
	// task without the value; otherwise, for a name or state, 1 + its
	// folded string's number among the selection's, which sorted turns
	// into 1 + its rank among them; for started, orderedTime's.
	value uint64
	// hi and lo are a canonical uuid's bytes, which order as its text.
	hi, lo uint64
	// seq is the task's sequence number less the selection's lowest.
	seq uint32
	// text is 0 for a canonical uuid, else 1 + the id's index in texts.
	text uint32
}

// orderedTime maps a time to a uint64 above 0 that orders as cmp.Compare
// orders the times: a NaN first, equal to any other NaN; -0 equal to 0.
func orderedTime(f float64) uint64 {
	switch {
	case f != f:
		return 1
	case f == 0:
		f = 0
	}
	b := math.Float64bits(f)
	if b>>63 == 1 {
		return ^b // negative: the greater the bits, the smaller the time
	}
	return b | 1<<63
}

// detachedSort gathers the detachedKeys of a selection.
type detachedSort struct {
	field string
	low   uint64 // the lowest sequence number a key may hold
	keys  []detachedKey
	strs  []string          // the folded names or states met, by number
	nums  map[string]uint32 // and their numbers
	texts []string          // the ids that are not canonical uuids
}

// add keeps the key of the task in slot i; the caller holds the read lock.
func (d *detachedSort) add(s *State, i uint32, v *view) {
	k := s.keyOf(i, d.field, v)
	dk := detachedKey{seq: uint32(s.seqOf(i) - d.low)}
	switch {
	case k.val == 0:
	case d.field == "started":
		dk.value = orderedTime(k.num)
	default:
		// The symbol's number may be another string's after the lock
		// is released; the string itself is immutable.
		str := s.sym.Str(k.val - 1)
		n, ok := d.nums[str]
		if !ok {
			n = uint32(len(d.strs))
			d.strs = append(d.strs, str)
			d.nums[str] = n
		}
		dk.value = 1 + uint64(n)
	}
	if sl := s.slots.At(i); sl.HasTextID() {
		d.texts = append(d.texts, s.textIDs[i])
		dk.text = uint32(len(d.texts))
	} else {
		id := s.slots.ID(i)
		dk.hi, dk.lo = binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:])
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
		rank := make([]uint64, len(d.strs))
		for r, n := range byString {
			rank[n] = uint64(r)
		}
		for j := range d.keys {
			if k := &d.keys[j]; k.value != 0 {
				k.value = 1 + rank[k.value-1]
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
	if a.value != b.value {
		return cmp.Compare(a.value, b.value)
	}
	if a.text == 0 && b.text == 0 {
		return cmp.Or(cmp.Compare(a.hi, b.hi), cmp.Compare(a.lo, b.lo))
	}
	return strings.Compare(d.id(a), d.id(b))
}

// id is the task id as compareIDs compares it.
func (d *detachedSort) id(k detachedKey) string {
	if k.text != 0 {
		return d.texts[k.text-1]
	}
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], k.hi)
	binary.BigEndian.PutUint64(id[8:], k.lo)
	return taskrec.FormatUUID(id)
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
func (s *State) sortDetached(p *plan, xs []*taskrec.Index, total int) []uint64 {
	d := &detachedSort{field: p.spec.field, low: s.oldest(), nums: map[string]uint32{}}
	f := p.f
	if total > minChunkedChunks*selectChunk {
		// Zeroing the keys of a million matches (32 MB) takes
		// milliseconds: not under the lock.
		began := s.created
		s.unlocked(func() { d.keys = make([]detachedKey, 0, total) })
		s.chunksDown(began, func(from, to uint64) {
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
		d.keys = make([]detachedKey, 0, total)
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
			out[j] = d.low + uint64(k.seq)
		}
	})
	return out
}
