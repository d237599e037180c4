// Package state keeps the cluster state derived from Celery events, as
// celery.events.state.State does for Flower: task records with Celery's
// out-of-order merge rules, workers with heartbeat liveness, the seen task
// names, and the queries of GET /api/tasks.
package state

import (
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/stamen-dev/stamen/internal/celery"
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
}

// State is the in-memory cluster state. Apply is meant to be called from
// one ingest goroutine while any number of readers query; all methods are
// safe for concurrent use.
type State struct {
	mu         sync.RWMutex
	maxTasks   int
	maxWorkers int
	now        func() time.Time

	tasks map[string]*entry
	// created lists tasks oldest first from created[head]: eviction takes
	// the head, so it is O(1) amortised at any MaxTasks.
	created []*entry
	head    int
	order   order
	// pending holds, per unknown parent id, the children waiting for it.
	pending map[string][]*entry

	workers       map[string]*Worker
	workerCreated []*Worker
	types         map[string]struct{}

	// clock is the receiver's Lamport clock (kombu's LamportClock in
	// Celery's EventReceiver), which stamps task-sent events.
	clock int64
}

// entry is a task record plus its bookkeeping.
type entry struct {
	t       Task // Children unused: built from children on snapshot
	key     float64
	next    []*entry // order links
	indexed bool
	evicted bool

	children []*entry
	dead     int      // evicted entries still in children
	parents  []*entry // entries whose children include this one

	pendingOn  string // parent id this entry waits for in State.pending
	pendingIdx int
}

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
	return &State{
		maxTasks:   cfg.MaxTasks,
		maxWorkers: cfg.MaxWorkers,
		now:        cfg.Now,
		tasks:      make(map[string]*entry),
		order:      newOrder(),
		pending:    make(map[string][]*entry),
		workers:    make(map[string]*Worker),
		types:      make(map[string]struct{}),
	}
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
	for i := range events {
		s.apply(&events[i], now)
	}
}

func (s *State) apply(e *celery.Event, now float64) {
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
		s.taskEvent(e, subject, clock, received)
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
	switch {
	case offline:
		w.Heartbeats = w.Heartbeats[:0]
	case localReceived != 0 && e.Timestamp != 0:
		w.heartbeat(localReceived)
	}
}

func (s *State) addWorker(hostname string) *Worker {
	if len(s.workerCreated) >= s.maxWorkers {
		old := s.workerCreated[0]
		s.workerCreated = slices.Delete(s.workerCreated, 0, 1)
		delete(s.workers, old.Hostname)
	}
	w := &Worker{Hostname: intern(hostname), Freq: defaultFreq}
	s.workers[w.Hostname] = w
	s.workerCreated = append(s.workerCreated, w)
	return w
}

// precedence is Celery's state precedence, lower is stronger; custom
// states rank between FAILURE and REVOKED.
func precedence(state string) int {
	switch state {
	case Success:
		return 0
	case Failure:
		return 1
	case Revoked:
		return 3
	case Started:
		return 4
	case Received:
		return 5
	case Rejected:
		return 6
	case Retry:
		return 7
	case Pending:
		return 8
	}
	return 2
}

// taskState maps the subject of a task-<subject> event to its state and
// the field that records when it happened (0 for custom events).
func taskState(subject string) (string, Field) {
	switch subject {
	case "sent":
		return Pending, FieldSent
	case "received":
		return Received, FieldReceived
	case "started":
		return Started, FieldStarted
	case "succeeded":
		return Success, FieldSucceeded
	case "failed":
		return Failure, FieldFailed
	case "retried":
		return Retry, FieldRetried
	case "revoked":
		return Revoked, FieldRevoked
	case "rejected":
		return Rejected, FieldRejected
	}
	return strings.ToUpper(subject), 0
}

func (s *State) taskEvent(e *celery.Event, subject string, clock int64, localReceived float64) {
	if !e.HasValue(celery.FieldUUID) || !e.HasValue(celery.FieldHostname) || !e.HasValue(celery.FieldTimestamp) {
		return
	}
	ent := s.tasks[e.UUID]
	if ent == nil {
		ent = s.addTask(e.UUID)
	}
	t := &ent.t
	if subject == "sent" {
		// task-sent comes from the client, not from a worker.
		t.Client = intern(e.Hostname)
		t.Set |= FieldClient
	} else {
		w := s.workers[e.Hostname]
		if w == nil {
			w = s.addWorker(e.Hostname)
		}
		t.Worker = w.Hostname
		t.Set |= FieldWorker
		// A task event is a heartbeat too. Celery passes its two times
		// swapped here, so what it records is the event's own timestamp;
		// that quirk is kept for identical liveness.
		if localReceived != 0 && e.Timestamp != 0 {
			w.heartbeat(e.Timestamp)
		}
	}

	state, at := taskState(subject)
	if at != 0 {
		setFloat(t, at, stampOf(t, at), e.Timestamp)
	}
	// An event whose state precedes the current one arrived out of order:
	// it does not change the state. A late task-received only contributes
	// its own details; any other late event is still copied in, timestamp
	// and clock included, exactly as Celery updates the record's __dict__.
	late := state != Retry && t.State != Retry && precedence(state) > precedence(t.State)
	if late && state == Received {
		copyReceived(t, e)
	} else {
		copyAll(t, e)
		t.Clock = clock
		setFloat(t, FieldTimestamp, &t.Timestamp, e.Timestamp)
		if !late {
			t.State = state
		}
	}
	switch key := orderKey(t); {
	case !ent.indexed:
		ent.key, ent.indexed = key, true
		s.order.insert(ent)
	default:
		s.order.move(ent, key)
	}

	if t.Has(FieldName) {
		s.types[t.Name] = struct{}{}
	}
	if t.Has(FieldParentID) && t.ParentID != "" {
		if parent := s.tasks[t.ParentID]; parent != nil {
			link(parent, ent)
		} else {
			s.wait(t.ParentID, ent)
		}
	}
	if waiting, ok := s.pending[t.UUID]; ok {
		delete(s.pending, t.UUID)
		for _, child := range waiting {
			child.pendingOn = ""
			link(ent, child)
		}
	}
}

// orderKey is Flower's default sort key: the timestamp, or 0 for none. A
// NaN (only possible from a hand-made Event) would break the index's
// ordering, so it counts as none.
func orderKey(t *Task) float64 {
	if t.Has(FieldTimestamp) && !math.IsNaN(t.Timestamp) {
		return t.Timestamp
	}
	return 0
}

// stampOf returns the field that holds the time of the event at.
func stampOf(t *Task, at Field) *float64 {
	switch at {
	case FieldSent:
		return &t.Sent
	case FieldReceived:
		return &t.Received
	case FieldStarted:
		return &t.Started
	case FieldSucceeded:
		return &t.Succeeded
	case FieldFailed:
		return &t.Failed
	case FieldRetried:
		return &t.Retried
	case FieldRevoked:
		return &t.Revoked
	default:
		return &t.Rejected
	}
}

func setFloat(t *Task, f Field, dst *float64, v float64) {
	*dst = v
	t.Set |= f
}

// copyReceived takes what a late task-received contributes (Celery's
// merge_rules for RECEIVED).
func copyReceived(t *Task, e *celery.Event) {
	copyString(t, e, FieldName, celery.FieldName, &t.Name, intern(e.Name))
	copyString(t, e, FieldArgs, celery.FieldArgs, &t.Args, e.Args)
	copyString(t, e, FieldKwargs, celery.FieldKwargs, &t.Kwargs, e.Kwargs)
	copyString(t, e, FieldParentID, celery.FieldParentID, &t.ParentID, sameAs(e.ParentID, t.UUID))
	copyString(t, e, FieldRootID, celery.FieldRootID, &t.RootID, sameAs(e.RootID, t.UUID))
	copyInt(t, e, FieldRetries, celery.FieldRetries, &t.Retries, e.Retries)
	copyString(t, e, FieldETA, celery.FieldETA, &t.ETA, e.ETA)
	copyString(t, e, FieldExpires, celery.FieldExpires, &t.Expires, e.Expires)
}

// copyAll takes every record field the event carries.
func copyAll(t *Task, e *celery.Event) {
	copyReceived(t, e)
	copyString(t, e, FieldResult, celery.FieldResult, &t.Result, e.Result)
	copyString(t, e, FieldException, celery.FieldException, &t.Exception, e.Exception)
	copyString(t, e, FieldTraceback, celery.FieldTraceback, &t.Traceback, e.Traceback)
	copyString(t, e, FieldExchange, celery.FieldExchange, &t.Exchange, intern(e.Exchange))
	copyString(t, e, FieldRoutingKey, celery.FieldRoutingKey, &t.RoutingKey, intern(e.RoutingKey))
	if e.Has(celery.FieldRuntime) {
		if e.Runtime != nil {
			t.Runtime = *e.Runtime
			t.Set |= FieldRuntime
		} else {
			t.Runtime = 0
			t.Set &^= FieldRuntime
		}
	}
}

// copyString sets a field the event carries, to null when it sent null.
func copyString(t *Task, e *celery.Event, f Field, ef celery.EventField, dst *string, v string) {
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

func copyInt(t *Task, e *celery.Event, f Field, ef celery.EventField, dst *int, v int) {
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

// sameAs returns id, sharing the memory of uuid when equal: most tasks are
// their own root, and a million records need not hold two copies.
func sameAs(id, uuid string) string {
	if id == uuid {
		return uuid
	}
	return id
}

// intern shares the few distinct names (task names, hostnames, routing)
// across a million records instead of keeping one copy per event.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

func (s *State) addTask(uuid string) *entry {
	if len(s.tasks) >= s.maxTasks {
		s.evictOldest()
	}
	ent := &entry{t: Task{UUID: uuid, State: Pending}}
	s.tasks[uuid] = ent
	s.created = append(s.created, ent)
	return ent
}

func (s *State) evictOldest() {
	if s.head >= len(s.created) {
		return
	}
	e := s.created[s.head]
	s.created[s.head] = nil
	s.head++
	// Reclaim the consumed prefix once it is most of the slice.
	if s.head >= 1024 && s.head*2 >= len(s.created) {
		n := copy(s.created, s.created[s.head:])
		clear(s.created[n:])
		s.created = s.created[:n]
		s.head = 0
	}
	delete(s.tasks, e.t.UUID)
	if e.indexed {
		s.order.remove(e)
	}
	e.evicted = true
	// Parents drop evicted children lazily, when they are mostly dead.
	for _, p := range e.parents {
		if p == e || p.evicted {
			continue
		}
		p.dead++
		if p.dead*2 > len(p.children) {
			p.children = slices.DeleteFunc(p.children, func(c *entry) bool { return c.evicted })
			p.dead = 0
		}
	}
	for _, c := range e.children {
		if c != e {
			c.parents = slices.DeleteFunc(c.parents, func(p *entry) bool { return p == e })
		}
	}
	e.parents, e.children = nil, nil
	if e.pendingOn != "" {
		s.unwait(e)
	}
}

// link makes child one of parent's children, once.
func link(parent, child *entry) {
	if slices.Contains(child.parents, parent) {
		return
	}
	parent.children = append(parent.children, child)
	child.parents = append(child.parents, parent)
}

// wait parks child until a task with id parentID appears.
func (s *State) wait(parentID string, child *entry) {
	if child.pendingOn == parentID {
		return
	}
	if child.pendingOn != "" {
		s.unwait(child)
	}
	child.pendingOn = parentID
	child.pendingIdx = len(s.pending[parentID])
	s.pending[parentID] = append(s.pending[parentID], child)
}

// unwait removes a child from its pending list in O(1).
func (s *State) unwait(child *entry) {
	list := s.pending[child.pendingOn]
	last := len(list) - 1
	if i := child.pendingIdx; i <= last && list[i] == child {
		list[i] = list[last]
		list[i].pendingIdx = i
		list[last] = nil
		list = list[:last]
	}
	if len(list) == 0 {
		delete(s.pending, child.pendingOn)
	} else {
		s.pending[child.pendingOn] = list
	}
	child.pendingOn = ""
}

// snapshot copies a record out of the state.
func (e *entry) snapshot() Task {
	t := e.t
	t.Children = make([]string, 0, max(len(e.children)-e.dead, 0))
	for _, c := range e.children {
		if !c.evicted {
			t.Children = append(t.Children, c.t.UUID)
		}
	}
	return t
}

// Task returns the record of a task.
func (s *State) Task(id string) (Task, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.tasks[id]
	if e == nil {
		return Task{}, false
	}
	return e.snapshot(), true
}

// Len is the number of tasks kept.
func (s *State) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.tasks)
}

// TaskTypes returns the sorted names of all tasks seen since the state was
// created (evicted tasks' names stay, as in Celery).
func (s *State) TaskTypes() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.types))
	for n := range s.types {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
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
