package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
)

const (
	// defaultCollect bounds collecting when ctx has no deadline (kombu's
	// default broadcast timeout).
	defaultCollect = time.Second
	// blockingMargin keeps a whole-second BRPOP from running into the
	// collection deadline.
	blockingMargin = 100 * time.Millisecond
	// maxPoll is the longest pause between RPOPs in the last second of a
	// collection, where BRPOP's whole-second timeout would overshoot.
	maxPoll = 50 * time.Millisecond
)

// replyBindingKey is the Redis set that emulates the bindings of the
// direct reply exchange: a worker LPUSHes its reply to every queue bound
// with the request's reply routing key.
func (b *Broker) replyBindingKey() string {
	return b.keys.Binding(celery.ReplyExchange)
}

// Broadcast sends cmd through the pidbox. With cmd.Reply it collects the
// replies carrying this call's ticket until cmd.Limit (or
// len(cmd.Destination)) arrived or ctx ends; without a deadline it collects
// for one second. Every call has its own reply queue, so concurrent
// broadcasts never see each other's replies. If Redis fails after the
// request went out, the replies so far are returned with the error.
func (b *Broker) Broadcast(ctx context.Context, cmd celery.ControlCommand) ([]celery.ControlReply, error) {
	if !cmd.Reply {
		payload, err := celery.EncodeControlRequest(cmd, "", "", b.clock.Add(1))
		if err != nil {
			return nil, err
		}
		return nil, b.publishRequest(ctx, cmd.Method, payload)
	}

	oid, ticket := uuid.NewString(), uuid.NewString()
	queue := celery.ReplyQueueName(oid)
	member := b.keys.BindingMember(oid, queue)
	payload, err := celery.EncodeControlRequest(cmd, ticket, oid, b.clock.Add(1))
	if err != nil {
		return nil, err
	}

	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultCollect)
	}
	limit := cmd.Limit
	if limit <= 0 {
		limit = len(cmd.Destination)
	}

	// The binding must exist before the request goes out: a worker that
	// finds no binding for our routing key drops its reply.
	octx, cancel := b.opContext(ctx)
	err = b.client.SAdd(octx, b.replyBindingKey(), member).Err()
	cancel()
	if err != nil {
		return nil, wrap(ctx, "bind reply queue for "+cmd.Method, err)
	}
	defer b.unbind(ctx, member, queue)

	if err := b.publishRequest(ctx, cmd.Method, payload); err != nil {
		return nil, err
	}
	return b.collect(ctx, cmd.Method, b.keys.Queue(queue, 0), ticket, limit, deadline)
}

// publishRequest PUBLISHes an encoded request on the pidbox channels
// (where workers PSUBSCRIBE for requests).
func (b *Broker) publishRequest(ctx context.Context, method string, payload []byte) error {
	octx, cancel := b.opContext(ctx)
	defer cancel()
	_, err := b.client.Pipelined(octx, func(p goredis.Pipeliner) error {
		for _, ch := range b.fanouts(celery.ControlExchange) {
			p.Publish(octx, ch, payload)
		}
		return nil
	})
	if err != nil {
		return wrap(ctx, "broadcast "+method, err)
	}
	return nil
}

// unbind removes the reply binding and whatever is left in the reply
// queue. It runs after ctx has usually expired, so it gets its own budget.
func (b *Broker) unbind(ctx context.Context, member, queue string) {
	octx, cancel := b.opContext(context.WithoutCancel(ctx))
	defer cancel()
	_, err := b.client.Pipelined(octx, func(p goredis.Pipeliner) error {
		p.SRem(octx, b.replyBindingKey(), member)
		p.Del(octx, b.keys.Queues(queue)...)
		return nil
	})
	if err != nil {
		b.log.Debug("pidbox cleanup failed", slog.String("queue", queue), slog.Any("err", err))
	}
}

// collect pops replies off queue until limit replies (0: no limit) carried
// ticket or the deadline passes. BRPOP only waits whole seconds, so it is
// used while at least a second (plus margin) is left; the last second is
// covered by polling RPOP with a short, growing pause.
func (b *Broker) collect(ctx context.Context, method, queue, ticket string, limit int, deadline time.Time) ([]celery.ControlReply, error) {
	var replies []celery.ControlReply
	pause := 5 * time.Millisecond
	for limit == 0 || len(replies) < limit {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		var raw string
		var err error
		if left >= time.Second+blockingMargin {
			// A one-second BRPOP keeps a cancelled ctx from being ignored
			// for long.
			octx, cancel := context.WithTimeout(ctx, time.Second+b.opTimeout)
			var kv []string
			kv, err = b.client.BRPop(octx, time.Second, queue).Result()
			cancel()
			if err == nil && len(kv) == 2 {
				raw = kv[1]
			}
		} else {
			octx, cancel := b.opContext(ctx)
			raw, err = b.client.RPop(octx, queue).Result()
			cancel()
		}
		switch {
		case errors.Is(err, goredis.Nil):
			if left < time.Second+blockingMargin {
				if !sleep(ctx, min(pause, left)) {
					return replies, nil
				}
				pause = min(pause*2, maxPoll)
			}
			continue
		case err != nil:
			if ctxErr(ctx) != nil || !time.Now().Before(deadline) {
				// The deadline ended the wait: that is the normal end.
				return replies, nil
			}
			return replies, wrap(ctx, "collect replies to "+method, err)
		}
		pause = 5 * time.Millisecond
		got, err := decodeReply([]byte(raw), ticket)
		if err != nil {
			b.log.Debug("dropping pidbox reply", slog.String("method", method), slog.Any("err", err))
			continue
		}
		replies = append(replies, got...)
	}
	return replies, nil
}

// decodeReply unpacks a reply envelope, checking that it answers ticket.
func decodeReply(raw []byte, ticket string) ([]celery.ControlReply, error) {
	env, err := celery.DecodeEnvelope(raw)
	if err != nil {
		return nil, err
	}
	if got, _ := env.Headers["ticket"].(string); got != ticket {
		return nil, fmt.Errorf("reply for ticket %q, want %q", got, ticket)
	}
	body, err := env.BodyBytes()
	if err != nil {
		return nil, err
	}
	return celery.DecodeControlReply(body)
}

// sleep waits d or until ctx ends, reporting whether the full d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
