package amqp

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// returns tracks the basic.return RabbitMQ sends for a mandatory publish
// that no queue took (NO_ROUTE). Without the mandatory flag such a message
// is confirmed (basic.ack) all the same and silently dropped: a task
// answered 200 and lost. A returned message is acked too, and RabbitMQ
// sends the return first; amqp091 hands both over from one reader
// goroutine in that order.
//
// Returns are matched to publishes by the message_id property, which
// stamen sets to a number of its own for each mandatory publish (a task id
// can repeat: a client may give one). Celery's workers do not read
// message_id.
type returns struct {
	seq atomic.Uint64
	// barrier is received by the watcher goroutine between returns (see
	// returned).
	barrier chan struct{}

	mu sync.Mutex
	// pending holds the publishes waiting for their confirm, by message
	// id: nil, or the return RabbitMQ sent for it. It holds no more
	// entries than publishes in flight.
	pending map[string]*amqp091.Return
}

// watchReturns subscribes to the returns of p's channel and records them
// on a goroutine that ends with the channel (or the session).
func (b *Broker) watchReturns(s *session, p *publisher) {
	r := &returns{barrier: make(chan struct{}), pending: map[string]*amqp091.Return{}}
	p.returns = r
	// Unbuffered: amqp091's reader waits until the watcher has taken a
	// return before it reads the ack that follows it, so a barrier
	// handed to the watcher after the ack comes after the return's
	// recording. (amqp091 gives a listener up to 5 s before dropping a
	// notification; the watcher only takes a lock.)
	ch := p.ch.NotifyReturn(make(chan amqp091.Return))
	b.wg.Go(func() {
		for {
			select {
			case ret, ok := <-ch:
				if !ok {
					return
				}
				r.record(b.log, ret)
			case <-r.barrier:
			case <-s.done:
				return
			}
		}
	})
}

// add registers a mandatory publish before it is sent and returns its
// message id.
func (r *returns) add() string {
	id := "stamen-" + strconv.FormatUint(r.seq.Add(1), 10)
	r.mu.Lock()
	r.pending[id] = nil
	r.mu.Unlock()
	return id
}

// remove forgets a publish once it has its answer, or was given up.
func (r *returns) remove(id string) {
	r.mu.Lock()
	delete(r.pending, id)
	r.mu.Unlock()
}

func (r *returns) record(log *slog.Logger, ret amqp091.Return) {
	r.mu.Lock()
	_, waiting := r.pending[ret.MessageId]
	if waiting {
		r.pending[ret.MessageId] = &ret
	}
	r.mu.Unlock()
	if !waiting {
		// Its publish gave up waiting for the confirm and already said
		// the message may or may not be queued.
		log.Warn("RabbitMQ returned a message nobody waits for any more",
			slog.String("exchange", ret.Exchange), slog.String("routing_key", ret.RoutingKey),
			slog.String("correlation_id", ret.CorrelationId), slog.String("reason", ret.ReplyText))
	}
}

// returned reports the return RabbitMQ sent for the publish id, nil when
// none. It must be called once the publish's confirm is in: the barrier
// waits until the watcher has recorded every return handed over before
// that confirm.
func (r *returns) returned(ctx context.Context, pub *publisher, op, id string) (*amqp091.Return, error) {
	select {
	case r.barrier <- struct{}{}:
	case <-pub.done:
		// It closes with the connection too.
		return nil, fmt.Errorf("amqp %s: publish channel lost after the confirm (the message may or may not be queued): %w", op, celery.ErrUnavailable)
	case <-ctx.Done():
		return nil, fmt.Errorf("amqp %s: checking for a return: %w", op, ctx.Err())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending[id], nil
}

// unroutableError is a mandatory publish that RabbitMQ returned: no queue
// is bound to the exchange with that routing key, and nothing was
// delivered. It is celery.ErrNoRoute, and errReturned.
type unroutableError struct {
	exchange, key string
	reason        string
}

func (e *unroutableError) Error() string {
	where := fmt.Sprintf("exchange %q", e.exchange)
	if e.exchange == "" {
		where = "the default exchange (a queue of that name does not exist)"
	}
	return fmt.Sprintf("no queue is bound to %s with routing key %q: RabbitMQ returned the message (%s); nothing was delivered", where, e.key, e.reason)
}

func (e *unroutableError) Is(target error) bool {
	return target == celery.ErrNoRoute || target == errReturned
}
