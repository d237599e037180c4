package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// defaultCollect bounds collecting replies when ctx has no deadline
// (kombu's default broadcast timeout).
const defaultCollect = time.Second

// Broadcast sends cmd to the workers through the celery.pidbox fanout
// exchange. With cmd.Reply it collects the replies carrying this call's
// ticket until it has what it waits for (celery.ControlCommand.Collected)
// or ctx ends;
// without a deadline it collects for one second. All broadcasts share one
// reply queue and a dispatcher routes each reply by its ticket, so
// concurrent broadcasts never see each other's replies. If the connection
// is lost while collecting, the replies so far are returned with the
// error.
func (b *Broker) Broadcast(ctx context.Context, cmd celery.ControlCommand) ([]celery.ControlReply, error) {
	op := "broadcast " + cmd.Method
	s, err := b.current(op)
	if err != nil {
		return nil, err
	}
	if !cmd.Reply {
		body, err := celery.ControlRequestBody(cmd, "", "")
		if err != nil {
			return nil, err
		}
		// Workers ignore expires; 0 is kombu's "no timeout".
		return nil, b.publishRequest(ctx, s, op, body, 0)
	}

	ticket := uuid.NewString()
	body, err := celery.ControlRequestBody(cmd, ticket, b.oid)
	if err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultCollect)
	}
	// Register before publishing: a fast worker may answer before the
	// publish call returns.
	w := b.pidbox.register(ticket)
	defer b.pidbox.unregister(ticket)
	expires := float64(deadline.UnixNano()) / 1e9
	if err := b.publishRequest(ctx, s, op, body, expires); err != nil {
		return nil, err
	}

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for !w.collected(cmd) {
		select {
		case <-w.notify:
		case <-timer.C:
			return w.take(), nil
		case <-ctx.Done():
			return w.take(), nil
		case <-s.done:
			return w.take(), fmt.Errorf("amqp %s: connection lost while collecting replies: %w", op, celery.ErrUnavailable)
		}
	}
	return w.take(), nil
}

// publishRequest publishes a request body to the pidbox exchange with
// kombu's headers. expires is the epoch time the sender stops listening,
// or 0.
func (b *Broker) publishRequest(ctx context.Context, s *session, op string, body []byte, expires float64) error {
	var exp any = 0
	if expires > 0 {
		exp = expires
	}
	return b.publish(ctx, s, op, celery.ControlExchange, "", amqp091.Publishing{
		Headers:         amqp091.Table{"clock": b.clock.Add(1), "expires": exp},
		ContentType:     contentType,
		ContentEncoding: contentEncoding,
		// kombu falls back to persistent because the exchange is named by
		// a string; the lab saw 2.
		DeliveryMode: persistent,
		Body:         body,
	}, false) // no worker, no queue bound: nobody to ask, not an error
}

// dispatchReplies hands each pidbox reply to the broadcast waiting for its
// ticket, until the session's reply consumer ends.
func (b *Broker) dispatchReplies(s *session, deliveries <-chan amqp091.Delivery) {
	for d := range deliveries {
		ticket, _ := d.Headers["ticket"].(string)
		w := b.pidbox.lookup(ticket)
		if w == nil {
			// kombu keeps these as "unclaimed"; nobody asks for them here.
			b.log.Debug("dropping pidbox reply nobody waits for", slog.String("ticket", ticket))
			continue
		}
		replies, err := celery.DecodeControlReply(d.Body)
		if err != nil {
			b.log.Debug("dropping undecodable pidbox reply", slog.String("ticket", ticket), slog.Any("err", err))
			continue
		}
		w.add(replies)
	}
	// The consumer can end with the channel still open (the queue was
	// deleted, say): without it broadcasts would wait in vain.
	s.fail(errors.New("pidbox reply consumer ended"))
}

// replyRouter tracks the broadcasts waiting for replies, by ticket.
type replyRouter struct {
	mu      sync.Mutex
	waiters map[string]*replyWaiter
}

// replyWaiter collects the replies to one broadcast. The dispatcher never
// blocks on it.
type replyWaiter struct {
	mu      sync.Mutex
	replies []celery.ControlReply
	// notify has room for one signal: "more replies arrived".
	notify chan struct{}
}

func (r *replyRouter) register(ticket string) *replyWaiter {
	w := &replyWaiter{notify: make(chan struct{}, 1)}
	r.mu.Lock()
	r.waiters[ticket] = w
	r.mu.Unlock()
	return w
}

func (r *replyRouter) unregister(ticket string) {
	r.mu.Lock()
	delete(r.waiters, ticket)
	r.mu.Unlock()
}

func (r *replyRouter) lookup(ticket string) *replyWaiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiters[ticket]
}

func (w *replyWaiter) add(replies []celery.ControlReply) {
	w.mu.Lock()
	w.replies = append(w.replies, replies...)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// collected reports whether cmd has the replies it waits for.
func (w *replyWaiter) collected(cmd celery.ControlCommand) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return cmd.Collected(w.replies)
}

func (w *replyWaiter) take() []celery.ControlReply {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.replies
	w.replies = nil
	return out
}
