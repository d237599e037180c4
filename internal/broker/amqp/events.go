package amqp

import (
	"context"
	"fmt"
	"log/slog"
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

// ConsumeEvents follows the workers' event stream and calls fn with each
// message's events (task events arrive batched), LocalReceived set. fn runs
// on this goroutine; a slow fn delays the stream: RabbitMQ hands us at most
// eventPrefetch messages that fn has not returned from, keeps the rest in
// our queue and drops events older than 5 s from it.
//
// It declares its own queue "celeryev.stamen-<uuid>" bound to celeryev with
// "#", and re-declares it after every reconnect. Each time it starts
// consuming it asks all workers for a heartbeat and for task events, so
// that they show up at once, and every 5 s it broadcasts enable_events so
// that workers started without -E send task events too. Undecodable
// messages are dropped. It returns ctx.Err() when ctx ends, or an error
// wrapping celery.ErrUnavailable once the Broker is closed.
func (b *Broker) ConsumeEvents(ctx context.Context, fn func([]celery.Event)) error {
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { celery.EnableEventsLoop(ctx, b, b.enableEvery, b.log) })
	defer func() {
		stop()
		wg.Wait()
	}()

	queue := "celeryev.stamen-" + uuid.NewString()
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
		consumed, err := b.consumeEvents(ctx, s, queue, fn)
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
func (b *Broker) consumeEvents(ctx context.Context, s *session, queue string, fn func([]celery.Event)) (bool, error) {
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
		if _, err := ch.QueueDeclare(queue, false, true, false, false, eventQueueArgs()); err != nil {
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

	b.log.Info("following worker events", slog.String("queue", queue))
	celery.WakeWorkers(ctx, b, b.log)
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
