// Package amqp is the Celery broker over RabbitMQ (AMQP 0-9-1), and the
// rpc:// result backend that comes with it: it publishes task messages the
// way kombu does, runs the pidbox remote-control exchange, follows the
// celeryev stream and collects rpc:// results, wire-compatible with
// unmodified Celery 5.x workers.
//
// amqp091-go does not reconnect by itself (its experimental recovery is not
// used: it would replay our declarations behind our back), so a Broker
// keeps one connection and rebuilds it, with backoff, whenever it or one of
// the Broker's own channels dies. While it is down every call fails at once
// with an error wrapping celery.ErrUnavailable.
package amqp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/brokertls"
	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/redact"
)

const (
	// DefaultOpTimeout bounds a single broker call when Config.OpTimeout
	// is 0.
	DefaultOpTimeout = 5 * time.Second
	// minBackoff and maxBackoff bound the pause between reconnect attempts.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// enableEventsEvery is how often workers are told to send task events
	// (Flower's events_enable_interval): the setting dies with a worker.
	enableEventsEvery = 5 * time.Second
	// maxResults bounds the rpc:// results kept in memory.
	maxResults = 10000
	// eventPrefetch bounds the event messages RabbitMQ hands us before we
	// acknowledge them: what a slow ingester holds in memory. The rest of
	// a backlog waits in our queue, where Celery's 5 s event TTL ages it
	// out, instead of piling up in the client without bound.
	eventPrefetch = 256
)

// Config says where the broker is and whether it doubles as the result
// backend.
type Config struct {
	// BrokerURL is amqp://user:password@host:port/vhost, or amqps:// for
	// TLS. Celery's aliases pyamqp:// and librabbitmq:// are accepted. As
	// with Celery, "//" at the end means the vhost "/", and a missing host
	// means localhost. Several URLs separated by ';' are failover brokers,
	// tried in turn (Celery's round-robin failover_strategy).
	BrokerURL string
	// ResultBackend is "rpc://" to receive results on a queue of our own,
	// or "" for no result backend. Other backends live in other packages.
	ResultBackend string
	// Logger receives connection trouble; nil discards it. Passwords are
	// never logged.
	Logger *slog.Logger
	// OpTimeout bounds every broker call; 0 means DefaultOpTimeout.
	OpTimeout time.Duration
	// EventQueue, when set, is a durable queue on the celeryev exchange
	// that outlives stamen: events published while no stamen consumes
	// wait in it (within EventQueueTTL and EventQueueMaxLength), and
	// several stamen processes naming the same queue share its events.
	// Empty: an exclusive queue per process, gone with it (Celery's
	// receivers' way). ValidateEventQueue checks a name.
	EventQueue string
	// EventQueueTTL (x-message-ttl) and EventQueueMaxLength (x-max-length,
	// the oldest dropped beyond it) bound EventQueue; 0 means
	// DefaultEventQueueTTL and DefaultEventQueueMaxLength.
	EventQueueTTL       time.Duration
	EventQueueMaxLength int64
	// NoEnableEvents keeps ConsumeEvents from telling the workers to send
	// task events (enable_events, at every subscription and every 5 s):
	// Flower's --enable_events=false.
	NoEnableEvents bool
	// TLS is Celery's broker_use_ssl in py-amqp's keys. When set, every
	// URL of the list is dialled over TLS with it, amqp:// too (as kombu
	// does: on the URL's port, else 5671); without it amqps:// trusts the
	// system's roots and offers no client certificate.
	TLS *brokertls.Settings
}

// Broker talks to Celery workers through RabbitMQ. It is safe for
// concurrent use.
type Broker struct {
	log       *slog.Logger
	opTimeout time.Duration
	// urls hold the passwords: they go to the dialer only, never to logs
	// or errors. There is more than one with failover URLs; cur is the
	// index of the one to try first (the last that worked).
	urls     []string
	redacted string
	shown    []string // urls with passwords masked
	cur      atomic.Int64
	// tls is what every dial clones (amqp091 writes the URL's host into
	// the one it is given); nil leaves amqps:// to amqp091's defaults.
	tls *tls.Config

	// oid is our pidbox identity: workers send replies through the reply
	// exchange with it as routing key.
	oid        string
	replyQueue string
	// rpcQueue is where rpc:// results arrive; "" without rpc://.
	rpcQueue string

	mu   sync.Mutex
	sess *session
	// changed is closed and replaced whenever sess changes, so that
	// waiters for a connection need no polling.
	changed chan struct{}
	closed  bool
	// wg counts every goroutine the Broker starts; Close waits for them.
	wg sync.WaitGroup

	// stopCtx ends with Close and stops the supervisor.
	stopCtx context.Context
	stop    context.CancelFunc

	reconnects atomic.Int64
	// clock is our Lamport clock for pidbox requests.
	clock atomic.Int64

	pidbox  replyRouter
	results *resultStore
	delayed delayedDelivery

	// events is the event queue's declaration.
	events eventQueue
	// onSubscribe, when set, is called each time the event consumer is
	// (re)established (SetOnSubscribe).
	onSubscribe atomic.Pointer[func()]
	// following is true while the event consumer is established.
	following atomic.Bool

	// enableEvents is !Config.NoEnableEvents: whether ConsumeEvents
	// broadcasts enable_events at all.
	enableEvents bool

	// Fields so that tests can shorten them.
	eventPrefetch int
	enableEvery   time.Duration
	minBackoff    time.Duration
	maxBackoff    time.Duration
}

// New connects to the broker described by cfg. A broker that cannot be
// reached yet is not an error: calls fail with celery.ErrUnavailable until
// it comes up. A broker that answers and refuses us (bad credentials, no
// access to the vhost, a conflicting declaration) is.
func New(ctx context.Context, cfg Config) (*Broker, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opTimeout := cfg.OpTimeout
	if opTimeout <= 0 {
		opTimeout = DefaultOpTimeout
	}
	urls, shown, err := normalizeURLs(cfg.BrokerURL, cfg.TLS != nil)
	if err != nil {
		return nil, err
	}
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		if tlsCfg, err = cfg.TLS.Config(); err != nil {
			return nil, fmt.Errorf("broker_use_ssl: %w", err)
		}
	}
	redacted := strings.Join(shown, ";")
	rpc, err := isRPCBackend(cfg.ResultBackend)
	if err != nil {
		return nil, err
	}
	events, err := newEventQueue(cfg)
	if err != nil {
		return nil, err
	}

	oid := uuid.NewString()
	b := &Broker{
		log:           log.With(slog.String("broker", redacted)),
		opTimeout:     opTimeout,
		urls:          urls,
		redacted:      redacted,
		shown:         shown,
		tls:           tlsCfg,
		oid:           oid,
		replyQueue:    celery.ReplyQueueName(oid),
		changed:       make(chan struct{}),
		pidbox:        replyRouter{waiters: map[string]*replyWaiter{}},
		events:        events,
		eventPrefetch: eventPrefetch,
		enableEvery:   enableEventsEvery,
		enableEvents:  !cfg.NoEnableEvents,
		minBackoff:    minBackoff,
		maxBackoff:    maxBackoff,
	}
	if rpc {
		b.rpcQueue = "stamen-rpc-" + uuid.NewString()
		b.results = newResultStore(maxResults)
	}
	b.stopCtx, b.stop = context.WithCancel(context.Background())
	if tlsCfg != nil && !cfg.TLS.Verify() {
		b.log.Warn("TLS without verifying the server's certificate (cert_reqs CERT_NONE): anyone on the path can impersonate RabbitMQ")
	}

	s, err := b.connect(ctx)
	if err != nil && ctx.Err() == nil && b.tls != nil && !isRefusal(err) && tlsRefusal(err) == nil {
		if perr := b.probeTLS(ctx); perr != nil {
			err = perr
		}
	}
	switch {
	case err == nil:
		b.setSession(s)
		b.log.Info("connected to RabbitMQ")
	case ctx.Err() != nil:
		b.shutdown()
		return nil, fmt.Errorf("connect to %s: %w", redacted, ctx.Err())
	case isRefusal(err):
		b.shutdown()
		// The broker's own words, without classify's "unavailable".
		var aerr *amqp091.Error
		errors.As(err, &aerr)
		return nil, fmt.Errorf("broker %s refused us: %w", redacted, aerr)
	case tlsRefusal(err) != nil:
		b.shutdown()
		return nil, fmt.Errorf("broker %s: TLS handshake failed: %w", redacted, tlsRefusal(err))
	default:
		b.log.Warn("RabbitMQ not reachable yet; will keep trying", slog.Any("err", err))
	}
	b.wg.Go(func() { b.supervise(s) })
	return b, nil
}

// probeTLS asks each broker URL's server whether it refuses our TLS
// settings (brokertls.Probe), after a first connection failed without
// saying why: a reset may hide the refusal of our certificate.
func (b *Broker) probeTLS(ctx context.Context) error {
	for _, raw := range b.urls {
		uri, err := amqp091.ParseURI(raw)
		if err != nil {
			continue
		}
		cfg := b.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = uri.Host
		}
		if err := brokertls.Probe(ctx, net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)), cfg, b.opTimeout); err != nil {
			return err
		}
	}
	return nil
}

// tlsRefusal is the TLS failure within a connection error
// (brokertls.Refusal), or the server's TLS alert that amqp091 turned into
// a frame error keeping only its text; nil when there is none.
func tlsRefusal(err error) error {
	var aerr *amqp091.Error
	if errors.As(err, &aerr) && strings.HasPrefix(aerr.Reason, "remote error: tls: ") {
		return errors.New(aerr.Reason)
	}
	return brokertls.Refusal(err)
}

// normalizeURLs splits a Celery broker URL list (failover URLs separated
// by ';', as kombu's Connection takes them) and normalizes each.
func normalizeURLs(raw string, useTLS bool) (dial, redacted []string, err error) {
	for part := range strings.SplitSeq(raw, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, r, err := normalizeURL(part, useTLS)
		if err != nil {
			return nil, nil, err
		}
		dial, redacted = append(dial, d), append(redacted, r)
	}
	if len(dial) == 0 {
		return nil, nil, errors.New("invalid broker URL: empty")
	}
	return dial, redacted, nil
}

// normalizeURL checks a Celery broker URL and returns the URL to dial
// (Celery's scheme aliases mapped to amqp, and to amqps with useTLS) and
// the URL with its password masked.
func normalizeURL(raw string, useTLS bool) (dial, redacted string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("invalid broker URL: %w", redact.ParseError(err))
	}
	switch u.Scheme {
	case "amqp", "amqps":
	case "pyamqp", "librabbitmq":
		u.Scheme = "amqp"
	default:
		return "", "", fmt.Errorf("invalid broker URL %s: scheme must be amqp or amqps", redact.URL(raw))
	}
	if useTLS {
		// kombu's py-amqp transport wraps an amqp:// connection in TLS
		// when broker_use_ssl is set, defaulting the port to 5671 as
		// amqps:// does in amqp091.
		u.Scheme = "amqps"
	}
	return u.String(), redact.URL(u.String()), nil
}

// isRPCBackend accepts the result backends this package implements.
func isRPCBackend(backend string) (bool, error) {
	switch backend {
	case "":
		return false, nil
	case "rpc://", "rpc":
		return true, nil
	}
	scheme := backend
	if u, err := url.Parse(backend); err == nil && u.Scheme != "" {
		scheme = u.Scheme + "://"
	} else {
		// Whatever it is, it may hold a password.
		scheme = "<unparsable>"
	}
	return false, fmt.Errorf("result backend %s: the AMQP broker only implements rpc://: %w", scheme, celery.ErrUnsupported)
}

// RedactedURL is the broker URL with its password masked, for logs.
func (b *Broker) RedactedURL() string {
	return b.redacted
}

// Connected reports whether the connection is up right now.
func (b *Broker) Connected() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sess != nil && b.sess.alive()
}

// Reconnects is how many times a lost connection has been re-established.
func (b *Broker) Reconnects() int64 {
	return b.reconnects.Load()
}

// Close closes the connection and waits for the Broker's goroutines. Calls
// in flight fail with celery.ErrUnavailable; ConsumeEvents returns.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	s := b.sess
	b.sess = nil
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()

	b.stop()
	var err error
	if s != nil {
		err = s.close(b.opTimeout)
	}
	b.wg.Wait()
	return err
}

// shutdown undoes a New that fails.
func (b *Broker) shutdown() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.stop()
	b.wg.Wait()
}

// spawn runs fn on a goroutine that Close waits for, unless the Broker is
// closed already. Close sets closed under mu before it waits, so no Add
// can race with the Wait.
func (b *Broker) spawn(fn func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Go(fn)
	return true
}

// opContext bounds one broker call.
func (b *Broker) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.opTimeout)
}

// errClosed is what calls on a closed Broker return.
func errClosed(op string) error {
	return fmt.Errorf("amqp %s: broker closed: %w", op, celery.ErrUnavailable)
}
