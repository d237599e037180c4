package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/history"
)

// The audit log and the log of sent tasks (what /api/task/retry sends
// again) live in the fleet's
// database too, so that every replica lists every replica's records and can
// retry a task another replica sent.

// Audit is the audit.Store of a fleet: records as JSON rows, filtered and
// ordered by indexed columns.
type Audit struct{ S *Store }

// Append stores r.
func (a Audit) Append(ctx context.Context, r audit.Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode audit record: %w", err)
	}
	// Not idempotent: run again only when it cannot have been stored.
	err = a.S.write(ctx, false, func(ctx context.Context) error {
		_, err := a.S.pool.Exec(ctx,
			`INSERT INTO stamen_audit (at, operation, username, record) VALUES ($1, $2, $3, $4)`,
			r.Time, r.Operation, r.User, data)
		return err
	})
	if err != nil {
		return fmt.Errorf("store audit record: %w", unavailable(err))
	}
	return nil
}

// List returns the matching records, newest first.
func (a Audit) List(ctx context.Context, q audit.Query) ([]audit.Record, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = audit.DefaultLimit
	}
	var since, until *time.Time
	if !q.Since.IsZero() {
		since = &q.Since
	}
	if !q.Until.IsZero() {
		until = &q.Until
	}
	var out []audit.Record
	err := a.S.read(ctx, func(ctx context.Context) error {
		rows, err := a.S.pool.Query(ctx, `SELECT record FROM stamen_audit
WHERE ($1 = '' OR operation = $1) AND ($2 = '' OR username = $2)
  AND ($3::timestamptz IS NULL OR at >= $3) AND ($4::timestamptz IS NULL OR at < $4)
ORDER BY at DESC, id DESC LIMIT $5 OFFSET $6`, q.Operation, q.User, since, until, limit, max(q.Offset, 0))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Record, error) {
			var data []byte
			var r audit.Record
			if err := row.Scan(&data); err != nil {
				return r, err
			}
			return r, json.Unmarshal(data, &r)
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read audit records: %w", err)
	}
	return out, nil
}

// Prune drops records older than before, then the oldest beyond
// maxRecords, in batches of DeleteBatch rows.
func (a Audit) Prune(ctx context.Context, before time.Time, maxRecords int) (int, error) {
	total := 0
	for {
		n, err := a.S.deleteBatch(ctx, `DELETE FROM stamen_audit WHERE id IN (
	SELECT id FROM stamen_audit WHERE at < $1 ORDER BY at LIMIT $2)`, before, DeleteBatch)
		total += n
		if err != nil || n < DeleteBatch {
			if err != nil {
				return total, err
			}
			break
		}
	}
	if maxRecords <= 0 {
		return total, nil
	}
	for {
		n, err := a.S.deleteBatch(ctx, `DELETE FROM stamen_audit WHERE id IN (
	SELECT id FROM stamen_audit ORDER BY at DESC, id DESC OFFSET $1 LIMIT $2)`, maxRecords, DeleteBatch)
		total += n
		if err != nil || n < DeleteBatch {
			return total, err
		}
	}
}

// deleteBatch runs one bounded DELETE and says how many rows went.
func (s *Store) deleteBatch(ctx context.Context, sql string, args ...any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return 0, unavailable(err)
	}
	return int(tag.RowsAffected()), nil
}

// Sent is the log of what stamen sent, for POST /api/task/retry: bounded
// like the bbolt one (history.SentLimits), the oldest rows going first.
type Sent struct {
	S   *Store
	Lim history.SentLimits
}

// PutSent keeps data under task id, sent at time at, and trims the log.
func (l Sent) PutSent(ctx context.Context, id string, at time.Time, data []byte) error {
	if id == "" {
		return errors.New("put sent task: empty id")
	}
	ctx, cancel := context.WithTimeout(ctx, l.S.cfg.WriteTimeout)
	defer cancel()
	err := l.S.write(ctx, true, func(ctx context.Context) error {
		_, err := l.S.pool.Exec(ctx, `INSERT INTO stamen_sent (id, at, data) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET at = excluded.at, data = excluded.data`, id, at, data)
		return err
	})
	if err != nil {
		return fmt.Errorf("put sent task %s: %w", id, unavailable(err))
	}
	if l.Lim.MaxAge > 0 {
		if _, err := l.S.deleteBatch(ctx, `DELETE FROM stamen_sent WHERE id IN (
	SELECT id FROM stamen_sent WHERE at < $1 ORDER BY at LIMIT $2)`, at.Add(-l.Lim.MaxAge), DeleteBatch); err != nil {
			return fmt.Errorf("trim sent tasks: %w", err)
		}
	}
	if l.Lim.Max > 0 {
		// Trimmed a batch at a time: each put adds one row, so the table
		// stays within Max plus what one statement removes.
		if _, err := l.S.deleteBatch(ctx, `DELETE FROM stamen_sent WHERE id IN (
	SELECT id FROM stamen_sent ORDER BY at DESC OFFSET $1 LIMIT $2)`, l.Lim.Max, DeleteBatch); err != nil {
			return fmt.Errorf("trim sent tasks: %w", err)
		}
	}
	return nil
}

// Sent returns what PutSent kept for id.
func (l Sent) Sent(ctx context.Context, id string) ([]byte, bool, error) {
	var data []byte
	found := true
	err := l.S.read(ctx, func(ctx context.Context) error {
		err := l.S.pool.QueryRow(ctx, `SELECT data FROM stamen_sent WHERE id = $1`, id).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			found = false
			return nil
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("read sent task %s: %w", id, err)
	}
	return data, found, nil
}

// Queues is the fleet's record of the queues stamen published to, for
// GET /api/queues/length and the purge's check that a queue is known: a
// queue without consumers that one replica sent to is listed, and purged,
// by every replica. It keeps the Max names published to last, none older
// than MaxAge.
type Queues struct {
	S      *Store
	Max    int
	MaxAge time.Duration
}

// PutQueue notes that a task was published to queue name at time at, and
// trims the record.
func (q Queues) PutQueue(ctx context.Context, name string, at time.Time) error {
	// Both statements are idempotent: run again together when the
	// connection failed.
	err := q.S.write(ctx, true, func(ctx context.Context) error {
		if _, err := q.S.pool.Exec(ctx, `INSERT INTO stamen_queues (name, at) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET at = greatest(stamen_queues.at, excluded.at)`, name, at); err != nil {
			return err
		}
		// At most Max+1 rows before the trim: a single statement
		// suffices. Without MaxAge the cutoff is NULL, and no row is older.
		_, err := q.S.pool.Exec(ctx, `DELETE FROM stamen_queues WHERE at < $1
	OR name IN (SELECT name FROM stamen_queues ORDER BY at DESC, name OFFSET $2)`, q.cutoff(at), q.limit())
		return err
	})
	if err != nil {
		return fmt.Errorf("put queue %s: %w", name, unavailable(err))
	}
	return nil
}

// cutoff is the time before which a name is dropped, nil without MaxAge.
func (q Queues) cutoff(now time.Time) any {
	if q.MaxAge <= 0 {
		return nil
	}
	return now.Add(-q.MaxAge)
}

// limit is Max, or without it a count the table never reaches.
func (q Queues) limit() any {
	if q.Max <= 0 {
		return math.MaxInt32
	}
	return q.Max
}

// Queues returns the names of the queues published to, newest first.
func (q Queues) Queues(ctx context.Context) ([]string, error) {
	var names []string
	err := q.S.read(ctx, func(ctx context.Context) error {
		rows, err := q.S.pool.Query(ctx, `SELECT name FROM stamen_queues WHERE $1::timestamptz IS NULL OR at >= $1
ORDER BY at DESC, name LIMIT $2`, q.cutoff(q.S.cfg.Now()), q.limit())
		if err != nil {
			return err
		}
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read queues: %w", err)
	}
	return names, nil
}

var (
	_ history.SentLog  = Sent{}
	_ history.QueueLog = Queues{}
)
