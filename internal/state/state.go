// Package state keeps the cluster state derived from Celery events, as
// celery.events.state.State does for Flower: task records with Celery's
// out-of-order merge rules, workers with heartbeat liveness, the seen task
// names, and the queries of GET /api/tasks.
package state

import (
	"bytes"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// Defaults of Config, Celery's own (Flower passes --max_tasks, 100000).
const (
	DefaultMaxTasks   = 10000
	DefaultMaxWorkers = 5000
)

// Config sizes a State.
type Config struct {
	// MaxTasks bounds the tasks kept; beyond it the oldest-created goes.
	MaxTasks int
	// MaxWorkers bounds the workers kept, the same way.
	MaxWorkers int
	// Now is the clock for liveness and for events without LocalReceived.
	Now func() time.Time
	// TrackChanges makes the state remember what changed, for Drain.
	TrackChanges bool
	// DrainEvicted, with TrackChanges, makes Drain also hand over the
	// records of tasks changed and then evicted since the previous Drain,
	// for a store that keeps more history than the state (PostgreSQL):
	// without it a task created and evicted between two drains would never
	// reach the store.
	DrainEvicted bool
	// FinishUnknown makes a reconciled event (celery.Event.Reconciled) of
	// a task the state does not hold create it, holding only what the
	// event says, for a store that holds the rest of the task and merges
	// (PostgreSQL): there the unfinished tasks come from the store, not
	// from this replica's memory. Without it such an event is dropped.
	FinishUnknown bool
}

// State is the in-memory cluster state. Apply is meant to be called from
// one ingest goroutine while any number of readers query; all methods are
// safe for concurrent use.
//
// Task records are kept compact (see package taskrec) and indexed by
// state, task name and worker, each index sorted newest first, so that the
// pages of GET /api/tasks cost the same at ten thousand and a million
// tasks.
type State struct {
	mu sync.RWMutex
	// turns holds a token for each list copying and formatting a chunk
	// (see TaskList.Next); its capacity is ReadersAtOnce.
	turns      chan struct{}
	maxTasks   int
	maxWorkers int
	now        func() time.Time

	slots taskrec.Slab
	arena taskrec.Arena
	sym   taskrec.Symbols
	// created counts the tasks ever created; the next one takes slot
	// created mod maxTasks, evicting the oldest.
	created uint64
	live    int
	byUUID  taskrec.IDTable
	// Ids that are not canonical uuids, both ways.
	byText  map[string]uint32
	textIDs map[uint32]string

	// The indexes, by casefolded symbol: every task is in the one of its
	// state; a task with a name (worker) in the one of its name (worker).
	byState  map[uint32]*taskrec.Index
	byName   map[uint32]*taskrec.Index
	byWorker map[uint32]*taskrec.Index
	// byReceived holds two indexes: the received tasks by received time,
	// the others by timestamp.
	byReceived map[uint32]*taskrec.Index
	// children lists, per parent id, the slots of the tasks that name it
	// as their parent, whether that parent is known or not (yet).
	children map[string][]uint32

	workers       map[string]*worker
	workerCreated []*worker

	// clock is the receiver's Lamport clock (kombu's LamportClock in
	// Celery's EventReceiver), which stamps task-sent events.
	clock int64

	buf  []byte // scratch for packing
	less taskrec.LessFunc

	// dirty holds the slots changed since the last Drain, and types the
	// task types that came (true) or went (false); nil unless changes are
	// tracked.
	dirty map[uint32]struct{}
	types map[string]bool
	// goneWorkers are the workers forgotten since the last Drain, when
	// changes are tracked.
	goneWorkers []string
	// keepEvicted is Config.DrainEvicted; evicted holds those records.
	keepEvicted bool
	evicted     []Record
	// finishUnknown is Config.FinishUnknown.
	finishUnknown bool
}

// ReadersAtOnce is how many task lists may copy and format a chunk at the
// same time: one core fewer than Go runs goroutines on, and at least one,
// so that the ingest loop always finds a core.
func ReadersAtOnce() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// New returns an empty state.
func New(cfg Config) *State {
	if cfg.MaxTasks <= 0 {
		cfg.MaxTasks = DefaultMaxTasks
	}
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = DefaultMaxWorkers
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &State{
		turns:      make(chan struct{}, ReadersAtOnce()),
		maxTasks:   cfg.MaxTasks,
		maxWorkers: cfg.MaxWorkers,
		now:        cfg.Now,
		arena:      taskrec.NewArena(),
		sym:        taskrec.NewSymbols(),
		byUUID:     taskrec.NewIDTable(),
		byText:     make(map[string]uint32),
		textIDs:    make(map[uint32]string),
		byState:    make(map[uint32]*taskrec.Index),
		byName:     make(map[uint32]*taskrec.Index),
		byWorker:   make(map[uint32]*taskrec.Index),
		byReceived: make(map[uint32]*taskrec.Index),
		children:   make(map[string][]uint32),
		workers:    make(map[string]*worker),
	}
	s.less = s.itemLess
	s.finishUnknown = cfg.FinishUnknown
	if cfg.TrackChanges {
		s.keepEvicted = cfg.DrainEvicted
		s.dirty = make(map[uint32]struct{})
		s.types = make(map[string]bool)
	}
	return s
}

// Apply updates the state with events, in order. Events that Celery's
// state would reject (no type; a task event without uuid, hostname or
// timestamp; a worker event without hostname or timestamp) are ignored.
func (s *State) Apply(events ...celery.Event) {
	if len(events) == 0 {
		return
	}
	// LocalReceived is set by the broker receiver; tests and replays may
	// leave it out, and then the time of Apply stands in for it.
	var now float64
	for i := range events {
		if events[i].LocalReceived == 0 {
			now = epoch(s.now())
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var h heldTask
	began := time.Now()
	for i := range events {
		s.apply(&events[i], now, &h)
		if i%yieldCheck == yieldCheck-1 && i < len(events)-1 && time.Since(began) > maxWriteHold {
			s.release(&h)
			s.mu.Unlock()
			s.mu.Lock()
			began = time.Now()
		}
	}
	s.release(&h)
}

// maxWriteHold bounds how long Apply holds the write lock: past it, the
// readers waiting meanwhile go first (sync.RWMutex admits them before the
// writer's next Lock), and the writer then waits for them to copy their
// chunks. Every yield costs the writer that wait: at 150 µs, 4 readers
// took 72% of ingestion away on two cores (BenchmarkApplyUnderReaders);
// at 1 ms, 40%, while a reader waits at most a millisecond for the batch.
// yieldCheck is how many events go between two looks at the clock.
// maxWriteHold is a variable for the tests.
var maxWriteHold = time.Millisecond

const yieldCheck = 8

// heldTask is a task record read for an event and not yet written back:
// when the next event is the same task's, as in a worker's batch of a
// task's received, started and succeeded events, it goes on from the
// record in hand, and the state writes and re-indexes the task once, not
// once per event. Nothing else reads the record in between: the events of
// one Apply run under the lock, and any other task's event releases it
// first.
type heldTask struct {
	held      bool
	uuid      string // as the events spell it
	i         uint32
	t         taskrec.Task
	known     bool // the record was in the state before
	oldParent string
}

func (s *State) apply(e *celery.Event, now float64, h *heldTask) {
	if !e.HasValue(celery.FieldType) {
		return
	}
	clock := s.receive(e)
	received := e.LocalReceived
	if received == 0 {
		received = now
	}
	group, subject, _ := strings.Cut(e.Type, "-")
	switch group {
	case "worker":
		s.workerEvent(e, subject, clock, received)
	case "task":
		s.taskEvent(e, subject, clock, received, h)
	}
}

// receive ticks the receiver's Lamport clock and returns the event's clock
// as Celery's EventReceiver leaves it: clients never sync their clock, so
// task-sent is stamped just behind the receiver's; an event without a
// clock gets the receiver's next value.
func (s *State) receive(e *celery.Event) int64 {
	switch {
	case e.Type == "task-sent":
		c := max(s.clock, 1) - 1
		s.clock = tick(max(s.clock, c))
		return c
	case e.HasValue(celery.FieldClock):
		s.clock = tick(max(s.clock, e.Clock))
		return e.Clock
	default:
		s.clock = tick(s.clock)
		return s.clock
	}
}

func tick(c int64) int64 {
	if c == math.MaxInt64 {
		return c
	}
	return c + 1
}

func (s *State) workerEvent(e *celery.Event, subject string, clock int64, localReceived float64) {
	if !e.HasValue(celery.FieldHostname) || !e.HasValue(celery.FieldTimestamp) {
		return
	}
	offline := subject == "offline"
	w := s.workers[e.Hostname]
	if w == nil {
		if offline {
			return // Celery does not keep a worker it only saw leave
		}
		w = s.addWorker(e.Hostname)
	}
	w.update(e, clock)
	w.lastEvent = localReceived
	w.heard = true
	switch {
	case offline:
		w.Heartbeats = w.Heartbeats[:0]
	case localReceived != 0 && e.Timestamp != 0:
		w.heartbeat(localReceived)
	}
}

func (s *State) addWorker(hostname string) *worker {
	if len(s.workerCreated) >= s.maxWorkers {
		// The worker whose last event came longest ago goes (the first
		// seen among equals), as from Celery's LRU cache of workers: with
		// more live workers than the bound, the ones still sending stay
		// rather than pushing each other out in turn. The scan costs what
		// the slice's shift below costs, once per new worker beyond the
		// bound.
		i := 0
		for j, w := range s.workerCreated {
			if w.lastEvent < s.workerCreated[i].lastEvent {
				i = j
			}
		}
		old := s.workerCreated[i]
		s.workerCreated = slices.Delete(s.workerCreated, i, i+1)
		delete(s.workers, old.Hostname)
		s.forgetWorker(old.Hostname)
	}
	w := &worker{Worker: Worker{Hostname: strings.Clone(hostname), Freq: defaultFreq}}
	s.workers[w.Hostname] = w
	s.workerCreated = append(s.workerCreated, w)
	return w
}

// precedence is Celery's state precedence, lower is stronger; custom
// states rank between FAILURE and REVOKED.
func precedence(state string) int {
	switch state {
	case taskrec.Success:
		return 0
	case taskrec.Failure:
		return 1
	case taskrec.Revoked:
		return 3
	case taskrec.Started:
		return 4
	case taskrec.Received:
		return 5
	case taskrec.Rejected:
		return 6
	case taskrec.Retry:
		return 7
	case taskrec.Pending:
		return 8
	}
	return 2
}

// taskState maps the subject of a task-<subject> event to its state and
// the field that records when it happened (0 for custom events).
func taskState(subject string) (string, taskrec.Field) {
	switch subject {
	case "sent":
		return taskrec.Pending, taskrec.FieldSent
	case "received":
		return taskrec.Received, taskrec.FieldReceived
	case "started":
		return taskrec.Started, taskrec.FieldStarted
	case "succeeded":
		return taskrec.Success, taskrec.FieldSucceeded
	case "failed":
		return taskrec.Failure, taskrec.FieldFailed
	case "retried":
		return taskrec.Retry, taskrec.FieldRetried
	case "revoked":
		return taskrec.Revoked, taskrec.FieldRevoked
	case "rejected":
		return taskrec.Rejected, taskrec.FieldRejected
	}
	return strings.ToUpper(subject), 0
}

func (s *State) taskEvent(e *celery.Event, subject string, clock int64, localReceived float64, h *heldTask) {
	if !e.HasValue(celery.FieldUUID) || !e.HasValue(celery.FieldHostname) || !e.HasValue(celery.FieldTimestamp) {
		return
	}
	if !h.held || h.uuid != e.UUID {
		if _, known := s.lookup(e.UUID); e.Reconciled && !known && !s.finishUnknown {
			return // evicted since it was found stale: nothing to finish
		}
		s.release(h)
		s.hold(h, e.UUID)
	}
	t := &h.t
	if subject == "sent" {
		// task-sent comes from the client, not from a worker.
		t.Client = e.Hostname
		t.Set |= taskrec.FieldClient
	} else if !e.Reconciled {
		w := s.workers[e.Hostname]
		if w == nil {
			w = s.addWorker(e.Hostname)
		}
		t.Worker = w.Hostname
		t.Set |= taskrec.FieldWorker
		w.lastEvent = localReceived
		// A task event is a heartbeat too. Celery passes its two times
		// swapped here, so what it records is the event's own timestamp;
		// that quirk is kept for identical liveness.
		if localReceived != 0 && e.Timestamp != 0 {
			w.heartbeat(e.Timestamp)
		}
	}

	state, at := taskState(subject)
	if at != 0 {
		setFloat(t, at, taskrec.FloatOf(t, at), e.Timestamp)
	}
	// An event whose state precedes the current one arrived out of order:
	// it does not change the state. A late task-received only contributes
	// its own details; any other late event is still copied in, timestamp
	// and clock included, exactly as Celery updates the record's __dict__.
	late := state != taskrec.Retry && t.State != taskrec.Retry && precedence(state) > precedence(t.State)
	if late && state == taskrec.Received {
		copyReceived(t, e)
	} else {
		copyAll(t, e)
		t.Clock = clock
		setFloat(t, taskrec.FieldTimestamp, &t.Timestamp, e.Timestamp)
		if !late {
			t.State = state
		}
	}
}

// hold reads the record of uuid, or starts one, into h.
func (s *State) hold(h *heldTask, uuid string) {
	i, known := s.lookup(uuid)
	*h = heldTask{held: true, uuid: uuid, i: i, known: known}
	if known {
		// Views into the arena are safe here: the record is rewritten
		// before the arena can reuse their bytes, and nothing keeps them
		// but the children map, which copies its key.
		h.t = s.load(i, taskrec.ViewText)
		h.oldParent = parentOf(&h.t)
	} else {
		h.i = s.addTask(uuid)
		h.t = taskrec.Task{UUID: uuid, State: taskrec.Pending}
	}
}

// release writes back the record h holds, if any, and re-indexes it.
func (s *State) release(h *heldTask) {
	if !h.held {
		return
	}
	h.held = false
	i, t := h.i, &h.t
	s.save(i, t, h.known)
	if s.dirty != nil {
		s.dirty[i] = struct{}{}
	}
	// Celery links a child to its parent when either arrives; listing the
	// tasks that name a parent gives the same children, known or pending.
	if parent := parentOf(t); parent != h.oldParent {
		if h.oldParent != "" {
			s.unlinkChild(h.oldParent, i)
		}
		if parent != "" {
			parent = strings.Clone(parent)
			s.children[parent] = append(s.children[parent], i)
		}
	}
}

func parentOf(t *taskrec.Task) string {
	if t.Has(taskrec.FieldParentID) {
		return t.ParentID
	}
	return ""
}

func (s *State) unlinkChild(parent string, child uint32) {
	list := s.children[parent]
	// Children are evicted oldest first, so the one to go is nearly
	// always at the front.
	if i := slices.Index(list, child); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(s.children, parent)
	} else {
		s.children[parent] = list
	}
}

// orderKey is Flower's default sort key: the timestamp, or 0 for none. A
// NaN (only possible from a hand-made Event) would break the index's
// ordering, so it counts as none.
func orderKey(t *taskrec.Task) float64 {
	if t.Has(taskrec.FieldTimestamp) && !math.IsNaN(t.Timestamp) {
		return t.Timestamp
	}
	return 0
}

func setFloat(t *taskrec.Task, f taskrec.Field, dst *float64, v float64) {
	*dst = v
	t.Set |= f
}

// copyReceived takes what a late task-received contributes (Celery's
// merge_rules for RECEIVED).
func copyReceived(t *taskrec.Task, e *celery.Event) {
	copyString(t, e, taskrec.FieldName, celery.FieldName, &t.Name, e.Name)
	copyString(t, e, taskrec.FieldArgs, celery.FieldArgs, &t.Args, e.Args)
	copyString(t, e, taskrec.FieldKwargs, celery.FieldKwargs, &t.Kwargs, e.Kwargs)
	copyString(t, e, taskrec.FieldParentID, celery.FieldParentID, &t.ParentID, e.ParentID)
	copyString(t, e, taskrec.FieldRootID, celery.FieldRootID, &t.RootID, e.RootID)
	copyInt(t, e, taskrec.FieldRetries, celery.FieldRetries, &t.Retries, e.Retries)
	copyString(t, e, taskrec.FieldETA, celery.FieldETA, &t.ETA, e.ETA)
	copyString(t, e, taskrec.FieldExpires, celery.FieldExpires, &t.Expires, e.Expires)
}

// copyAll takes every record field the event carries.
func copyAll(t *taskrec.Task, e *celery.Event) {
	copyReceived(t, e)
	copyString(t, e, taskrec.FieldResult, celery.FieldResult, &t.Result, e.Result)
	copyString(t, e, taskrec.FieldException, celery.FieldException, &t.Exception, e.Exception)
	copyString(t, e, taskrec.FieldTraceback, celery.FieldTraceback, &t.Traceback, e.Traceback)
	copyString(t, e, taskrec.FieldExchange, celery.FieldExchange, &t.Exchange, e.Exchange)
	copyString(t, e, taskrec.FieldRoutingKey, celery.FieldRoutingKey, &t.RoutingKey, e.RoutingKey)
	if e.Has(celery.FieldRuntime) {
		if e.Runtime != nil {
			t.Runtime = *e.Runtime
			t.Set |= taskrec.FieldRuntime
		} else {
			t.Runtime = 0
			t.Set &^= taskrec.FieldRuntime
		}
	}
}

// copyString sets a field the event carries, to null when it sent null.
func copyString(t *taskrec.Task, e *celery.Event, f taskrec.Field, ef celery.EventField, dst *string, v string) {
	switch {
	case !e.Has(ef):
	case e.HasValue(ef):
		*dst = v
		t.Set |= f
	default:
		*dst = ""
		t.Set &^= f
	}
}

func copyInt(t *taskrec.Task, e *celery.Event, f taskrec.Field, ef celery.EventField, dst *int, v int) {
	switch {
	case !e.Has(ef):
	case e.HasValue(ef):
		*dst = v
		t.Set |= f
	default:
		*dst = 0
		t.Set &^= f
	}
}

// lookup finds the slot of a task id.
func (s *State) lookup(uuid string) (uint32, bool) {
	if id, ok := taskrec.ParseUUID(uuid); ok {
		return s.byUUID.Get(&id, &s.slots)
	}
	i, ok := s.byText[uuid]
	return i, ok
}

// taskID is the id of the task in slot i.
func (s *State) taskID(i uint32) string {
	sl := s.slots.At(i)
	if sl.HasTextID() {
		return s.textIDs[i]
	}
	return taskrec.FormatUUID(*s.slots.ID(i))
}

// itemLess orders index items by key, then by task id.
func (s *State) itemLess(a, b taskrec.Item) bool {
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	return s.compareIDs(a.Slot, b.Slot) < 0
}

// compareIDs compares the ids of two tasks as text; canonical uuids
// compare as their bytes do, without being formatted.
func (s *State) compareIDs(a, b uint32) int {
	x, y := s.slots.At(a), s.slots.At(b)
	if !x.HasTextID() && !y.HasTextID() {
		return bytes.Compare(s.slots.ID(a)[:], s.slots.ID(b)[:])
	}
	return strings.Compare(s.taskID(a), s.taskID(b))
}

// addTask takes the next slot of the ring for a new task, evicting the
// oldest task when the ring is full.
func (s *State) addTask(uuid string) uint32 {
	i := uint32(s.created % uint64(s.maxTasks))
	s.slots.Ensure(i)
	if s.slots.At(i).Live() {
		// Before counting the new task: evict reads the old one's
		// sequence number from created.
		s.evict(i)
	}
	s.created++
	sl := s.slots.At(i)
	*sl = taskrec.Slot{Set: taskrec.SlotLive, Cold: taskrec.NoRef}
	if id, ok := taskrec.ParseUUID(uuid); ok {
		*s.slots.ID(i) = id
		s.byUUID.Put(i, &s.slots)
	} else {
		sl.Set |= taskrec.SlotTextID
		uuid = strings.Clone(uuid)
		s.byText[uuid] = i
		s.textIDs[i] = uuid
	}
	s.live++
	return i
}

func (s *State) evict(i uint32) {
	sl := s.slots.At(i)
	t := s.load(i, taskrec.ViewText)
	if s.keepEvicted {
		if _, changed := s.dirty[i]; changed {
			// Not written yet: the next Drain hands it over anyway.
			s.evicted = append(s.evicted, Record{Seq: s.seqOf(i), Data: taskrec.EncodeRecord(nil, &t)})
			delete(s.dirty, i)
		}
	}
	if parent := parentOf(&t); parent != "" {
		s.unlinkChild(parent, i)
	}
	s.unindex(i, sl)
	s.releaseSymbols(sl)
	if sl.HasTextID() {
		delete(s.byText, s.textIDs[i])
		delete(s.textIDs, i)
	} else {
		s.byUUID.Remove(i, &s.slots)
	}
	s.arena.Release(sl.Cold)
	*sl = taskrec.Slot{Cold: taskrec.NoRef}
	s.live--
	s.arena.CompactDue(s.owner)
}

// owner is the arena's way back to the live slot that owns a record.
func (s *State) owner(i uint32) *taskrec.Ref {
	sl := s.slots.At(i)
	if !sl.Live() {
		return nil
	}
	return &sl.Cold
}

// The indexes a slot belongs to: its state's, and its name's and
// worker's when it has them (Flower does not index empty ones).
func (s *State) stateKey(sl *taskrec.Slot) uint32 { return s.sym.Folded[sl.State] }

func (s *State) nameKey(sl *taskrec.Slot) uint32 {
	if sl.Set&taskrec.FieldName == 0 {
		return 0
	}
	return s.sym.Folded[sl.Name]
}

func (s *State) workerKey(sl *taskrec.Slot) uint32 {
	if sl.Set&taskrec.FieldWorker == 0 {
		return 0
	}
	return s.sym.Folded[sl.Worker]
}

// The dimensions a task is indexed by.
const (
	dimState = iota
	dimName
	dimWorker
	dimReceived
	dims
)

// Keys of the received dimension's two indexes.
const (
	notReceived uint32 = iota
	received
)

// placement is where a task sits in one dimension: the index's key in
// its map and the item; ok is false when the task is not in any.
type placement struct {
	k  uint32
	it taskrec.Item
	ok bool
}

func (s *State) dimension(d int) map[uint32]*taskrec.Index {
	switch d {
	case dimState:
		return s.byState
	case dimName:
		return s.byName
	case dimWorker:
		return s.byWorker
	}
	return s.byReceived
}

// place returns where slot i, holding sl, sits in dimension d. The
// received dimension orders received tasks by that time, for the
// received_start/received_end filters and sort_by=received, and the
// others by timestamp, as the default order does.
func (s *State) place(d int, i uint32, sl *taskrec.Slot) placement {
	it := taskrec.Item{Key: sl.Key, Slot: i}
	switch d {
	case dimState:
		return placement{s.stateKey(sl), it, true}
	case dimName:
		k := s.nameKey(sl)
		return placement{k, it, k != 0}
	case dimWorker:
		k := s.workerKey(sl)
		return placement{k, it, k != 0}
	}
	if sl.Set&taskrec.FieldReceived != 0 {
		return placement{received, taskrec.Item{Key: s.receivedOf(sl), Slot: i}, true}
	}
	return placement{notReceived, it, true}
}

func (s *State) unindex(i uint32, sl *taskrec.Slot) {
	for d := range dims {
		s.removeFrom(d, s.place(d, i, sl))
	}
}

func (s *State) removeFrom(d int, p placement) {
	if !p.ok {
		return
	}
	m := s.dimension(d)
	x := m[p.k]
	if x == nil || !x.Remove(p.it, s.less) {
		panic("state: index out of step with its records")
	}
	if x.Len() == 0 {
		delete(m, p.k)
	}
}

func (s *State) insertInto(d int, p placement) {
	if !p.ok {
		return
	}
	m := s.dimension(d)
	x := m[p.k]
	if x == nil {
		x = &taskrec.Index{}
		m[p.k] = x
	}
	x.Insert(p.it, s.less)
}

// save writes t back to slot i and moves it in the indexes it changed.
func (s *State) save(i uint32, t *taskrec.Task, indexed bool) {
	sl := s.slots.At(i)
	old := *sl
	// The new record is written first and the old one released last: the
	// placements read the received time from them.
	s.buf = taskrec.Pack(s.buf[:0], t, &s.sym)
	sl.Cold = s.arena.Put(i, s.buf)
	sl.Key = orderKey(t)
	sl.Set = t.Set | old.Set&^taskrec.TaskFields
	sl.State = s.sym.ID(t.State)
	sl.Name = s.sym.ID(t.Name)
	sl.Worker = s.sym.ID(t.Worker)
	if sl.Set&taskrec.FieldName != 0 {
		s.named(sl.Name, 1)
	}
	// Index comparisons read only the item's key and the slot's id, which
	// does not change, so the slot can hold its new values already.
	for d := range dims {
		to := s.place(d, i, sl)
		if indexed {
			from := s.place(d, i, &old)
			if from == to {
				continue
			}
			s.removeFrom(d, from)
		}
		s.insertInto(d, to)
	}
	if old.Cold != taskrec.NoRef {
		s.releaseSymbols(&old)
		s.arena.Release(old.Cold)
	}
	s.arena.CompactDue(s.owner)
}

// releaseSymbols gives back the symbols the record of sl holds, once it
// is replaced or evicted.
func (s *State) releaseSymbols(sl *taskrec.Slot) {
	if sl.Set&taskrec.FieldName != 0 {
		s.named(sl.Name, -1)
	}
	taskrec.ReleasePacked(s.arena.Get(sl.Cold), sl.Set&taskrec.TaskFields, &s.sym)
	s.sym.Release(sl.State)
	s.sym.Release(sl.Name)
	s.sym.Release(sl.Worker)
}

// named counts a live task more (d = 1) or less (-1) under the name
// symbol id: a task type lasts as long as a task of that name.
func (s *State) named(id uint32, d int) {
	n := &s.sym.Named[id]
	if d > 0 {
		*n++
	} else {
		*n--
	}
	if s.types != nil && *n == uint32(max(d, 0)) {
		s.typeChanged(s.sym.Str(id), d > 0)
	}
}

// typeChanged notes for Drain that a task type came or went. A name
// absent from s.types is as the store has it: a change undoing one not
// drained yet cancels it, so that names which came and went between two
// drains cost the store nothing.
func (s *State) typeChanged(name string, kept bool) {
	if was, ok := s.types[name]; ok && was != kept {
		delete(s.types, name)
		return
	}
	s.types[name] = kept
}

// receivedOf is the received time of the record of sl.
func (s *State) receivedOf(sl *taskrec.Slot) float64 {
	return taskrec.PackedReceived(s.arena.Get(sl.Cold))
}

// load reads the record of slot i; text makes its strings.
func (s *State) load(i uint32, text func([]byte) string) taskrec.Task {
	var t taskrec.Task
	s.loadInto(&t, i, s.taskID(i), text, nil)
	return t
}

// loadInto reads the record of slot i, whose id is uuid, into t; text
// makes its strings, and ids, when it has room, holds the root and parent
// ids (see formatID).
func (s *State) loadInto(t *taskrec.Task, i uint32, uuid string, text func([]byte) string, ids *[]byte) {
	sl := s.slots.At(i)
	*t = taskrec.Task{
		UUID:  uuid,
		State: s.sym.Str(sl.State),
		Set:   sl.Set & taskrec.TaskFields,
	}
	if sl.Set&taskrec.FieldName != 0 {
		t.Name = s.sym.Str(sl.Name)
	}
	if sl.Set&taskrec.FieldWorker != 0 {
		t.Worker = s.sym.Str(sl.Worker)
	}
	if err := taskrec.Unpack(s.arena.Get(sl.Cold), sl.Key, t, &s.sym, text, ids); err != nil {
		panic(err) // only this package writes records
	}
}

// snapshot copies the record of slot i out of the state.
func (s *State) snapshot(i uint32) taskrec.Task {
	t := s.load(i, taskrec.CopyText)
	kids := s.children[t.UUID]
	t.Children = make([]string, len(kids))
	for j, k := range kids {
		t.Children[j] = s.taskID(k)
	}
	return t
}

// Task returns the record of a task.
func (s *State) Task(id string) (taskrec.Task, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.lookup(id)
	if !ok {
		return taskrec.Task{}, false
	}
	return s.snapshot(i), true
}

// TaskName returns the name of a task, without copying its record out.
func (s *State) TaskName(id string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.lookup(id)
	if !ok {
		return "", false
	}
	sl := s.slots.At(i)
	if sl.Set&taskrec.FieldName == 0 {
		return "", true
	}
	return s.sym.Str(sl.Name), true
}

// Len is the number of tasks kept.
func (s *State) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.live
}

// TaskTypes returns the sorted names of the tasks kept. Celery keeps
// every name it ever saw; a name here goes with the last task of that
// name, so that names that churn (one per deployment, per tenant) do not
// pile up.
func (s *State) TaskTypes() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var names []string
	for id, n := range s.sym.Named {
		if n > 0 {
			names = append(names, s.sym.Strs[id])
		}
	}
	slices.Sort(names)
	return names
}

// HasTaskType reports whether a task of that name is kept.
func (s *State) HasTaskType(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.sym.Lookup(name)
	return ok && s.sym.Named[id] > 0
}

// Symbols is the number of distinct strings the task records hold (names,
// hostnames, states, exchanges, routing keys, clients, and their
// casefolded forms).
func (s *State) Symbols() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sym.Len()
}

// Workers returns the known workers in the order they were first seen,
// the order Flower lists them in, with Alive computed now.
func (s *State) Workers() []Worker {
	now := s.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Worker, len(s.workerCreated))
	for i, w := range s.workerCreated {
		out[i] = w.snapshot(now)
	}
	return out
}

// WorkerNames returns the hostnames of the known workers, first seen first.
func (s *State) WorkerNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, len(s.workerCreated))
	for i, w := range s.workerCreated {
		out[i] = w.Hostname
	}
	return out
}

// KnowsWorker reports whether the state holds the worker.
func (s *State) KnowsWorker(hostname string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.workers[hostname] != nil
}

// WorkerAlive reports whether the worker is known and online now, by its
// heartbeats (Worker.AliveAt).
func (s *State) WorkerAlive(hostname string) bool {
	now := s.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	w := s.workers[hostname]
	return w != nil && w.AliveAt(now)
}

// PurgeWorkers forgets the workers that are offline and sent no event
// since before (Flower's --purge_offline_workers), and returns their
// hostnames. A worker comes back with its next event. A worker known only
// from task events (its worker events do not reach stamen, or it is a pod
// whose heartbeats stamen missed) has no heartbeat interval of its own:
// its task events count as heartbeats of Celery's default interval, which
// kept it online for two minutes after its last task. It goes once it
// sent nothing since before, as the silence of the others is measured.
func (s *State) PurgeWorkers(before time.Time) []string {
	now, cut := s.now(), epoch(before)
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	s.workerCreated = slices.DeleteFunc(s.workerCreated, func(w *worker) bool {
		if w.lastEvent >= cut || (w.heard && w.AliveAt(now)) {
			return false
		}
		delete(s.workers, w.Hostname)
		gone = append(gone, w.Hostname)
		s.forgetWorker(w.Hostname)
		return true
	})
	return gone
}

// forgetWorker notes for Drain that the worker is no longer kept.
func (s *State) forgetWorker(hostname string) {
	if s.dirty != nil {
		s.goneWorkers = append(s.goneWorkers, hostname)
	}
}
