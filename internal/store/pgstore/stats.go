package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/taskstats"
)

var statsLock = lockKey("stamen.stats")

// StatsRetention is how long the activity is kept, as in memory.
const StatsRetention = taskstats.DefaultRetention

// TaskStats answers GET /api/stats/tasks from the fleet's shared activity
// (migration 6), so that every replica answers the same: each task counts
// once per state, in the minute of its record's time of that state
// (received, started, succeeded, failed, retried, revoked), and the
// successes' runtimes fill the same histogram as in memory, whose
// percentiles are estimated the same way. The read takes the window's
// folded cells (stamen_task_stats, a row per minute and key, by its
// primary key's minute range) and sums the deltas not folded yet (by
// their minute index) in one snapshot: its cost grows with the window's
// minutes and keys, not with the tasks.
func (s *Store) TaskStats(ctx context.Context, q taskstats.Query) (taskstats.Result, error) {
	m0 := q.From.Unix() / 60
	m1 := q.End().Unix() / 60
	stepMin := int64(q.Step / time.Minute)
	args := []any{m0, m1}
	var where strings.Builder
	for _, f := range []struct{ col, v string }{{"name", q.TaskName}, {"worker", q.Worker}, {"queue", q.Queue}} {
		if v := taskstats.Fold(f.v); v != "" {
			args = append(args, v)
			fmt.Fprintf(&where, " AND lower(%s) = $%d", f.col, len(args))
		}
	}
	folded := `SELECT minute, data FROM stamen_task_stats WHERE minute >= $1 AND minute < $2` + where.String()
	deltas := `SELECT minute, kind, bin, sum(n)::bigint FROM stamen_task_stats_delta
		WHERE minute >= $1 AND minute < $2` + where.String() + ` GROUP BY 1, 2, 3`
	cells := make([]taskstats.Cell, q.N)
	err := s.read(ctx, func(ctx context.Context) error {
		clear(cells)
		// One snapshot: a fold between the two reads would count its
		// deltas twice, or not at all.
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, folded, args...)
			if err != nil {
				return err
			}
			var m int64
			var data []byte
			_, err = pgx.ForEachRow(rows, []any{&m, &data}, func() error {
				if b := (m - m0) / stepMin; b >= 0 && b < int64(q.N) {
					if err := cells[b].AddEncoded(data); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			rows, err = tx.Query(ctx, deltas, args...)
			if err != nil {
				return err
			}
			var kind, bin int16
			var n int64
			_, err = pgx.ForEachRow(rows, []any{&m, &kind, &bin, &n}, func() error {
				if b := (m - m0) / stepMin; b >= 0 && b < int64(q.N) {
					addDelta(&cells[b], kind, bin, n)
				}
				return nil
			})
			return err
		})
	})
	if err != nil {
		return taskstats.Result{}, err
	}
	res := taskstats.Result{Buckets: make([]taskstats.Bucket, q.N)}
	for i := range res.Buckets {
		res.Buckets[i] = taskstats.Bucket{Start: q.From.Add(time.Duration(i) * q.Step).UTC(), Counts: cells[i].N}
		res.Buckets[i].P50, res.Buckets[i].P95 = taskstats.Percentiles(&cells[i].Hist)
	}
	return res, nil
}

// addDelta adds a delta row (kind, bin, n) to c: a count (bin -1) or a
// runtime bin's.
func addDelta(c *taskstats.Cell, kind, bin int16, n int64) {
	switch {
	case kind < 0 || kind >= taskstats.NumKinds:
	case bin < 0:
		c.N[kind] += n
	case bin < taskstats.Bins:
		c.Hist[bin] += n
	}
}

// compactBatch is how many deltas one transaction of CompactStats folds:
// a backlog (a bulk load, the migration's count of the tasks there, a
// long pause of the folding) is folded a batch at a time, each well
// within the write timeout.
const compactBatch = 20000

// statsKey is a folded row's key.
type statsKey struct {
	minute              int64
	name, worker, queue string
}

// CompactStats folds the activity's deltas into its cells, a batch a
// transaction until a batch finds fewer than it takes, unless another
// replica is doing it, and drops the minutes older than the retention
// before now. One replica at a time does it (an advisory lock): the
// writers only ever append deltas, and the folded rows have one writer.
// It returns how many deltas were folded.
func (s *Store) CompactStats(ctx context.Context, now time.Time) (int64, error) {
	cut := now.Add(-StatsRetention).Unix() / 60
	var total int64
	for {
		var moved int
		var got bool
		err := s.write(ctx, false, func(ctx context.Context) error {
			moved, got = 0, false
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				var err error
				moved, got, err = foldBatch(ctx, tx, cut)
				return err
			})
		})
		if err != nil {
			return total, unavailable(err)
		}
		total += int64(moved)
		if !got || moved < compactBatch {
			break
		}
	}
	// By the primary key's minute range: a few minutes' rows each time.
	err := s.write(ctx, true, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM stamen_task_stats WHERE minute < $1`, cut)
		return err
	})
	if err != nil {
		return total, unavailable(err)
	}
	return total, nil
}

// foldBatch folds up to compactBatch deltas in tx, if it gets the lock.
func foldBatch(ctx context.Context, tx pgx.Tx, cut int64) (moved int, got bool, err error) {
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, statsLock).Scan(&got); err != nil || !got {
		return 0, got, err
	}
	rows, err := tx.Query(ctx, `DELETE FROM stamen_task_stats_delta
		WHERE ctid = ANY (ARRAY(SELECT ctid FROM stamen_task_stats_delta LIMIT $1))
		RETURNING minute, name, worker, queue, kind, bin, n`, compactBatch)
	if err != nil {
		return 0, true, err
	}
	cells := map[statsKey]*taskstats.Cell{}
	var k statsKey
	var kind, bin int16
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&k.minute, &k.name, &k.worker, &k.queue, &kind, &bin, &n}, func() error {
		moved++
		if k.minute < cut {
			return nil
		}
		c := cells[k]
		if c == nil {
			c = &taskstats.Cell{}
			cells[k] = c
		}
		addDelta(c, kind, bin, n)
		return nil
	})
	if err != nil || len(cells) == 0 {
		return moved, true, err
	}
	// In key order, as every fold locks them (one folder at a time, but a
	// trim may run beside it).
	keys := slices.SortedFunc(maps.Keys(cells), func(a, b statsKey) int {
		return cmp.Or(cmp.Compare(a.minute, b.minute), strings.Compare(a.name, b.name),
			strings.Compare(a.worker, b.worker), strings.Compare(a.queue, b.queue))
	})
	mins := make([]int64, len(keys))
	names, workers, queues := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		mins[i], names[i], workers[i], queues[i] = k.minute, k.name, k.worker, k.queue
	}
	rows, err = tx.Query(ctx, `SELECT s.minute, s.name, s.worker, s.queue, s.data FROM stamen_task_stats s
		JOIN unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS u(minute, name, worker, queue)
		USING (minute, name, worker, queue) ORDER BY 1, 2, 3, 4 FOR UPDATE OF s`, mins, names, workers, queues)
	if err != nil {
		return moved, true, err
	}
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&k.minute, &k.name, &k.worker, &k.queue, &data}, func() error {
		if c := cells[k]; c != nil {
			return c.AddEncoded(data)
		}
		return nil
	})
	if err != nil {
		return moved, true, err
	}
	datas := make([][]byte, len(keys))
	for i, k := range keys {
		datas[i] = taskstats.AppendCell(nil, cells[k])
	}
	_, err = tx.Exec(ctx, `INSERT INTO stamen_task_stats (minute, name, worker, queue, data)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bytea[])
		ON CONFLICT (minute, name, worker, queue) DO UPDATE SET data = EXCLUDED.data`, mins, names, workers, queues, datas)
	return moved, true, err
}
