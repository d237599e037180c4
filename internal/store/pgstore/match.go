package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/state"
)

// MatchTasks returns the ids of the first max tasks q selects, in q's order
// (its Limit and Offset aside), and whether more than max match: the
// selection of a bulk revoke or retry. It reads max+1 ids through the
// list's indexes, never counting every match, under the read timeout.
func (s *Store) MatchTasks(ctx context.Context, q state.Query, max int) (ids []string, more bool, err error) {
	q.Limit, q.Offset = max+1, 0
	sqlText, args, empty, err := buildSelect("t.id", q)
	if err != nil || empty {
		return nil, false, err
	}
	err = s.read(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, sqlText, args...)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if len(ids) > max {
		return ids[:max], true, nil
	}
	return ids, false, nil
}

// Failures groups the tasks q selects (Limit, Offset and SortBy aside) by
// task name and exception type, as state.Failures does: the same groups,
// counts, times, examples and tracebacks. It is one statement under the
// read timeout: the rows of the filters (the caller's state FAILURE reads
// the state index), numbered newest failure first within their group by a
// window, folded by GROUP BY; the traceback is read by primary key for
// each group's newest example only, so that no traceback is sorted or
// aggregated.
func (s *Store) Failures(ctx context.Context, q state.Query) ([]state.FailureGroup, error) {
	b := &builder{}
	where, window, err := b.filters(q)
	if err != nil {
		return nil, err
	}
	where = withWindow(where, window)
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	// state.ExceptionType in SQL: the repr up to its first "(", trimmed
	// of what strings.TrimSpace trims, "unknown" when nothing is left.
	exc := "coalesce(nullif(btrim(split_part(coalesce(t.exception, ''), '(', 1), " + b.arg(state.Spaces) + "), ''), 'unknown')"
	// Ties of the failure time go in the state's list order: newest
	// timestamp, then greatest id, first.
	sqlText := `WITH f AS (
	SELECT t.id, coalesce(t.name, '') AS name, ` + exc + ` AS exc, coalesce(t.failed, t.ts, 0) AS at, coalesce(t.ts, 0) AS ts
	FROM stamen_tasks t` + cond + `
), r AS (
	SELECT f.*, row_number() OVER (PARTITION BY name, exc ORDER BY at DESC, ts DESC, id DESC) AS rn FROM f
), g AS (
	SELECT name, exc, count(*) AS n, min(at) AS first, max(at) AS last,
		array_agg(id ORDER BY rn) FILTER (WHERE rn <= ` + b.arg(int64(state.FailureExamples)) + `) AS examples
	FROM r GROUP BY name, exc
)
SELECT g.name, g.exc, g.n, g.first, g.last, g.examples, coalesce(t.traceback, '')
FROM g LEFT JOIN stamen_tasks t ON t.id = g.examples[1]`
	var out []state.FailureGroup
	err = s.read(ctx, func(ctx context.Context) error {
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			// Over many failures the plan's cost makes PostgreSQL compile
			// it (JIT): 1.9 s of the 6 s it took at a million failures
			// (bench/RESULTS.md), more than the run it speeds up.
			if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, sqlText, b.args...)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.FailureGroup, error) {
				var g state.FailureGroup
				err := row.Scan(&g.Name, &g.ExceptionType, &g.Count, &g.First, &g.Last, &g.Examples, &g.Traceback)
				return g, err
			})
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
