// Package memory is the history.Backend of a stamen without --db: it keeps
// nothing. The in-memory state is then the whole history and answers every
// read; the audit log and the sent-task log keep their own bounded
// memory (audit.Memory, handlers.NewMemorySentLog).
package memory

import (
	"context"

	"github.com/stamen-dev/stamen/internal/history"
)

// Backend writes nothing, always answers and takes no space.
type Backend struct{}

// Write keeps nothing.
func (Backend) Write(context.Context, history.Batch) error { return nil }

// Ping always answers.
func (Backend) Ping(context.Context) error { return nil }

// Size is 0.
func (Backend) Size(context.Context) (int64, error) { return 0, nil }

// Close does nothing.
func (Backend) Close() error { return nil }

// Roles are none: the app's in-memory defaults serve them.
func (Backend) Roles(history.Limits) history.Roles { return history.Roles{} }

var _ history.Store = Backend{}
