package state

import (
	"bytes"
	"cmp"
	"runtime"
	"strings"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// selectChunk is how many tasks a sorted page examines per read lock. A
// page sorted by name, state or started has to look at every match; at a
// million tasks that held one read lock for about 28 ms, which ingestion,
// and every reader queued behind its waiting write lock, waited for.
// 16,384 tasks take about half a millisecond. A variable so that tests
// can make chunks of a few tasks.
var selectChunk = 16384

// chunkGap, when set, is called while a chunked selection has released
// the lock, so that tests can change the state between two chunks.
var chunkGap func()

// minChunkedChunks is how many chunks' worth of candidates a sorted page
// must have (the tasks of the indexes it would walk) to be selected in
// chunks. Under one lock a page reads only its candidates, in chunks it
// reads every task: at a million tasks, a page of the 100,000 failures
// took 2.2 ms under one lock and 9.2 ms in chunks (BenchmarkTasksMillion,
// sort_by=name+state=FAILURE); at that rate 131,072 candidates hold one
// lock for about 3 ms.
const minChunkedChunks = 8

// maxChunkedPage bounds offset+limit for a chunked selection: it keeps
// that many keys, each holding its strings, where one lock keeps 16-byte
// keys. Deeper pages select under one lock, as before.
const maxChunkedPage = 10_000

// stableKey is a sortKey that survives the lock being released: slots
// and symbols are freed and reused by ingestion, so it holds the task's
// sequence number, the folded name or state itself and the id's bytes.
type stableKey struct {
	has  bool
	num  float64
	str  string // the folded name or state
	uuid [16]byte
	// text is the id when it is not a canonical uuid (isText).
	text   string
	isText bool
	seq    uint64
}

// stableKeyOf is keyOf for a key kept across locks.
func (s *State) stableKeyOf(i uint32, field string, v *view) stableKey {
	k := s.keyOf(i, field, v)
	sk := stableKey{has: k.val != 0, num: k.num, seq: s.seqOf(i)}
	if k.val != 0 && (field == "name" || field == "state") {
		sk.str = s.sym.Str(k.val - 1)
	}
	if sl := s.slots.At(i); sl.HasTextID() {
		sk.text, sk.isText = s.textIDs[i], true
	} else {
		sk.uuid = *s.slots.ID(i)
	}
	return sk
}

// compareStable orders stable keys as compareKeys orders sortKeys.
func compareStable(a, b stableKey) int {
	if a.has != b.has {
		if a.has {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(a.num, b.num); c != 0 {
		return c
	}
	if c := strings.Compare(a.str, b.str); c != 0 {
		return c
	}
	if !a.isText && !b.isText {
		return bytes.Compare(a.uuid[:], b.uuid[:])
	}
	return strings.Compare(a.id(), b.id())
}

// id is the task id as compareIDs compares it: a canonical uuid's bytes
// order as its text does, so only a mixed pair is formatted.
func (k *stableKey) id() string {
	if k.isText {
		return k.text
	}
	return taskrec.FormatUUID(k.uuid)
}

// sortedInChunks selects a sorted page as plan does, reading selectChunk
// tasks per read lock and releasing the lock between chunks: first the
// tasks there were when it began, newest first, then those created since,
// until none is left to read. The caller holds the read lock; it is held
// again on return.
//
// Each task is judged as it was when its chunk was read; the tasks kept
// for the page are judged again at the end, and dropped if they are gone
// or no longer match, re-sorted if their key changed. When the page may
// then be missing tasks that the kept ones pushed out (a kept task was
// dropped or moved later while more tasks matched than were kept), it
// reports false, and the caller selects under one lock. Under ingestion
// that is common for a page by state ascending, which lists the newest
// tasks while they move on (RECEIVED, STARTED, SUCCESS): such a page
// costs a chunked pass more than it did, and holds the one lock as long.
func (s *State) sortedInChunks(p *plan) ([]uint64, bool) {
	f, field := p.f, p.spec.field
	order := compareStable
	if p.spec.desc {
		order = func(a, b stableKey) int { return compareStable(b, a) }
	}
	top := &keyHeap[stableKey]{order: order, max: p.offset + p.limit}
	matched := 0
	// examine offers the matches among the tasks numbered from to to-1.
	examine := func(from, to uint64) {
		if !f.resolve(&s.sym) {
			return // the symbols of a filter are gone: nothing matches
		}
		for seq := from; seq < to; seq++ {
			i, ok := s.liveSlot(seq)
			if !ok || !s.match(f, i) {
				continue
			}
			matched++
			top.offer(s.stableKeyOf(i, field, &f.v))
		}
	}
	began := s.created
	s.chunksDown(began, examine)
	// A chunk that finds no task created since its lock was taken ends
	// the selection under that lock.
	for next := began; next < s.created; {
		s.unlocked(runtime.Gosched)
		next = max(next, s.oldest())
		to := min(s.created, next+uint64(selectChunk))
		examine(next, to)
		next = to
	}

	resolved := f.resolve(&s.sym)
	kept := top.keys[:0]
	complete := true
	for _, k := range top.keys {
		i, ok := s.liveSlot(k.seq)
		if !ok || !resolved || !s.match(f, i) {
			complete = false
			continue
		}
		now := s.stableKeyOf(i, field, &f.v)
		if order(now, k) > 0 {
			complete = false
		}
		kept = append(kept, now)
	}
	if !complete && matched > top.max {
		return nil, false
	}
	top.keys = kept
	keys := top.sorted()
	out := []uint64{}
	if p.offset >= len(keys) {
		return out, true
	}
	keys = keys[p.offset:]
	keys = keys[:min(p.limit, len(keys))]
	out = make([]uint64, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.seq)
	}
	return out, true
}

// oldest is the sequence number of the oldest task the ring can hold.
func (s *State) oldest() uint64 { return s.created - min(s.created, uint64(s.maxTasks)) }

// chunksDown calls examine for the tasks numbered below began, newest
// first, selectChunk of them at a time, and releases the read lock
// between two calls; the caller holds it, and holds it again on return.
func (s *State) chunksDown(began uint64, examine func(from, to uint64)) {
	for hi := began; hi > s.oldest(); {
		from := hi - min(hi-s.oldest(), uint64(selectChunk))
		examine(from, hi)
		if hi = from; hi > s.oldest() {
			s.unlocked(runtime.Gosched)
		}
	}
}

// unlocked runs fn with the read lock released; the caller holds it, and
// holds it again on return.
func (s *State) unlocked(fn func()) {
	s.mu.RUnlock()
	defer s.mu.RLock()
	if chunkGap != nil {
		chunkGap()
	}
	fn()
}
