// Package history is the seam between stamen and the store its task
// history is kept in: the batches the state's changes are written in, the
// write-behind Buffer that holds them while the store cannot be written,
// and the errors every store answers with. The stores themselves live
// under internal/store.
package history

import (
	"errors"
	"time"
)

// ErrUnavailable marks a read or write that failed because the store could
// not be reached in time (a PostgreSQL outage): the API answers 503 for it.
var ErrUnavailable = errors.New("the task store is unavailable")

// Task is one task record and its sequence number.
type Task struct {
	Seq  uint64
	Data []byte
}

// Batch is one write.
type Batch struct {
	// Tasks are put, replacing the records of the same numbers.
	Tasks []Task
	// Records numbered below FirstSeq are deleted.
	FirstSeq uint64
	// Workers maps a hostname to that worker's latest event.
	Workers map[string][]byte
	// ForgottenWorkers are deleted, before Workers are put.
	ForgottenWorkers []string
	// Types are task names to keep, ForgottenTypes names to delete.
	Types, ForgottenTypes []string
}

// SentLimits bound the tasks kept by a sent-task log: at most Max records,
// none older than MaxAge.
type SentLimits struct {
	Max    int
	MaxAge time.Duration
}
