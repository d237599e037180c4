package state

import (
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// A task record lives in a slot: a fixed-size struct without pointers that
// holds what the indexes and filters read (id, order key, received time,
// interned name, worker and state), plus a reference to the rest of the
// record packed into an arena. Slots are reused in a ring, so the slot of
// the n-th task created is n mod MaxTasks and eviction of the oldest task
// is the reuse of its slot. Nothing here holds a Go pointer per task: at a
// million tasks the heap is a few large pointer-free arrays that the
// garbage collector does not scan.
type slot struct {
	id   [16]byte // the uuid's bytes when canonical (see parseUUID)
	key  float64  // order key: the timestamp, or 0
	cold ref
	// set is the record's Task.Set plus the slot's own flags.
	set    taskrec.Field
	name   uint32 // symbols
	worker uint32
	state  uint32
}

// The slot's flags, in bits of set that no Field uses.
const (
	slotLive taskrec.Field = 1 << 30
	// slotTextID: the id is not a canonical uuid and lives in
	// State.textIDs.
	slotTextID taskrec.Field = 1 << 31
	taskFields               = slotLive - 1
)

func (sl *slot) live() bool      { return sl.set&slotLive != 0 }
func (sl *slot) hasTextID() bool { return sl.set&slotTextID != 0 }

const pageBits = 12

// slab holds the slots in pages, allocated as the ring fills, so that a
// large MaxTasks costs nothing until tasks arrive and growing never copies.
type slab struct {
	pages [][]slot
}

func (s *slab) at(i uint32) *slot {
	return &s.pages[i>>pageBits][i&(1<<pageBits-1)]
}

// ensure makes slot i addressable.
func (s *slab) ensure(i uint32) {
	for int(i>>pageBits) >= len(s.pages) {
		s.pages = append(s.pages, make([]slot, 1<<pageBits))
	}
}

// parseUUID returns the 16 bytes of a task id written the way Celery
// writes them (lowercase hex, 8-4-4-4-12), the only form that converts
// back to the same text. Other ids are kept as text.
func parseUUID(s string) (id [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	j := 0
	for i := 0; i < 36; i += 2 {
		if s[i] == '-' {
			i--
			continue
		}
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return id, false
		}
		id[j] = hi<<4 | lo
		j++
	}
	return id, true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func formatUUID(id [16]byte) string {
	return string(appendUUID(make([]byte, 0, 36), id))
}

// appendUUID appends id in Celery's form (see parseUUID).
func appendUUID(dst []byte, id [16]byte) []byte {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return append(dst, b[:]...)
}

// symbols interns the few distinct strings of task records (task names,
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
type symbols struct {
	strs   []string
	folded []uint32
	refs   []uint32
	// named counts the live tasks whose name the symbol is: the task
	// types.
	named []uint32
	ids   map[string]uint32
	free  []uint32
}

func newSymbols() symbols {
	// Symbol 0 is the empty string, never freed.
	y := symbols{strs: []string{""}, folded: []uint32{0}, refs: []uint32{1}, named: []uint32{0},
		ids: map[string]uint32{"": 0}}
	// Celery's states hold a reference of their own: a task passes through
	// RECEIVED and STARTED alone at times, and each of its events would
	// otherwise free the state it leaves and intern it anew.
	for _, st := range [...]string{taskrec.Pending, taskrec.Received, taskrec.Started, taskrec.Success, taskrec.Failure, taskrec.Retry, taskrec.Revoked, taskrec.Rejected} {
		y.id(st)
	}
	return y
}

// id returns the symbol of s and takes a reference to it, which release
// gives back.
func (y *symbols) id(s string) uint32 {
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
		y.strs[id], y.folded[id], y.refs[id] = s, id, 1
	} else {
		id = uint32(len(y.strs))
		y.strs = append(y.strs, s)
		y.folded = append(y.folded, id)
		y.refs = append(y.refs, 1)
		y.named = append(y.named, 0)
	}
	y.ids[s] = id
	if f := pyfmt.Fold(s); f != s {
		y.folded[id] = y.id(f)
	}
	return id
}

// release gives back a reference taken by id; the last one frees the
// symbol, and its reference to its folded form.
func (y *symbols) release(id uint32) {
	if id == 0 {
		return
	}
	if y.refs[id]--; y.refs[id] > 0 {
		return
	}
	delete(y.ids, y.strs[id])
	f := y.folded[id]
	y.strs[id], y.folded[id] = "", 0
	y.free = append(y.free, id)
	if f != id {
		y.release(f)
	}
}

// lookup returns the symbol of s without adding it.
func (y *symbols) lookup(s string) (uint32, bool) {
	id, ok := y.ids[s]
	return id, ok
}

func (y *symbols) str(id uint32) string { return y.strs[id] }

// len is the number of live symbols, the empty string included.
func (y *symbols) len() int { return len(y.ids) }

// ref locates a record in the arena: chunk number and offset.
type ref uint64

const noRef ref = 1<<64 - 1

func makeRef(chunk, off int) ref { return ref(uint64(chunk)<<32 | uint64(off)) }
func (r ref) chunk() int         { return int(r >> 32) }
func (r ref) off() int           { return int(uint32(r)) }

// chunkSize is the arena's allocation unit. A record larger than that
// gets a chunk of its own.
const chunkSize = 256 << 10

type chunk struct {
	data []byte
	dead int // bytes of records no slot refers to any more
}

// arena holds the packed part of every record, appended to the current
// chunk, each record prefixed by its slot number and length. An updated
// record is written anew and the old copy counted dead; a chunk a
// quarter dead has its live records moved to the current chunk and is
// freed. Memory stays proportional to the live records without a Go
// allocation (nor a pointer for the collector) per task.
type arena struct {
	chunks []*chunk // nil where freed
	free   []int    // freed chunk numbers
	spare  [][]byte // freed standard-size buffers kept for reuse
	cur    int
	bytes  int // capacity of the chunks in use
	// due lists chunks worth compacting; the owner of the arena calls
	// compact for them once its slots are consistent again.
	due []int
}

func newArena() arena {
	a := arena{cur: -1}
	return a
}

func (a *arena) newChunk(size int) int {
	var buf []byte
	if size <= chunkSize {
		size = chunkSize
		if n := len(a.spare); n > 0 {
			buf, a.spare = a.spare[n-1][:0], a.spare[:n-1]
		}
	}
	if buf == nil {
		buf = make([]byte, 0, size)
	}
	a.bytes += cap(buf)
	c := &chunk{data: buf}
	if n := len(a.free); n > 0 {
		i := a.free[n-1]
		a.free = a.free[:n-1]
		a.chunks[i] = c
		return i
	}
	a.chunks = append(a.chunks, c)
	return len(a.chunks) - 1
}

// put appends the record of slot and returns where it is.
func (a *arena) put(slot uint32, rec []byte) ref {
	need := 4 + binary.MaxVarintLen32 + len(rec)
	if a.cur < 0 || cap(a.chunks[a.cur].data)-len(a.chunks[a.cur].data) < need {
		c := a.newChunk(need)
		if need > chunkSize {
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

func (a *arena) write(c int, slot uint32, rec []byte) ref {
	ch := a.chunks[c]
	off := len(ch.data)
	ch.data = binary.LittleEndian.AppendUint32(ch.data, slot)
	ch.data = binary.AppendUvarint(ch.data, uint64(len(rec)))
	ch.data = append(ch.data, rec...)
	return makeRef(c, off)
}

// record returns the record at r and its slot; the bytes are the arena's.
func (a *arena) record(r ref) (slot uint32, rec []byte, size int) {
	d := a.chunks[r.chunk()].data[r.off():]
	slot = binary.LittleEndian.Uint32(d)
	n, w := binary.Uvarint(d[4:])
	return slot, d[4+w : 4+w+int(n)], 4 + w + int(n)
}

func (a *arena) get(r ref) []byte {
	_, rec, _ := a.record(r)
	return rec
}

// release marks the record at r dead, and its chunk due when that makes
// it worth compacting.
func (a *arena) release(r ref) {
	_, _, size := a.record(r)
	c := r.chunk()
	ch := a.chunks[c]
	before := a.worthCompacting(c)
	ch.dead += size
	if c != a.cur && !before && a.worthCompacting(c) {
		a.due = append(a.due, c)
	}
}

// worthCompacting: a quarter dead. Moving the live rest costs at most
// three times the bytes it frees, once per record in practice (a moved
// record is final), and keeps the arena within a third of the live size.
func (a *arena) worthCompacting(c int) bool {
	ch := a.chunks[c]
	return ch.dead*4 >= len(ch.data)
}

// compactDue compacts the chunks that became due.
func (a *arena) compactDue(owner func(slot uint32) *ref) {
	for len(a.due) > 0 {
		c := a.due[len(a.due)-1]
		a.due = a.due[:len(a.due)-1]
		if a.chunks[c] != nil && c != a.cur {
			a.compact(c, owner)
		}
	}
}

// compact moves the live records of chunk c (those whose slot still
// points at them, as owner reports) to the current chunk and frees c.
func (a *arena) compact(c int, owner func(slot uint32) *ref) {
	ch := a.chunks[c]
	for off := 0; off < len(ch.data); {
		r := makeRef(c, off)
		slot, rec, size := a.record(r)
		if p := owner(slot); p != nil && *p == r {
			*p = a.put(slot, rec)
		}
		off += size
	}
	a.bytes -= cap(ch.data)
	if cap(ch.data) == chunkSize && len(a.spare) < 4 {
		a.spare = append(a.spare, ch.data)
	}
	a.chunks[c] = nil
	a.free = append(a.free, c)
}
