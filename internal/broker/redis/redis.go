// Package redis is the Celery broker and result backend over Redis: it puts
// task messages on kombu's lists, runs the pidbox remote-control exchange,
// follows the celeryev pub/sub stream and reads and writes result documents,
// byte-compatible with unmodified Celery 5.x workers.
package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/brokertls"
	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/redact"
)

// Broker talks to Celery workers through Redis. It is safe for concurrent
// use.
type Broker struct {
	log       *slog.Logger
	opTimeout time.Duration
	redacted  string

	client *goredis.Client
	// results is the result backend's client: client itself when both are
	// the same database, nil when no backend is configured.
	results *goredis.Client
	// keys is kombu's key layout on the broker: global_keyprefix, sep,
	// priority steps and the fanout prefix "/<db>." (pub/sub ignores
	// databases, so the broker's db number keeps clusters on one server
	// apart).
	keys celery.RedisKeys
	// resultPrefix is what result keys start with on the result backend.
	resultPrefix string
	// sentinel is set on a sentinel:// broker, where Celery 5.2 workers
	// use other fanout channels than 5.3+ (RedisKeys.SentinelFanout52).
	sentinel bool

	// enableEvery is the enable_events period and eventsIdle the quiet
	// time after which the event subscription is pinged (fields so that
	// tests can shorten them).
	enableEvery time.Duration
	eventsIdle  time.Duration
	// decoders is how many goroutines decode events (see decoders; tests
	// set more than a small machine's cores give).
	decoders int
	// enableEvents is !Config.NoEnableEvents: whether ConsumeEvents
	// broadcasts enable_events at all.
	enableEvents bool

	// clock is our Lamport clock for pidbox requests.
	clock  atomic.Int64
	closed atomic.Bool
	// wholeSecondBlock is set once the server refused a fractional BRPOP
	// timeout (Redis before 6.0): pidbox replies are then polled.
	wholeSecondBlock atomic.Bool
	// onSubscribe, when set, is called each time the event subscription
	// is (re)established (SetOnSubscribe).
	onSubscribe atomic.Pointer[func()]
	// following is true while the event subscription is established.
	following atomic.Bool
}

// SetOnSubscribe sets fn to be called, on the event stream's goroutine,
// each time ConsumeEvents has (re)subscribed: the events published while
// it was not subscribed are lost, and fn may look for what they said
// elsewhere (internal/reconcile). fn must not block.
func (b *Broker) SetOnSubscribe(fn func()) { b.onSubscribe.Store(&fn) }

// EventsSubscribed reports whether ConsumeEvents' subscription is
// established now: false before the first one, and from the moment one
// fails until the next is confirmed.
func (b *Broker) EventsSubscribed() bool { return b.following.Load() }

func (b *Broker) subscribed() {
	b.following.Store(true)
	if fn := b.onSubscribe.Load(); fn != nil && *fn != nil {
		(*fn)()
	}
}

// New connects to the broker (and result backend) described by cfg. A
// server that cannot be reached yet is not an error: calls fail with
// celery.ErrUnavailable until it comes up and ConsumeEvents keeps retrying.
// A server that answers and refuses us (bad password, bad db) is.
func New(ctx context.Context, cfg Config) (*Broker, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opTimeout := cfg.OpTimeout
	if opTimeout <= 0 {
		opTimeout = DefaultOpTimeout
	}
	client, db, fopt, err := newClient(ctx, cfg.BrokerURL, cfg.Transport, cfg.TLS, opTimeout, log)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b := &Broker{
		log:          log,
		opTimeout:    opTimeout,
		redacted:     redact.URL(cfg.BrokerURL),
		client:       client,
		keys:         cfg.Transport.keys(db),
		resultPrefix: celery.ResultKeyPrefixFor(cfg.ResultTransport.GlobalKeyPrefix),
		sentinel:     strings.HasPrefix(cfg.BrokerURL, "sentinel://"),

		enableEvery:  enableEventsEvery,
		eventsIdle:   eventsIdle,
		decoders:     decoders(),
		enableEvents: !cfg.NoEnableEvents,
	}
	var resultFopt *goredis.FailoverOptions
	if cfg.ResultBackendURL != "" {
		if cfg.ResultBackendURL == cfg.BrokerURL {
			b.results = b.client
		} else {
			b.results, _, resultFopt, err = newClient(ctx, cfg.ResultBackendURL, cfg.ResultTransport, cfg.ResultTLS, opTimeout, log)
			if err != nil {
				_ = b.client.Close()
				return nil, fmt.Errorf("result backend: %w", err)
			}
		}
	}
	if err := b.check(ctx, b.client, fopt, "broker", cfg.BrokerURL); err != nil {
		_ = b.Close()
		return nil, err
	}
	if b.results != nil && b.results != b.client {
		if err := b.check(ctx, b.results, resultFopt, "result backend", cfg.ResultBackendURL); err != nil {
			_ = b.Close()
			return nil, err
		}
	}
	return b, nil
}

// check pings a server once: a refusal is fatal, silence only logged. The
// caller giving up is an error too. So are sentinels (f, of a sentinel://
// URL) that answer but know no master of the name given: a typo in
// master_name, which go-redis reports as every sentinel unreachable
// ("redis: nil") and would have stamen retry forever. Later, while
// running, the same answer is taken for an outage (a sentinel being
// reconfigured), as any other failure to find the master is.
func (b *Broker) check(ctx context.Context, c *goredis.Client, f *goredis.FailoverOptions, what, rawURL string) error {
	octx, cancel := b.opContext(ctx)
	defer cancel()
	err := c.Ping(octx).Err()
	switch {
	case err == nil:
		b.log.Debug("connected to Redis", slog.String("role", what), slog.String("url", redact.URL(rawURL)))
		return nil
	case ctxErr(ctx) != nil:
		return fmt.Errorf("connect to %s %s: %w", what, redact.URL(rawURL), ctxErr(ctx))
	case isServerError(err):
		return fmt.Errorf("%s %s refused the connection: %w", what, redact.URL(rawURL), err)
	case brokertls.IsRefusal(err):
		return fmt.Errorf("%s %s: TLS handshake failed: %w", what, redact.URL(rawURL), brokertls.Refusal(err))
	case f != nil && errors.Is(err, goredis.Nil):
		if unknown := unknownMaster(ctx, f, b.opTimeout); len(unknown) > 0 {
			return fmt.Errorf("%s %s: sentinels at %s know no master named %q (master_name in the transport options)",
				what, redact.URL(rawURL), strings.Join(unknown, ", "), f.MasterName)
		}
		// No sentinel answered: an outage, retried as any other.
		fallthrough
	default:
		if opt := c.Options(); opt.TLSConfig != nil && !strings.HasPrefix(rawURL, "sentinel://") {
			// A reset may hide the server's refusal of our certificate.
			if perr := brokertls.Probe(ctx, opt.Addr, opt.TLSConfig, b.opTimeout); perr != nil {
				return fmt.Errorf("%s %s: TLS handshake failed: %w", what, redact.URL(rawURL), perr)
			}
		}
		b.log.Warn("Redis not reachable yet; will keep trying",
			slog.String("role", what), slog.String("url", redact.URL(rawURL)), slog.Any("err", err))
		return nil
	}
}

// RedactedURL is the broker URL with its password masked, for logs.
func (b *Broker) RedactedURL() string {
	return b.redacted
}

// Close releases the connections. Calls in flight fail.
func (b *Broker) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	err := b.client.Close()
	if b.results != nil && b.results != b.client {
		err = errors.Join(err, b.results.Close())
	}
	return err
}

// opContext bounds one Redis call.
func (b *Broker) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.opTimeout)
}

// wrap classifies a Redis error. The caller's own context ending wins: the
// error then wraps ctx.Err(). A server that answered with an error stays
// as it is. Everything else (refused, reset, EOF, pool exhausted, our
// per-call timeout, a closed client) means Redis is unavailable; the cause
// is kept as text only, so that an expired per-call timeout is not taken for
// the caller's deadline.
func wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctxErr(ctx); cerr != nil {
		return fmt.Errorf("redis %s: %w", op, cerr)
	}
	if isNoPerm(err) {
		return fmt.Errorf("redis %s: %w", op, &celery.RefusedError{Reply: err.Error()})
	}
	if isServerError(err) {
		return fmt.Errorf("redis %s: %w", op, err)
	}
	return fmt.Errorf("redis %s: %w: %v", op, celery.ErrUnavailable, err)
}

// isNoPerm reports Redis' refusal of a command, key or channel to the
// user stamen logs in as (an ACL's NOPERM reply).
func isNoPerm(err error) bool {
	var rerr goredis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOPERM ")
}

// isServerError reports an error reply from Redis (as opposed to not
// getting a reply at all). LOADING and similar transient states count as
// replies too; they are rare enough not to need retrying here.
func isServerError(err error) bool {
	var rerr goredis.Error
	return errors.As(err, &rerr) && !errors.Is(err, goredis.Nil)
}

// resultsClient is the result backend's client, or ErrNoResultBackend.
func (b *Broker) resultsClient() (*goredis.Client, error) {
	if b.results == nil {
		return nil, celery.ErrNoResultBackend
	}
	return b.results, nil
}

// resultKey is the key and channel of taskID's result document.
func (b *Broker) resultKey(taskID string) string {
	return b.resultPrefix + taskID
}

// fanouts are the channels (or patterns) of a fanout exchange the workers
// may use: on a sentinel:// broker both kombu 5.2's and 5.3+'s, so that a
// control request reaches workers of either release exactly once and
// events of both are followed.
func (b *Broker) fanouts(exchange string) []string {
	if b.sentinel {
		return []string{b.keys.Fanout(exchange), b.keys.SentinelFanout52(exchange)}
	}
	return []string{b.keys.Fanout(exchange)}
}
