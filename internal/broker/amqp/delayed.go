package amqp

import (
	"context"
	"log/slog"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// missingFor is how long the delayed-delivery topology, once found
// missing, is not looked for again: workers that declare it may start at
// any time, and each look costs a channel.
const missingFor = 10 * time.Second

// QueueLookup returns a queue as the workers consume it (their
// active_queues), false when no known worker consumes it.
type QueueLookup = func(name string) (*celery.QueueDeclaration, bool)

// delayedDelivery decides whether a task with an eta goes through Celery's
// native delayed delivery (see celery.DelayedRoute).
type delayedDelivery struct {
	mu      sync.Mutex
	lookup  QueueLookup
	checked time.Time
	present bool
}

// SetQueueLookup tells the Broker how the workers declared their queues.
// Without it, or for a queue it does not know, tasks with an eta go
// straight to their queue.
func (b *Broker) SetQueueLookup(f QueueLookup) {
	b.delayed.mu.Lock()
	b.delayed.lookup = f
	b.delayed.mu.Unlock()
}

// delayedRoute is the exchange and routing key for msg through the
// workers' delayed-delivery exchanges, as Celery's client (5.5+) sends a
// task with a countdown or an eta when it knows a quorum queue: for a
// quorum queue holding an early message would cost a worker its prefetch
// (no global QoS), so it holds delayed tasks in memory and runs the
// others late. ok is false when msg goes as before: no eta, a queue no
// worker reports as a quorum queue behind a non-direct exchange, or no
// delayed-delivery topology (declared by Celery 5.5+ workers that detect
// quorum queues).
func (b *Broker) delayedRoute(ctx context.Context, msg *celery.TaskMessage, queue string) (exchange, key string, ok bool, err error) {
	if msg.ETA == nil || msg.Exchange != "" || msg.RoutingKey != "" {
		// An explicit exchange or routing key is the caller's route, and
		// Celery's client only rewrites the queue's own.
		return "", "", false, nil
	}
	b.delayed.mu.Lock()
	lookup := b.delayed.lookup
	b.delayed.mu.Unlock()
	if lookup == nil {
		return "", "", false, nil
	}
	q, known := lookup(queue)
	if !known {
		return "", "", false, nil
	}
	exchange, key, ok = celery.DelayedRoute(q, time.Until(*msg.ETA))
	if !ok {
		return "", "", false, nil
	}
	present, err := b.delayedTopology(ctx)
	if err != nil || !present {
		return "", "", false, err
	}
	return exchange, key, true, nil
}

// delayedTopology reports whether the workers declared the delayed-delivery
// exchanges: the cascade's entry, and the delivery exchange they declare
// last. Passive declares only: they are the workers' to declare.
func (b *Broker) delayedTopology(ctx context.Context) (bool, error) {
	b.delayed.mu.Lock()
	checked, present := b.delayed.checked, b.delayed.present
	b.delayed.mu.Unlock()
	if !checked.IsZero() && (present && time.Since(checked) < declaredFor || !present && time.Since(checked) < missingFor) {
		return present, nil
	}
	present = true
	err := b.withChannel(ctx, "check delayed delivery", func(c *channels) error {
		for _, ex := range []string{celery.DelayedEntryExchange, celery.DelayedDeliveryExchange} {
			ch, err := c.get()
			if err != nil {
				return err
			}
			err = ch.ExchangeDeclarePassive(ex, amqp091.ExchangeTopic, true, false, false, false, nil)
			if isNotFound(err) {
				present = false
				return nil
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	b.delayed.mu.Lock()
	if b.delayed.present != present || b.delayed.checked.IsZero() {
		b.log.Info("native delayed delivery", slog.Bool("available", present))
	}
	b.delayed.checked, b.delayed.present = time.Now(), present
	b.delayed.mu.Unlock()
	return present, nil
}
