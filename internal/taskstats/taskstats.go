// Package taskstats counts task events over time for GET /api/stats/tasks:
// how many tasks were received, started, succeeded, failed, retried and
// revoked in each minute, and how long the successes ran, per (task name,
// worker, queue), within a fixed memory bound whatever the number of names.
//
// The aggregate keeps one-minute cells for Retention (7 days) in a ring of
// minutes. A cell holds the exact counts of one key in one minute and a
// sparse logarithmic histogram of its runtimes; percentiles are estimated
// from it (see Bins). Two bounds hold the memory:
//   - at most MaxKeys distinct keys; an event whose key would be one more
//     counts under the key `other`, which no filter matches (a key is let
//     go once no cell refers to it);
//   - at most MaxBytes of cells and keys, measured by Size; past it the
//     oldest minutes are dropped first, and KeptSince says from when the
//     counts are whole.
//
// Totals are exact for the minutes kept; a filtered answer also says how
// many of its window's events were folded into `other`.
package taskstats

import (
	"math"
	"sync"
	"time"
	"unsafe"
)

// The kinds of event counted, in the order of Counts.
const (
	Received = iota
	Started
	Succeeded
	Failed
	Retried
	Revoked
	NumKinds
)

// KindOf maps a Celery event type to the kind it counts as.
func KindOf(eventType string) (int, bool) {
	switch eventType {
	case "task-received":
		return Received, true
	case "task-started":
		return Started, true
	case "task-succeeded":
		return Succeeded, true
	case "task-failed":
		return Failed, true
	case "task-retried":
		return Retried, true
	case "task-revoked":
		return Revoked, true
	}
	return 0, false
}

// Defaults of Config.
const (
	DefaultMaxKeys   = 2048
	DefaultMaxBytes  = 12 << 20
	DefaultRetention = 7 * 24 * time.Hour
	// MaxKeyBytes bounds each of a key's strings; an event with a longer
	// name, worker or queue counts under `other`.
	MaxKeyBytes = 255
	// futureMinutes is how far ahead of the clock an event's time may be
	// (a worker's clock running fast) and still count.
	futureMinutes = 10
)

// Config bounds an aggregate.
type Config struct {
	MaxKeys   int
	MaxBytes  int64
	Retention time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Event is one task event to count.
type Event struct {
	Kind int
	// Time is when it happened, Unix seconds.
	Time                float64
	Name, Worker, Queue string
	// Runtime, in seconds, is counted for a Succeeded event when HasRuntime.
	Runtime    float64
	HasRuntime bool
}

type key struct{ name, worker, queue string }

type keyEntry struct {
	key
	refs int // the cells referring to it
}

// otherKey is the id of the `other` key; real keys start at 1.
const otherKey = 0

type cell struct {
	key uint32
	n   [NumKinds]uint32
	// hist is the runtime histogram, sparse: bin<<24 | count, a bin
	// possibly in several entries once its count passes 2^24-1.
	hist []uint32
}

type minute struct {
	m     int64 // Unix minutes; slot empty when cells is nil
	cells []cell
	// index finds a key's cell once the minute has many.
	index map[uint32]int32
	// total is the sum of the minute's cells, `other` included: a read
	// without a filter takes it rather than every key's cell, so that
	// its cost follows the window's minutes, not minutes x keys.
	total *cell
}

// Aggregate is the in-memory activity aggregate. It is safe for
// concurrent use.
type Aggregate struct {
	cfg     Config
	ringLen int64

	mu    sync.RWMutex
	ring  []minute
	keys  map[key]uint32
	ents  []keyEntry // by id; ents[otherKey] is `other`
	free  []uint32
	size  int64
	dirty map[int64]struct{}
	// swept: every minute below it has been dropped.
	swept int64
	// droppedBefore: minutes below it were dropped to honour MaxBytes.
	droppedBefore int64
	// since is when counting began (Unix minutes).
	since int64
	// hiwat is the largest Size seen.
	hiwat int64
}

// New returns an empty aggregate counting from now.
func New(cfg Config) *Aggregate {
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	n := int64(cfg.Retention/time.Minute) + futureMinutes + 2
	a := &Aggregate{
		cfg: cfg, ringLen: n, ring: make([]minute, n),
		keys: map[key]uint32{}, ents: []keyEntry{{}}, dirty: map[int64]struct{}{},
	}
	a.since = a.nowMinute()
	a.swept = a.since - a.retentionMinutes()
	a.size = fixedSize(n)
	return a
}

func fixedSize(ringLen int64) int64 {
	return int64(unsafe.Sizeof(Aggregate{})) + ringLen*int64(unsafe.Sizeof(minute{}))
}

func (a *Aggregate) retentionMinutes() int64 { return int64(a.cfg.Retention / time.Minute) }

func (a *Aggregate) nowMinute() int64 { return floorDiv(a.cfg.Now().Unix(), 60) }

func floorDiv(x, y int64) int64 {
	q := x / y
	if (x%y != 0) && ((x < 0) != (y < 0)) {
		q--
	}
	return q
}

// Sizes used by the accounting: a map entry is costed at twice its key
// and value, for the table's empty slots and control bytes.
var (
	cellSize     = int64(unsafe.Sizeof(cell{}))
	indexEntry   = 2 * int64(unsafe.Sizeof(uint32(0))+unsafe.Sizeof(int32(0)))
	keyEntrySize = int64(unsafe.Sizeof(keyEntry{})) + 2*(int64(unsafe.Sizeof(key{}))+4)
)

// indexFrom is how many cells a minute has before it gets an index.
const indexFrom = 16

// Add counts events.
func (a *Aggregate) Add(evs ...Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.nowMinute()
	a.sweep(now)
	for i := range evs {
		a.add(&evs[i], now)
	}
	a.enforce(now)
}

func (a *Aggregate) add(e *Event, now int64) {
	if e.Kind < 0 || e.Kind >= NumKinds || math.IsNaN(e.Time) || math.IsInf(e.Time, 0) {
		return
	}
	m := int64(math.Floor(e.Time / 60))
	if m < now-a.retentionMinutes() || m > now+futureMinutes || m < a.droppedBefore {
		return
	}
	mi := a.minuteAt(m)
	if mi == nil {
		return
	}
	c := a.cellFor(mi, a.keyOf(e))
	if c.n[e.Kind] < math.MaxUint32 {
		c.n[e.Kind]++
		if mi.total.n[e.Kind] < math.MaxUint32 { // 4 billion events a minute: beyond any cluster
			mi.total.n[e.Kind]++
		}
	}
	if e.Kind == Succeeded && e.HasRuntime && !math.IsNaN(e.Runtime) {
		bin := Bin(e.Runtime)
		a.addRuntime(c, bin, 1)
		a.addRuntime(mi.total, bin, 1)
	}
	a.dirty[m] = struct{}{}
}

func (a *Aggregate) addRuntime(c *cell, bin int, count uint32) {
	for count > 0 {
		added := false
		for j, h := range c.hist {
			if int(h>>24) == bin && h&0xffffff < 0xffffff {
				room := 0xffffff - h&0xffffff
				d := min(room, count)
				c.hist[j] += d
				count -= d
				added = true
				break
			}
		}
		if !added {
			before := cap(c.hist)
			d := min(count, 0xffffff)
			c.hist = append(c.hist, uint32(bin)<<24|d)
			count -= d
			a.size += int64(cap(c.hist)-before) * 4
		}
	}
}

// minuteAt returns the ring's minute m, making it when new; nil when the
// slot holds a newer minute (m is then older than the ring spans).
func (a *Aggregate) minuteAt(m int64) *minute {
	mi := &a.ring[floorMod(m, a.ringLen)]
	if mi.cells != nil && mi.m == m {
		return mi
	}
	if mi.cells != nil {
		if mi.m > m {
			return nil
		}
		a.drop(mi)
	}
	mi.m = m
	mi.cells = make([]cell, 0, 1)
	mi.total = &cell{key: otherKey}
	a.size += 2 * cellSize
	return mi
}

func floorMod(x, y int64) int64 { return x - floorDiv(x, y)*y }

// keyOf returns the key id of e, interning it, or otherKey.
func (a *Aggregate) keyOf(e *Event) uint32 {
	if len(e.Name) > MaxKeyBytes || len(e.Worker) > MaxKeyBytes || len(e.Queue) > MaxKeyBytes {
		return otherKey
	}
	k := key{e.Name, e.Worker, e.Queue}
	if id, ok := a.keys[k]; ok {
		return id
	}
	if len(a.keys) >= a.cfg.MaxKeys {
		return otherKey
	}
	// Cloned: an event's strings may be slices of a larger buffer.
	k = key{cloneString(e.Name), cloneString(e.Worker), cloneString(e.Queue)}
	var id uint32
	if n := len(a.free); n > 0 {
		id = a.free[n-1]
		a.free = a.free[:n-1]
		a.ents[id] = keyEntry{key: k}
	} else {
		id = uint32(len(a.ents))
		a.ents = append(a.ents, keyEntry{key: k})
	}
	a.keys[k] = id
	a.size += keyEntrySize + int64(len(k.name)+len(k.worker)+len(k.queue))
	return id
}

func cloneString(s string) string {
	if s == "" {
		return ""
	}
	return string(append([]byte(nil), s...))
}

func (a *Aggregate) cellFor(mi *minute, k uint32) *cell {
	if mi.index != nil {
		if j, ok := mi.index[k]; ok {
			return &mi.cells[j]
		}
	} else {
		for j := range mi.cells {
			if mi.cells[j].key == k {
				return &mi.cells[j]
			}
		}
	}
	before := cap(mi.cells)
	mi.cells = append(mi.cells, cell{key: k})
	a.size += int64(cap(mi.cells)-before) * cellSize
	if k != otherKey {
		a.ents[k].refs++
	}
	j := int32(len(mi.cells) - 1)
	switch {
	case mi.index != nil:
		mi.index[k] = j
		a.size += indexEntry
	case len(mi.cells) > indexFrom:
		mi.index = make(map[uint32]int32, len(mi.cells))
		for i := range mi.cells {
			mi.index[mi.cells[i].key] = int32(i)
		}
		a.size += int64(len(mi.cells)) * indexEntry
	}
	return &mi.cells[j]
}

// drop empties a minute's slot, letting go of the keys only it held.
func (a *Aggregate) drop(mi *minute) {
	if mi.cells == nil {
		return
	}
	for i := range mi.cells {
		c := &mi.cells[i]
		a.size -= int64(cap(c.hist)) * 4
		if c.key != otherKey {
			a.release(c.key)
		}
	}
	a.size -= int64(cap(mi.cells)) * cellSize
	a.size -= int64(len(mi.index)) * indexEntry
	a.size -= cellSize + int64(cap(mi.total.hist))*4
	// A dropped minute's record in a store must go too.
	a.dirty[mi.m] = struct{}{}
	*mi = minute{}
}

func (a *Aggregate) release(id uint32) {
	e := &a.ents[id]
	e.refs--
	if e.refs > 0 {
		return
	}
	delete(a.keys, e.key)
	a.size -= keyEntrySize + int64(len(e.name)+len(e.worker)+len(e.queue))
	*e = keyEntry{}
	a.free = append(a.free, id)
}

// sweep drops the minutes older than the retention.
func (a *Aggregate) sweep(now int64) {
	cut := now - a.retentionMinutes()
	if cut <= a.swept {
		return
	}
	from := a.swept
	if cut-from > a.ringLen {
		from = cut - a.ringLen
	}
	for m := from; m < cut; m++ {
		mi := &a.ring[floorMod(m, a.ringLen)]
		if mi.cells != nil && mi.m == m {
			a.drop(mi)
		}
	}
	a.swept = cut
}

// enforce drops the oldest minutes while the size is over MaxBytes; the
// current minute and those after it stay.
func (a *Aggregate) enforce(now int64) {
	if a.size > a.hiwat {
		a.hiwat = a.size
	}
	for m := max(a.swept, a.droppedBefore); a.size > a.cfg.MaxBytes && m < now; m++ {
		mi := &a.ring[floorMod(m, a.ringLen)]
		if mi.cells != nil && mi.m == m {
			a.drop(mi)
		}
		a.droppedBefore = m + 1
	}
}

// Size is the aggregate's accounted memory in bytes: the ring, the cells
// with their histograms and indexes, and the keys.
func (a *Aggregate) Size() int64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.size
}

// HighWater is the largest Size seen.
func (a *Aggregate) HighWater() int64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.hiwat
}

// Keys is how many keys are held, `other` aside.
func (a *Aggregate) Keys() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.keys)
}
