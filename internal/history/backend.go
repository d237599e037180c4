package history

import (
	"context"
	"time"

	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// Backend is a store of the task history: the state's changes are written
// to it (through a Buffer), and it says whether it answers and how large
// it is. What else a store keeps, it offers through the roles below, each
// a value of its own: a store keeps some of them only, and a role may take
// settings of its own (a sent log's bounds).
type Backend interface {
	// Write writes one batch of the state's changes. On an error the
	// batch counts as not written, and the caller writes it again with
	// the next: a store that wrote part of it (PostgreSQL, a chunk at a
	// time) takes those records again without changing them.
	Write(ctx context.Context, b Batch) error
	// Ping reports whether the store answers (/readyz).
	Ping(ctx context.Context) error
	// Size is what the store takes, in bytes (stamen_store_size_bytes).
	Size(ctx context.Context) (int64, error)
	// Close flushes nothing: the caller's last Buffer.Flush comes first.
	Close() error
}

// Store is a Backend with the roles it keeps: what a store package opens,
// and all the app needs of it besides loading it at start.
type Store interface {
	Backend
	// Roles are the roles the store keeps, bounded by lim.
	Roles(lim Limits) Roles
}

// Roles are the parts of the history a store keeps besides its writes. A
// nil role is one the store does not keep, and the app then uses its
// in-memory default: the state answers the task reads and finds the
// unfinished tasks to reconcile, the audit log is kept in memory, and no
// sent or queue log is kept.
type Roles struct {
	Tasks  TaskReader
	Sent   SentLog
	Queues QueueLog
	Audit  audit.Store
	Stale  StaleTasks
}

// Limits bound the logs a store keeps for its roles.
type Limits struct {
	Sent SentLimits
	// MaxQueues is how many queue names the queue log keeps; they are
	// forgotten after Sent.MaxAge without a publish.
	MaxQueues int
}

// SentLog is the log of the tasks stamen sent, which POST /api/task/retry
// sends again with their exact arguments; bounded by count and age, the
// oldest dropped first.
type SentLog interface {
	// PutSent keeps data under task id, sent at time at.
	PutSent(ctx context.Context, id string, at time.Time, data []byte) error
	// Sent returns what PutSent kept for id, and whether there is any.
	Sent(ctx context.Context, id string) ([]byte, bool, error)
}

// QueueLog is the record of the queues stamen published to, shared by a
// fleet (PostgreSQL) so that every replica lists and purges a queue
// without consumers that another one sent to.
type QueueLog interface {
	// PutQueue notes that a task was published to queue name at time at.
	PutQueue(ctx context.Context, name string, at time.Time) error
	// Queues returns the names noted, newest first.
	Queues(ctx context.Context) ([]string, error)
}

// TaskReader answers the reads of the task history: the in-memory state
// (handlers.StateReader) or a shared store (pg.Reader), so that every
// replica of a fleet answers the same. Tasks come back as taskrec.Task,
// written by the same code whatever the store.
type TaskReader interface {
	ListTasks(ctx context.Context, q state.Query) (TaskCursor, error)
	Task(ctx context.Context, id string) (taskrec.Task, bool, error)
	TaskTypes(ctx context.Context) ([]string, error)
	Workers(ctx context.Context) ([]state.Worker, error)
	// MatchTasks returns the ids of the first max tasks q selects, in q's
	// order (its Limit and Offset aside), and whether more than max match:
	// it reads at most max+1, never counts every match.
	MatchTasks(ctx context.Context, q state.Query, max int) (ids []string, more bool, err error)
	// Failures groups the tasks q selects (Limit, Offset and SortBy aside)
	// by task name and exception type, in any order.
	Failures(ctx context.Context, q state.Query) ([]state.FailureGroup, error)
}

// TaskCursor is a ListTasks answer, read in chunks.
type TaskCursor interface {
	// Next calls fn with each of the next n tasks (valid only during the
	// call) and reports whether more may follow.
	Next(n int, fn func(t *taskrec.Task)) bool
	// Err is what ended the list early, if anything.
	Err() error
	// Close releases what the list holds; a reader of it always calls it.
	Close()
}

// StaleTasks lists the unfinished tasks whose latest event is older than
// before, for reconciliation (reconcile.Source).
type StaleTasks interface {
	StaleTasks(ctx context.Context, before time.Time, limit int) ([]string, error)
}
