package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
)

const (
	// resultExpires is Celery's default result_expires, used for the
	// ABORTED document.
	resultExpires = 24 * time.Hour
	// resultPoll is how often WaitResult re-reads the document in case a
	// notification was missed.
	resultPoll = 500 * time.Millisecond
)

// Result reads the task's result document; a task without one is PENDING.
func (b *Broker) Result(ctx context.Context, taskID string) (*celery.Result, error) {
	c, err := b.resultsClient()
	if err != nil {
		return nil, err
	}
	octx, cancel := b.opContext(ctx)
	defer cancel()
	data, err := c.Get(octx, b.resultKey(taskID)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return celery.PendingResult(taskID), nil
	}
	if err != nil {
		return nil, wrap(ctx, "get result of "+taskID, err)
	}
	r, err := celery.DecodeResult(data)
	if err != nil {
		return nil, fmt.Errorf("result of %s: %w", taskID, err)
	}
	return r, nil
}

// WaitResult waits until the task's result is ready or ctx ends. Like
// Celery's client it subscribes to the document's channel before reading
// it, so a result stored in between is not missed, and it re-reads the
// document every 500 ms in case a notification is lost.
func (b *Broker) WaitResult(ctx context.Context, taskID string) (*celery.Result, error) {
	c, err := b.resultsClient()
	if err != nil {
		return nil, err
	}
	key := b.resultKey(taskID)
	ps := c.Subscribe(ctx)
	defer ps.Close()
	octx, cancel := b.opContext(ctx)
	err = ps.Subscribe(octx, key)
	if err == nil {
		// The confirmation proves the subscription is active.
		_, err = ps.ReceiveTimeout(octx, b.opTimeout)
	}
	cancel()
	if err != nil {
		return nil, wrap(ctx, "subscribe to result of "+taskID, err)
	}

	r, err := b.Result(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if r.Ready() {
		return r, nil
	}
	lastRead := time.Now()
	for {
		wait := resultPoll - time.Since(lastRead)
		if wait > 0 {
			msg, err := ps.ReceiveTimeout(ctx, wait)
			if cerr := ctxErr(ctx); cerr != nil {
				return nil, fmt.Errorf("wait for result of %s: %w", taskID, cerr)
			}
			if err != nil {
				var nerr net.Error
				if !errors.As(err, &nerr) || !nerr.Timeout() {
					return nil, wrap(ctx, "wait for result of "+taskID, err)
				}
			} else if m, ok := msg.(*goredis.Message); ok {
				r, err := celery.DecodeResult([]byte(m.Payload))
				var unreadable *celery.UnreadableResultError
				if errors.As(err, &unreadable) {
					return nil, fmt.Errorf("result of %s: %w", taskID, err)
				}
				if err != nil {
					b.log.Debug("ignoring undecodable result notification", slog.String("task", taskID), slog.Any("err", err))
				} else if r.Ready() {
					return r, nil
				}
			}
			continue
		}
		r, err := b.Result(ctx, taskID)
		if err != nil {
			return nil, err
		}
		if r.Ready() {
			return r, nil
		}
		lastRead = time.Now()
	}
}

// Abort flags the task ABORTED the way AbortableAsyncResult.abort() does:
// a finished task's SUCCESS is left alone (workers never overwrite it
// either), anything else is replaced by the ABORTED document, which an
// AbortableTask polling is_aborted() reads.
func (b *Broker) Abort(ctx context.Context, taskID string) error {
	c, err := b.resultsClient()
	if err != nil {
		return err
	}
	r, err := b.Result(ctx, taskID)
	if err != nil {
		return err
	}
	if r.Status == celery.StateSuccess {
		return nil
	}
	key := b.resultKey(taskID)
	doc := celery.AbortedDocument(taskID)
	octx, cancel := b.opContext(ctx)
	defer cancel()
	_, err = c.TxPipelined(octx, func(p goredis.Pipeliner) error {
		p.SetEx(octx, key, doc, resultExpires)
		p.Publish(octx, key, doc)
		return nil
	})
	if err != nil {
		return wrap(ctx, "abort "+taskID, err)
	}
	return nil
}

// ctxErr is ctx.Err(), or DeadlineExceeded as soon as the deadline has
// passed: a socket deadline copied from ctx can fire a moment before ctx
// itself notices.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// Results reads the result documents of ids with one MGET, in order: nil
// where there is none, or one stamen cannot read (another serializer, or
// not a result document). It is the reconciler's bulk lookup; callers
// bound len(ids).
func (b *Broker) Results(ctx context.Context, ids []string) ([]*celery.Result, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	c, err := b.resultsClient()
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = b.resultKey(id)
	}
	octx, cancel := b.opContext(ctx)
	defer cancel()
	vals, err := c.MGet(octx, keys...).Result()
	if err != nil {
		return nil, wrap(ctx, fmt.Sprintf("get %d results", len(ids)), err)
	}
	out := make([]*celery.Result, len(ids))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok || i >= len(out) {
			continue
		}
		r, err := celery.DecodeResult([]byte(s))
		if err != nil {
			b.log.Debug("skipping an unreadable result document", slog.String("task", ids[i]), slog.Any("err", err))
			continue
		}
		out[i] = r
	}
	return out, nil
}
