package pg

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

// RetainTimeout bounds each of the retention's queries and DELETEs (one
// batch of DeleteBatch rows, the OFFSET that finds the --db_max_tasks
// cut, the task types left without tasks): longer than a write, since
// they read indexes of tens of millions of rows, but not for ever.
const RetainTimeout = time.Minute

// Retain deletes what the retention drops, DeleteBatch rows per statement,
// each statement its own short transaction, oldest first. One replica at
// a time does it: the others find the lock taken and return at once with
// (0, nil). It returns how many tasks went.
//
// Every statement has its own deadline (the write timeout, RetainTimeout
// for the DELETEs), so that a database that stops answering cannot hold
// the retention, and the connection it took, for ever: pgxpool pings an
// idle connection before handing it out, and without a deadline that ping
// waits for a frozen server as long as the socket stays open.
func (s *Store) Retain(ctx context.Context, r Retention, now time.Time) (int64, error) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	conn, err := s.pool.Acquire(actx)
	if err != nil {
		cancel()
		return 0, unavailable(err)
	}
	defer conn.Release()
	var got bool
	err = conn.QueryRow(actx, `SELECT pg_try_advisory_lock($1)`, retainLock).Scan(&got)
	cancel()
	if err != nil {
		return 0, unavailable(err)
	}
	if !got {
		return 0, nil
	}
	defer unlock(ctx, conn, retainLock, s.cfg.WriteTimeout)

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
		qctx, cancel := context.WithTimeout(ctx, RetainTimeout)
		err := conn.QueryRow(qctx, `SELECT coalesce(ts, 0), id FROM stamen_tasks
			ORDER BY coalesce(ts, 0) DESC, id DESC OFFSET $1 LIMIT 1`, r.MaxTasks).Scan(&ts, &id)
		cancel()
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
		tctx, cancel := context.WithTimeout(ctx, RetainTimeout)
		_, err := conn.Exec(tctx, `DELETE FROM stamen_task_types y
			WHERE NOT EXISTS (SELECT 1 FROM stamen_tasks t WHERE t.name = y.name)`)
		cancel()
		if err != nil {
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
		dctx, cancel := context.WithTimeout(ctx, RetainTimeout)
		tag, err := conn.Exec(dctx, `DELETE FROM stamen_tasks WHERE id IN (
			SELECT id FROM stamen_tasks WHERE `+cond+` ORDER BY coalesce(ts, 0), id LIMIT $2)`, args...)
		cancel()
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
