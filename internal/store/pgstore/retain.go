package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stamen-dev/stamen/internal/state"
)

// Retention bounds the history by age and count.
type Retention struct {
	// MaxAge, when set, drops the tasks whose latest event is older
	// (--max_task_age).
	MaxAge time.Duration
	// MaxTasks, when set, keeps only the newest that many tasks
	// (--db_max_tasks; --max_tasks bounds each replica's hot set, not
	// the history).
	MaxTasks int64
	// Batch is the rows per DELETE; 0 is DeleteBatch.
	Batch int
}

// Retain deletes what the retention drops, DeleteBatch rows per statement,
// each statement its own short transaction, oldest first. One replica at
// a time does it: the others find the lock taken and return at once with
// (0, nil). It returns how many tasks went.
func (s *Store) Retain(ctx context.Context, r Retention, now time.Time) (int64, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, unavailable(err)
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, retainLock).Scan(&got); err != nil {
		return 0, unavailable(err)
	}
	if !got {
		return 0, nil
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, retainLock) }()

	var total int64
	if r.MaxAge > 0 {
		n, err := s.deleteOlder(ctx, conn, r.batch(), state.Epoch(now.Add(-r.MaxAge)), "")
		total += n
		if err != nil {
			return total, err
		}
	}
	if r.MaxTasks > 0 {
		// The newest MaxTasks are kept: everything ordered at or below
		// the first one beyond them goes.
		var ts float64
		var id string
		err := conn.QueryRow(ctx, `SELECT coalesce(ts, 0), id FROM stamen_tasks
			ORDER BY coalesce(ts, 0) DESC, id DESC OFFSET $1 LIMIT 1`, r.MaxTasks).Scan(&ts, &id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return total, unavailable(err)
		default:
			n, err := s.deleteOlder(ctx, conn, r.batch(), ts, id)
			total += n
			if err != nil {
				return total, err
			}
		}
	}
	if total > 0 {
		// A task type goes with its last task, as in memory.
		if _, err := conn.Exec(ctx, `DELETE FROM stamen_task_types y
			WHERE NOT EXISTS (SELECT 1 FROM stamen_tasks t WHERE t.name = y.name)`); err != nil {
			return total, unavailable(err)
		}
	}
	return total, nil
}

// deleteOlder deletes, in batches, the tasks ordered before (ts, id) in
// the default order's index: with id "" those with ts below ts, else
// those at or below (ts, id).
func (s *Store) deleteOlder(ctx context.Context, conn *pgxpool.Conn, batch int, ts float64, id string) (int64, error) {
	cond := `coalesce(ts, 0) < $1`
	args := []any{ts, batch}
	if id != "" {
		cond = `(coalesce(ts, 0), id) <= ($1, $3)`
		args = append(args, id)
	}
	var total int64
	for {
		tag, err := conn.Exec(ctx, `DELETE FROM stamen_tasks WHERE id IN (
			SELECT id FROM stamen_tasks WHERE `+cond+` ORDER BY coalesce(ts, 0), id LIMIT $2)`, args...)
		if err != nil {
			return total, unavailable(err)
		}
		total += tag.RowsAffected()
		s.deletes.Add(1)
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

func (r Retention) batch() int {
	if r.Batch > 0 {
		return r.Batch
	}
	return DeleteBatch
}
