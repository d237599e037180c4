// Package app wires stamen together: the broker internal/broker opens by
// URL scheme (or the embedded one), the events state fed by the broker's
// event stream, the inspector, the handlers and the HTTP stack. cmd/stamen
// parses flags into a Config; integration tests build an App directly.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stamen-dev/stamen/handlers"
	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/broker"
	"github.com/stamen-dev/stamen/internal/broker/embedded"
	"github.com/stamen-dev/stamen/internal/brokertls"
	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/ingest"
	"github.com/stamen-dev/stamen/internal/inspect"
	"github.com/stamen-dev/stamen/internal/metrics"
	"github.com/stamen-dev/stamen/internal/reconcile"
	"github.com/stamen-dev/stamen/internal/redact"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/bolt"
	"github.com/stamen-dev/stamen/internal/store/memory"
	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/stream"
	"github.com/stamen-dev/stamen/internal/taskstats"
	"github.com/stamen-dev/stamen/internal/version"
	"github.com/stamen-dev/stamen/internal/workercount"
)

// Config is everything stamen can be told at start-up.
type Config struct {
	// BrokerURL selects the broker by scheme: redis, rediss, amqp, amqps.
	// Empty starts the embedded broker.
	BrokerURL string
	// ResultBackend is a redis(s):// URL, or rpc:// with an AMQP broker.
	// Empty means rpc:// on AMQP and the broker's own URL on Redis (stamen
	// cannot read the Celery app's configuration, so give it explicitly when
	// the workers use another database).
	ResultBackend string
	// BrokerTransportOptions and ResultBackendTransportOptions are JSON
	// objects, as Celery's broker_transport_options and
	// result_backend_transport_options (Redis only: global_keyprefix,
	// master_name, sentinel_kwargs, sep, priority_steps). When the result
	// backend has none, it takes the broker's master_name and
	// sentinel_kwargs.
	BrokerTransportOptions        string
	ResultBackendTransportOptions string
	// BrokerUseSSL is Celery's broker_use_ssl (brokertls.Parse with the
	// broker's kind): TLS settings for every broker URL, and for the Redis
	// result backend when it is the broker's URL. RedisBackendUseSSL is
	// redis_backend_use_ssl, for a Redis result backend of its own URL.
	// nil: the URLs alone say (rediss://, amqps://, ssl_* parameters).
	BrokerUseSSL       *brokertls.Settings
	RedisBackendUseSSL *brokertls.Settings
	// EmbeddedAddr is where the embedded broker listens.
	EmbeddedAddr string
	// EmbeddedPassword is the password the embedded broker requires of
	// every client. Empty generates one at start; a non-loopback
	// EmbeddedAddr needs it given, as the API needs credentials there.
	EmbeddedPassword string

	MaxTasks int
	// MaxWorkers bounds the workers the events state keeps, the one
	// silent longest going first (Flower's --max_workers; 0:
	// state.DefaultMaxWorkers).
	MaxWorkers int
	// MaxTaskAge, when set, evicts the tasks whose latest event is older.
	MaxTaskAge time.Duration
	// PurgeOfflineWorkers, when set, forgets workers offline and silent
	// that long: in the state, the store, the inspector's cache and the
	// metrics (Flower's --purge_offline_workers).
	PurgeOfflineWorkers time.Duration
	InspectTimeout      time.Duration
	BrokerTimeout       time.Duration
	ApplyTimeout        time.Duration
	URLPrefix           string
	MaxBodyBytes        int64
	SSEHeartbeat        time.Duration
	// MaxEventStreams bounds the /api/events streams served at once
	// (0: DefaultMaxEventStreams).
	MaxEventStreams int
	// DBPath, when set, keeps the history in a store there and restores it
	// at start (Flower's --persistent with --db). A postgres:// or
	// postgresql:// URL selects PostgreSQL instead (internal/store/pg):
	// the history shared by a fleet of replicas, from which the read
	// operations are answered; MaxTasks then bounds this replica's
	// in-memory hot set only.
	DBPath string
	// DBMaxTasks, with PostgreSQL, keeps only the newest that many tasks
	// there (0: no bound by count); MaxTaskAge bounds it by age too.
	DBMaxTasks int64
	// DBTimeout bounds each read of PostgreSQL (0: 2 s): past it the read
	// answers 503.
	DBTimeout time.Duration
	// SaveInterval is how often changed records are written to the store
	// (Flower's --state_save_interval); a crash loses at most this much.
	SaveInterval time.Duration
	// EventQueue names a durable RabbitMQ event queue that outlives
	// stamen (amqp.Config.EventQueue), bounded by EventQueueTTL and
	// EventQueueMaxLength; empty keeps a private queue per process.
	EventQueue          string
	EventQueueTTL       time.Duration
	EventQueueMaxLength int64
	// Reconciliation (internal/reconcile), with a Redis result backend:
	// tasks unfinished longer than ReconcileAfter are looked up every
	// ReconcileInterval, and every unfinished task whenever the event
	// stream (re)subscribes, at most ReconcileMaxLookups per round
	// (0: reconcile.DefaultMaxLookups; negative turns reconciliation off).
	ReconcileAfter      time.Duration
	ReconcileInterval   time.Duration
	ReconcileMaxLookups int
	// ReadOnly refuses every write operation with 403, whatever the
	// credentials (Flower 2.1's --read_only).
	ReadOnly bool
	// NoEnableEvents keeps stamen from broadcasting enable_events to the
	// workers, at every subscription of the event stream and every 5 s
	// after (Flower's --enable_events=false): workers send task events
	// only if started with -E or told by someone else.
	NoEnableEvents bool
	// XHeaders takes the client's address the audit log records from a
	// proxy's X-Real-Ip or X-Forwarded-For, as Tornado does with Flower's
	// --xheaders; off, those headers are ignored (clientAddr).
	XHeaders bool
	// AuditMaxAge and AuditMaxRecords bound the audit log (0: default).
	// It is kept in the store with DBPath, in memory otherwise.
	AuditMaxAge     time.Duration
	AuditMaxRecords int
	// TaskRuntimeBuckets are the buckets of flower_task_runtime_seconds,
	// in seconds (Flower's --task_runtime_metric_buckets; nil:
	// metrics.DefaultRuntimeBuckets). New refuses those
	// metrics.CheckRuntimeBuckets refuses.
	TaskRuntimeBuckets []float64
	// MaxSeries is the budget of Flower's series on /metrics (0:
	// metrics.DefaultMaxSeries); NoTaskWorkerLabel drops the worker label
	// from the per-task series (metrics.Limits).
	MaxSeries         int
	NoTaskWorkerLabel bool
	// QueueLengthInterval is how often stamen_queue_length is refreshed
	// (0: 15 s).
	QueueLengthInterval time.Duration
	// Now is the clock of the task statistics; nil is time.Now.
	Now func() time.Time
	// AllowedOrigins are the origins (crossorigin.ParseOrigins' form) whose
	// pages may call the API from a browser: a dashboard served elsewhere.
	// They get CORS answers, and their write calls are let through; every
	// other origin's write calls are refused (crossorigin.CheckWrites).
	AllowedOrigins []string
	// CheckHost answers only the requests whose Host is localhost, an IP
	// address or one of AllowedHosts (crossorigin.ParseHosts' form), and
	// 421 to the others, which is what keeps a DNS rebinding page out.
	// cmd/stamen turns it on on a loopback address or a unix socket, and
	// wherever --allowed_hosts is given.
	CheckHost    bool
	AllowedHosts []string
	// Auth holds the credentials; nil or empty serves without them.
	Auth *auth.Authenticator
	// SignIn, when set, serves the sign-in's pages (signin.Paths: /login,
	// /logout) under the prefix; Auth must let them through (AddPublic)
	// and identify its sessions (UseSessions).
	SignIn http.Handler
	Logger *slog.Logger

	// ready is what /readyz asks (App.notReady); New sets it. Without it
	// /readyz is not served.
	ready func(context.Context) map[string]string
}

// App is a running stamen without its HTTP listener.
type App struct {
	cfg       Config
	log       *slog.Logger
	State     *state.State
	Inspector *inspect.Inspector
	Metrics   *metrics.Metrics
	Events    *stream.Hub
	Audit     *audit.Log
	// Stats is the task activity GET /api/stats/tasks reads; nil with
	// PostgreSQL, whose shared history it reads instead.
	Stats *taskstats.Aggregate
	// WorkerCounts counts each worker's task events since this process
	// started (GET /api/stats/workers) and numbers the applied events (the
	// ids of /api/events).
	WorkerCounts *workercount.Counter
	Handler      http.Handler
	// BrokerURL is the URL workers should use (the embedded broker's, with
	// its password, when no broker was configured).
	BrokerURL string
	// ResultBackendURL is Config.ResultBackend, or when that is empty
	// with the embedded broker, the embedded one's URL with its password.
	ResultBackendURL string

	broker   broker.Conn
	handlers *handlers.Handlers
	// ingester feeds the broker's events into the state and on.
	ingester *ingest.Ingester
	// reconciler is nil without a Redis result backend.
	reconciler *reconcile.Reconciler
	// db is the history's store --db picks: store (the bbolt file),
	// Postgres, or without --db memory.Backend, which keeps nothing. nil
	// only when New failed before it picked one.
	db history.Store
	// roles are what db keeps besides the writes (history.Roles); a nil
	// role is served by the in-memory default.
	roles history.Roles
	store *bolt.Store
	// Postgres is the shared history with --db postgres://..., else nil.
	Postgres *pg.Store
	// lost is stamen_store_lost_records_total: the task records the
	// buffer dropped while PostgreSQL could not be written.
	lost prometheus.Collector
	// writeBatch is the store's Write; tests make it fail.
	writeBatch func(context.Context, history.Batch) error
	// buffer writes the state's changes to db behind ingestion, keeping
	// a failed write's batch for the next flush (history.Buffer); nil
	// without a store.
	buffer  *history.Buffer
	closers []func() error
	closed  sync.Once
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New connects to the broker and starts ingesting events. Close stops it.
func New(ctx context.Context, cfg Config) (*App, error) {
	// From here on a server that repeats a password in its error (some
	// answer an AUTH they do not know by quoting its arguments) has it
	// masked in the logs, errors and bodies too.
	redact.RegisterURLs(cfg.BrokerURL, cfg.ResultBackend, cfg.DBPath)
	redact.RegisterSettings(cfg.BrokerTransportOptions)
	redact.RegisterSettings(cfg.ResultBackendTransportOptions)
	redact.Register(cfg.EmbeddedPassword)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxTasks <= 0 {
		cfg.MaxTasks = 10000
	}
	if cfg.InspectTimeout <= 0 {
		cfg.InspectTimeout = time.Second
	}
	if cfg.BrokerTimeout <= 0 {
		cfg.BrokerTimeout = 5 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.TaskRuntimeBuckets != nil {
		if err := metrics.CheckRuntimeBuckets(cfg.TaskRuntimeBuckets); err != nil {
			return nil, fmt.Errorf("task_runtime_metric_buckets: %w", err)
		}
	}
	a := &App{cfg: cfg, log: cfg.Logger}
	a.BrokerURL, a.ResultBackendURL = cfg.BrokerURL, cfg.ResultBackend
	if cfg.BrokerURL == "" {
		e, err := embedded.Start(embedded.Config{Addr: cfg.EmbeddedAddr, Password: cfg.EmbeddedPassword,
			ResultBackend: cfg.ResultBackend, Logger: a.log})
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, e.Close)
		a.BrokerURL, a.ResultBackendURL = e.BrokerURL, e.ResultBackendURL
	}
	var results broker.ResultBackend
	var err error
	a.broker, results, err = broker.Open(ctx, broker.Config{
		BrokerURL: a.BrokerURL, ResultBackend: a.ResultBackendURL,
		BrokerTransportOptions: cfg.BrokerTransportOptions, ResultBackendTransportOptions: cfg.ResultBackendTransportOptions,
		BrokerUseSSL: cfg.BrokerUseSSL, RedisBackendUseSSL: cfg.RedisBackendUseSSL,
		EventQueue: cfg.EventQueue, EventQueueTTL: cfg.EventQueueTTL, EventQueueMaxLength: cfg.EventQueueMaxLength,
		NoEnableEvents: cfg.NoEnableEvents, OpTimeout: cfg.BrokerTimeout, Logger: a.log,
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	a.State = state.New(state.Config{MaxTasks: cfg.MaxTasks, MaxWorkers: cfg.MaxWorkers, TrackChanges: cfg.DBPath != "",
		// PostgreSQL keeps more than the hot set: a task evicted before
		// its record was flushed must still reach it.
		DrainEvicted: pg.IsURL(cfg.DBPath),
		// Reconciliation finds unfinished tasks in PostgreSQL, mostly ones
		// this replica does not hold (after a restart).
		FinishUnknown: pg.IsURL(cfg.DBPath)})
	a.lost = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "stamen_store_lost_records_total",
		Help: "Task records dropped unwritten because PostgreSQL was unreachable longer than the buffer (one record per hot-set task) lasts.",
	}, func() float64 {
		if a.buffer == nil {
			return 0
		}
		return float64(a.buffer.Lost())
	})
	switch {
	case pg.IsSettings(cfg.DBPath):
		a.Close()
		return nil, errors.New("--db holds PostgreSQL's key=value settings (not shown: they may hold a password); PostgreSQL is selected by a URL, postgres://user:password@host:5432/dbname")
	case pg.IsURL(cfg.DBPath):
		if err := a.openPostgres(ctx); err != nil {
			a.Close()
			return nil, err
		}
	case cfg.DBPath != "":
		a.newStats()
		if err := a.openStore(); err != nil {
			a.Close()
			return nil, err
		}
	default:
		a.db = memory.Backend{}
	}
	a.roles = a.db.Roles(history.Limits{
		Sent:      history.SentLimits{Max: handlers.DefaultSentMax, MaxAge: handlers.DefaultSentMaxAge},
		MaxQueues: handlers.MaxSentQueues,
	})
	if a.Stats == nil {
		a.newStats()
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	// Bounded as the events state's workers are: the ones that sent
	// nothing for longest go first in both.
	a.WorkerCounts = workercount.New(cfg.MaxWorkers, now())
	a.Inspector = inspect.New(a.broker, cfg.InspectTimeout, cfg.MaxWorkers, a.log)
	// An inspect of all workers waits only for those alive by heartbeat.
	a.Inspector.SetAlive(a.aliveWorkers)
	if b, ok := a.broker.(broker.QueueLookupSetter); ok {
		// Native delayed delivery needs the queues as the workers declared
		// them.
		b.SetQueueLookup(a.Inspector.QueueDeclaration)
	}
	a.Metrics = metrics.New(cfg.TaskRuntimeBuckets, a.gauges()...)
	a.Metrics.SetLimits(metrics.Limits{MaxSeries: cfg.MaxSeries, NoTaskWorker: cfg.NoTaskWorkerLabel})
	a.Events = stream.NewHub(cfg.MaxEventStreams)
	a.ingester = a.newIngester()
	// After the ingester, which applies what it reconciles.
	a.reconciler = a.newReconciler(results)
	a.Audit = a.newAuditLog()
	// A store kept under looser bounds is trimmed before the first read.
	a.Audit.Prune(ctx)
	h := handlers.New(handlers.Config{
		Sent:           a.roles.Sent,
		Queues:         a.roles.Queues,
		Audit:          a.Audit,
		State:          a.State,
		Tasks:          a.roles.Tasks,
		Inspector:      a.Inspector,
		Broker:         a.broker,
		Results:        results,
		Logger:         a.log,
		ControlTimeout: cfg.InspectTimeout,
		BrokerTimeout:  cfg.BrokerTimeout,
		ApplyTimeout:   cfg.ApplyTimeout,
		Origin:         origin(),
		Events:         a.Events,
		SSEHeartbeat:   cfg.SSEHeartbeat,
		Stats:          a.statsReader(),
		WorkerCounts:   a.WorkerCounts,
		ReadOnly:       cfg.ReadOnly,
	})
	a.handlers = h
	cfg.ready = a.notReady
	a.Handler, err = newHTTPHandler(h, a.Metrics, a.Audit, cfg)
	if err != nil {
		a.Close()
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	if a.buffer != nil {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.flushLoop(runCtx)
		}()
	}
	if a.Postgres != nil {
		a.wg.Go(func() { a.compactStatsLoop(runCtx) })
	}
	if a.Postgres != nil && (cfg.MaxTaskAge > 0 || cfg.DBMaxTasks > 0) {
		a.wg.Go(func() { a.retainLoop(runCtx) })
	}
	if cfg.MaxTaskAge > 0 {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.expireLoop(runCtx)
		}()
	}
	// Before ingestion starts, so that the first subscription kicks it.
	if r := a.reconciler; r != nil {
		if s, ok := a.broker.(broker.Subscriber); ok {
			s.SetOnSubscribe(r.Kick)
		}
		a.wg.Go(func() { r.Run(runCtx) })
	}
	a.wg.Go(func() { a.onlineLoop(runCtx) })
	a.wg.Add(5)
	go func() {
		defer a.wg.Done()
		a.purgeLoop(runCtx)
	}()
	go func() {
		defer a.wg.Done()
		a.queueLengthLoop(runCtx)
	}()
	go func() {
		defer a.wg.Done()
		tick(runCtx, a.auditPruneEvery(), func(time.Time) { a.Audit.Prune(runCtx) })
	}()
	go func() {
		defer a.wg.Done()
		a.ingester.Run(runCtx)
	}()
	go func() {
		defer a.wg.Done()
		// Fill the worker cache at start, as Flower does.
		rctx, cancel := context.WithTimeout(runCtx, cfg.InspectTimeout+time.Second)
		defer cancel()
		_ = a.Inspector.Refresh(rctx, "")
	}()
	return a, nil
}

// newIngester is what feeds the broker's events into the state and on.
// The inspections of the workers that join run in a.wg, which Close waits
// for.
func (a *App) newIngester() *ingest.Ingester {
	cfg := ingest.Config{
		Source:       a.broker,
		State:        a.State,
		Stats:        a.Stats,
		WorkerCounts: a.WorkerCounts,
		Metrics:      a.Metrics,
		Events:       a.Events,
		Inspector:    a.Inspector,
		Group:        &a.wg,
		Logger:       a.log,
	}
	if a.buffer != nil {
		// Kept until the next flush writes them to the store.
		cfg.KeepWorkerEvent = a.buffer.NoteWorker
	}
	return ingest.New(cfg)
}

// newReconciler is the reconciler when the result backend can be read in
// bulk (Redis), nil otherwise: see internal/reconcile. New kicks its
// rounds at every (re)subscription of the event stream. Its source of
// unfinished tasks is the store's where it keeps one (the shared history
// with PostgreSQL), else the state.
func (a *App) newReconciler(results broker.ResultBackend) *reconcile.Reconciler {
	bulk, ok := results.(broker.BulkResults)
	if !ok || a.cfg.ReconcileMaxLookups < 0 {
		return nil
	}
	var source reconcile.Source = a.State
	if a.roles.Stale != nil {
		source = a.roles.Stale
	}
	return reconcile.New(reconcile.Config{
		Source:     source,
		Results:    bulk,
		Apply:      a.ingester.Apply,
		After:      a.cfg.ReconcileAfter,
		Interval:   a.cfg.ReconcileInterval,
		MaxLookups: a.cfg.ReconcileMaxLookups,
		Timeout:    a.cfg.BrokerTimeout,
		Logger:     a.log,
	})
}

// aliveWorkers lists the workers alive by heartbeat in the events state.
func (a *App) aliveWorkers() []string {
	var alive []string
	for _, w := range a.State.Workers() {
		if w.Alive {
			alive = append(alive, w.Hostname)
		}
	}
	return alive
}

func origin() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("stamen%d@%s", os.Getpid(), host)
}

// openStore opens the store and restores the state from it.
func (a *App) openStore() error {
	st, err := bolt.Open(a.cfg.DBPath)
	if err != nil {
		return err
	}
	a.store, a.db = st, st
	a.newBuffer(st.Write)
	start, skipped := time.Now(), 0
	err = st.Load(func(seq uint64, data []byte) error {
		if err := a.State.Restore(seq, data); err != nil {
			skipped++ // a record this version cannot read is skipped, not fatal
		}
		return nil
	}, func(raw []byte) error {
		if evs, err := celery.DecodeStoredEvents(raw); err == nil {
			a.State.Apply(evs...)
		}
		return nil
	}, a.State.RestoreType)
	if err != nil {
		return fmt.Errorf("restore from %s: %w", a.cfg.DBPath, err)
	}
	if err := a.restoreStats(); err != nil {
		return err
	}
	a.log.Info("state restored", slog.String("db", a.cfg.DBPath), slog.Int("tasks", a.State.Len()),
		slog.Int("unreadable", skipped), slog.Duration("took", time.Since(start)))
	return nil
}

// flush writes what changed since the last flush to the store. When the
// write fails the batch is kept and written with the next one.
func (a *App) flush(ctx context.Context) error {
	return errors.Join(a.flushStats(), a.flushState(ctx))
}

// flushState writes the state's changes to the store.
func (a *App) flushState(ctx context.Context) error {
	return a.buffer.Flush(ctx)
}

// newBuffer makes the write-behind buffer of the state's changes, written
// with write (through writeBatch, which tests replace).
func (a *App) newBuffer(write func(context.Context, history.Batch) error) {
	a.writeBatch = write
	a.buffer = history.NewBuffer(history.BufferConfig{
		Source: a.State,
		Write:  func(ctx context.Context, b history.Batch) error { return a.writeBatch(ctx, b) },
		// PostgreSQL's history outlives the hot set.
		Shared:   a.Postgres != nil,
		MaxTasks: a.cfg.MaxTasks,
		Logger:   a.log,
	})
}

// flushLoop writes the state's changes to the store every SaveInterval.
func (a *App) flushLoop(ctx context.Context) {
	every := a.cfg.SaveInterval
	if every <= 0 {
		every = time.Second
	}
	tick(ctx, every, func(time.Time) {
		// A flush under way when stamen stops is finished, not cut short:
		// the closing flush would only write its batch again.
		if err := a.flush(context.WithoutCancel(ctx)); err != nil {
			a.log.Error("store flush failed", slog.Any("err", err))
		}
	})
}

// tick calls fn every period until ctx ends.
func tick(ctx context.Context, period time.Duration, fn func(now time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			fn(now)
		}
	}
}

// expireLoop evicts the tasks older than MaxTaskAge, every second: a task
// outlives the limit by at most that.
func (a *App) expireLoop(ctx context.Context) {
	tick(ctx, time.Second, func(now time.Time) {
		if n := a.State.Expire(now.Add(-a.cfg.MaxTaskAge)); n > 0 {
			a.log.Debug("expired old tasks", slog.Int("tasks", n))
		}
	})
}

// onlineLoop turns flower_worker_online to 0, every second, for the
// workers whose heartbeats stopped without a worker-offline event (see
// metrics.Metrics.MarkOffline).
func (a *App) onlineLoop(ctx context.Context) {
	tick(ctx, time.Second, func(time.Time) { a.Metrics.MarkOffline(a.State.WorkerAlive) })
}

// purgeEvery is how often purgeLoop runs: a worker outlives the purge age
// by at most this much, and metric series of forgotten task names live
// this long.
func (a *App) purgeEvery() time.Duration {
	if p := a.cfg.PurgeOfflineWorkers; p > 0 {
		return min(max(p/4, 10*time.Millisecond), time.Minute)
	}
	return time.Minute
}

// purgeLoop forgets what nothing refers to any more, every purgeEvery.
func (a *App) purgeLoop(ctx context.Context) {
	tick(ctx, a.purgeEvery(), a.purge)
}

// purge forgets the workers offline longer than PurgeOfflineWorkers (when
// set) everywhere they are kept, and the metric series of workers and task
// names the state no longer knows.
func (a *App) purge(now time.Time) {
	if p := a.cfg.PurgeOfflineWorkers; p > 0 {
		cut := now.Add(-p)
		// The store hears of them through the state's next Drain.
		if gone := a.State.PurgeWorkers(cut); len(gone) > 0 {
			a.log.Debug("purged offline workers", slog.Int("workers", len(gone)))
		}
		a.Inspector.Purge(cut, a.State.KnowsWorker)
	}
	a.Metrics.Retain(a.State.KnowsWorker, a.State.HasTaskType)
}

// gauges are the scrape-time metrics of the running app.
func (a *App) gauges() []prometheus.Collector {
	reconciled := func(tasks bool) func() float64 {
		return func() float64 {
			if a.reconciler == nil {
				return 0
			}
			looked, done := a.reconciler.Totals()
			if tasks {
				return float64(done)
			}
			return float64(looked)
		}
	}
	// fromPostgres reads a figure of the PostgreSQL store, 0 without one.
	fromPostgres := func(read func(*pg.Store) float64) func() float64 {
		return func() float64 {
			if a.Postgres == nil {
				return 0
			}
			return read(a.Postgres)
		}
	}
	build := version.Get()
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "stamen_build_info", Help: "Always 1; the labels say which build of stamen runs.",
			ConstLabels: prometheus.Labels{"version": build.Version, "revision": build.Commit,
				"build_date": build.Date, "goversion": build.GoVersion},
		}, func() float64 { return 1 }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "stamen_reconcile_lookups_total", Help: "Result documents read to reconcile unfinished tasks.",
		}, reconciled(false)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "stamen_reconciled_tasks_total", Help: "Tasks finished from their result documents after their events were missed.",
		}, reconciled(true)),
		a.lost,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "stamen_store_unwritable_records_total",
			Help: "Task records and worker events kept in memory only: a task id, name, state, parent id or worker name longer than PostgreSQL's indexes take.",
		}, fromPostgres(func(st *pg.Store) float64 { return float64(st.Unwritable()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "stamen_store_written_records_total",
			Help: "Task records this replica wrote to PostgreSQL: those of the tasks it owns among the live replicas, and those it held for another that had not written them in time.",
		}, fromPostgres(func(st *pg.Store) float64 { return float64(st.Written()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "stamen_store_taken_over_records_total",
			Help: "Task records this replica wrote to PostgreSQL for another replica that owned them but had not written them a grace period later (it stopped, or was cut off).",
		}, fromPostgres(func(st *pg.Store) float64 { return float64(st.TakenOver()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "stamen_store_held_records",
			Help: "Task records this replica holds for the other replicas that own them, until it has checked they were written.",
		}, fromPostgres(func(st *pg.Store) float64 { return float64(st.Held()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "stamen_store_live_replicas",
			Help: "Replicas of the fleet this one saw live in PostgreSQL at its last write, itself included: the task records are divided among them.",
		}, fromPostgres(func(st *pg.Store) float64 { return float64(st.Replicas()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "stamen_tasks_stored", Help: "Tasks held in the state.",
		}, func() float64 { return float64(a.State.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "stamen_store_size_bytes",
			Help: "Size of the store: the --db file, or with PostgreSQL the fleet's stamen tables with their indexes (read at most every 30 s). 0 without --persistent.",
		}, func() float64 {
			// PostgreSQL's is read at most every 30 s; a failed read
			// keeps the last value (pg.Store.Size).
			n, _ := a.db.Size(context.Background())
			return float64(n)
		}),
	}
}

// Broker returns the broker connection (tests use it to inspect workers
// beyond what the API shows).
func (a *App) Broker() handlers.Broker { return a.broker }

// Close stops ingestion and closes the broker connections. Calls after
// the first do nothing.
func (a *App) Close() {
	a.closed.Do(a.close)
}

func (a *App) close() {
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	if a.Inspector != nil {
		a.Inspector.Close()
	}
	if a.broker != nil {
		_ = a.broker.Close()
	}
	if a.db != nil {
		var err error
		if a.buffer != nil {
			err = a.flush(context.Background())
		}
		if a.Postgres != nil && err == nil {
			// After the last flush: the records held for the other
			// replicas are written where their rows lack them, and the
			// others take this one's share from their next flush. Not
			// when that flush failed: PostgreSQL is away, and waiting on
			// it again would only hold the stop up; this replica's row
			// goes stale by itself.
			err = a.Postgres.Leave(context.Background())
		}
		if err := errors.Join(err, a.db.Close()); err != nil {
			a.log.Error("closing the store", slog.Any("err", err))
		}
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		_ = a.closers[i]()
	}
}

// IsLoopback reports whether host (an address without port, or empty for
// all interfaces) is a loopback address: embedded.IsLoopback, which decides
// whether the embedded broker may generate its password.
func IsLoopback(host string) bool { return embedded.IsLoopback(host) }
