package taskrec

import (
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// A task record lives in a slot: a fixed-size struct without pointers that
// holds what the indexes and filters read (order key, interned name,
// worker and state), plus a reference to the rest of the record packed
// into an arena; its id lies beside it, in the slab's id pages. Slots are reused in a ring, so the slot of
// the n-th task created is n mod MaxTasks and eviction of the oldest task
// is the reuse of its slot. Nothing here holds a Go pointer per task: at a
// million tasks the heap is a few large pointer-free arrays that the
// garbage collector does not scan.
type Slot struct {
	Key  float64 // order key: the timestamp, or 0
	Cold Ref
	// Set is the record's Task.Set plus the slot's own flags.
	Set    Field
	Name   uint32 // symbols
	Worker uint32
	State  uint32
}

// The slot's flags, in bits of Set that no Field uses.
const (
	SlotLive Field = 1 << 30
	// SlotTextID: the id is not a canonical uuid, and the slot's owner
	// keeps its text.
	SlotTextID Field = 1 << 31
	TaskFields       = SlotLive - 1
)

// Live reports whether the slot holds a task; HasTextID whether its id
// is kept as text (SlotTextID).
func (sl *Slot) Live() bool      { return sl.Set&SlotLive != 0 }
func (sl *Slot) HasTextID() bool { return sl.Set&SlotTextID != 0 }

// PageBits: a page of the Slab holds 1<<PageBits slots.
const PageBits = 12

// Slab holds the slots in pages, allocated as the ring fills, so that a
// large MaxTasks costs nothing until tasks arrive and growing never copies.
type Slab struct {
	Pages [][]Slot
	// IDs holds each slot's id, the uuid's bytes when canonical (see
	// ParseUUID), page for page with Pages. Kept apart, the ids are 16
	// contiguous bytes a task: a search for a piece of an id reads them
	// alone, a third of the bytes of the slots.
	IDs [][][16]byte
}

// At returns slot i, which Ensure made addressable.
func (s *Slab) At(i uint32) *Slot {
	return &s.Pages[i>>PageBits][i&(1<<PageBits-1)]
}

// Ensure makes slot i addressable.
func (s *Slab) Ensure(i uint32) {
	for int(i>>PageBits) >= len(s.Pages) {
		s.Pages = append(s.Pages, make([]Slot, 1<<PageBits))
		s.IDs = append(s.IDs, make([][16]byte, 1<<PageBits))
	}
}

// ID returns the id of slot i, which Ensure made addressable.
func (s *Slab) ID(i uint32) *[16]byte {
	return &s.IDs[i>>PageBits][i&(1<<PageBits-1)]
}

// ParseUUID returns the 16 bytes of a task id written the way Celery
// writes them (lowercase hex, 8-4-4-4-12), the only form that converts
// back to the same text. Other ids are kept as text.
func ParseUUID(s string) (id [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	j := 0
	for i := 0; i < 36; i += 2 {
		if s[i] == '-' {
			i--
			continue
		}
		hi, ok1 := LowerHex(s[i])
		lo, ok2 := LowerHex(s[i+1])
		if !ok1 || !ok2 {
			return id, false
		}
		id[j] = hi<<4 | lo
		j++
	}
	return id, true
}

// LowerHex returns the value of a lowercase hex digit.
func LowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// FormatUUID returns id in Celery's form (see ParseUUID).
func FormatUUID(id [16]byte) string {
	return string(AppendUUID(make([]byte, 0, 36), id))
}

// AppendUUID appends id in Celery's form (see ParseUUID).
func AppendUUID(dst []byte, id [16]byte) []byte {
	// Written in place: a search formats the id of every task it looks at.
	n := len(dst)
	dst = slices.Grow(dst, 36)[:n+36]
	b := dst[n : n+36]
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return dst
}

// Symbols interns the few distinct strings of task records (task names,
// hostnames, states, exchanges, routing keys, clients) as small numbers,
// and knows for each its casefolded form, which the filters compare.
//
// A symbol lives as long as something refers to it: the slots (name,
// worker, state), the packed records (exchange, routing key, client) and
// the symbols that fold to it each hold a reference, and the last one
// released frees it for reuse. Names come and go with the tasks (pod
// hostnames, clients' gen<pid>@host), so the table holds what the live
// tasks name, not every name ever seen. Counting fits the records: they
// hold symbols as numbers, without a Go pointer, where unique.Handle is
// a pointer per field that the collector would scan in every slot.
type Symbols struct {
	Strs   []string
	Folded []uint32
	refs   []uint32
	// Named counts the live tasks whose name the symbol is: the task
	// types.
	Named []uint32
	ids   map[string]uint32
	free  []uint32
}

// NewSymbols returns a table holding the empty string and Celery's
// states.
func NewSymbols() Symbols {
	// Symbol 0 is the empty string, never freed.
	y := Symbols{Strs: []string{""}, Folded: []uint32{0}, refs: []uint32{1}, Named: []uint32{0},
		ids: map[string]uint32{"": 0}}
	// Celery's states hold a reference of their own: a task passes through
	// RECEIVED and STARTED alone at times, and each of its events would
	// otherwise free the state it leaves and intern it anew.
	for _, st := range [...]string{Pending, Received, Started, Success, Failure, Retry, Revoked, Rejected} {
		y.ID(st)
	}
	return y
}

// ID returns the symbol of s and takes a reference to it, which release
// gives back.
func (y *Symbols) ID(s string) uint32 {
	if id, ok := y.ids[s]; ok {
		y.refs[id]++
		return id
	}
	// s may be a view into a larger buffer (an event's message); the
	// table keeps its own copy.
	s = strings.Clone(s)
	var id uint32
	if n := len(y.free); n > 0 {
		id, y.free = y.free[n-1], y.free[:n-1]
		y.Strs[id], y.Folded[id], y.refs[id] = s, id, 1
	} else {
		id = uint32(len(y.Strs))
		y.Strs = append(y.Strs, s)
		y.Folded = append(y.Folded, id)
		y.refs = append(y.refs, 1)
		y.Named = append(y.Named, 0)
	}
	y.ids[s] = id
	if f := pyfmt.Fold(s); f != s {
		y.Folded[id] = y.ID(f)
	}
	return id
}

// Release gives back a reference taken by id; the last one frees the
// symbol, and its reference to its folded form.
func (y *Symbols) Release(id uint32) {
	if id == 0 {
		return
	}
	if y.refs[id]--; y.refs[id] > 0 {
		return
	}
	delete(y.ids, y.Strs[id])
	f := y.Folded[id]
	y.Strs[id], y.Folded[id] = "", 0
	y.free = append(y.free, id)
	if f != id {
		y.Release(f)
	}
}

// Lookup returns the symbol of s without adding it.
func (y *Symbols) Lookup(s string) (uint32, bool) {
	id, ok := y.ids[s]
	return id, ok
}

// Str returns the string of symbol id.
func (y *Symbols) Str(id uint32) string { return y.Strs[id] }

// Len is the number of live symbols, the empty string included.
func (y *Symbols) Len() int { return len(y.ids) }

// Ref locates a record in the arena: chunk number and offset.
type Ref uint64

const NoRef Ref = 1<<64 - 1

// MakeRef returns the Ref of offset off in chunk number chunk.
func MakeRef(chunk, off int) Ref { return Ref(uint64(chunk)<<32 | uint64(off)) }
func (r Ref) chunk() int         { return int(r >> 32) }
func (r Ref) off() int           { return int(uint32(r)) }

// ChunkSize is the arena's allocation unit. A record larger than that
// gets a chunk of its own.
const ChunkSize = 256 << 10

// Chunk is one buffer of an Arena: records, each after its slot
// number and length.
type Chunk struct {
	Data []byte
	dead int // bytes of records no slot refers to any more
	// grams is the chunk's digest for searches, once one built it
	// (Arena.Grams).
	grams atomic.Pointer[Grams]
}

// Arena holds the packed part of every record, appended to the current
// chunk, each record prefixed by its slot number and length. An updated
// record is written anew and the old copy counted dead; a chunk a
// quarter dead has its live records moved to the current chunk and is
// freed. Memory stays proportional to the live records without a Go
// allocation (nor a pointer for the collector) per task.
type Arena struct {
	Chunks []*Chunk // nil where freed
	free   []int    // freed chunk numbers
	spare  [][]byte // freed standard-size buffers kept for reuse
	cur    int
	Bytes  int // capacity of the chunks in use
	// due lists chunks worth compacting; the owner of the arena calls
	// compact for them once its slots are consistent again.
	due []int
}

// NewArena returns an empty arena.
func NewArena() Arena {
	a := Arena{cur: -1}
	return a
}

func (a *Arena) newChunk(size int) int {
	var buf []byte
	if size <= ChunkSize {
		size = ChunkSize
		if n := len(a.spare); n > 0 {
			buf, a.spare = a.spare[n-1][:0], a.spare[:n-1]
		}
	}
	if buf == nil {
		buf = make([]byte, 0, size)
	}
	a.Bytes += cap(buf)
	c := &Chunk{Data: buf}
	if n := len(a.free); n > 0 {
		i := a.free[n-1]
		a.free = a.free[:n-1]
		a.Chunks[i] = c
		return i
	}
	a.Chunks = append(a.Chunks, c)
	return len(a.Chunks) - 1
}

// Put appends the record of slot and returns where it is.
func (a *Arena) Put(slot uint32, rec []byte) Ref {
	need := 4 + binary.MaxVarintLen32 + len(rec)
	if a.cur < 0 || cap(a.Chunks[a.cur].Data)-len(a.Chunks[a.cur].Data) < need {
		c := a.newChunk(need)
		if need > ChunkSize {
			// A record of its own chunk; the current chunk stays current.
			return a.write(c, slot, rec)
		}
		// Most records die while their chunk is current (a task's events
		// come close together), so the chunk it was is checked now.
		if a.cur >= 0 && a.worthCompacting(a.cur) {
			a.due = append(a.due, a.cur)
		}
		a.cur = c
	}
	return a.write(a.cur, slot, rec)
}

func (a *Arena) write(c int, slot uint32, rec []byte) Ref {
	ch := a.Chunks[c]
	off := len(ch.Data)
	ch.Data = binary.LittleEndian.AppendUint32(ch.Data, slot)
	ch.Data = binary.AppendUvarint(ch.Data, uint64(len(rec)))
	ch.Data = append(ch.Data, rec...)
	return MakeRef(c, off)
}

// Record returns the record at r and its slot; the bytes are the arena's.
func (a *Arena) Record(r Ref) (slot uint32, rec []byte, size int) {
	d := a.Chunks[r.chunk()].Data[r.off():]
	slot = binary.LittleEndian.Uint32(d)
	n, w := binary.Uvarint(d[4:])
	return slot, d[4+w : 4+w+int(n)], 4 + w + int(n)
}

// Get returns the record at r; the bytes are the arena's.
func (a *Arena) Get(r Ref) []byte {
	_, rec, _ := a.Record(r)
	return rec
}

// Release marks the record at r dead, and its chunk due when that makes
// it worth compacting.
func (a *Arena) Release(r Ref) {
	_, _, size := a.Record(r)
	c := r.chunk()
	ch := a.Chunks[c]
	before := a.worthCompacting(c)
	ch.dead += size
	if c != a.cur && !before && a.worthCompacting(c) {
		a.due = append(a.due, c)
	}
}

// worthCompacting: a quarter dead. Moving the live rest costs at most
// three times the bytes it frees, once per record in practice (a moved
// record is final), and keeps the arena within a third of the live size.
func (a *Arena) worthCompacting(c int) bool {
	ch := a.Chunks[c]
	return ch.dead*4 >= len(ch.Data)
}

// CompactDue compacts the chunks that became due.
func (a *Arena) CompactDue(owner func(slot uint32) *Ref) {
	for len(a.due) > 0 {
		c := a.due[len(a.due)-1]
		a.due = a.due[:len(a.due)-1]
		if a.Chunks[c] != nil && c != a.cur {
			a.compact(c, owner)
		}
	}
}

// compact moves the live records of chunk c (those whose slot still
// points at them, as owner reports) to the current chunk and frees c.
func (a *Arena) compact(c int, owner func(slot uint32) *Ref) {
	ch := a.Chunks[c]
	for off := 0; off < len(ch.Data); {
		r := MakeRef(c, off)
		slot, rec, size := a.Record(r)
		if p := owner(slot); p != nil && *p == r {
			*p = a.Put(slot, rec)
		}
		off += size
	}
	a.Bytes -= cap(ch.Data)
	if cap(ch.Data) == ChunkSize && len(a.spare) < 4 {
		a.spare = append(a.spare, ch.Data)
	}
	a.Chunks[c] = nil
	a.free = append(a.free, c)
}
