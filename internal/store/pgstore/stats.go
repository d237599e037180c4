package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stamen-dev/stamen/internal/taskstats"
)

// TaskStats answers GET /api/stats/tasks from the shared task history, so
// that every replica answers the same: each task counts once per state, in
// the bucket of its record's time of that state (received, started,
// succeeded, failed, retried, revoked), and the successes' runtimes give
// the percentiles, exact (nearest rank). Replicas writing the same events
// write the same row, so nothing counts twice.
//
// Rows are found through the order index (coalesce(ts, 0), id), or behind
// a task name or worker filter through that one's index, from the window's
// start on: a task's ts is the time of its latest event, so a task with a
// state's time in the window has its ts there or after. The window's rows
// are read once (each row's six times in the one pass of a LATERAL
// VALUES), so the read's cost grows with the tasks whose latest event is
// in the window, not with the table.
func (s *Store) TaskStats(ctx context.Context, q taskstats.Query) (taskstats.Result, error) {
	from := float64(q.From.Unix())
	to := float64(q.End().Unix())
	step := q.Step.Seconds()
	args := []any{from, to, step}
	var where strings.Builder
	for _, f := range []struct{ col, v string }{{"name", q.TaskName}, {"worker", q.Worker}, {"routing_key", q.Queue}} {
		if v := taskstats.Fold(f.v); v != "" {
			args = append(args, v)
			fmt.Fprintf(&where, " AND lower(t.%s) = $%d", f.col, len(args))
		}
	}
	sql := `SELECT e.k, floor((e.v - $1) / $3)::int AS b, count(*),
	percentile_disc(0.5) WITHIN GROUP (ORDER BY e.rt),
	percentile_disc(0.95) WITHIN GROUP (ORDER BY e.rt)
FROM stamen_tasks t
CROSS JOIN LATERAL (VALUES (0, t.received, NULL::float8), (1, t.started, NULL::float8),
	(2, t.succeeded, t.runtime), (3, t.failed, NULL::float8), (4, t.retried, NULL::float8),
	(5, t.revoked, NULL::float8)) AS e(k, v, rt)
WHERE coalesce(t.ts, 0) >= $1 AND e.v >= $1 AND e.v < $2` + where.String() + `
GROUP BY 1, 2`
	res := taskstats.Result{Buckets: make([]taskstats.Bucket, q.N)}
	for i := range res.Buckets {
		res.Buckets[i].Start = q.From.Add(time.Duration(i) * q.Step).UTC()
	}
	err := s.read(ctx, func(ctx context.Context) error {
		for i := range res.Buckets {
			res.Buckets[i].Counts = [taskstats.NumKinds]int64{}
			res.Buckets[i].P50, res.Buckets[i].P95 = nil, nil
		}
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k, b int
			var n int64
			var p50, p95 *float64
			if err := rows.Scan(&k, &b, &n, &p50, &p95); err != nil {
				return err
			}
			if b < 0 || b >= q.N || k < 0 || k >= taskstats.NumKinds {
				continue
			}
			res.Buckets[b].Counts[k] = n
			if k == taskstats.Succeeded {
				res.Buckets[b].P50, res.Buckets[b].P95 = p50, p95
			}
		}
		return rows.Err()
	})
	if err != nil {
		return taskstats.Result{}, err
	}
	return res, nil
}
