package handlers

import (
	"context"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/history"
)

// Broker is what the handlers need from a Celery broker. Implementations
// live in internal/broker/*; every method honours ctx's deadline and wraps
// connection failures in celery.ErrUnavailable.
type Broker interface {
	// Publish puts a task message on its queue.
	Publish(ctx context.Context, msg *celery.TaskMessage) error
	// Broadcast sends a remote-control command through the pidbox. When
	// cmd.Reply is set it collects replies until cmd.Limit replies arrived
	// or ctx ends, and returns what it has (possibly nothing) without error.
	Broadcast(ctx context.Context, cmd celery.ControlCommand) ([]celery.ControlReply, error)
	// QueueLengths returns the number of messages waiting in each queue.
	QueueLengths(ctx context.Context, queues []string) (map[string]int64, error)
	// Purge deletes the messages waiting in a queue (on Redis its priority
	// lists too) and returns how many; a queue that does not exist holds
	// none.
	Purge(ctx context.Context, queue string) (int64, error)
}

// ResultBackend is what the handlers need from a Celery result backend.
type ResultBackend interface {
	// Result returns the task's stored result; a task with no stored result
	// is PENDING.
	Result(ctx context.Context, taskID string) (*celery.Result, error)
	// WaitResult blocks until the task's result is ready or ctx ends, in
	// which case it returns an error wrapping ctx.Err().
	WaitResult(ctx context.Context, taskID string) (*celery.Result, error)
	// Abort flags an AbortableTask as ABORTED; celery.ErrUnsupported when
	// the backend keeps no state the worker can read back.
	Abort(ctx context.Context, taskID string) error
}

// SentLog keeps what stamen sent, so that a task can be sent again with
// its exact arguments (history.SentLog). Implementations: bolt.Sent,
// pg.Sent, or NewMemorySentLog.
type SentLog = history.SentLog

// QueueLog is the fleet's record of the queues stamen published to
// (history.QueueLog). Without one, each process keeps its own, until it
// exits.
type QueueLog = history.QueueLog
