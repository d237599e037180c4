package pg

import (
	"context"

	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
)

// Reader is the fleet's history as a history.TaskReader: every read of
// the task history answered from PostgreSQL.
type Reader struct{ *Store }

// ListTasks is List, its cursor a history.TaskCursor.
func (r Reader) ListTasks(ctx context.Context, q state.Query) (history.TaskCursor, error) {
	c, err := r.List(ctx, q)
	if err != nil {
		return nil, err
	}
	return c, nil
}

var _ history.TaskReader = Reader{}
