// Package broker is the one seam between stamen and a Celery broker: Conn
// and ResultBackend are what the rest of stamen uses, the named optional
// interfaces are what only some brokers offer, and Open picks the
// implementation from the broker URL's scheme (internal/broker/redis,
// internal/broker/amqp). The embedded broker (internal/broker/embedded) is
// a Redis server in the process, reached through redis like any other.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/stamen-dev/stamen/internal/broker/amqp"
	"github.com/stamen-dev/stamen/internal/broker/redis"
	"github.com/stamen-dev/stamen/internal/brokertls"
	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/redact"
)

// Conn is a connection to a Celery broker. Every method that waits honours
// ctx's deadline and wraps connection failures in celery.ErrUnavailable.
//
// See redis.Broker for the reference implementation.
type Conn interface {
	celery.Broadcaster
	// Publish puts a task message on its queue.
	Publish(ctx context.Context, msg *celery.TaskMessage) error
	// QueueLengths returns the number of messages waiting in each queue.
	QueueLengths(ctx context.Context, queues []string) (map[string]int64, error)
	// Purge deletes the messages waiting in a queue (on Redis its
	// priority lists too) and returns how many; a queue that does not
	// exist holds none.
	Purge(ctx context.Context, queue string) (int64, error)
	// ConsumeEvents follows the workers' event stream, calling fn with each
	// batch of events, until ctx ends or the stream breaks. fn's events
	// may be reused once it returns, but for their strings.
	ConsumeEvents(ctx context.Context, fn func([]celery.Event)) error
	// Close ends the connection, and the result backend's when Open
	// opened one of its own.
	Close() error
}

// ResultBackend is a connection to a Celery result backend.
//
// See redis.Broker for the reference implementation.
type ResultBackend interface {
	// Result returns the task's stored result; a task with no stored
	// result is PENDING.
	Result(ctx context.Context, taskID string) (*celery.Result, error)
	// WaitResult blocks until the task's result is ready or ctx ends, in
	// which case it returns an error wrapping ctx.Err().
	WaitResult(ctx context.Context, taskID string) (*celery.Result, error)
	// Abort flags an AbortableTask as ABORTED; celery.ErrUnsupported when
	// the backend keeps no state the worker can read back.
	Abort(ctx context.Context, taskID string) error
}

// BulkResults is a ResultBackend that reads many result documents at once
// (Redis): what reconciliation needs to look up unfinished tasks whose
// events were missed. rpc:// keeps no documents to read.
type BulkResults interface {
	// Results returns one entry per id, in order, nil where the backend
	// holds none (or one stamen cannot read).
	Results(ctx context.Context, ids []string) ([]*celery.Result, error)
}

// Subscriber is a Conn that says when its event stream is subscribed:
// events sent while it was not are lost, so whoever relies on them learns
// when to look for what was missed, and whether the monitor is live.
type Subscriber interface {
	// SetOnSubscribe sets fn to be called, on the event stream's
	// goroutine, each time the subscription is (re)established.
	SetOnSubscribe(fn func())
	// EventsSubscribed reports whether the event stream is subscribed now.
	EventsSubscribed() bool
}

// QueueLookup returns a queue as the workers consume it (their
// active_queues), false when no known worker consumes it.
type QueueLookup = func(name string) (*celery.QueueDeclaration, bool)

// QueueLookupSetter is a Conn that routes tasks with an eta through the
// workers' native delayed delivery (AMQP), which needs the queues as the
// workers declared them. Without a lookup such tasks go straight to their
// queue.
type QueueLookupSetter interface {
	SetQueueLookup(f QueueLookup)
}

// Config is what Open needs: the broker and result backend URLs and their
// settings, as Celery's configuration names them.
type Config struct {
	// BrokerURL selects the broker by scheme: redis, rediss, sentinel,
	// amqp, amqps. A failover list ("url1;url2") is of its first URL's
	// kind.
	BrokerURL string
	// ResultBackend is a redis(s):// URL, or rpc:// with an AMQP broker.
	// Empty means rpc:// on AMQP and the broker's own URL on Redis.
	ResultBackend string
	// BrokerTransportOptions and ResultBackendTransportOptions are JSON
	// objects, as Celery's broker_transport_options and
	// result_backend_transport_options (Redis only). When the result
	// backend has none, it takes the broker's master_name and
	// sentinel_kwargs.
	BrokerTransportOptions        string
	ResultBackendTransportOptions string
	// BrokerUseSSL is Celery's broker_use_ssl: TLS settings for every
	// broker URL, and for the Redis result backend when it is the broker's
	// URL. RedisBackendUseSSL is redis_backend_use_ssl, for a Redis result
	// backend of its own URL. nil: the URLs alone say.
	BrokerUseSSL       *brokertls.Settings
	RedisBackendUseSSL *brokertls.Settings
	// EventQueue names a durable RabbitMQ event queue
	// (amqp.Config.EventQueue), bounded by EventQueueTTL and
	// EventQueueMaxLength; Redis refuses it.
	EventQueue          string
	EventQueueTTL       time.Duration
	EventQueueMaxLength int64
	// NoEnableEvents keeps the broker from broadcasting enable_events to
	// the workers.
	NoEnableEvents bool
	// OpTimeout bounds each broker operation.
	OpTimeout time.Duration
	Logger    *slog.Logger
}

// Open connects to the broker cfg.BrokerURL names and to its result
// backend: the broker itself (Redis, or AMQP with rpc://), or with an AMQP
// broker a Redis result backend of its own, which closing the Conn closes
// too.
func Open(ctx context.Context, cfg Config) (Conn, ResultBackend, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A failover list (Celery's "url1;url2", or a sentinel:// URL's list
	// of sentinels) is of the first URL's kind.
	first, _, _ := strings.Cut(cfg.BrokerURL, ";")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil {
		return nil, nil, fmt.Errorf("invalid broker URL %s: %w", redact.URL(cfg.BrokerURL), redact.ParseError(err))
	}
	brokerOpts, err := redis.ParseTransportOptions(cfg.BrokerTransportOptions)
	if err != nil {
		return nil, nil, fmt.Errorf("broker_transport_options: %w", err)
	}
	resultOpts, err := redis.ParseTransportOptions(cfg.ResultBackendTransportOptions)
	if err != nil {
		return nil, nil, fmt.Errorf("result_backend_transport_options: %w", err)
	}
	if strings.TrimSpace(cfg.ResultBackendTransportOptions) == "" {
		// Celery's result backend reads only its own options; inheriting
		// the sentinel settings lets one option serve a sentinel:// broker
		// that is also the result backend. Not global_keyprefix: Celery
		// never prefixes results with the broker's.
		resultOpts.MasterName, resultOpts.SentinelKwargs = brokerOpts.MasterName, brokerOpts.SentinelKwargs
	}
	switch u.Scheme {
	case "redis", "rediss", "sentinel":
		backend, backendSSL := cfg.ResultBackend, cfg.RedisBackendUseSSL
		if backend == "" || backend == cfg.BrokerURL {
			// One server, one connection: the broker's settings.
			backend, backendSSL = cfg.BrokerURL, cfg.BrokerUseSSL
		}
		if cfg.EventQueue != "" {
			return nil, nil, errors.New("event_queue: only RabbitMQ brokers have event queues (Redis pub/sub keeps nothing)")
		}
		for _, o := range []struct {
			name string
			keys []string
		}{{"broker_transport_options", brokerOpts.Ignored}, {"result_backend_transport_options", resultOpts.Ignored}} {
			if len(o.keys) > 0 {
				log.Info("transport options taken without effect on stamen (they tune the workers' consuming and connections)",
					slog.String("setting", o.name), slog.Any("keys", o.keys))
			}
		}
		b, err := redis.New(ctx, redis.Config{
			BrokerURL: cfg.BrokerURL, ResultBackendURL: backend, Logger: log, OpTimeout: cfg.OpTimeout,
			Transport: brokerOpts, ResultTransport: resultOpts, NoEnableEvents: cfg.NoEnableEvents,
			TLS: cfg.BrokerUseSSL, ResultTLS: backendSSL,
		})
		if err != nil {
			return nil, nil, err
		}
		return b, b, nil
	case "amqp", "amqps":
		backend := cfg.ResultBackend
		if backend == "" {
			backend = "rpc://"
		}
		rpc := backend == "rpc://" || backend == "rpc"
		if strings.TrimSpace(cfg.BrokerTransportOptions) != "" {
			return nil, nil, errors.New("broker_transport_options: only Redis brokers take transport options")
		}
		acfg := amqp.Config{BrokerURL: cfg.BrokerURL, Logger: log, OpTimeout: cfg.OpTimeout,
			EventQueue: cfg.EventQueue, EventQueueTTL: cfg.EventQueueTTL, EventQueueMaxLength: cfg.EventQueueMaxLength,
			NoEnableEvents: cfg.NoEnableEvents, TLS: cfg.BrokerUseSSL}
		if rpc {
			acfg.ResultBackend = "rpc://"
		}
		b, err := amqp.New(ctx, acfg)
		if err != nil {
			return nil, nil, err
		}
		if rpc {
			return b, b, nil
		}
		// An AMQP broker with a Redis result backend.
		rb, err := redis.New(ctx, redis.Config{
			BrokerURL: backend, ResultBackendURL: backend, Logger: log, OpTimeout: cfg.OpTimeout,
			Transport: resultOpts, ResultTransport: resultOpts,
			TLS: cfg.RedisBackendUseSSL, ResultTLS: cfg.RedisBackendUseSSL,
		})
		if err != nil {
			_ = b.Close()
			return nil, nil, err
		}
		return amqpWithResults{b, rb}, rb, nil
	default:
		return nil, nil, fmt.Errorf("unsupported broker scheme %q: use redis://, rediss://, sentinel://, amqp:// or amqps://", u.Scheme)
	}
}

// amqpWithResults is an AMQP broker whose results a Redis result backend
// of its own keeps: closing it closes both. Everything else is the AMQP
// broker's, its optional interfaces included.
type amqpWithResults struct {
	*amqp.Broker
	results *redis.Broker
}

func (c amqpWithResults) Close() error {
	return errors.Join(c.Broker.Close(), c.results.Close())
}

// What each implementation offers, checked at compile time: a method
// renamed there would otherwise only turn an optional interface off.
var (
	_ Conn              = (*redis.Broker)(nil)
	_ ResultBackend     = (*redis.Broker)(nil)
	_ BulkResults       = (*redis.Broker)(nil)
	_ Subscriber        = (*redis.Broker)(nil)
	_ Conn              = (*amqp.Broker)(nil)
	_ ResultBackend     = (*amqp.Broker)(nil)
	_ Subscriber        = (*amqp.Broker)(nil)
	_ QueueLookupSetter = (*amqp.Broker)(nil)
	_ Conn              = amqpWithResults{}
)
