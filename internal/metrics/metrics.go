// Package metrics exports Prometheus metrics under Flower's names, so that
// dashboards built for Flower keep working, plus stamen's own.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Event is what the metrics need to know of one Celery event.
type Event struct {
	Type   string
	UUID   string
	Task   string // task name, resolved from the state when the event lacks it
	Worker string
	// Timestamp is the event's own time (epoch seconds).
	Timestamp float64
	Runtime   float64
	HasETA    bool
	// Active is a heartbeat's number of executing tasks.
	Active int
	// Exception is a task-failed event's exception repr.
	Exception string
}

// maxPending bounds the tasks remembered between received and started
// (for the prefetch metrics); beyond it the metrics lose precision, not
// memory.
const maxPending = 100000

// MaxTaskNames bounds the task names that label series; the events of
// further names are counted under OtherTask. Each name costs a series per
// worker in five metrics, and task names are whatever clients send.
const MaxTaskNames = 1000

// OtherTask is the task label of the names beyond MaxTaskNames.
const OtherTask = "other"

// MaxEventTypes bounds the event types, beyond Celery's own, that label
// flower_events_total; the events of further types count under
// OtherEventType. An event's type is whatever its sender wrote (custom
// task-* events, or anything at all), and every type costs a series per
// worker and task name, which Retain never frees while both are kept.
const MaxEventTypes = 100

// OtherEventType is the type label of the types beyond MaxEventTypes.
const OtherEventType = "other"

// celeryTypes are the event types Celery sends: they always have series
// of their own and take no slot of MaxEventTypes.
var celeryTypes = map[string]bool{
	"task-sent": true, "task-received": true, "task-started": true, "task-succeeded": true,
	"task-failed": true, "task-retried": true, "task-revoked": true, "task-rejected": true,
	"worker-online": true, "worker-heartbeat": true, "worker-offline": true,
}

// DefaultMaxSeries is the default budget of Flower's series (flower_*):
// with stamen's own, Go's and the process' series a scrape stays under
// 10,000 series whatever the churn of workers and task names.
const DefaultMaxSeries = 8000

// OtherWorker is the worker label of the per-task series that do not fit
// the series budget.
const OtherWorker = "other"

// Limits bound what a scrape shows.
type Limits struct {
	// MaxSeries bounds the series of Flower's metrics (0:
	// DefaultMaxSeries). A new (worker, task) pair whose series would
	// pass it is counted under worker "other", and when that does not fit
	// either, under task "other" too; a new worker whose gauges would pass
	// it has none until the budget frees (a purge). What is folded is
	// counted in stamen_metrics_folded_total. The series of worker "other"
	// and task "other" are allowed past it: at most one histogram and two
	// gauges, and an event counter per event type.
	MaxSeries int
	// NoTaskWorker drops the worker from the per-task series: their
	// worker label is empty, which Prometheus stores as no label, so a
	// task's series are one whatever the number of workers that ran it.
	// The per-worker gauges keep it.
	NoTaskWorker bool
}

type pending struct {
	received float64
	task     string
	worker   string
	eta      bool
}

// Metrics is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	events     *prometheus.CounterVec
	runtime    *prometheus.HistogramVec
	prefetch   *prometheus.GaugeVec
	prefetched *prometheus.GaugeVec
	online     *prometheus.GaugeVec
	executing  *prometheus.GaugeVec

	ingested                     *prometheus.CounterVec
	ingestedTask, ingestedWorker prometheus.Counter
	folded                       *prometheus.CounterVec
	foldedWorker, foldedTask     prometheus.Counter
	foldedGauges                 prometheus.Counter
	httpDur                      *prometheus.HistogramVec
	browserRefusals              *prometheus.CounterVec
	ops                          opsMetrics

	mu      sync.Mutex
	pending map[string]pending
	// The children of the vectors above by their labels: a map lookup costs
	// a third of WithLabelValues' hashing and validation, paid on every
	// event. They hold what the vectors hold, no more.
	eventSeries  map[[3]string]prometheus.Counter
	taskSeries   map[[2]string]*taskSeries
	workerSeries map[string]*workerSeries
	// taskNames are the task names that have series of their own.
	taskNames map[string]struct{}
	// eventTypes are the types beyond Celery's that have series of their
	// own, at most MaxEventTypes.
	eventTypes map[string]struct{}

	limits Limits
	// seriesGauge and budgetGauge show series and limits.MaxSeries. They
	// are set, not read at scrape time by a function taking mu: Retain
	// holds mu while it deletes label values, which waits for a vector's
	// lock that a scrape in progress holds, so a scrape must never wait
	// for mu.
	seriesGauge, budgetGauge prometheus.Gauge
	// series is what the children above cost in series: a histogram its
	// buckets, +Inf, sum and count (histCost), anything else one.
	series   int
	histCost int
}

// taskSeries are one (worker, task)'s children, each made on first use
// as WithLabelValues would, so that a scrape shows the same series.
type taskSeries struct {
	worker, task string
	runtime      prometheus.Observer
	prefetch     prometheus.Gauge
	prefetched   prometheus.Gauge
}

// workerSeries are one worker's children, made on first use.
type workerSeries struct {
	name string
	// dropped: the worker's gauges did not fit the series budget.
	dropped   bool
	online    prometheus.Gauge
	executing prometheus.Gauge
}

// New registers every metric on a private registry. runtimeBuckets are
// flower_task_runtime_seconds' buckets (nil: DefaultRuntimeBuckets; else
// as CheckRuntimeBuckets wants them, or New panics). gauges are extra
// scrape-time values (store size, broker reconnects, ...).
func New(runtimeBuckets []float64, gauges ...prometheus.Collector) *Metrics {
	if runtimeBuckets == nil {
		runtimeBuckets = DefaultRuntimeBuckets
	}
	m := &Metrics{
		reg:          prometheus.NewRegistry(),
		pending:      map[string]pending{},
		eventSeries:  map[[3]string]prometheus.Counter{},
		taskSeries:   map[[2]string]*taskSeries{},
		workerSeries: map[string]*workerSeries{},
		taskNames:    map[string]struct{}{},
		eventTypes:   map[string]struct{}{},
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flower_events_total", Help: "Number of task events.",
		}, []string{"worker", "type", "task"}),
		runtime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flower_task_runtime_seconds", Help: "Task runtime.", Buckets: runtimeBuckets,
		}, []string{"worker", "task"}),
		prefetch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flower_task_prefetch_time_seconds", Help: "The time the task spent waiting at the worker to be processed.",
		}, []string{"worker", "task"}),
		prefetched: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flower_worker_prefetched_tasks", Help: "Number of tasks of given type prefetched at a worker.",
		}, []string{"worker", "task"}),
		online: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flower_worker_online", Help: "Worker online status.",
		}, []string{"worker"}),
		executing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flower_worker_number_of_currently_executing_tasks", Help: "Number of tasks currently executing at a worker.",
		}, []string{"worker"}),
		histCost: len(runtimeBuckets) + 3,
		limits:   Limits{MaxSeries: DefaultMaxSeries},
		folded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stamen_metrics_folded_total",
			Help: "Label values that did not fit the series budget (--max_series), by label: events counted under worker or task \"other\", and workers left without gauges (worker_gauges).",
		}, []string{"label"}),
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stamen_events_ingested_total", Help: "Celery events ingested, by kind (task, worker).",
		}, []string{"kind"}),
		httpDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "stamen_http_request_duration_seconds", Help: "HTTP request durations by API operation and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation", "code"}),
		browserRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stamen_http_browser_refusals_total",
			Help: "Requests refused to keep web pages from using stamen through a browser, by reason: cross_site (Sec-Fetch-Site), origin (Origin is not the Host), host (a Host that is not this server: DNS rebinding).",
		}, []string{"reason"}),
	}
	m.ops = newOpsMetrics()
	m.ingestedTask = m.ingested.WithLabelValues("task")
	m.ingestedWorker = m.ingested.WithLabelValues("worker")
	m.foldedWorker = m.folded.WithLabelValues("worker")
	m.foldedTask = m.folded.WithLabelValues("task")
	m.foldedGauges = m.folded.WithLabelValues("worker_gauges")
	m.seriesGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stamen_metrics_series", Help: "Series of Flower's metrics (flower_*) the scrape shows.",
	})
	m.budgetGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stamen_metrics_series_budget", Help: "The budget of Flower's series (--max_series).",
	})
	m.budgetGauge.Set(float64(m.limits.MaxSeries))
	m.reg.MustRegister(m.events, m.runtime, m.prefetch, m.prefetched, m.online, m.executing, m.ingested, m.httpDur, m.browserRefusals,
		m.folded, m.seriesGauge, m.budgetGauge,
		m.ops.queueLength, m.ops.failures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, g := range gauges {
		m.reg.MustRegister(g)
	}
	return m
}

// SetLimits sets the series budget and the worker label switch; it is
// called before the first event.
func (m *Metrics) SetLimits(l Limits) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l.MaxSeries <= 0 {
		l.MaxSeries = DefaultMaxSeries
	}
	m.limits = l
	m.budgetGauge.Set(float64(l.MaxSeries))
}

// addSeries counts d more series (fewer when negative); m.mu is held.
func (m *Metrics) addSeries(d int) {
	m.series += d
	m.seriesGauge.Set(float64(m.series))
}

// fits reports whether cost more series stay within the budget; m.mu is
// held.
func (m *Metrics) fits(cost int) bool { return m.series+cost <= m.limits.MaxSeries }

// Observe updates the metrics for one event, as Flower does.
func (m *Metrics) Observe(e Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch e.Type {
	case "worker-online", "worker-heartbeat":
		m.ingestedWorker.Inc()
		w := m.worker(e.Worker)
		if w.dropped {
			return
		}
		w.onlineOf(m).Set(1)
		if e.Type == "worker-heartbeat" {
			w.executingOf(m).Set(float64(e.Active))
		}
		return
	case "worker-offline":
		m.ingestedWorker.Inc()
		if w := m.worker(e.Worker); !w.dropped {
			w.onlineOf(m).Set(0)
		}
		return
	}
	m.ingestedTask.Inc()
	ek := [3]string{e.Worker, e.Type, e.Task}
	c, ok := m.eventSeries[ek]
	if !ok {
		ek[0], ek[1], ek[2] = m.taskWorker(e.Worker), m.typeLabel(e.Type), m.taskLabel(e.Task)
		c, ok = m.eventSeries[ek]
		if !ok && !m.fits(1) && ek[0] != OtherWorker {
			ek[0] = OtherWorker
			m.foldedWorker.Inc()
			c, ok = m.eventSeries[ek]
		}
		if !ok && !m.fits(1) && ek[2] != OtherTask {
			ek[2] = OtherTask
			m.foldedTask.Inc()
			c, ok = m.eventSeries[ek]
		}
		if !ok {
			c = m.events.WithLabelValues(ek[:]...)
			m.eventSeries[ek] = c
			m.addSeries(1)
		}
	}
	c.Inc()
	if e.Runtime > 0 {
		m.task(e.Worker, e.Task).runtimeOf(m).Observe(e.Runtime)
	}
	switch e.Type {
	case "task-received":
		if !e.HasETA {
			m.task(e.Worker, e.Task).prefetchedOf(m).Inc()
		}
		if len(m.pending) < maxPending {
			m.pending[e.UUID] = pending{received: e.Timestamp, task: e.Task, worker: e.Worker, eta: e.HasETA}
		}
	case "task-started":
		p, ok := m.pending[e.UUID]
		if ok && !p.eta {
			t := m.task(p.worker, p.task)
			t.prefetchedOf(m).Dec()
			t.prefetchOf(m).Set(max(0, e.Timestamp-p.received))
		}
	case "task-succeeded", "task-failed", "task-revoked", "task-rejected":
		if e.Type == "task-failed" {
			m.failed(e.Exception)
		}
		if p, ok := m.pending[e.UUID]; ok {
			m.task(p.worker, p.task).prefetchOf(m).Set(0)
			delete(m.pending, e.UUID)
		}
	}
}

// taskLabel is the label of a task name: the name while fewer than
// MaxTaskNames have series, else OtherTask. m.mu is held.
func (m *Metrics) taskLabel(name string) string {
	return cappedLabel(m.taskNames, MaxTaskNames, name, OtherTask)
}

// typeLabel is the label of an event type: Celery's own types, and the
// first MaxEventTypes others, as they are; OtherEventType beyond. m.mu is
// held.
func (m *Metrics) typeLabel(typ string) string {
	if celeryTypes[typ] {
		return typ
	}
	return cappedLabel(m.eventTypes, MaxEventTypes, typ, OtherEventType)
}

// cappedLabel is value while it is one of the labels in own, or while own
// has fewer than max (it then joins them), else other.
func cappedLabel(own map[string]struct{}, max int, value, other string) string {
	if _, ok := own[value]; ok {
		return value
	}
	if len(own) >= max {
		return other
	}
	own[value] = struct{}{}
	return value
}

// taskWorker is the worker label of worker's per-task series: empty with
// Limits.NoTaskWorker. m.mu is held.
func (m *Metrics) taskWorker(worker string) string {
	if m.limits.NoTaskWorker {
		return ""
	}
	return worker
}

// taskCost is what a (worker, task) pair's children may cost: the runtime
// histogram and the two prefetch gauges. It is reserved when the pair is
// made, whichever children it then uses.
func (m *Metrics) taskCost() int { return m.histCost + 2 }

// task returns (worker, task)'s children; m.mu is held. Only labels with
// series of their own are keys, so the map is as bounded as the series.
// A pair that does not fit the budget is folded (Limits.MaxSeries).
func (m *Metrics) task(worker, task string) *taskSeries {
	k := [2]string{worker, task}
	t, ok := m.taskSeries[k]
	if ok {
		return t
	}
	k = [2]string{m.taskWorker(worker), m.taskLabel(task)}
	t, ok = m.taskSeries[k]
	if !ok && !m.fits(m.taskCost()) && k[0] != OtherWorker {
		k[0] = OtherWorker
		m.foldedWorker.Inc()
		t, ok = m.taskSeries[k]
	}
	if !ok && !m.fits(m.taskCost()) && k[1] != OtherTask {
		k[1] = OtherTask
		m.foldedTask.Inc()
		t, ok = m.taskSeries[k]
	}
	if !ok {
		t = &taskSeries{worker: k[0], task: k[1]}
		m.taskSeries[k] = t
		m.addSeries(m.taskCost())
	}
	return t
}

// Retain deletes the series of the workers keepWorker does not claim and
// of the task names keepTask does not (the app passes what the state still
// knows), so that forgotten workers and task names leave the scrape and
// free their label slots. OtherTask stays, and so does the empty name of
// the events of tasks whose name the state never learnt.
func (m *Metrics) Retain(keepWorker, keepTask func(string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	keptTask := func(name string) bool { return name == OtherTask || name == "" || keepTask(name) }
	// The worker label of folded series, and the empty one of
	// Limits.NoTaskWorker, stay as OtherTask does.
	keptWorker := func(name string) bool { return name == OtherWorker || name == "" || keepWorker(name) }
	for k := range m.eventSeries {
		if !keptWorker(k[0]) || !keptTask(k[2]) {
			m.events.DeleteLabelValues(k[:]...)
			delete(m.eventSeries, k)
			m.addSeries(-1)
		}
	}
	for k, t := range m.taskSeries {
		if !keptWorker(k[0]) || !keptTask(k[1]) {
			m.addSeries(-(m.taskCost()))
			if t.runtime != nil {
				m.runtime.DeleteLabelValues(t.worker, t.task)
			}
			if t.prefetch != nil {
				m.prefetch.DeleteLabelValues(t.worker, t.task)
			}
			if t.prefetched != nil {
				m.prefetched.DeleteLabelValues(t.worker, t.task)
			}
			delete(m.taskSeries, k)
		}
	}
	for name, w := range m.workerSeries {
		if !keepWorker(name) {
			if !w.dropped {
				m.addSeries(-2)
			}
			if w.online != nil {
				m.online.DeleteLabelValues(name)
			}
			if w.executing != nil {
				m.executing.DeleteLabelValues(name)
			}
			delete(m.workerSeries, name)
		}
	}
	for name := range m.taskNames {
		if !keptTask(name) {
			delete(m.taskNames, name)
		}
	}
}

// Series counts the series of Flower's metrics (flower_*) a scrape shows.
func (m *Metrics) Series() int {
	mfs, _ := m.reg.Gather()
	n := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "flower_") {
			n += len(mf.GetMetric())
		}
	}
	return n
}

func (t *taskSeries) runtimeOf(m *Metrics) prometheus.Observer {
	if t.runtime == nil {
		t.runtime = m.runtime.WithLabelValues(t.worker, t.task)
	}
	return t.runtime
}

func (t *taskSeries) prefetchOf(m *Metrics) prometheus.Gauge {
	if t.prefetch == nil {
		t.prefetch = m.prefetch.WithLabelValues(t.worker, t.task)
	}
	return t.prefetch
}

func (t *taskSeries) prefetchedOf(m *Metrics) prometheus.Gauge {
	if t.prefetched == nil {
		t.prefetched = m.prefetched.WithLabelValues(t.worker, t.task)
	}
	return t.prefetched
}

// MarkOffline sets flower_worker_online to 0 for every worker that alive
// says is offline. Flower's gauge drops to 0 only on a worker-offline
// event, which a worker that crashed, was killed or lost its network
// never sends: it would show online for good, and an alert on
// flower_worker_online == 0 would never fire for it. alive is the events
// state's view (a heartbeat younger than twice the worker's interval);
// it is asked with m's lock held, so a heartbeat observed meanwhile,
// which the state applied first, keeps its worker at 1.
func (m *Metrics) MarkOffline(alive func(worker string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, w := range m.workerSeries {
		if !w.dropped && w.online != nil && !alive(name) {
			w.online.Set(0)
		}
	}
}

// worker returns the worker's children; m.mu is held. A new worker
// whose two gauges do not fit the budget is dropped: it has none until it
// is forgotten and comes back. The map holds at most the workers the
// state holds (Retain).
func (m *Metrics) worker(name string) *workerSeries {
	w, ok := m.workerSeries[name]
	if !ok {
		w = &workerSeries{name: name}
		if m.fits(2) {
			m.addSeries(2)
		} else {
			w.dropped = true
			m.foldedGauges.Inc()
		}
		m.workerSeries[name] = w
	}
	return w
}

func (w *workerSeries) onlineOf(m *Metrics) prometheus.Gauge {
	if w.online == nil {
		w.online = m.online.WithLabelValues(w.name)
	}
	return w.online
}

func (w *workerSeries) executingOf(m *Metrics) prometheus.Gauge {
	if w.executing == nil {
		w.executing = m.executing.WithLabelValues(w.name)
	}
	return w.executing
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// BrowserRefusals is the counter of the refusals for reason, which the
// caller takes from a fixed set (crossorigin.Reasons): it labels a series.
// Asking for it makes the series show, at 0, before any refusal.
func (m *Metrics) BrowserRefusals(reason string) prometheus.Counter {
	return m.browserRefusals.WithLabelValues(reason)
}

// ObserveHTTP records one request's duration.
func (m *Metrics) ObserveHTTP(operation string, code int, d time.Duration) {
	m.httpDur.WithLabelValues(operation, strconv.Itoa(code)).Observe(d.Seconds())
}
