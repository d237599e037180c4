package amqp

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// eventExchange is Celery's event_exchange; workers publish every event to
// it with the event type (dots for dashes) as routing key.
const eventExchange = "celeryev"

// eventQueueArgs are Celery's event_queue_ttl (5 s) and
// event_queue_expires (60 s): events nobody reads soon are worthless, and
// a queue left behind by a crashed receiver goes away.
func eventQueueArgs() amqp091.Table {
	return amqp091.Table{"x-message-ttl": int32(5000), "x-expires": int32(60000)}
}

// Bounds of a named event queue (Config.EventQueue) by default: an hour
// of events, at most a million messages (a message is one event or one
// worker's batch, about 1 KB: a full queue holds about 1 GB in RabbitMQ).
const (
	DefaultEventQueueTTL       = time.Hour
	DefaultEventQueueMaxLength = 1_000_000
	// maxEventQueueName leaves room under AMQP's 255-byte limit.
	maxEventQueueName = 200
)

// eventQueue is how the event queue is declared.
type eventQueue struct {
	name       string // "" until ConsumeEvents picks a private one
	durable    bool
	autoDelete bool
	args       amqp091.Table
}

// ValidateEventQueue checks a name for Config.EventQueue: 1 to 200 bytes
// of letters, digits and "._-:", not starting with "amq." (RabbitMQ keeps
// those for itself).
func ValidateEventQueue(name string) error {
	if name == "" || len(name) > maxEventQueueName {
		return fmt.Errorf("invalid event queue name: want 1 to %d bytes, got %d", maxEventQueueName, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':') {
			return fmt.Errorf("invalid event queue name %q: byte %d (%q) is not a letter, a digit or one of ._-:", name, i, c)
		}
	}
	if strings.HasPrefix(name, "amq.") {
		return fmt.Errorf("invalid event queue name %q: RabbitMQ reserves names starting with amq.", name)
	}
	return nil
}

// newEventQueue is cfg's event queue: the named durable one, or a
// private one per process.
func newEventQueue(cfg Config) (eventQueue, error) {
	if cfg.EventQueue == "" {
		return eventQueue{autoDelete: true, args: eventQueueArgs()}, nil
	}
	if err := ValidateEventQueue(cfg.EventQueue); err != nil {
		return eventQueue{}, err
	}
	ttl, maxLen := cfg.EventQueueTTL, cfg.EventQueueMaxLength
	if ttl <= 0 {
		ttl = DefaultEventQueueTTL
	}
	if maxLen <= 0 {
		maxLen = DefaultEventQueueMaxLength
	}
	if ttl.Milliseconds() < 1 || ttl.Milliseconds() > 1<<32-1 {
		return eventQueue{}, fmt.Errorf("invalid event queue TTL %s: want 1 ms to about 49 days", ttl)
	}
	return eventQueue{name: cfg.EventQueue, durable: true, args: amqp091.Table{
		"x-message-ttl": ttl.Milliseconds(),
		"x-max-length":  maxLen,
	}}, nil
}

// SetOnSubscribe sets fn to be called, on the event stream's goroutine,
// each time ConsumeEvents has (re)started consuming: with a private event
// queue the events published meanwhile are lost, and fn may look for what
// they said elsewhere (internal/reconcile). fn must not block.
func (b *Broker) SetOnSubscribe(fn func()) { b.onSubscribe.Store(&fn) }

// EventsSubscribed reports whether ConsumeEvents is consuming now: false
// before it first does, and from the moment its consumer fails until the
// next one consumes.
func (b *Broker) EventsSubscribed() bool { return b.following.Load() }

// ConsumeEvents follows the workers' event stream and calls fn with each
// message's events (task events arrive batched), LocalReceived set. fn runs
// on this goroutine; a slow fn delays the stream: RabbitMQ hands us at most
// eventPrefetch messages that fn has not returned from, keeps the rest in
// our queue and drops events older than 5 s from it.
//
// It declares its own queue "celeryev.stamen-<uuid>" (or, with
// Config.EventQueue, that durable queue) bound to celeryev with "#", and
// re-declares it after every reconnect. A message is acknowledged only
// once fn has returned from it, so a durable queue's events that stamen
// took but did not apply before it stopped are delivered again. Each time
// it starts consuming it asks all workers for a heartbeat, so that they
// show up at once, and, unless Config.NoEnableEvents, for task events then
// and every 5 s (enable_events), so that workers started without -E send
// task events too. Undecodable messages are dropped. It returns ctx.Err()
// when ctx ends, or an error wrapping celery.ErrUnavailable once the
// Broker is closed.
func (b *Broker) ConsumeEvents(ctx context.Context, fn func([]celery.Event)) error {
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if b.enableEvents {
		wg.Go(func() { celery.EnableEventsLoop(ctx, b, b.enableEvery, b.log) })
	}
	defer func() {
		stop()
		wg.Wait()
	}()

	q := b.events
	if q.name == "" {
		q.name = "celeryev.stamen-" + uuid.NewString()
	}
	backoff := b.minBackoff
	failing := false
	for {
		s, err := b.waitSession(ctx)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			return fmt.Errorf("event stream: %w", err)
		}
		consumed, err := b.consumeEvents(ctx, s, q, fn)
		b.following.Store(false)
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if b.isClosed() {
			return fmt.Errorf("event stream: %w", errClosed("consume events"))
		}
		if consumed {
			backoff = b.minBackoff
		}
		if !failing || consumed {
			b.log.Warn("event stream interrupted; resuming", slog.Any("err", err))
		} else {
			b.log.Debug("event stream still down", slog.Any("err", err), slog.Duration("retry_in", backoff))
		}
		failing = true
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(backoff*2, b.maxBackoff)
	}
}

// eventConsumer is a channel consuming our event queue.
type eventConsumer struct {
	ch         *amqp091.Channel
	deliveries <-chan amqp091.Delivery
}

// consumeEvents runs one consumer on s until it fails or ctx ends,
// reporting whether it got as far as consuming.
func (b *Broker) consumeEvents(ctx context.Context, s *session, q eventQueue, fn func([]celery.Event)) (bool, error) {
	queue := q.name
	c, err := bounded(ctx, b, s, "follow events", func() (eventConsumer, error) {
		ch, err := s.conn.Channel()
		if err != nil {
			return eventConsumer{}, err
		}
		ok := false
		defer func() {
			if !ok {
				_ = ch.Close()
			}
		}()
		// Must match the workers' declaration: topic, durable.
		if err := ch.ExchangeDeclare(eventExchange, amqp091.ExchangeTopic, true, false, false, false, nil); err != nil {
			return eventConsumer{}, fmt.Errorf("declare exchange %s: %w", eventExchange, err)
		}
		if _, err := ch.QueueDeclare(queue, q.durable, q.autoDelete, false, false, q.args); err != nil {
			if q.durable {
				// Most likely the queue exists with other bounds:
				// RabbitMQ refuses a declaration that differs.
				return eventConsumer{}, fmt.Errorf("declare event queue %s (x-message-ttl %v, x-max-length %v; an existing queue "+
					"declared with other arguments must be deleted first): %w", queue, q.args["x-message-ttl"], q.args["x-max-length"], err)
			}
			return eventConsumer{}, fmt.Errorf("declare queue %s: %w", queue, err)
		}
		if err := ch.QueueBind(queue, "#", eventExchange, false, nil); err != nil {
			return eventConsumer{}, fmt.Errorf("bind queue %s: %w", queue, err)
		}
		// With automatic acknowledgement RabbitMQ would push the whole
		// backlog into amqp091's unbounded buffer while fn is slow.
		if err := ch.Qos(b.eventPrefetch, 0, false); err != nil {
			return eventConsumer{}, fmt.Errorf("set the prefetch of %s: %w", queue, err)
		}
		deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
		if err != nil {
			return eventConsumer{}, fmt.Errorf("consume %s: %w", queue, err)
		}
		ok = true
		return eventConsumer{ch: ch, deliveries: deliveries}, nil
	}, func(c eventConsumer) { _ = c.ch.Close() })
	if err != nil {
		return false, err
	}
	defer func() {
		// Closing waits for the broker's answer; nobody needs to wait for
		// it but Close, which waits for every goroutine. Closing the
		// channel is what lets RabbitMQ auto-delete the queue.
		b.spawn(func() { _ = c.ch.Close() })
	}()

	b.log.Info("following worker events", slog.String("queue", queue), slog.Bool("durable", q.durable))
	b.following.Store(true)
	if fn := b.onSubscribe.Load(); fn != nil && *fn != nil {
		(*fn)()
	}
	celery.WakeWorkers(ctx, b, b.enableEvents, b.log)
	// Messages are acknowledged once fn has returned from them, several at
	// once (multiple=true): when a quarter of the prefetch is pending, or
	// when no other message is waiting. Acks are frames we send and do not
	// wait on; they are few and follow the deliveries we read, so they
	// cannot pile up on a connection that stalled.
	ackEvery := max(1, b.eventPrefetch/4)
	var lastTag uint64
	pending := 0
	ack := func() error {
		if pending == 0 {
			return nil
		}
		pending = 0
		if err := c.ch.Ack(lastTag, true); err != nil {
			return fmt.Errorf("acknowledge events: %w: %w", celery.ErrUnavailable, err)
		}
		return nil
	}
	for {
		var d amqp091.Delivery
		var ok bool
		select {
		case d, ok = <-c.deliveries:
		case <-ctx.Done():
			return true, ctx.Err()
		default:
			if err := ack(); err != nil {
				return true, err
			}
			select {
			case d, ok = <-c.deliveries:
			case <-ctx.Done():
				return true, ctx.Err()
			}
		}
		if !ok {
			if !s.alive() {
				return true, fmt.Errorf("event consumer: connection lost: %w: %w", celery.ErrUnavailable, s.cause())
			}
			return true, fmt.Errorf("event consumer cancelled: %w", celery.ErrUnavailable)
		}
		b.deliver(d, fn)
		lastTag = d.DeliveryTag
		if pending++; pending >= ackEvery {
			if err := ack(); err != nil {
				return true, err
			}
		}
	}
}

// deliver decodes one event message and hands its events to fn; a message
// it cannot read is dropped.
func (b *Broker) deliver(d amqp091.Delivery, fn func([]celery.Event)) {
	if d.ContentType != "" && d.ContentType != contentType {
		b.log.Debug("dropping event message of unsupported content type",
			slog.String("routing_key", d.RoutingKey), slog.String("content_type", d.ContentType))
		return
	}
	events, err := celery.DecodeEvents(d.Body)
	if err != nil {
		b.log.Debug("dropping undecodable event message", slog.String("routing_key", d.RoutingKey), slog.Any("err", err))
		return
	}
	if len(events) == 0 {
		return
	}
	now := float64(time.Now().UnixNano()) / 1e9
	for i := range events {
		events[i].LocalReceived = now
	}
	fn(events)
}

// isClosed reports whether Close was called.
func (b *Broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}
