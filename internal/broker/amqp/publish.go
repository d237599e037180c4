package amqp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

const (
	// contentType and contentEncoding are Celery's json serializer.
	contentType     = "application/json"
	contentEncoding = "utf-8"
	// persistent is AMQP delivery_mode 2, Celery's task_default_delivery_mode.
	persistent = amqp091.Persistent
	// declaredFor is how long a queue once seen to exist is trusted to
	// still exist before the next publish checks again.
	declaredFor = time.Minute
)

// Publish puts msg on its queue the way Celery does: through the default
// exchange with the queue's name as routing key, after making sure the
// queue exists (see ensureQueue), or
// through the exchange and routing key given (celery.Route), which must
// exist. A task with an eta for a quorum queue goes through the workers'
// delayed-delivery exchanges instead, as Celery's client sends it (see
// delayedRoute). It returns once RabbitMQ has confirmed the message.
func (b *Broker) Publish(ctx context.Context, msg *celery.TaskMessage) error {
	if err := b.publishTask(ctx, msg); err != nil {
		return err
	}
	if b.rpcQueue != "" {
		// Its results come to our queue (see WaitResult).
		b.results.expect(msg.ID)
	}
	return nil
}

// publishTask is Publish but for what it tells the rpc results.
func (b *Broker) publishTask(ctx context.Context, msg *celery.TaskMessage) error {
	if msg.Name == "" || msg.ID == "" {
		return errors.New("publish: task message needs a name and an id")
	}
	body, err := msg.Body()
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	headers, err := toTable(msg.ProtocolHeaders())
	if err != nil {
		return fmt.Errorf("publish %s: headers: %w", msg.ID, err)
	}
	queue := celery.QueueName(msg)
	s, err := b.current("publish " + msg.ID)
	if err != nil {
		return err
	}
	exchange, routingKey := celery.Route(msg)
	delayedEx, delayedKey, delayed, err := b.delayedRoute(ctx, msg, queue)
	if err != nil {
		return fmt.Errorf("publish %s: %w", msg.ID, err)
	}
	if delayed {
		// The cascade's first queue takes the message whether or not its
		// own queue still exists, so no return would tell: look at the
		// queue itself rather than trust the cache.
		s.forget(queue)
	}
	// Through an exchange, the exchange's bindings pick the queues: a
	// missing queue of that name is no reason to refuse.
	if err := b.ensureQueue(ctx, s, queue, msg.Declare); err != nil && (exchange == "" || !errors.Is(err, celery.ErrNoQueue)) {
		return fmt.Errorf("publish %s: %w", msg.ID, err)
	}
	if delayed {
		exchange, routingKey = delayedEx, delayedKey
	} else if exchange != "" {
		if err := b.checkExchange(ctx, exchange); err != nil {
			return fmt.Errorf("publish %s: %w", msg.ID, err)
		}
	}
	p := amqp091.Publishing{
		Headers:         headers,
		ContentType:     contentType,
		ContentEncoding: contentEncoding,
		DeliveryMode:    persistent,
		// As given, as Celery sends it: the queue's x-max-priority caps it.
		Priority:      uint8(min(max(msg.Priority, 0), 255)),
		CorrelationId: msg.ID,
		ReplyTo:       msg.ReplyTo,
		Body:          body,
	}
	if b.rpcQueue != "" {
		// The rpc:// backend: the worker sends results to the queue named
		// by reply_to, and ours is the one we consume.
		p.ReplyTo = b.rpcQueue
	}
	if msg.Expires != nil {
		// kombu sends the time left as a string of milliseconds, and
		// RabbitMQ drops the message once it has passed.
		ms := max(time.Until(*msg.Expires).Milliseconds(), 0)
		p.Expiration = strconv.FormatInt(ms, 10)
	}
	op := "publish " + msg.ID
	err = b.publish(ctx, s, op, exchange, routingKey, p, true)
	if !errors.Is(err, errReturned) || exchange != "" {
		return err
	}
	// Through the default exchange a return means the queue is gone,
	// though it was there when ensureQueue last looked: deleted since
	// (its declaration was trusted for declaredFor) or meanwhile. Nothing
	// was delivered: look again, as for a queue never seen, and send once
	// more.
	s.forget(queue)
	if err := b.ensureQueue(ctx, s, queue, msg.Declare); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return b.publish(ctx, s, op, exchange, routingKey, p, true)
}

// checkExchange makes sure an exchange a message is sent to exists:
// publishing to a missing one closes the channel and loses the message.
// It is not declared: its type and bindings are the workers' to choose.
func (b *Broker) checkExchange(ctx context.Context, exchange string) error {
	err := b.withChannel(ctx, "check exchange "+exchange, func(c *channels) error {
		ch, err := c.get()
		if err != nil {
			return err
		}
		return ch.ExchangeDeclarePassive(exchange, amqp091.ExchangeDirect, true, false, false, false, nil)
	})
	if isNotFound(err) {
		return fmt.Errorf("exchange %q does not exist: %w", exchange, celery.ErrNoRoute)
	}
	return err
}

// errReturned marks the error of a mandatory publish that RabbitMQ
// returned (an *unroutableError).
var errReturned = errors.New("returned")

// publish sends p and waits for the broker's confirm. A mandatory message
// that no queue takes is returned by RabbitMQ instead of dropped: publish
// then fails with an *unroutableError (celery.ErrNoRoute, errReturned).
func (b *Broker) publish(ctx context.Context, s *session, op, exchange, key string, p amqp091.Publishing, mandatory bool) error {
	if s.blocked.Load() {
		return fmt.Errorf("amqp %s: RabbitMQ is blocking publishers (resource alarm): %w", op, celery.ErrUnavailable)
	}
	octx, cancel := b.opContext(ctx)
	defer cancel()
	pub, err := s.publisher(octx)
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			return fmt.Errorf("amqp %s: %w", op, cerr)
		}
		if errors.Is(err, celery.ErrUnavailable) {
			return fmt.Errorf("amqp %s: %w", op, err)
		}
		return fmt.Errorf("amqp %s: no publish channel within %s: %w", op, b.opTimeout, celery.ErrUnavailable)
	}
	if mandatory {
		p.MessageId = pub.returns.add()
		defer pub.returns.remove(p.MessageId)
	}
	dc, err := bounded(octx, b, s, op, func() (*amqp091.DeferredConfirmation, error) {
		return pub.ch.PublishWithDeferredConfirmWithContext(octx, exchange, key, mandatory, false, p)
	}, nil)
	if err != nil {
		return err
	}
	if dc == nil {
		// Cannot happen: the channel is in confirm mode.
		return nil
	}
	select {
	case <-dc.Done():
	case <-octx.Done():
		if cerr := ctxErr(ctx); cerr != nil {
			return fmt.Errorf("amqp %s: waiting for the confirm: %w", op, cerr)
		}
		return fmt.Errorf("amqp %s: no confirm within %s (the message may or may not be queued): %w", op, b.opTimeout, celery.ErrUnavailable)
	}
	if !dc.Acked() {
		// A publish the user's permissions refuse (no write access to
		// the exchange) closes the channel: amqp091 marks it closed and
		// hands the reason to its watcher before it nacks what was
		// pending. A nack on an open channel is RabbitMQ's own.
		if pub.ch.IsClosed() {
			select {
			case <-pub.done:
			case <-octx.Done():
			}
			select {
			case <-pub.done:
				if refused := accessRefused(pub.err); refused != nil {
					return fmt.Errorf("amqp %s: %w", op, refused)
				}
			default:
			}
			// amqp091 nacks what is pending when the channel closes.
			return fmt.Errorf("amqp %s: the publish channel closed before the confirm (the message may or may not be queued): %w", op, celery.ErrUnavailable)
		}
		return fmt.Errorf("amqp %s: RabbitMQ refused the message (nack)", op)
	}
	if !mandatory {
		return nil
	}
	ret, err := pub.returns.returned(octx, pub, op, p.MessageId)
	if err != nil {
		return err
	}
	if ret != nil {
		return fmt.Errorf("amqp %s: %w", op, &unroutableError{exchange: exchange, key: key, reason: ret.ReplyText})
	}
	return nil
}

// ensureQueue makes sure queue exists before a message goes to it (a
// message for a missing queue is silently dropped). A passive declare comes
// first. A missing queue is declared only as the workers declare it (decl,
// from their active_queues), exchange and binding included: RabbitMQ
// refuses with 406 PRECONDITION_FAILED a declaration whose arguments
// (x-max-priority, x-queue-type) differ from the queue's, and a worker
// whose own declaration is refused dies. Without decl a missing queue is
// celery.ErrNoQueue.
func (b *Broker) ensureQueue(ctx context.Context, s *session, queue string, decl *celery.QueueDeclaration) error {
	s.declMu.Lock()
	seen, ok := s.declared[queue]
	s.declMu.Unlock()
	if ok && time.Since(seen) < declaredFor {
		return nil
	}
	created, missing := false, false
	err := b.withChannel(ctx, "declare queue "+queue, func(c *channels) error {
		ch, err := c.get()
		if err != nil {
			return err
		}
		_, err = ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err == nil || !isNotFound(err) {
			return err
		}
		if decl == nil || decl.Name != queue {
			// Not an error of the broker's: told apart below, so that
			// it is not reported as the broker being unavailable.
			missing = true
			return nil
		}
		// The 404 closed that channel.
		if ch, err = c.get(); err != nil {
			return err
		}
		args, err := toTable(decl.Arguments)
		if err != nil {
			return fmt.Errorf("queue %q arguments: %w", queue, err)
		}
		if _, err := ch.QueueDeclare(queue, decl.Durable, decl.AutoDelete, decl.Exclusive, false, args); err != nil {
			return err
		}
		created = true
		if decl.Exchange == "" {
			return nil
		}
		xargs, err := toTable(decl.ExchangeArguments)
		if err != nil {
			return fmt.Errorf("exchange %q arguments: %w", decl.Exchange, err)
		}
		if err := ch.ExchangeDeclare(decl.Exchange, decl.ExchangeType, decl.ExchangeDurable, decl.ExchangeAutoDelete, false, false, xargs); err != nil {
			// The queue is what the message needs; an exchange of that
			// name declared otherwise by someone else is their business.
			b.log.Warn("cannot declare the queue's exchange", slog.String("queue", queue), slog.Any("err", err))
			return nil
		}
		bargs, err := toTable(decl.BindingArguments)
		if err != nil {
			return fmt.Errorf("binding arguments: %w", err)
		}
		return ch.QueueBind(queue, decl.RoutingKey, decl.Exchange, false, bargs)
	})
	if err != nil {
		return err
	}
	if missing {
		return fmt.Errorf("queue %q: %w", queue, celery.ErrNoQueue)
	}
	if created {
		b.log.Info("declared missing queue as the workers do", slog.String("queue", queue))
	}
	s.declMu.Lock()
	s.declared[queue] = time.Now()
	s.declMu.Unlock()
	return nil
}

// QueueLengths returns the number of ready messages in each queue, from a
// passive queue.declare; a queue that does not exist counts 0. Messages
// that workers have fetched but not acknowledged are not counted.
func (b *Broker) QueueLengths(ctx context.Context, queues []string) (map[string]int64, error) {
	out := make(map[string]int64, len(queues))
	if len(queues) == 0 {
		return out, nil
	}
	err := b.withChannel(ctx, "queue lengths", func(c *channels) error {
		for _, q := range queues {
			if _, seen := out[q]; seen {
				continue
			}
			// A 404 closes the channel: get opens a fresh one for the
			// next queue.
			ch, err := c.get()
			if err != nil {
				return err
			}
			info, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
			switch {
			case err == nil:
				out[q] = int64(info.Messages)
			case isNotFound(err):
				out[q] = 0
			default:
				return fmt.Errorf("queue %s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// toTable converts headers to an AMQP table. amqp091 only writes its own
// types: nested maps must be amqp091.Table and arrays []any, or the publish
// fails validation.
func toTable(m map[string]any) (amqp091.Table, error) {
	t := make(amqp091.Table, len(m))
	for k, v := range m {
		f, err := toField(v)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		t[k] = f
	}
	return t, nil
}

// toField converts one header value to a type amqp091 can write.
func toField(v any) (any, error) {
	switch v := v.(type) {
	case nil, bool, string, int, int8, int16, int32, int64, uint8, uint16, uint32,
		float32, float64, []byte, time.Time, amqp091.Decimal:
		return v, nil
	case uint:
		return uintField(uint64(v))
	case uint64:
		return uintField(v)
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", v.String(), err)
		}
		return f, nil
	case json.RawMessage:
		var x any
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&x); err != nil {
			return nil, fmt.Errorf("raw JSON: %w", err)
		}
		return toField(x)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			f, err := toField(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = f
		}
		return out, nil
	case map[string]any:
		return toTable(v)
	case amqp091.Table:
		return toTable(v)
	}
	// Typed slices and maps ([]string, map[string]string, ...).
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			f, err := toField(rv.Index(i).Interface())
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = f
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map with %s keys is not an AMQP table", rv.Type().Key())
		}
		t := make(amqp091.Table, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			k := iter.Key().String()
			f, err := toField(iter.Value().Interface())
			if err != nil {
				return nil, fmt.Errorf("%q: %w", k, err)
			}
			t[k] = f
		}
		return t, nil
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		return toField(rv.Elem().Interface())
	}
	return nil, fmt.Errorf("%T cannot be sent in an AMQP header", v)
}

// uintField fits an unsigned integer into AMQP's signed 64-bit field.
func uintField(u uint64) (any, error) {
	if u > 1<<63-1 {
		return nil, fmt.Errorf("%d does not fit a signed 64-bit AMQP field", u)
	}
	return int64(u), nil
}

// Purge empties a queue with queue.purge and returns how many messages it
// deleted. Messages delivered to a consumer and not yet acknowledged stay,
// as RabbitMQ's purge leaves them. A queue that does not exist holds
// nothing: 0, and nothing is declared.
func (b *Broker) Purge(ctx context.Context, queue string) (int64, error) {
	var n int64
	err := b.withChannel(ctx, "purge", func(c *channels) error {
		ch, err := c.get()
		if err != nil {
			return err
		}
		count, err := ch.QueuePurge(queue, false)
		switch {
		case err == nil:
			n = int64(count)
		case isNotFound(err):
			n = 0
		default:
			return fmt.Errorf("queue %s: %w", queue, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
