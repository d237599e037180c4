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

// Roles are all of them, shared by the fleet: every replica answers the
// task reads from PostgreSQL, retries what another sent, lists and purges
// the queues another published to, lists every replica's audit records,
// and reconciles the unfinished tasks of the whole history.
func (s *Store) Roles(lim history.Limits) history.Roles {
	return history.Roles{
		Tasks:  Reader{Store: s},
		Sent:   Sent{S: s, Lim: lim.Sent},
		Queues: Queues{S: s, Max: lim.MaxQueues, MaxAge: lim.Sent.MaxAge},
		Audit:  Audit{S: s},
		Stale:  s,
	}
}

var _ history.Store = (*Store)(nil)
