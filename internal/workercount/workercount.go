// Package workercount counts, per worker, the task events stamen applied
// since it started (GET /api/stats/workers), as Flower's counter of events
// by worker and type does for its dashboard, and numbers every applied
// event so that a client adding live events (GET /api/events) to an
// answer can tell which ones the answer holds already.
package workercount

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// Kind is a counted task event type.
type Kind int

// The counted kinds, the task events a worker sends.
const (
	Received Kind = iota
	Started
	Succeeded
	Failed
	Retried
	Revoked
	Rejected
	NumKinds
)

// KindOf maps an event type to its kind; false for the types not counted
// (task-sent comes from a client, worker events are not task events).
func KindOf(typ string) (Kind, bool) {
	switch typ {
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
	case "task-rejected":
		return Rejected, true
	}
	return 0, false
}

// Counts are one worker's counts, indexed by Kind.
type Counts [NumKinds]int64

func (c *Counts) total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// DefaultMaxWorkers is New's bound when it is given none (the events
// state's default).
const DefaultMaxWorkers = 5000

type entry struct {
	counts Counts
	// last is the sequence number of its latest counted event, which
	// says which worker was heard from longest ago.
	last uint64
}

// Counter is safe for concurrent use.
type Counter struct {
	mu       sync.Mutex
	max      int
	instance string
	since    time.Time
	seq      uint64
	workers  map[string]*entry
	// droppedWorkers and droppedEvents: the workers forgotten at the
	// bound, and the events they had been counted for.
	droppedWorkers, droppedEvents int64
}

// New returns a counter that keeps at most maxWorkers workers
// (DefaultMaxWorkers when maxWorkers <= 0), counting from now.
func New(maxWorkers int, now time.Time) *Counter {
	if maxWorkers <= 0 {
		maxWorkers = DefaultMaxWorkers
	}
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (Go 1.24)
	return &Counter{max: maxWorkers, instance: hex.EncodeToString(b[:]), since: now, workers: map[string]*entry{}}
}

// Instance is this counter's random name, which tells one stamen process
// from another in the ids of their event streams.
func (c *Counter) Instance() string { return c.instance }

// Add numbers the events, in order, and counts the task events among them
// under the hostname they came from. It returns the number of evs[0]; the
// next ones follow it. Events the events state would ignore (a task event
// without uuid, hostname or timestamp) and the reconciler's (no worker
// sent them) are numbered but not counted.
func (c *Counter) Add(evs []celery.Event) (first uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first = c.seq + 1
	for i := range evs {
		c.seq++
		e := &evs[i]
		k, ok := KindOf(e.Type)
		if !ok || e.Reconciled || !e.HasValue(celery.FieldUUID) || !e.HasValue(celery.FieldHostname) ||
			!e.HasValue(celery.FieldTimestamp) || e.Hostname == "" {
			continue
		}
		w := c.workers[e.Hostname]
		if w == nil {
			w = c.add(e.Hostname)
		}
		w.counts[k]++
		w.last = c.seq
	}
	return first
}

// add starts counting a worker, forgetting the one heard from longest ago
// at the bound. The scan costs what the events state's own does, once per
// new worker beyond the bound.
func (c *Counter) add(hostname string) *entry {
	if len(c.workers) >= c.max {
		var oldest string
		var last uint64
		for name, w := range c.workers {
			if oldest == "" || w.last < last {
				oldest, last = name, w.last
			}
		}
		c.droppedWorkers++
		c.droppedEvents += c.workers[oldest].counts.total()
		delete(c.workers, oldest)
	}
	// A copy: the event's strings may point into the broker's buffer.
	w := &entry{}
	c.workers[strings.Clone(hostname)] = w
	return w
}

// Snapshot is the counts at one moment.
type Snapshot struct {
	Instance string
	Since    time.Time
	// Seq is the number of the latest event numbered.
	Seq                           uint64
	Workers                       map[string]Counts
	DroppedWorkers, DroppedEvents int64
}

// Snapshot copies the counts, consistent with Seq.
func (c *Counter) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{Instance: c.instance, Since: c.since, Seq: c.seq, Workers: make(map[string]Counts, len(c.workers)),
		DroppedWorkers: c.droppedWorkers, DroppedEvents: c.droppedEvents}
	for name, w := range c.workers {
		s.Workers[name] = w.counts
	}
	return s
}
