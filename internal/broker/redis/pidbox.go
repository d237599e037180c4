package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
)

const (
	// defaultCollect bounds collecting when ctx has no deadline (kombu's
	// default broadcast timeout).
	defaultCollect = time.Second
	// maxBlock is the longest one BRPOP waits: a cancelled ctx is noticed
	// at least this often.
	maxBlock = time.Second
	// maxPoll is the longest pause between RPOPs on a server that only
	// takes whole-second BRPOP timeouts (Redis before 6.0).
	maxPoll = 50 * time.Millisecond
)

// replyBindingKey is the Redis set that emulates the bindings of the
// direct reply exchange: a worker LPUSHes its reply to every queue bound
// with the request's reply routing key.
func (b *Broker) replyBindingKey() string {
	return b.keys.Binding(celery.ReplyExchange)
}

// Broadcast sends cmd through the pidbox. With cmd.Reply it collects the
// replies carrying this call's ticket until it has what it waits for
// (celery.ControlCommand.Collected) or ctx ends; without a deadline it collects
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

	// The binding must exist before the request goes out: a worker that
	// finds no binding for our routing key drops its reply. One pipeline
	// on one connection keeps that order and costs one round trip.
	octx, cancel := b.opContext(ctx)
	_, err = b.client.Pipelined(octx, func(p goredis.Pipeliner) error {
		p.SAdd(octx, b.replyBindingKey(), member)
		for _, ch := range b.fanouts(celery.ControlExchange) {
			p.Publish(octx, ch, payload)
		}
		return nil
	})
	cancel()
	// Whatever part of the pipeline ran, the binding may exist.
	defer b.unbind(ctx, member, queue)
	if err != nil {
		return nil, wrap(ctx, "broadcast "+cmd.Method, err)
	}
	return b.collect(ctx, cmd, b.keys.Queue(queue, 0), ticket, deadline)
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

// collect pops replies off queue until cmd has collected enough of them
// (celery.ControlCommand.Collected) or the deadline passes. Each BRPOP
// waits at most what is left, in fractions of a second (Redis 6.0+), so a
// reply is taken the moment it is pushed: no polling interval is added to
// a round trip.
func (b *Broker) collect(ctx context.Context, cmd celery.ControlCommand, queue, ticket string, deadline time.Time) ([]celery.ControlReply, error) {
	var replies []celery.ControlReply
	pause := 5 * time.Millisecond
	for !cmd.Collected(replies) {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		raw, err := b.pop(ctx, queue, left, &pause)
		switch {
		case errors.Is(err, goredis.Nil):
			continue
		case err != nil:
			if ctxErr(ctx) != nil || !time.Now().Before(deadline) {
				// The deadline ended the wait: that is the normal end.
				return replies, nil
			}
			return replies, wrap(ctx, "collect replies to "+cmd.Method, err)
		}
		pause = 5 * time.Millisecond
		got, err := decodeReply([]byte(raw), ticket)
		if err != nil {
			b.log.Debug("dropping pidbox reply", slog.String("method", cmd.Method), slog.Any("err", err))
			continue
		}
		replies = append(replies, got...)
	}
	return replies, nil
}

// pop takes one element off queue, waiting at most left (and maxBlock);
// goredis.Nil when none came. A server that refuses a fractional BRPOP
// timeout (before Redis 6.0) is remembered and polled with RPOP instead,
// pausing *pause (doubling up to maxPoll) after each miss.
func (b *Broker) pop(ctx context.Context, queue string, left time.Duration, pause *time.Duration) (string, error) {
	if !b.wholeSecondBlock.Load() {
		// The client's read timeout is the op timeout: a block as long
		// would be taken for a dead server.
		// BRPOP 0 would block for ever.
		block := max(min(left, maxBlock, b.opTimeout/2), time.Millisecond)
		octx, cancel := context.WithTimeout(ctx, block+b.opTimeout)
		kv, err := b.client.Do(octx, "BRPOP", queue, strconv.FormatFloat(block.Seconds(), 'f', 3, 64)).StringSlice()
		cancel()
		if err == nil && len(kv) == 2 {
			return kv[1], nil
		}
		if err == nil {
			return "", goredis.Nil
		}
		if !isServerError(err) || !strings.Contains(err.Error(), "timeout") {
			return "", err
		}
		b.wholeSecondBlock.Store(true)
		b.log.Debug("redis refuses fractional BRPOP timeouts; polling pidbox replies")
	}
	octx, cancel := b.opContext(ctx)
	raw, err := b.client.RPop(octx, queue).Result()
	cancel()
	if errors.Is(err, goredis.Nil) {
		if !sleep(ctx, min(*pause, left)) {
			return "", ctx.Err()
		}
		*pause = min(*pause*2, maxPoll)
	}
	return raw, err
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
