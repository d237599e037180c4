// Package reconcile finishes the tasks whose last events stamen missed.
//
// Redis pub/sub keeps nothing for a subscriber that is not there: a task
// that finished while stamen was down, or while its subscription was being
// re-established, stays RECEIVED or STARTED for good. Celery's result
// backend still knows how it ended (celery-task-meta-<id>), so the
// Reconciler asks it about the tasks left unfinished and feeds what it
// holds back as the event the worker would have sent (task-succeeded,
// task-failed, task-revoked), marked Reconciled, through the normal
// ingestion path: the state, the store, the metrics and /api/events all
// see it.
//
// It runs a round when kicked (at every (re)subscription of the event
// stream, which is also the start) over every task unfinished at that
// moment, and every Interval over the tasks unfinished for longer than
// After. A round looks up at most MaxLookups tasks, Batch at a time, each
// batch bounded by Timeout.
package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// Hostname is the hostname of the events the Reconciler makes: they come
// from stamen, not from a worker. The state does not take it for the
// task's worker (celery.Event.Reconciled).
const Hostname = "stamen-reconcile"

// RawMarker is the key, true, that marks a reconciled event's JSON (its
// Raw, which /api/events shows) beside Celery's own keys.
const RawMarker = "stamen_reconciled"

// Source lists the tasks to reconcile: the ids of at most limit tasks in
// an unfinished state (PENDING, RECEIVED, STARTED, RETRY) whose latest
// event is older than before, oldest first. *state.State implements it;
// so does the PostgreSQL store.
type Source interface {
	StaleTasks(ctx context.Context, before time.Time, limit int) ([]string, error)
}

// Results reads result documents in bulk: one entry per id, in order, nil
// where the backend holds none (or one stamen cannot read).
type Results interface {
	Results(ctx context.Context, ids []string) ([]*celery.Result, error)
}

// Defaults of Config.
const (
	DefaultAfter      = 5 * time.Minute
	DefaultInterval   = time.Minute
	DefaultMaxLookups = 1000
	DefaultBatch      = 100
	DefaultTimeout    = 5 * time.Second
	// DefaultPause is the wait between rounds while a kicked round's tasks
	// are not all looked up: the rest follow soon, not one Interval later.
	DefaultPause = time.Second
	// retryPause is, in Pauses, the wait after a failed round while a
	// kick's tasks are not through.
	retryPause = 5
)

// Config is what a Reconciler needs.
type Config struct {
	Source  Source
	Results Results
	// Apply feeds events into the normal ingestion path.
	Apply func(ctx context.Context, events []celery.Event)
	// After: the periodic rounds look at tasks unfinished this long (and
	// an unresolved lookup is not repeated for this long, but after a
	// kick).
	After time.Duration
	// Interval between periodic rounds.
	Interval time.Duration
	// MaxLookups bounds the result documents read per round, Batch those
	// per request, and Timeout each request.
	MaxLookups int
	Batch      int
	Timeout    time.Duration
	Pause      time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Reconciler runs reconciliation rounds; see the package comment.
type Reconciler struct {
	cfg  Config
	kick chan struct{}

	mu sync.Mutex
	// cut, when set, is the latest kick's time: the next rounds look at
	// every task unfinished before it, until a round gets through them.
	cut time.Time
	// gen counts the kicks, so that a round does not clear the cut of a
	// kick that came while it ran.
	gen uint64
	// checked remembers the tasks whose lookup found nothing final, and
	// when, so that rounds move on to others instead of asking about the
	// same oldest tasks for ever. At most maxChecked entries, oldest
	// first in order.
	checked map[string]time.Time
	order   []string

	// Totals since start, for /metrics.
	looked, reconciled atomic.Uint64
}

// Totals returns the result documents read and the tasks reconciled since
// the Reconciler was made.
func (r *Reconciler) Totals() (looked, reconciled uint64) {
	return r.looked.Load(), r.reconciled.Load()
}

// Stats is what one round did.
type Stats struct {
	Stale      int // unfinished tasks the source returned
	Looked     int // result documents asked for
	Reconciled int // tasks finished from their documents
	// Exhausted: every stale task was looked up or recently was.
	Exhausted bool
}

// New returns a Reconciler; Run starts it.
func New(cfg Config) *Reconciler {
	if cfg.After <= 0 {
		cfg.After = DefaultAfter
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxLookups <= 0 {
		cfg.MaxLookups = DefaultMaxLookups
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Pause <= 0 {
		cfg.Pause = DefaultPause
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{cfg: cfg, kick: make(chan struct{}, 1), checked: map[string]time.Time{}}
}

// maxChecked bounds the remembered unresolved lookups: the lookups of
// ten rounds.
func (r *Reconciler) maxChecked() int { return 10 * r.cfg.MaxLookups }

// Kick asks for a round over every task unfinished now, without waiting:
// the event stream has just (re)subscribed, and what finished while it was
// away is only in the result backend.
func (r *Reconciler) Kick() {
	r.mu.Lock()
	r.cut = r.cfg.Now()
	r.gen++
	// What was still running before the gap may have finished in it.
	clear(r.checked)
	r.order = r.order[:0]
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run runs rounds until ctx ends: when kicked, every Interval, and every
// Pause while a kicked round is not through.
func (r *Reconciler) Run(ctx context.Context) {
	t := time.NewTimer(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-t.C:
		}
		r.mu.Lock()
		gen := r.gen
		r.mu.Unlock()
		st, err := r.Round(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			r.cfg.Logger.Warn("reconciliation round failed", slog.Any("err", err))
		case st.Reconciled > 0:
			r.cfg.Logger.Info("reconciled tasks from the result backend", slog.Int("stale", st.Stale),
				slog.Int("looked_up", st.Looked), slog.Int("reconciled", st.Reconciled))
		case st.Looked > 0:
			r.cfg.Logger.Debug("no unfinished task had a final result document", slog.Int("looked_up", st.Looked))
		}
		next := r.cfg.Interval
		r.mu.Lock()
		switch {
		case r.cut.IsZero():
		case err != nil:
			// The backend may be coming back with the broker.
			next = min(next, retryPause*r.cfg.Pause)
		case !st.Exhausted:
			next = r.cfg.Pause
		case r.gen == gen:
			// Through; unless a kick came during the round, which the
			// pending signal on r.kick covers.
			r.cut = time.Time{}
		}
		r.mu.Unlock()
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}

// Round looks up at most MaxLookups unfinished tasks and applies what
// their result documents say.
func (r *Reconciler) Round(ctx context.Context) (Stats, error) {
	var st Stats
	now := r.cfg.Now()
	r.mu.Lock()
	before := now.Add(-r.cfg.After)
	if r.cut.After(before) {
		before = r.cut
	}
	// Forget the unresolved lookups old enough to be repeated.
	for len(r.order) > 0 && now.Sub(r.checked[r.order[0]]) >= r.cfg.After {
		delete(r.checked, r.order[0])
		r.order = r.order[1:]
	}
	skip := len(r.checked)
	r.mu.Unlock()

	limit := r.cfg.MaxLookups + skip
	stale, err := r.cfg.Source.StaleTasks(ctx, before, limit)
	if err != nil {
		return st, fmt.Errorf("list unfinished tasks: %w", err)
	}
	st.Stale = len(stale)
	todo := make([]string, 0, min(len(stale), r.cfg.MaxLookups))
	r.mu.Lock()
	for _, id := range stale {
		if _, ok := r.checked[id]; ok {
			continue
		}
		if len(todo) == r.cfg.MaxLookups {
			break
		}
		todo = append(todo, id)
	}
	r.mu.Unlock()
	st.Exhausted = len(stale) < limit && len(todo) < r.cfg.MaxLookups || len(todo) == 0

	for start := 0; start < len(todo); start += r.cfg.Batch {
		batch := todo[start:min(start+r.cfg.Batch, len(todo))]
		bctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		results, err := r.cfg.Results.Results(bctx, batch)
		cancel()
		if err != nil {
			st.Exhausted = false
			return st, fmt.Errorf("read %d result documents: %w", len(batch), err)
		}
		st.Looked += len(batch)
		r.looked.Add(uint64(len(batch)))
		at := r.cfg.Now()
		events := make([]celery.Event, 0, len(batch))
		var unresolved []string
		for i, id := range batch {
			var res *celery.Result
			if i < len(results) {
				res = results[i]
			}
			e, ok := Event(id, res, at)
			if !ok {
				unresolved = append(unresolved, id)
				continue
			}
			events = append(events, e)
		}
		if len(events) > 0 {
			r.cfg.Apply(ctx, events)
			st.Reconciled += len(events)
			r.reconciled.Add(uint64(len(events)))
		}
		r.remember(unresolved, at)
	}
	return st, nil
}

// remember notes lookups that found nothing final, within maxChecked.
func (r *Reconciler) remember(ids []string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if _, ok := r.checked[id]; ok {
			continue
		}
		if len(r.order) >= r.maxChecked() {
			delete(r.checked, r.order[0])
			r.order = r.order[1:]
		}
		r.checked[id] = at
		r.order = append(r.order, id)
	}
}

// Event is the event a worker would have sent for a task that ended as res
// says: task-succeeded with the result's repr, task-failed with the
// exception's repr and the traceback, task-revoked; its timestamp is the
// document's date_done (now when unreadable). ok is false when res is nil
// or not final (PENDING, STARTED, RETRY, custom states): there is nothing
// to apply. The event is marked Reconciled, with Hostname and, in its
// JSON, RawMarker.
func Event(id string, res *celery.Result, now time.Time) (celery.Event, bool) {
	if res == nil || res.Unreadable != nil {
		return celery.Event{}, false
	}
	ts := doneAt(res.DateDone, now)
	fields := map[string]any{"uuid": id, "hostname": Hostname, "timestamp": ts, RawMarker: true}
	switch res.Status {
	case celery.StateSuccess:
		fields["type"] = "task-succeeded"
		repr := "None"
		if len(res.Result) > 0 {
			if s, err := pyfmt.ReprJSON(res.Result); err == nil {
				repr = s
			}
		}
		fields["result"] = truncate(repr)
	case celery.StateFailure:
		fields["type"] = "task-failed"
		fields["exception"] = truncate(pyfmt.ExceptionRepr(res.Result))
		if res.Traceback != nil {
			fields["traceback"] = *res.Traceback
		}
	case celery.StateRevoked:
		fields["type"] = "task-revoked"
	default:
		return celery.Event{}, false
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return celery.Event{}, false
	}
	evs, err := celery.DecodeEvents(raw)
	if err != nil || len(evs) != 1 {
		return celery.Event{}, false
	}
	e := evs[0]
	e.Reconciled = true
	e.LocalReceived = float64(now.UnixNano()) / 1e9
	return e, true
}

// maxRepr is Celery's resultrepr_maxsize: a worker's task-succeeded
// carries at most this much of the result's repr.
const maxRepr = 1024

func truncate(s string) string {
	if len(s) <= maxRepr {
		return s
	}
	n := maxRepr - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// doneAt reads date_done (ISO 8601, naive UTC before Celery 5.6, with
// +00:00 since) as epoch seconds; now when missing or unreadable.
func doneAt(dateDone *string, now time.Time) float64 {
	if dateDone != nil {
		for _, layout := range []string{"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999"} {
			if t, err := time.Parse(layout, *dateDone); err == nil {
				return float64(t.UnixNano()) / 1e9
			}
		}
	}
	return float64(now.UnixNano()) / 1e9
}
