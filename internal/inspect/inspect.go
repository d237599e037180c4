// Package inspect keeps the latest answers of Celery's inspect commands per
// worker, the data behind GET /api/workers and the "known worker" and
// "known task" checks of the control operations.
package inspect

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/redact"
)

// Methods are the inspect commands Flower caches, in the order stamen
// serialises them.
var Methods = []string{"stats", "active_queues", "registered", "scheduled", "active", "reserved", "revoked", "conf"}

type workerInfo struct {
	replies   map[string]json.RawMessage
	timestamp float64
	// router is the routing settings of the worker's app, from its last
	// conf reply (nil when it sets none): see TaskRoute.
	router *taskRouter
}

// Inspector caches inspect replies. It is safe for concurrent use.
type Inspector struct {
	b       celery.Broadcaster
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
	// maxWorkers bounds the workers cached (DefaultMaxWorkers).
	maxWorkers int

	mu      sync.RWMutex
	workers map[string]*workerInfo

	// inflight deduplicates refreshes of the same target ("" = all workers).
	flightMu sync.Mutex
	inflight map[string]*flight

	discovery discovery

	// alive lists the workers alive by heartbeat (SetAlive): a refresh of
	// all workers stops waiting once each of them has answered.
	aliveMu sync.RWMutex
	alive   func() []string

	// life bounds the refreshes that outlive their callers: Close ends it
	// and waits for them, so that none is still talking to a broker the
	// app has closed.
	life    context.Context
	end     context.CancelFunc
	running sync.WaitGroup
}

type flight struct {
	done chan struct{}
	err  error
	// expect are the workers it waits for (Inspector.expected).
	expect []string
	// timedOut are the expected workers that did not answer every method
	// within the inspect timeout, sorted.
	timedOut []string
}

// New returns an Inspector that waits up to timeout for each command's
// replies.
func New(b celery.Broadcaster, timeout time.Duration, maxWorkers int, log *slog.Logger) *Inspector {
	if maxWorkers <= 0 {
		maxWorkers = DefaultMaxWorkers
	}
	in := &Inspector{
		b:          b,
		timeout:    timeout,
		maxWorkers: maxWorkers,
		log:        log,
		now:        time.Now,
		workers:    map[string]*workerInfo{},
		inflight:   map[string]*flight{},
	}
	in.life, in.end = context.WithCancel(context.Background())
	return in
}

// SetAlive gives the Inspector the workers alive by heartbeat. A refresh
// of all workers then returns as soon as each of them has answered every
// method, instead of waiting the whole inspect timeout for replies that
// might still come; it waits the timeout only for those that stay silent
// (and for any worker when none is alive, since then it cannot know whom
// to wait for). Workers not in the list that answer in the meantime are
// cached too.
func (in *Inspector) SetAlive(alive func() []string) {
	in.aliveMu.Lock()
	in.alive = alive
	in.aliveMu.Unlock()
}

// expected returns the workers a refresh of target waits for.
func (in *Inspector) expected(target string) []string {
	if target != "" {
		return []string{target}
	}
	in.aliveMu.RLock()
	alive := in.alive
	in.aliveMu.RUnlock()
	if alive == nil {
		return nil
	}
	return alive()
}

// Close stops the refreshes in flight and waits for them to return.
func (in *Inspector) Close() {
	in.end()
	in.running.Wait()
}

// Refresh runs every inspect method against worker (all workers when empty)
// concurrently and merges the replies into the cache. A refresh already in
// flight for the same target, or for all workers, is joined instead of
// started again.
func (in *Inspector) Refresh(ctx context.Context, worker string) error {
	_, err := in.RefreshReport(ctx, worker)
	return err
}

// RefreshReport is Refresh, also returning the workers it waited for that
// did not answer every method within the inspect timeout (sorted): worker
// itself, or with worker empty those alive by heartbeat (see SetAlive).
func (in *Inspector) RefreshReport(ctx context.Context, worker string) ([]string, error) {
	expect := in.expected(worker)
	in.flightMu.Lock()
	f, ok := in.inflight[worker]
	if !ok && worker != "" {
		f, ok = in.inflight[""]
	}
	if !ok || !f.waitsFor(expect) {
		f = &flight{done: make(chan struct{}), expect: expect}
		in.inflight[worker] = f
		in.flightMu.Unlock()
		// The refresh outlives a caller that gives up, so that its result
		// still lands in the cache for the next one; Close ends it.
		in.running.Add(1)
		go func() {
			defer in.running.Done()
			in.run(in.life, worker, f)
		}()
	} else {
		in.flightMu.Unlock()
	}
	select {
	case <-f.done:
		return f.timedOut, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// waitsFor reports whether the flight waits for every worker in expect,
// so that joining it tells whether they answered. A flight started when
// no worker was alive waits the whole timeout: a caller that knows whom
// to wait for does not join it.
func (f *flight) waitsFor(expect []string) bool {
	if len(expect) > len(f.expect) {
		return false
	}
	set := make(map[string]struct{}, len(f.expect))
	for _, w := range f.expect {
		set[w] = struct{}{}
	}
	for _, w := range expect {
		if _, ok := set[w]; !ok {
			return false
		}
	}
	return true
}

func (in *Inspector) run(ctx context.Context, worker string, f *flight) {
	defer func() {
		in.flightMu.Lock()
		// A later refresh that did not join this one may have taken its
		// place.
		if in.inflight[worker] == f {
			delete(in.inflight, worker)
		}
		in.flightMu.Unlock()
		close(f.done)
	}()
	var dest []string
	if worker != "" {
		dest = []string{worker}
	}
	expect := f.expect
	var wg sync.WaitGroup
	errs := make([]error, len(Methods))
	answered := make([]map[string]bool, len(Methods))
	for i, m := range Methods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answered[i], errs[i] = in.inspect(ctx, m, dest, expect)
		}()
	}
	wg.Wait()
	// Flower leaves stale data in place when a method fails; report the
	// failure only when every method failed (the broker is down).
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed == len(errs) {
		f.err = errs[0]
		return
	}
	for _, w := range expect {
		for i := range Methods {
			if errs[i] == nil && !answered[i][w] {
				f.timedOut = append(f.timedOut, w)
				break
			}
		}
	}
	sort.Strings(f.timedOut)
	if len(f.timedOut) > 0 && ctx.Err() == nil {
		level := slog.LevelWarn
		if worker != "" {
			// Discovery asks a starting worker until it answers, and
			// says so itself when it gives up.
			level = slog.LevelDebug
		}
		in.log.Log(ctx, level, "workers alive by heartbeat did not answer inspect within the inspect timeout",
			slog.Any("workers", f.timedOut), slog.Duration("timeout", in.timeout))
	}
}

// inspect runs one method, collecting replies until every worker in expect
// answered (or, with expect empty, until the timeout), caches them and
// returns who answered.
func (in *Inspector) inspect(ctx context.Context, method string, dest, expect []string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	args := map[string]any{}
	switch method {
	case "active":
		args["safe"] = true
	case "registered":
		args["taskinfoitems"] = []any{}
	case "conf":
		args["with_defaults"] = false
	}
	replies, err := in.b.Broadcast(ctx, celery.ControlCommand{
		Method: method, Arguments: args, Destination: dest, Reply: true, Expect: expect,
	})
	if err != nil {
		if in.life.Err() != nil { // closing: not a broker failure
			in.log.Debug("inspect ended by shutdown", slog.String("method", method), slog.Any("err", err))
			return nil, err
		}
		in.log.Warn("inspect failed", slog.String("method", method), slog.Any("err", err))
		return nil, err
	}
	answered := make(map[string]bool, len(replies))
	now := float64(in.now().UnixMicro()) / 1e6
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, r := range replies {
		if r.Hostname == "" {
			continue
		}
		w := in.workers[r.Hostname]
		if w == nil {
			if len(in.workers) >= in.maxWorkers {
				in.evictOldest()
			}
			w = &workerInfo{replies: map[string]json.RawMessage{}}
			in.workers[r.Hostname] = w
		}
		w.replies[method] = sanitize(method, r.Value)
		if method == "conf" {
			// From the reply as sent: sanitize does not keep the order of
			// task_routes' patterns, which Celery tries in turn.
			w.router = parseRouter(r.Value)
		}
		w.timestamp = now
		answered[r.Hostname] = true
	}
	return answered, nil
}

// DefaultMaxWorkers bounds the workers cached unless New is given another
// bound (--max_workers), as the events state bounds its own: without a
// purge age (--purge_offline_workers 0) nothing else forgets a worker that
// answered once, and a reply names its worker by whatever hostname its
// sender wrote.
const DefaultMaxWorkers = 5000

// evictOldest forgets the eighth of the cached workers that answered
// longest ago, so that a stream of new names costs a sort per eighth of
// the bound, not a scan per name. in.mu is held.
func (in *Inspector) evictOldest() {
	type aged struct {
		name string
		at   float64
	}
	all := make([]aged, 0, len(in.workers))
	for name, w := range in.workers {
		all = append(all, aged{name, w.timestamp})
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.at, b.at) })
	for _, w := range all[:max(len(all)/8, 1)] {
		delete(in.workers, w.name)
	}
}

// Known reports whether the worker has answered an inspection.
func (in *Inspector) Known(worker string) bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	_, ok := in.workers[worker]
	return ok
}

// Purge drops the cached workers that last answered before the given
// time and that keep does not claim (the app keeps those the events state
// still knows), and returns their names. An offline worker cannot have
// answered since it went offline, so a worker the state purged for being
// offline that long goes here too; a live one answers the next refresh.
func (in *Inspector) Purge(before time.Time, keep func(worker string) bool) []string {
	cut := float64(before.UnixMicro()) / 1e6
	in.mu.Lock()
	defer in.mu.Unlock()
	var gone []string
	for name, w := range in.workers {
		if w.timestamp < cut && !keep(name) {
			delete(in.workers, name)
			gone = append(gone, name)
		}
	}
	return gone
}

// Len is the number of cached workers.
func (in *Inspector) Len() int {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return len(in.workers)
}

// Names returns the cached worker names, sorted.
func (in *Inspector) Names() []string {
	in.mu.RLock()
	defer in.mu.RUnlock()
	names := make([]string, 0, len(in.workers))
	for n := range in.workers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Registers reports whether any cached worker registers the task name.
func (in *Inspector) Registers(task string) bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	for _, w := range in.workers {
		if registers(w.replies["registered"], task) {
			return true
		}
	}
	return false
}

// registers reports whether a registered reply lists task.
func registers(reply json.RawMessage, task string) bool {
	var names []string
	if json.Unmarshal(reply, &names) != nil {
		return false
	}
	for _, n := range names {
		// With taskinfoitems entries look like "name [rate_limit=...]".
		if n == task || (len(n) > len(task) && n[:len(task)] == task && n[len(task)] == ' ') {
			return true
		}
	}
	return false
}

// QueueNames returns the sorted union of the queues the cached workers
// consume, from their active_queues replies.
func (in *Inspector) QueueNames() []string {
	in.mu.RLock()
	defer in.mu.RUnlock()
	set := map[string]struct{}{}
	for _, w := range in.workers {
		for name := range celery.QueueDeclarations(w.replies["active_queues"]) {
			set[name] = struct{}{}
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// QueueDeclaration returns how the cached workers declare queue, from
// their active_queues replies; false when none consumes it. Workers of one
// app declare a queue alike (RabbitMQ would refuse them otherwise); the
// first in name order wins.
func (in *Inspector) QueueDeclaration(queue string) (*celery.QueueDeclaration, bool) {
	return in.QueueDeclarationBy(queue, nil)
}

// QueueDeclarationBy is QueueDeclaration from the workers for which alive
// is true only (every cached worker when alive is nil). The cache keeps a
// worker's last active_queues after it stopped: declaring a missing queue
// from a gone worker's reply would park tasks in a queue nobody consumes.
func (in *Inspector) QueueDeclarationBy(queue string, alive func(worker string) bool) (*celery.QueueDeclaration, bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	names := make([]string, 0, len(in.workers))
	for n := range in.workers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if alive != nil && !alive(n) {
			continue
		}
		if d, ok := celery.QueueDeclarations(in.workers[n].replies["active_queues"])[queue]; ok {
			return d, true
		}
	}
	return nil, false
}

// WorkerJSON returns the cached info of one worker as a JSON object in
// Flower's shape: one key per inspect method that ever answered, then
// "timestamp".
func (in *Inspector) WorkerJSON(worker string) (json.RawMessage, bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	w, ok := in.workers[worker]
	if !ok {
		return nil, false
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for _, m := range Methods {
		v, ok := w.replies[m]
		if !ok {
			continue
		}
		buf.WriteString(strconv.Quote(m))
		buf.WriteByte(':')
		buf.Write(v)
		buf.WriteByte(',')
	}
	buf.WriteString(`"timestamp":`)
	buf.WriteString(strconv.FormatFloat(w.timestamp, 'f', -1, 64))
	buf.WriteByte('}')
	return buf.Bytes(), true
}

// sanitize removes secrets from a reply before it is cached and served.
// conf is a worker's configuration: every secret setting is masked at any
// depth, as Celery's conf.humanize(censored=True) does, whether or not the
// worker censored it (Celery's own censoring skips lists, and stamen does
// not trust a worker's version to do it). stats.broker is the broker
// connection's settings: its password and transport_options (Redis
// Sentinel's sentinel_kwargs hold a password) get the same treatment, and
// its alternates (failover URLs) are dropped as Flower 2.1 does. The other
// replies are task and queue data whose keys are not settings (a task's
// delivery_info.routing_key): only URL passwords in their strings are
// masked. A reply that does not decode is not served at all.
//
// The tasks of active, reserved and scheduled read as their records do
// (see celery.PlainJSON and pyfmt.PlainRepr): Celery >= 5.3 workers send
// a reserved or scheduled task's datetime, date, time, UUID, Decimal and
// bytes arguments as kombu's typed JSON, where 5.2 workers wrote plain
// strings, and the argument reprs of an active task (asked with safe)
// show those values' Python reprs on every release.
func sanitize(method string, v json.RawMessage) json.RawMessage {
	if bytes.Contains(v, typedMarker) {
		if plain, err := celery.PlainJSON(v); err == nil {
			v = plain
		}
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber() // keep numbers exactly as the worker sent them
	var x any
	if err := d.Decode(&x); err != nil {
		return json.RawMessage(`null`)
	}
	switch method {
	case "conf":
		x = redact.Settings(x)
	case "stats":
		if stats, ok := x.(map[string]any); ok {
			if broker, ok := stats["broker"].(map[string]any); ok {
				delete(broker, "alternates")
				stats["broker"] = redact.Settings(broker)
			}
		}
		x = redact.Strings(x)
	case "active", "reserved", "scheduled":
		x = redact.Strings(plainArgReprs(x))
	default:
		x = redact.Strings(x)
	}
	out, err := json.Marshal(x)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return out
}

// typedMarker is the key every kombu typed JSON value has.
var typedMarker = []byte(`"__type__"`)

// plainArgReprs rewrites the string args and kwargs of the task requests
// in a decoded reply (at any depth: scheduled nests them under "request")
// with pyfmt.PlainRepr.
func plainArgReprs(x any) any {
	switch v := x.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && (k == "args" || k == "kwargs") {
				v[k] = pyfmt.PlainRepr(s)
				continue
			}
			v[k] = plainArgReprs(e)
		}
	case []any:
		for i, e := range v {
			v[i] = plainArgReprs(e)
		}
	}
	return x
}
