package state

import (
	"slices"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

const (
	// maxHeartbeats is how many receive times Celery keeps per worker.
	maxHeartbeats = 4
	// defaultFreq is Celery's heartbeat interval for a worker known only
	// from task events (its own events always carry freq).
	defaultFreq = 60.0
	// expireWindow is HEARTBEAT_EXPIRE_WINDOW: a worker is alive for twice
	// its heartbeat interval after the last heartbeat.
	expireWindow = 2.0
)

// Worker is a worker as the events show it (celery.events.state.Worker).
type Worker struct {
	Hostname string
	// Alive is AliveAt the time of the snapshot.
	Alive bool
	PID   int
	// Freq is the heartbeat interval in seconds.
	Freq float64
	// Heartbeats are the last (at most four) receive times, ascending.
	Heartbeats []float64
	Clock      int64
	Active     int
	Processed  int
	Loadavg    []float64
	SWIdent    string
	SWVer      string
	SWSys      string
}

// worker is a Worker as the state keeps it.
type worker struct {
	Worker
	// lastEvent is when its latest event was received (epoch seconds),
	// for PurgeWorkers.
	lastEvent float64
	// heard: a worker event (online, heartbeat, offline) came from it,
	// not only task events.
	heard bool
}

// AliveAt reports whether the worker counts as online at now: it has a
// heartbeat and the last one is younger than twice its interval.
func (w *Worker) AliveAt(now time.Time) bool {
	if len(w.Heartbeats) == 0 {
		return false
	}
	return epoch(now) < w.Heartbeats[len(w.Heartbeats)-1]+w.Freq*expireWindow
}

func epoch(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// heartbeat records a receive time: the oldest goes once four are kept and
// a late one is sorted in, so the last stays the newest.
func (w *Worker) heartbeat(at float64) {
	n := len(w.Heartbeats)
	if n >= maxHeartbeats {
		w.Heartbeats = append(w.Heartbeats[:0], w.Heartbeats[1:]...)
	}
	if n > 0 && at > w.Heartbeats[len(w.Heartbeats)-1] {
		w.Heartbeats = append(w.Heartbeats, at)
		return
	}
	i, found := slices.BinarySearch(w.Heartbeats, at)
	for found && i < len(w.Heartbeats) && w.Heartbeats[i] == at {
		i++ // after equal times, as bisect.insort does
	}
	w.Heartbeats = slices.Insert(w.Heartbeats, i, at)
}

// update copies the worker fields an event carries; null ones reset.
func (w *Worker) update(e *celery.Event, clock int64) {
	w.Clock = clock
	if e.Has(celery.FieldPID) {
		w.PID = e.PID
	}
	// A null freq would make liveness meaningless (Python raises on it).
	if e.HasValue(celery.FieldFreq) {
		w.Freq = e.Freq
	}
	if e.Has(celery.FieldActive) {
		w.Active = e.Active
	}
	if e.Has(celery.FieldProcessed) {
		w.Processed = e.Processed
	}
	if e.Has(celery.FieldLoadavg) {
		w.Loadavg = slices.Clone(e.Loadavg) // not the caller's memory
	}
	if e.Has(celery.FieldSWIdent) {
		w.SWIdent = e.SWIdent
	}
	if e.Has(celery.FieldSWVer) {
		w.SWVer = e.SWVer
	}
	if e.Has(celery.FieldSWSys) {
		w.SWSys = e.SWSys
	}
}

// snapshot is a copy of w that shares no memory with it.
func (w *Worker) snapshot(now time.Time) Worker {
	c := *w
	c.Heartbeats = slices.Clone(w.Heartbeats)
	c.Loadavg = slices.Clone(w.Loadavg)
	c.Alive = w.AliveAt(now)
	return c
}
