package pgstore

import (
	"context"
	"math"
	"strconv"
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
	sel, err := buildSelect("t.id", q)
	if err != nil || sel.empty {
		return nil, false, err
	}
	if sel.match != nil {
		// The rows are checked (selection): read them whole.
		if sel, err = buildSelect(selectColumns, q); err != nil {
			return nil, false, err
		}
		return s.matchSuperset(ctx, sel, max)
	}
	err = s.read(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, sel.sql, sel.args...)
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

// matchSuperset is MatchTasks over a selection checked row by row.
func (s *Store) matchSuperset(ctx context.Context, sel selection, max int) (ids []string, more bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	c, err := s.open(ctx, cancel, sel)
	if err != nil {
		return nil, false, err
	}
	for c.Next(firstFetch, func(t *state.Task) { ids = append(ids, t.UUID) }) {
	}
	if err := c.Err(); err != nil {
		return nil, false, err
	}
	if len(ids) > max {
		return ids[:max], true, nil
	}
	return ids, false, nil
}

// failureWindow is how many of the newest selected failures Failures
// reads, newest first through the list's index, for the groups' examples.
// A variable so that tests can make it small.
var failureWindow = 10_000

// Failures groups the tasks q selects (Limit, Offset and SortBy aside) by
// task name and exception type, as state.Failures does: the same groups,
// counts, times, examples and tracebacks.
//
// Ordering every failure of a group for its 5 newest examples sorted a
// million rows (2 s at a million failures, bench/RESULTS.md); the counts
// alone are a hash aggregate. So one statement counts the groups and reads
// the failureWindow newest selected tasks through the list's order (newest
// timestamp first), whose newest failures per group are the examples when
// the window proves it: a group wholly inside it, or one with 5 failures
// in it whose 5th is newer than any failure outside can be. An example's
// order is its failure time, which may differ from the timestamp the
// window is read by (a late event), so the proof bounds a failure outside
// the window by the window's oldest timestamp plus the group's greatest
// failure-time-minus-timestamp. The groups not proven (rare or old ones)
// are ordered as before, reading only their rows; then the tracebacks of
// the newest examples by primary key. All in one read-only snapshot. A
// bounded received window (at most narrowWindow) is sorted whole instead.
func (s *Store) Failures(ctx context.Context, q state.Query) ([]state.FailureGroup, error) {
	b := &builder{}
	where, window, err := b.filters(q)
	if err != nil {
		return nil, err
	}
	if b.superset {
		// /api/failures takes no search; a caller that passes one gets
		// the groups of what SQL can select exactly, or this.
		return nil, &state.SearchError{Message: "Search terms kwargs:key=value are not supported when grouping failures with the PostgreSQL store", Position: -1}
	}
	narrow := window != ""
	where = withWindow(where, window)
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	// state.ExceptionType in SQL: the repr up to its first "(", trimmed
	// of what strings.TrimSpace trims, "unknown" when nothing is left.
	exc := "coalesce(nullif(btrim(split_part(coalesce(t.exception, ''), '(', 1), " + b.arg(state.Spaces) + "), ''), 'unknown')"
	cols := `t.id, coalesce(t.name, '') AS name, ` + exc + ` AS exc, coalesce(t.failed, t.ts, 0) AS at, coalesce(t.ts, 0) AS ts`
	nEx := b.arg(int64(state.FailureExamples))
	// The statement of the open groups takes the arguments up to here.
	openArgs := b.args
	var groupsSQL string
	if narrow {
		// A bounded received window (buildSelect) is read once through
		// the received index and sorted whole: reading its rows a second
		// time for the newest failures costs more than the sort.
		groupsSQL = `WITH f AS (
	SELECT ` + cols + ` FROM stamen_tasks t` + cond + `
), r AS (
	SELECT f.*, row_number() OVER (PARTITION BY name, exc ORDER BY ` + exampleOrder + `) AS rn FROM f
)
SELECT name, exc, count(*), min(at), max(at), array_agg(id ORDER BY rn) FILTER (WHERE rn <= ` + nEx + `), true, min(ts)
FROM r GROUP BY name, exc`
	} else {
		groupsSQL = newestSQL(cols, exc, cond, nEx, b.arg(int64(failureWindow)))
	}
	var out []state.FailureGroup
	err = s.read(ctx, func(ctx context.Context) error {
		out = nil
		opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
		return pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
			// Over many failures the plan's cost makes PostgreSQL compile
			// it (JIT): 1.9 s of the 6 s it took at a million failures
			// (bench/RESULTS.md), more than the run it speeds up.
			if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, groupsSQL, b.args...)
			if err != nil {
				return err
			}
			var settled []bool
			var oldest []float64
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.FailureGroup, error) {
				var g state.FailureGroup
				var ok bool
				var from float64
				err := row.Scan(&g.Name, &g.ExceptionType, &g.Count, &g.First, &g.Last, &g.Examples, &ok, &from)
				settled, oldest = append(settled, ok), append(oldest, from)
				return g, err
			})
			if err != nil {
				return err
			}
			var names, excs []string
			var from float64
			open := map[[2]string]int{}
			for i, g := range out {
				if !settled[i] {
					open[[2]string{g.Name, g.ExceptionType}] = i
					if len(names) == 0 || oldest[i] < from {
						from = oldest[i]
					}
					names, excs = append(names, g.Name), append(excs, g.ExceptionType)
				}
			}
			if len(names) > 0 {
				err := openExamples(ctx, tx, openArgs, cols, cond, nEx, names, excs, from, func(name, exc string, ids []string) {
					out[open[[2]string{name, exc}]].Examples = ids
				})
				if err != nil {
					return err
				}
			}
			return tracebacks(ctx, tx, out)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// exampleOrder is the order of a group's examples over Failures' cols:
// newest failure first, ties as the state's list (newest timestamp, then
// greatest id, first), as state.Failures orders them.
const exampleOrder = "at DESC, ts DESC, id DESC"

// newestSQL is the statement of the groups (their counts and times), of
// the examples the newest failures give, and of whether those settle
// them; cols, exc and cond are Failures', nEx and window the placeholders
// of state.FailureExamples and failureWindow.
func newestSQL(cols, exc, cond, nEx, window string) string {
	// Ties of the failure time go in the state's list order: newest
	// timestamp, then greatest id, first. A failure outside the window has
	// at <= ts + skew <= edge + skew; the 1 s margin covers the rounding
	// of those float sums, and timestamps beyond 1e12 s (or not finite)
	// prove nothing.
	return `WITH w AS (
	SELECT ` + cols + ` FROM stamen_tasks t` + cond + ` ORDER BY coalesce(t.ts, 0) DESC, t.id DESC LIMIT ` + window + `
), wb AS (
	SELECT count(*) AS k, min(ts) AS edge FROM w
), we AS (
	SELECT name, exc, count(*) AS wn,
		(array_agg(id ORDER BY ` + exampleOrder + `))[1:` + nEx + `] AS examples,
		(array_agg(at ORDER BY ` + exampleOrder + `))[` + nEx + `] AS nth
	FROM w GROUP BY name, exc
), g AS (
	SELECT coalesce(t.name, '') AS name, ` + exc + ` AS exc, count(*) AS n,
		min(coalesce(t.failed, t.ts, 0)) AS first, max(coalesce(t.failed, t.ts, 0)) AS last,
		max(coalesce(t.failed, t.ts, 0) - coalesce(t.ts, 0)) AS skew, min(coalesce(t.ts, 0)) AS oldest
	FROM stamen_tasks t` + cond + ` GROUP BY 1, 2
)
SELECT g.name, g.exc, g.n, g.first, g.last, coalesce(we.examples, '{}'),
	coalesce(wb.k < ` + window + ` OR we.wn = g.n OR (we.wn >= ` + nEx + ` AND abs(g.skew) < 1e12 AND abs(wb.edge) < 1e12
		AND wb.edge + g.skew + 1 < we.nth), false), g.oldest
FROM g LEFT JOIN we ON we.name = g.name AND we.exc = g.exc CROSS JOIN wb`
}

// openExamples orders the failures of the groups (names[i], excs[i]) that
// the window did not settle, newest failure first, and passes each
// group's first examples to fn: the whole-history way, over their rows
// only.
func openExamples(ctx context.Context, tx pgx.Tx, args []any, cols, cond, nEx string, names, excs []string, from float64, fn func(name, exc string, ids []string)) error {
	args = append(args[:len(args):len(args)], names, excs)
	groups := "$" + strconv.Itoa(len(args)-1) + "::text[], $" + strconv.Itoa(len(args)) + "::text[]"
	// No row of these groups is stamped before the oldest of them: a
	// bound the state or name index can start from (a NaN bounds nothing).
	if !math.IsNaN(from) {
		args = append(args, from)
		bound := "coalesce(t.ts, 0) >= $" + strconv.Itoa(len(args))
		if cond == "" {
			cond = " WHERE " + bound
		} else {
			cond += " AND " + bound
		}
	}
	sqlText := `WITH f AS (
	SELECT ` + cols + ` FROM stamen_tasks t` + cond + `
), r AS (
	SELECT f.*, row_number() OVER (PARTITION BY name, exc ORDER BY ` + exampleOrder + `) AS rn
	FROM f WHERE (name, exc) IN (SELECT * FROM unnest(` + groups + `))
)
SELECT name, exc, array_agg(id ORDER BY rn) FROM r WHERE rn <= ` + nEx + ` GROUP BY name, exc`
	rows, err := tx.Query(ctx, sqlText, args...)
	if err != nil {
		return err
	}
	var name, exc string
	var ids []string
	_, err = pgx.ForEachRow(rows, []any{&name, &exc, &ids}, func() error {
		fn(name, exc, ids)
		return nil
	})
	return err
}

// tracebacks sets each group's traceback, its newest example's, read by
// primary key so that no traceback is sorted or aggregated.
func tracebacks(ctx context.Context, tx pgx.Tx, gs []state.FailureGroup) error {
	ids := make([]string, 0, len(gs))
	for _, g := range gs {
		if len(g.Examples) > 0 {
			ids = append(ids, g.Examples[0])
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT id, coalesce(traceback, '') FROM stamen_tasks WHERE id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	tb := make(map[string]string, len(ids))
	var id, text string
	if _, err := pgx.ForEachRow(rows, []any{&id, &text}, func() error {
		tb[id] = text
		return nil
	}); err != nil {
		return err
	}
	for i := range gs {
		if len(gs[i].Examples) > 0 {
			gs[i].Traceback = tb[gs[i].Examples[0]]
		}
	}
	return nil
}
