// Package handlers fills in the bodies of the operations go-swagger generates
// from swagger.yaml. It knows the Celery protocol and the events state, but
// not which broker carries them: brokers plug in behind Broker and
// ResultBackend.
package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-openapi/runtime"

	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/inspect"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/stream"
	"github.com/stamen-dev/stamen/internal/workercount"
	"github.com/stamen-dev/stamen/restapi/operations"
)

// Config holds the dependencies and limits of the handlers.
type Config struct {
	State *state.State
	// Tasks is where the read operations find the history; nil reads
	// State.
	Tasks     TaskReader
	Inspector *inspect.Inspector
	Broker    Broker
	// Results may be nil when no result backend is configured.
	Results ResultBackend
	// Sent keeps what stamen sent, for /api/task/retry; New puts an
	// in-memory log in place when nil.
	Sent SentLog
	// Queues is the fleet's record of the queues it published to; nil
	// keeps them in this process only.
	Queues QueueLog
	Logger *slog.Logger

	// ControlTimeout bounds the wait for a worker's reply to a control
	// command (Flower: 1 s).
	ControlTimeout time.Duration
	// BrokerTimeout bounds a publish or a queue-length query.
	BrokerTimeout time.Duration
	// ApplyTimeout is the default bound on /api/task/apply's wait for the
	// result (Flower waits forever).
	ApplyTimeout time.Duration
	// Origin is the node name stamen puts on the messages it sends.
	Origin string
	// Events fans live events out to /api/events subscribers.
	Events *stream.Hub
	// SSEHeartbeat is how often an idle event stream gets a comment line.
	SSEHeartbeat time.Duration
	// Audit is the audit log GET /api/audit reads; nil answers 503.
	Audit *audit.Log
	// Stats answers GET /api/stats/tasks; nil answers 503.
	Stats TaskStats
	// WorkerCounts answers GET /api/stats/workers; New puts an empty one
	// in place when nil, which counts what its owner feeds it: nothing.
	WorkerCounts *workercount.Counter
	// Now is the clock; tests replace it.
	Now func() time.Time
	// ReadOnly is --read_only, which GET /api/session reports; the HTTP
	// layer refuses the write operations.
	ReadOnly bool
}

// Handlers implements the API operations.
type Handlers struct {
	Config
	log *slog.Logger

	// sentQueues remembers the queues stamen published to, so that
	// /api/queues/length reports a queue nobody consumes yet (Flower only
	// lists queues some worker consumes, and so misses a backlog building up
	// on a queue without consumers), with when each was last noted in
	// Queues.
	mu         sync.Mutex
	sentQueues map[string]time.Time
	// refusals are the broker refusals logged (logRefusal), by operation
	// and reply.
	refusals map[string]struct{}
}

// MaxSentQueues bounds sentQueues, and the fleet's record of queues,
// against clients inventing queue names.
const MaxSentQueues = 256

// queueNoteEvery is how often a queue published to again is noted again
// in Queues, whose age bound then drops only the queues no replica
// published to for that long.
const queueNoteEvery = time.Hour

// rememberQueue notes that a task was published to q, for the fleet too
// (Queues) when it was not noted within queueNoteEvery.
func (h *Handlers) rememberQueue(ctx context.Context, q string) {
	now := h.Now()
	h.mu.Lock()
	last, known := h.sentQueues[q]
	if !known && len(h.sentQueues) >= MaxSentQueues {
		h.mu.Unlock()
		return
	}
	note := h.Queues != nil && (!known || now.Sub(last) >= queueNoteEvery)
	if !known || note {
		h.sentQueues[q] = now
	}
	h.mu.Unlock()
	if note {
		// Off the request's path: the task is published, and a database
		// outage must not hold its answer. At most one a queue an hour.
		// It outlives the request: ctx's values are kept, not its end.
		ctx := context.WithoutCancel(ctx)
		go func() {
			if err := h.Queues.PutQueue(ctx, q, now); err != nil {
				h.log.Warn("could not note the queue for the other replicas", slog.String("queue", q), slog.Any("err", err))
			}
		}()
	}
}

// QueueNames is the sorted union of the queues workers consume and the ones
// stamen published to (the fleet, with Queues): what /api/queues/length
// reports, and what the queue-length gauge follows.
func (h *Handlers) QueueNames(ctx context.Context) []string { return h.queueNames(ctx) }

// sentQueue reports whether stamen (the fleet, with Queues) published to q.
func (h *Handlers) sentQueue(ctx context.Context, q string) bool {
	h.mu.Lock()
	_, ok := h.sentQueues[q]
	h.mu.Unlock()
	return ok || slices.Contains(h.fleetQueues(ctx), q)
}

// fleetQueues are the queues Queues holds; nil without it, or when it
// cannot be read (this process's own are still known).
func (h *Handlers) fleetQueues(ctx context.Context) []string {
	if h.Queues == nil {
		return nil
	}
	names, err := h.Queues.Queues(ctx)
	if err != nil {
		h.log.Warn("could not read the queues the other replicas published to", slog.Any("err", err))
		return nil
	}
	return names
}

// queueNames is the sorted union of the queues workers consume and the ones
// stamen published to.
func (h *Handlers) queueNames(ctx context.Context) []string {
	set := map[string]struct{}{}
	for _, q := range h.Inspector.QueueNames() {
		set[q] = struct{}{}
	}
	for _, q := range h.fleetQueues(ctx) {
		set[q] = struct{}{}
	}
	h.mu.Lock()
	for q := range h.sentQueues {
		set[q] = struct{}{}
	}
	h.mu.Unlock()
	names := make([]string, 0, len(set))
	for q := range set {
		names = append(names, q)
	}
	sort.Strings(names)
	return names
}

// New returns Handlers with defaults filled in.
func New(cfg Config) *Handlers {
	if cfg.ControlTimeout <= 0 {
		cfg.ControlTimeout = time.Second
	}
	if cfg.BrokerTimeout <= 0 {
		cfg.BrokerTimeout = 5 * time.Second
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = 60 * time.Second
	}
	if cfg.SSEHeartbeat <= 0 {
		cfg.SSEHeartbeat = 15 * time.Second
	}
	if cfg.Events == nil {
		cfg.Events = stream.NewHub(0)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tasks == nil {
		cfg.Tasks = StateReader{State: cfg.State}
	}
	if cfg.WorkerCounts == nil {
		cfg.WorkerCounts = workercount.New(0, cfg.Now())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Sent == nil {
		cfg.Sent = NewMemorySentLog(DefaultSentMax, DefaultSentMaxAge)
	}
	if cfg.Origin == "" {
		cfg.Origin = "stamen@localhost"
	}
	return &Handlers{Config: cfg, log: cfg.Logger, sentQueues: map[string]time.Time{}}
}

// strictJSON decodes request bodies like the runtime's JSON consumer
// (numbers kept as json.Number) but refuses a key the body's model does
// not have, as the spec's additionalProperties: false says: the task body
// is the only one, and an apply_async option stamen dropped silently would
// run the task otherwise than asked. The 400 names the key.
//
// Three more things encoding/json lets through are refused: bytes that are
// not UTF-8 (decoded as U+FFFD, so a task would get other arguments or
// another id than sent; Flower cannot decode them either), data after the
// JSON value (`{"args":[1]} {"args":[2]}`, which Python's json.loads
// refuses), and a key that matches a field only without regard to case
// (`{"ARGS": [2]}` would set args, where Flower hands ARGS to apply_async
// as an option).
func strictJSON() runtime.Consumer {
	return runtime.ConsumerFunc(func(r io.Reader, v any) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if !utf8.Valid(data) {
			return errors.New("the body is not valid UTF-8")
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return typeError(err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return errors.New("invalid JSON: data after the JSON value")
		}
		return exactKeys(data, v)
	})
}

// typeError says a value of the wrong JSON type in the client's terms
// ("args must be a list, not number") instead of encoding/json's, which
// names Go types (models.TaskApplyRequest, []interface {}).
func typeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	var want string
	switch te.Type.Kind() {
	case reflect.Slice, reflect.Array:
		want = "a list"
	case reflect.Map, reflect.Struct:
		want = "an object"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	default:
		want = "a number"
	}
	if te.Field == "" {
		return fmt.Errorf("it must be %s, not %s", want, te.Value)
	}
	return fmt.Errorf("%s must be %s, not %s", te.Field, want, te.Value)
}

// exactKeys refuses an object key that is not, byte for byte, the JSON name
// of a field of the struct v points to (encoding/json matches names
// without regard to case).
func exactKeys(data []byte, v any) error {
	rt := reflect.TypeOf(v)
	for rt != nil && rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	if rt == nil || rt.Kind() != reflect.Struct {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil // not an object: Decode has already said so, or it is null
	}
	names := make(map[string]bool, rt.NumField())
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = rt.Field(i).Name
		}
		names[name] = true
	}
	for k := range obj {
		if !names[k] {
			return fmt.Errorf("json: unknown field %q", k)
		}
	}
	return nil
}

// Register installs every operation's handler and stamen's error writer on
// the generated API. The handlers are set by registerOperations, which
// make generate writes from swagger.yaml: an operation's handler is the
// method of Handlers named after its operationId, so an operation added
// to the spec without one does not compile. app.NewAPI takes the generated
// "not implemented" stubs out before it calls Register, and api.Validate()
// then fails if an operation is still without a handler. The handlers
// ignore the principal (the caller's auth.Role): the auth middleware has
// already checked that the role may call the operation.
func (h *Handlers) Register(api *operations.StamenAPI) {
	api.ServeError = ServeError
	api.JSONConsumer = strictJSON()
	h.registerOperations(api)
	// The event stream writes its own body; this producer only serves the
	// runtime's content negotiation.
	api.TextEventStreamProducer = runtime.ProducerFunc(func(w io.Writer, data any) error {
		_, err := fmt.Fprint(w, data)
		return err
	})
}
