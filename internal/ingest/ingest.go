// Package ingest feeds the broker's events into the events state and on
// from there: to the metrics, the task statistics, the per-worker counts,
// the live event stream, the store's log of the workers' latest events and
// the inspector, which learns of the workers that join.
package ingest

import (
	"bytes"
	"context"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/inspect"
	"github.com/stamen-dev/stamen/internal/metrics"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/stream"
	"github.com/stamen-dev/stamen/internal/taskstats"
	"github.com/stamen-dev/stamen/internal/workercount"
)

// Source is the workers' event stream: broker.Conn's ConsumeEvents, which
// calls fn with each batch of events until ctx ends or the connection is
// lost.
type Source interface {
	ConsumeEvents(ctx context.Context, fn func([]celery.Event)) error
}

// Config is what an Ingester feeds and is fed by. Every field but Stats,
// KeepWorkerEvent, Group and Logger is required.
type Config struct {
	Source       Source
	State        *state.State
	Stats        *taskstats.Aggregate // nil: no task statistics are counted
	WorkerCounts *workercount.Counter
	Metrics      *metrics.Metrics
	Events       *stream.Hub
	Inspector    *inspect.Inspector
	// KeepWorkerEvent, when set, is given each worker event's raw body
	// (with the time it was received) for the store, which keeps each
	// worker's latest; nil without a store.
	KeepWorkerEvent func(hostname string, raw []byte)
	// Group, when set, runs the inspections of the workers that join; nil
	// runs them in the Ingester's own group, which Run waits for before
	// it returns.
	Group  *sync.WaitGroup
	Logger *slog.Logger
}

// Ingester applies the workers' events and feeds them on.
type Ingester struct {
	cfg Config
	log *slog.Logger
	// group runs the inspections Observe starts: Config.Group or own.
	group *sync.WaitGroup
	own   sync.WaitGroup
	// routeBuf is Apply's, reused.
	routeBuf []state.Route
}

// New returns an Ingester of cfg's events; Run starts it.
func New(cfg Config) *Ingester {
	in := &Ingester{cfg: cfg, log: cfg.Logger, group: cfg.Group}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	if in.group == nil {
		in.group = &in.own
	}
	return in
}

// Run feeds the broker's events into the state until ctx ends, subscribing
// again a second after the stream ends. Without Config.Group it returns
// once the inspections it started are over too.
func (in *Ingester) Run(ctx context.Context) {
	defer in.own.Wait()
	for ctx.Err() == nil {
		err := in.cfg.Source.ConsumeEvents(ctx, func(evs []celery.Event) {
			in.Apply(ctx, evs)
		})
		if err != nil && ctx.Err() == nil {
			in.log.Warn("event stream ended; reconnecting", slog.Any("err", err))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// Apply applies a batch of events and feeds them on. A panic (a bug, or an
// event nobody foresaw) costs this batch only: it is logged and ingestion
// goes on, since a monitor that stops ingesting shows a frozen cluster.
func (in *Ingester) Apply(ctx context.Context, evs []celery.Event) {
	defer func() {
		if r := recover(); r != nil {
			in.log.Error("event batch abandoned after a panic; ingestion goes on",
				slog.Int("events", len(evs)), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	in.cfg.State.Apply(evs...)
	routes := in.routes(len(evs))
	in.cfg.State.Routes(evs, routes)
	in.countStats(evs, routes)
	first := in.cfg.WorkerCounts.Add(evs)
	for i := range evs {
		task := evs[i].Name
		if task == "" {
			task = routes[i].Name
		}
		in.observe(ctx, &evs[i], task, first+uint64(i))
	}
}

// routes is a slice of n routes, reused from batch to batch: Apply runs on
// one goroutine.
func (in *Ingester) routes(n int) []state.Route {
	if cap(in.routeBuf) < n {
		in.routeBuf = make([]state.Route, n)
	}
	in.routeBuf = in.routeBuf[:n]
	return in.routeBuf
}

// Observe feeds one event the state has applied, the seq-th, to the metrics
// and the live stream, and what it says of workers to the store and the
// inspector. Apply calls it for each event of a batch; it is exported for
// the tests and benchmarks that apply events to the state themselves. The
// inspection of a new worker runs until ctx ends at the latest.
func (in *Ingester) Observe(ctx context.Context, e *celery.Event, seq uint64) {
	task := e.Name
	if task == "" && strings.HasPrefix(e.Type, "task-") {
		// Only task-sent and task-received carry the name.
		task, _ = in.cfg.State.TaskName(e.UUID)
	}
	in.observe(ctx, e, task, seq)
}

// observe is Observe with the name of the event's task (empty for a
// worker event) found already.
func (in *Ingester) observe(ctx context.Context, e *celery.Event, task string, seq uint64) {
	isTask := strings.HasPrefix(e.Type, "task-")
	m := metrics.Event{Type: e.Type, UUID: e.UUID, Task: task, Worker: e.Hostname, Timestamp: e.Timestamp}
	if isTask {
		if e.Runtime != nil {
			m.Runtime = *e.Runtime
		}
		m.HasETA = e.ETA != ""
		m.Exception = e.Exception
	} else {
		m.Active = e.Active
	}
	if e.Type != "task-sent" {
		in.cfg.Metrics.Observe(m)
	}
	// Raw is the broker's to reuse once the batch is applied. The copy
	// kept says when the event was received: a replica that replays it
	// later counts the worker's liveness from then.
	if in.cfg.KeepWorkerEvent != nil && !isTask && len(e.Raw) > 0 {
		in.cfg.KeepWorkerEvent(e.Hostname, celery.WithLocalReceived(e.Raw, e.LocalReceived))
	}
	if in.cfg.Events.Subscribers() > 0 {
		in.cfg.Events.Publish(stream.Message{Type: e.Type, Task: task, Worker: e.Hostname, Data: bytes.Clone(e.Raw),
			ID: in.cfg.WorkerCounts.Instance() + ":" + strconv.FormatUint(seq, 10)})
	}
	// A worker that joins after stamen started is inspected so that
	// /api/workers and the control operations know it without ?refresh=1;
	// on heartbeats too, for one whose worker-online stamen missed.
	if (e.Type == "worker-online" || e.Type == "worker-heartbeat") && !in.cfg.Inspector.Known(e.Hostname) {
		if discover := in.cfg.Inspector.Discover(ctx, e.Hostname); discover != nil {
			in.group.Go(discover)
		}
	}
}

// countStats counts a batch's task events in the aggregate, each keyed by
// its task's name, worker and queue (the routing key its task-sent event
// gave): the state's record holds them after Apply, as most events carry
// none of them; routes are the state's, one per event.
func (in *Ingester) countStats(evs []celery.Event, routes []state.Route) {
	if in.cfg.Stats == nil {
		return
	}
	var out []taskstats.Event
	for i := range evs {
		e := &evs[i]
		kind, ok := taskstats.KindOf(e.Type)
		if !ok {
			continue
		}
		se := taskstats.Event{Kind: kind, Time: e.Timestamp}
		if !e.HasValue(celery.FieldTimestamp) {
			se.Time = e.LocalReceived
		}
		r := &routes[i]
		name, worker, queue := r.Name, r.Worker, r.RoutingKey
		if !r.Known {
			// Evicted already (a state smaller than a batch): the event's own.
			name, queue = e.Name, e.RoutingKey
			if !e.Reconciled {
				worker = e.Hostname
			}
		}
		se.Name, se.Worker, se.Queue = name, worker, queue
		if e.Runtime != nil {
			se.Runtime, se.HasRuntime = *e.Runtime, true
		}
		out = append(out, se)
	}
	if len(out) > 0 {
		in.cfg.Stats.Add(out...)
	}
}
