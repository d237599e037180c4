package tasksearch

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// A search for a piece of a task id (the search box users paste ids into)
// matches one task in a million, and checking each record in turn costs a
// view of it, hundreds of milliseconds at that size. The candidates for an
// unqualified term are found instead by scanning what holds the searched
// fields contiguously: the ids in the slots, as nibble patterns; name,
// worker and state as symbols, once each; args, kwargs and result in the
// arena's chunks, for a part of the term that must appear there verbatim.
// Only the candidates are then matched as before, so the answer is the
// same; the scan only leaves out tasks that cannot match.

// maxDigestBuilds bounds the chunks' digests one search builds (about
// 0.3 ms of CPU each) under the read lock. A million tasks' arena is about
// 400 chunks: the first search builds them all, once, so that one slow
// search is all there is (a few slower ones queue the searches behind
// them, and show in the tail); a larger arena shares them among the first
// few searches, and the writer never waits for one search building all.
const maxDigestBuilds = 512

// maxCandidates bounds the candidates kept: a term found in more tasks
// than that is one that the walk, stopping at the page's end, finds soon
// enough among the newest.
const maxCandidates = 1 << 12

// candidateScan finds the candidates of one unqualified search term.
type candidateScan struct {
	term string // folded
	// anchor is the longest run of the term's digits and hyphens, which no
	// other character folds to (see TestAnchorBytesFoldOnlyFromThemselves):
	// a field whose folded text holds the term holds the anchor as it is.
	// rarest shortens it.
	anchor []byte
	at     int // the anchor's offset in the term
	// run is the term's longest run of hex digits and hyphens, which a
	// chunk's digest can rule out (taskrec.Grams) when it is long enough.
	run []byte
	// upper is set for a term without digits or hyphens: its anchor is
	// then one of its letters that only themselves fold to (isLetterAnchor),
	// found in either case, upper being the other.
	upper []byte
	// pats are the term as nibbles of a canonical id, one for each place
	// it can take in the id's text.
	pats []idPattern
}

type idPattern struct{ mask, val [2]uint64 }

// newCandidateScan returns a scan for the first term of e that one can
// serve (e itself, or a term that e ANDs), or nil.
func newCandidateScan(e expr) *candidateScan {
	switch x := e.(type) {
	case term:
		return scanFor(x)
	case andExpr:
		for _, m := range x {
			if t, ok := m.(term); ok {
				if c := scanFor(t); c != nil {
					return c
				}
			}
		}
	}
	return nil
}

func scanFor(t term) *candidateScan {
	if t.field != "" {
		return nil
	}
	v := t.value
	for i := 0; i < len(v); i++ {
		// Only printable ASCII: a NUL may span fields (see term.match), and
		// other characters fold from more than themselves.
		if v[i] < 0x20 || v[i] >= 0x7f {
			return nil
		}
	}
	var run []byte
	if best, end := longestRun(v, taskrec.IsGramByte); end-best >= taskrec.GramLen {
		run = []byte(v[best:end])
	}
	if best, end := longestRun(v, isAnchorByte); end > best {
		return &candidateScan{term: v, anchor: []byte(v[best:end]), at: best, run: run, pats: idPatterns(v)}
	}
	for i := 0; i < len(v); i++ {
		if isLetterAnchor(v[i]) {
			return &candidateScan{term: v, anchor: []byte{v[i]}, at: i, upper: []byte{v[i] - 'a' + 'A'}, run: run, pats: idPatterns(v)}
		}
	}
	return nil
}

// longestRun returns where v's longest run of bytes that in holds starts
// and ends; end == start when there is none.
func longestRun(v string, in func(byte) bool) (start, end int) {
	from := 0
	for i := 0; i < len(v); i++ {
		if !in(v[i]) {
			from = i + 1
		} else if i+1-from > end-start {
			start, end = from, i+1
		}
	}
	return start, end
}

func isAnchorByte(c byte) bool { return c == '-' || '0' <= c && c <= '9' }

// isLetterAnchor: the lowercase letters that no character beyond ASCII
// folds to text containing (TestAnchorBytesFoldOnlyFromThemselves).
func isLetterAnchor(c byte) bool { return strings.IndexByte("bcdegmopqruvxz", c) >= 0 }

// idPatterns returns the term as nibble masks and values over the 16 bytes
// of a canonical id, one for each offset of the id's text (8-4-4-4-12
// lowercase hex) at which the term's hyphens and hex digits line up.
func idPatterns(v string) []idPattern {
	var pats []idPattern
	for p := 0; p+len(v) <= 36; p++ {
		var mask, val [16]byte
		ok := true
		for j := 0; j < len(v) && ok; j++ {
			q := p + j
			if q == 8 || q == 13 || q == 18 || q == 23 {
				ok = v[j] == '-'
				continue
			}
			d, hex := taskrec.LowerHex(v[j])
			if !hex {
				ok = false
				break
			}
			nib := q
			for _, h := range [...]int{8, 13, 18, 23} {
				if q > h {
					nib--
				}
			}
			if nib%2 == 0 {
				mask[nib/2] |= 0xf0
				val[nib/2] |= d << 4
			} else {
				mask[nib/2] |= 0x0f
				val[nib/2] |= d
			}
		}
		if ok {
			pats = append(pats, idPattern{
				mask: [2]uint64{binary.LittleEndian.Uint64(mask[:8]), binary.LittleEndian.Uint64(mask[8:])},
				val:  [2]uint64{binary.LittleEndian.Uint64(val[:8]), binary.LittleEndian.Uint64(val[8:])},
			})
		}
	}
	return pats
}

// Records are what Candidates scans: a table's slots, arena and symbols,
// and its ids that are not canonical uuids, by slot.
type Records struct {
	Slots   *taskrec.Slab
	Arena   *taskrec.Arena
	Symbols *taskrec.Symbols
	TextIDs map[uint32]string
}

// Candidates returns the slots of the live records that may match the
// search, unordered and without repeats, when its first term that a scan
// can serve (the search itself, or a term it ANDs) is found in at most
// maxCandidates; false when there is no such term or more tasks hold it.
// The caller holds the table's read lock.
func (s *Search) Candidates(r Records) ([]uint32, bool) {
	if s == nil {
		return nil, false
	}
	c := newCandidateScan(s.e)
	if c == nil {
		return nil, false
	}
	return r.candidates(c)
}

// candidates returns the slots of the live tasks that may match the term,
// unordered and without repeats, or false when there are more than
// maxCandidates. The caller holds the read lock.
func (r *Records) candidates(c *candidateScan) ([]uint32, bool) {
	// A symbol is searched once, not once per task that refers to it.
	symHit := make([]bool, len(r.Symbols.Strs))
	anySym := false
	named := 0 // the live tasks of the task names that hold the term
	for id, str := range r.Symbols.Strs {
		symHit[id] = str != "" && pyfmt.ContainsFold(str, c.term)
		anySym = anySym || symHit[id]
		if symHit[id] {
			named += int(r.Symbols.Named[id])
		}
	}
	if named > maxCandidates {
		// A piece of a task name: the walk finds its page among the newest.
		return nil, false
	}
	// The arena's scans need the anchor's rarest byte, from a sample of
	// the arena (100-500 µs at a million tasks): taken once, by the first
	// goroutine with a chunk to scan. The digests leave few such chunks.
	rarest := sync.OnceFunc(func() { c.rarest(r.Arena) })
	nslots := len(r.Slots.Pages) << taskrec.PageBits
	var found, builds atomic.Int64
	parts := min(runtime.GOMAXPROCS(0), max(nslots>>16, 1))
	lists := make([][]uint32, 2*parts+1)
	if !anySym {
		lists[2*parts] = r.textIDsHolding(c, &found)
	}
	// A goroutine a core, each scanning its share of the slots and then of
	// the arena: a term that too many names or ids hold (a task name) is
	// given up on before the arena, the larger scan, begins; with a
	// goroutine for each, the arena's could take every core first.
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			if anySym {
				lists[p] = r.scanSlots(c, symHit, nslots*p/parts, nslots*(p+1)/parts, &found)
			} else if len(c.pats) > 0 {
				lists[p] = r.scanIDs(c, nslots*p/parts, nslots*(p+1)/parts, &found)
			}
			if found.Load() > maxCandidates {
				return
			}
			lists[parts+p] = r.scanArena(c, p, parts, &found, &builds, rarest)
		})
	}
	wg.Wait()
	if found.Load() > maxCandidates {
		return nil, false
	}
	out := slices.Concat(lists...)
	slices.Sort(out)
	return slices.Compact(out), true
}

// scanSlots returns the slots in [from, to) whose id, name, worker or
// state may match.
func (r *Records) scanSlots(c *candidateScan, symHit []bool, from, to int, found *atomic.Int64) []uint32 {
	var out []uint32
	for i := from; i < to; {
		if found.Load() > maxCandidates {
			return out
		}
		page := r.Slots.Pages[i>>taskrec.PageBits]
		end := min(to, (i>>taskrec.PageBits+1)<<taskrec.PageBits)
		for j := i & (1<<taskrec.PageBits - 1); i < end; i, j = i+1, j+1 {
			sl := &page[j]
			if !sl.Live() {
				continue
			}
			hit := symHit[sl.State] || sl.Set&taskrec.FieldName != 0 && symHit[sl.Name] ||
				sl.Set&taskrec.FieldWorker != 0 && symHit[sl.Worker]
			if !hit && sl.HasTextID() {
				hit = pyfmt.ContainsFold(r.TextIDs[uint32(i)], c.term)
			} else if !hit {
				hit = idMayHold(c.pats, &r.Slots.IDs[i>>taskrec.PageBits][j])
			}
			if hit {
				out = append(out, uint32(i))
				if found.Add(1) > maxCandidates {
					return out
				}
			}
		}
	}
	return out
}

// scanIDs returns the slots in [from, to) whose canonical id may match.
// When no name, worker or state holds the term, as for a pasted id, only
// the ids are read, 16 contiguous bytes a slot, and the slot itself only
// where one matches.
func (r *Records) scanIDs(c *candidateScan, from, to int, found *atomic.Int64) []uint32 {
	var out []uint32
	pats := c.pats
	for i := from; i < to; {
		if found.Load() > maxCandidates {
			return out
		}
		page, ids := r.Slots.Pages[i>>taskrec.PageBits], r.Slots.IDs[i>>taskrec.PageBits]
		base := i &^ (1<<taskrec.PageBits - 1)
		end := min(to, base+1<<taskrec.PageBits)
		for j := range ids[i-base : end-base] {
			if !idMayHold(pats, &ids[i-base+j]) {
				continue
			}
			// A free slot or one whose id is text may hold any bytes.
			if sl := &page[i-base+j]; sl.Live() && !sl.HasTextID() {
				out = append(out, uint32(i+j))
				if found.Add(1) > maxCandidates {
					return out
				}
			}
		}
		i = end
	}
	return out
}

// idMayHold reports whether a canonical id's bytes match one of pats.
func idMayHold(pats []idPattern, id *[16]byte) bool {
	lo, hi := binary.LittleEndian.Uint64(id[:8]), binary.LittleEndian.Uint64(id[8:])
	for k := range pats {
		if lo&pats[k].mask[0] == pats[k].val[0] && hi&pats[k].mask[1] == pats[k].val[1] {
			return true
		}
	}
	return false
}

// textIDsHolding returns the live slots whose id, kept as text, holds the
// term.
func (r *Records) textIDsHolding(c *candidateScan, found *atomic.Int64) []uint32 {
	var out []uint32
	for slot, id := range r.TextIDs {
		if pyfmt.ContainsFold(id, c.term) && r.Slots.At(slot).Live() {
			out = append(out, slot)
			if found.Add(1) > maxCandidates {
				return out
			}
		}
	}
	return out
}

// scanArena returns the slots whose current record, in the chunks of
// part p of parts, holds the anchor; builds counts the digests the
// search's goroutines built, and rarest sets the anchor before the first
// chunk is scanned.
func (r *Records) scanArena(c *candidateScan, p, parts int, found, builds *atomic.Int64, rarest func()) []uint32 {
	var out []uint32
	a := r.Arena
	nslots := uint32(len(r.Slots.Pages) << taskrec.PageBits)
	for ci := p; ci < len(a.Chunks); ci += parts {
		ch := a.Chunks[ci]
		if ch == nil {
			continue
		}
		if found.Load() > maxCandidates {
			// The other scans found too many already.
			return out
		}
		if c.run != nil {
			g := a.Grams(ci)
			if g == nil && a.Sealed(ci) && builds.Add(1) <= maxDigestBuilds {
				g = a.BuildGrams(ci)
			}
			if g != nil && !g.MayHold(c.run) {
				continue
			}
		}
		rarest()
		for _, anchor := range [2][]byte{c.anchor, c.upper} {
			if anchor == nil {
				continue
			}
			var ok bool
			if out, ok = r.scanChunk(c, anchor, ci, nslots, out, found); !ok {
				return out
			}
		}
	}
	return out
}

// scanChunk appends to out the slots whose current record in chunk ci
// holds anchor; false when there are too many candidates.
func (r *Records) scanChunk(c *candidateScan, anchor []byte, ci int, nslots uint32, out []uint32, found *atomic.Int64) ([]uint32, bool) {
	a := r.Arena
	data := a.Chunks[ci].Data
	rec := 0 // the start of the record that holds the next hit, or before it
	for off := 0; off < len(data); {
		k := bytes.Index(data[off:], anchor)
		if k < 0 {
			break
		}
		hit := off + k
		if !c.around(data, hit) {
			off = hit + 1
			continue
		}
		slot, _, size := a.Record(taskrec.MakeRef(ci, rec))
		for rec+size <= hit {
			rec += size
			slot, _, size = a.Record(taskrec.MakeRef(ci, rec))
		}
		if slot < nslots {
			if sl := r.Slots.At(slot); sl.Live() && sl.Cold == taskrec.MakeRef(ci, rec) {
				out = append(out, slot)
				if found.Add(1) > maxCandidates {
					return out, false
				}
			}
		}
		// The rest of this record is a candidate already.
		rec += size
		off = rec
	}
	return out, true
}

// rarest shortens the anchor to start at its byte that is rarest in a
// sample of the arena. bytes.Index looks for an anchor's first byte and
// then compares the rest at each place it finds it: a digit as common as
// another five times over costs five times as much. around checks the
// bytes left out. A letter anchor moves to the term's letter rarest in
// either case.
func (c *candidateScan) rarest(a *taskrec.Arena) {
	var n [256]int
	step := max(len(a.Chunks)/16, 1)
	for i := 0; i < len(a.Chunks); i += step {
		if ch := a.Chunks[i]; ch != nil {
			for _, b := range ch.Data[:min(len(ch.Data), 16<<10)] {
				n[b]++
			}
		}
	}
	if c.upper != nil {
		for i := 0; i < len(c.term); i++ {
			l := c.term[i]
			if isLetterAnchor(l) && n[l]+n[l-'a'+'A'] < n[c.anchor[0]]+n[c.upper[0]] {
				c.anchor, c.upper, c.at = []byte{l}, []byte{l - 'a' + 'A'}, i
			}
		}
		return
	}
	k := 0
	for i, b := range c.anchor {
		if n[b] < n[c.anchor[k]] {
			k = i
		}
	}
	c.anchor, c.at = c.anchor[k:], c.at+k
}

// around reports whether the anchor found at data[hit:] may be part of
// the term. The term's characters next to the anchor come from the
// characters next to it in the field: from the anchor outwards, each
// ASCII one as itself up to case, until one of the few others that fold
// to text with ASCII in it (asciiFolds).
func (c *candidateScan) around(data []byte, hit int) bool {
	for i, j := c.at-1, hit-1; i >= 0; i, j = i-1, j-1 {
		if j < 0 {
			return true
		}
		if data[j] >= utf8.RuneSelf {
			r, _ := utf8.DecodeLastRune(data[:j+1])
			return foldsToASCII(r)
		}
		if lower(data[j]) != c.term[i] {
			return false
		}
	}
	for i, j := c.at+len(c.anchor), hit+len(c.anchor); i < len(c.term); i, j = i+1, j+1 {
		if j >= len(data) {
			return true
		}
		if data[j] >= utf8.RuneSelf {
			r, _ := utf8.DecodeRune(data[j:])
			return foldsToASCII(r)
		}
		if lower(data[j]) != c.term[i] {
			return false
		}
	}
	return true
}

// asciiFolds are the characters beyond ASCII whose casefolded form holds
// ASCII (TestAnchorBytesFoldOnlyFromThemselves checks the list).
var asciiFolds = [...]rune{0xdf, 0x130, 0x149, 0x17f, 0x1f0, 0x1e96, 0x1e97, 0x1e98, 0x1e99, 0x1e9a, 0x1e9e, 0x212a,
	0xfb00, 0xfb01, 0xfb02, 0xfb03, 0xfb04, 0xfb05, 0xfb06}

func foldsToASCII(r rune) bool {
	for _, a := range asciiFolds {
		if r == a {
			return true
		}
	}
	return false
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}
