package amqp

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// The rpc:// result backend keeps nothing on the broker: workers send each
// state of a task (STARTED, RETRY, SUCCESS, ...) as a message to the queue
// named by the task message's reply_to, with the task id as correlation_id.
// So it only knows tasks that this Broker published, and only what
// arrived while it was connected: the queue is auto-delete, like Celery's,
// and goes away with the connection.

// Result returns the latest state received for the task, or PENDING when
// none arrived. A finished task's result is known even while disconnected;
// otherwise the answer needs a live connection, since results sent while
// we are away are lost.
func (b *Broker) Result(ctx context.Context, taskID string) (*celery.Result, error) {
	if b.results == nil {
		return nil, celery.ErrNoResultBackend
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("result of %s: %w", taskID, err)
	}
	r := b.results.get(taskID)
	if r != nil && r.Unreadable != nil {
		return nil, fmt.Errorf("result of %s: %w", taskID, r.Unreadable)
	}
	if r.Ready() {
		return r, nil
	}
	if _, err := b.current("result of " + taskID); err != nil {
		return nil, err
	}
	if r == nil {
		return celery.PendingResult(taskID), nil
	}
	return r, nil
}

// WaitResult waits until a ready state (SUCCESS, FAILURE, REVOKED) of the
// task arrives or ctx ends. It needs a live connection to start, unless
// the task is one this Broker published. Losing
// the connection meanwhile does not end the wait: the supervisor opens a
// new one and declares the results queue again under the same name, the
// task's reply_to, so a result the worker sends after that arrives. One
// sent while the queue was gone (it is auto-delete, like Celery's) is
// dropped by RabbitMQ; no one can tell, so the wait goes on until ctx
// ends, and then fails with celery.ErrResultLost rather than a plain
// timeout, saying why no result may come. A connection still down when
// ctx ends is celery.ErrUnavailable.
func (b *Broker) WaitResult(ctx context.Context, taskID string) (*celery.Result, error) {
	if b.results == nil {
		return nil, celery.ErrNoResultBackend
	}
	ready, cancel := b.results.wait(taskID)
	defer cancel()
	select {
	case r := <-ready:
		return finalResult(taskID, r)
	default:
	}
	op := "wait for result of " + taskID
	s, err := b.current(op)
	if err != nil && b.results.get(taskID) == nil {
		return nil, err
	}
	// A task this Broker published is waited for across a connection lost
	// before the wait began, as across one lost during it: a cut right
	// after the publish is no reason to give up on its result.
	// down adds up the time the results queue was gone during the wait.
	var down time.Duration
	for {
		if s != nil {
			select {
			case r := <-ready:
				return finalResult(taskID, r)
			case <-ctx.Done():
				if down > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return nil, fmt.Errorf("%s: %w: the connection to RabbitMQ was lost for %s while waiting, and a result the worker sent meanwhile was dropped with the results queue",
						op, celery.ErrResultLost, down.Round(time.Millisecond))
				}
				return nil, fmt.Errorf("%s: %w", op, ctx.Err())
			case <-s.done:
			}
			// The result may have come just before.
			select {
			case r := <-ready:
				return finalResult(taskID, r)
			default:
			}
		}
		lost := time.Now()
		ns, err := b.waitSession(ctx)
		down += time.Since(lost)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("%s: the connection to RabbitMQ was lost %s ago and is not back: %w",
					op, time.Since(lost).Round(time.Millisecond), celery.ErrUnavailable)
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
			return nil, err
		}
		b.log.Debug("still waiting for a result after reconnecting", slog.String("task", taskID))
		s = ns
	}
}

// finalResult is what a waiter gets: the result, or the error saying it
// cannot be read.
func finalResult(taskID string, r *celery.Result) (*celery.Result, error) {
	if r.Unreadable != nil {
		return nil, fmt.Errorf("result of %s: %w", taskID, r.Unreadable)
	}
	return r, nil
}

// Abort cannot work over rpc://: AbortableTask polls the result backend
// for ABORTED, and rpc:// keeps no state a worker could read.
func (b *Broker) Abort(ctx context.Context, taskID string) error {
	if b.results == nil {
		return celery.ErrNoResultBackend
	}
	return fmt.Errorf("abort %s: abort needs a result backend that keeps state; rpc:// does not: %w", taskID, celery.ErrUnsupported)
}

// dispatchResults stores each result message that arrives on our rpc
// queue, until the session's results consumer ends.
func (b *Broker) dispatchResults(s *session, deliveries <-chan amqp091.Delivery) {
	for d := range deliveries {
		id := d.CorrelationId
		r, err := celery.DecodeResultContent(d.Body, d.ContentType)
		var unreadable *celery.UnreadableResultError
		if errors.As(err, &unreadable) {
			// Kept, so that result and apply say what it is instead of
			// waiting for a result that will never be readable.
			r, err = &celery.Result{TaskID: id, Unreadable: unreadable}, nil
		}
		if err != nil {
			b.log.Debug("dropping undecodable rpc result", slog.String("task", id), slog.Any("err", err))
			continue
		}
		if id == "" {
			id = r.TaskID
		}
		if id == "" {
			b.log.Debug("dropping rpc result without task id")
			continue
		}
		if r.TaskID == "" {
			r.TaskID = id
		}
		b.results.put(id, r)
	}
	s.fail(errors.New("rpc results consumer ended"))
}

// resultStore keeps the latest result per task, at most max of them; the
// least recently updated go first.
type resultStore struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *storedResult, most recently updated first
	byID  map[string]*list.Element
	// waiters get the task's first ready result.
	waiters map[string]map[*chan *celery.Result]struct{}
}

type storedResult struct {
	id string
	r  *celery.Result
}

func newResultStore(maxEntries int) *resultStore {
	return &resultStore{
		max:     maxEntries,
		order:   list.New(),
		byID:    map[string]*list.Element{},
		waiters: map[string]map[*chan *celery.Result]struct{}{},
	}
}

// put records r as the task's latest state. A ready state is final: a
// late STARTED or RETRY does not replace it. An unreadable result wakes
// the waiters too: no readable one will follow.
func (st *resultStore) put(id string, r *celery.Result) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if e, ok := st.byID[id]; ok {
		sr := e.Value.(*storedResult)
		if (sr.r.Ready() || sr.r.Unreadable != nil) && !r.Ready() {
			return
		}
		sr.r = r
		st.order.MoveToFront(e)
	} else {
		st.add(id, r)
	}
	if r.Ready() || r.Unreadable != nil {
		for ch := range st.waiters[id] {
			// Buffered for exactly this one send.
			*ch <- clone(r)
		}
		delete(st.waiters, id)
	}
}

// expect records a task this Broker published, as PENDING, unless a state
// of it arrived already: its results will come to our queue.
func (st *resultStore) expect(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.byID[id]; !ok {
		st.add(id, celery.PendingResult(id))
	}
}

// add stores a task not stored yet, the most recently updated, and lets
// the least recently updated go past max; the caller holds st.mu.
func (st *resultStore) add(id string, r *celery.Result) {
	st.byID[id] = st.order.PushFront(&storedResult{id: id, r: r})
	for st.order.Len() > st.max {
		old := st.order.Remove(st.order.Back()).(*storedResult)
		delete(st.byID, old.id)
	}
}

// get returns the task's latest state, or nil.
func (st *resultStore) get(id string) *celery.Result {
	st.mu.Lock()
	defer st.mu.Unlock()
	if e, ok := st.byID[id]; ok {
		return clone(e.Value.(*storedResult).r)
	}
	return nil
}

// clone copies r so that callers cannot change what is stored.
func clone(r *celery.Result) *celery.Result {
	c := *r
	return &c
}

// wait returns a channel that yields the task's ready result: at once if
// it is known, else when it arrives. cancel must be called when done.
func (st *resultStore) wait(id string) (<-chan *celery.Result, func()) {
	ch := make(chan *celery.Result, 1)
	st.mu.Lock()
	defer st.mu.Unlock()
	if e, ok := st.byID[id]; ok && (e.Value.(*storedResult).r.Ready() || e.Value.(*storedResult).r.Unreadable != nil) {
		ch <- clone(e.Value.(*storedResult).r)
		return ch, func() {}
	}
	if st.waiters[id] == nil {
		st.waiters[id] = map[*chan *celery.Result]struct{}{}
	}
	key := &ch
	st.waiters[id][key] = struct{}{}
	return ch, func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if ws, ok := st.waiters[id]; ok {
			delete(ws, key)
			if len(ws) == 0 {
				delete(st.waiters, id)
			}
		}
	}
}
