package pg

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/tasksearch"
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
	for c.Next(firstFetch, func(t *taskrec.Task) { ids = append(ids, t.UUID) }) {
	}
	if err := c.Err(); err != nil {
		return nil, false, err
	}
	if len(ids) > max {
		return ids[:max], true, nil
	}
	return ids, false, nil
}

// Failures groups the tasks q selects (Limit, Offset and SortBy aside) by
// task name and exception type, as state.Failures does: the same groups,
// counts, times, examples and tracebacks.
//
// The failures are read through the indexes of migration 4, which hold
// them in each group's order (failureKey): the groups' counts and times
// from an index-only scan, the 5 newest examples of each from a backward
// read of its own entries, then the tracebacks of the newest examples by
// primary key, all in one read-only snapshot. The failures with a long
// exception repr (longException), which that index leaves out, are read
// the same way through their own index, checking each row's type.
// A bounded received window (at most narrowWindow), or a state filter
// other than FAILURE (which GET /api/failures never passes), is read
// whole and sorted instead.
func (s *Store) Failures(ctx context.Context, q state.Query) ([]state.FailureGroup, error) {
	failed := state.FoldFilter(q.State) == "failure"
	if failed {
		// Spelled as the indexes' WHERE (failedState), not bound.
		q.State = ""
	}
	b := &builder{}
	where, window, err := b.filters(q)
	if err != nil {
		return nil, err
	}
	if b.superset {
		// /api/failures takes no search; a caller that passes one gets
		// the groups of what SQL can select exactly, or this.
		return nil, &tasksearch.Error{Message: "Search terms kwargs:key=value are not supported when grouping failures with the PostgreSQL store", Position: -1}
	}
	narrow := window != ""
	where = withWindow(where, window)
	var groupsSQL string
	if narrow || !failed {
		if failed {
			where = append(where, failedState)
		}
		cond := ""
		if len(where) > 0 {
			cond = " WHERE " + strings.Join(where, " AND ")
		}
		// A bounded received window (buildSelect) is read once through
		// the received index and sorted whole: the failures' indexes do
		// not hold received, so reading the groups through them fetches
		// every failure's row to check it (1.3 to 1.6 s for a 1-hour
		// window at 10M tasks, against 0.4 to 0.8 s: bench/RESULTS.md).
		groupsSQL = `WITH f AS (
	SELECT t.id, ` + failureName + ` AS name, ` + failureType + ` AS exc, ` + failureAt + ` AS at, ` + failureTs + ` AS ts
	FROM stamen_tasks t` + cond + `
), r AS (
	SELECT f.*, row_number() OVER (PARTITION BY name, exc ORDER BY ` + exampleOrder + `) AS rn FROM f
)
SELECT name, exc, count(*), min(at), max(at), array_agg(id ORDER BY rn) FILTER (WHERE rn <= ` + nExamples + `)
FROM r GROUP BY name, exc`
	} else {
		groupsSQL = indexedSQL(where)
	}
	var out []state.FailureGroup
	err = s.read(ctx, func(ctx context.Context) error {
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
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.FailureGroup, error) {
				var g state.FailureGroup
				err := row.Scan(&g.Name, &g.ExceptionType, &g.Count, &g.First, &g.Last, &g.Examples)
				return g, err
			})
			if err != nil {
				return err
			}
			return tracebacks(ctx, tx, out)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// exampleOrder is the order of a group's examples over Failures' columns:
// newest failure first, ties as the state's list (newest timestamp, then
// greatest id, first), as state.Failures orders them.
const exampleOrder = "at DESC, ts DESC, id DESC"

// nExamples is state.FailureExamples in SQL.
var nExamples = strconv.Itoa(state.FailureExamples)

// indexedSQL is the statement of the failures' groups, with their counts,
// times and examples, read through the indexes of migration 4; where are
// the other filters on t. Each part reads the failures with a short
// exception repr (stamen_tasks_failures: an index-only scan, grouped in
// its order) and those with a long one (stamen_tasks_failures_long) apart,
// as each index's WHERE requires; the parts are then merged. A group's
// examples are its newest of each part, read backwards through the index
// from the group's key (a long part from its name, its rows checked for
// the type), at most 5 of each.
func indexedSQL(where []string) string {
	and := ""
	if len(where) > 0 {
		and = " AND " + strings.Join(where, " AND ")
	}
	counts := func(part string) string {
		return `SELECT ` + failureName + `, ` + failureType + `, count(*), min(` + failureAt + `), max(` + failureAt + `)
		FROM stamen_tasks t WHERE ` + failedState + ` AND ` + part + and + ` GROUP BY 1, 2`
	}
	newest := func(part string) string {
		return `SELECT t.id, ` + failureAt + ` AS at, ` + failureTs + ` AS ts FROM stamen_tasks t
			WHERE ` + failedState + ` AND ` + part + ` AND ` + failureName + ` = g.name AND ` + failureType + ` = g.exc` + and + `
			ORDER BY ` + failureAt + ` DESC, ` + failureTs + ` DESC, t.id DESC LIMIT ` + nExamples
	}
	return `WITH p (name, exc, n, first, last) AS (
	` + counts(shortException) + `
	UNION ALL
	` + counts(longException) + `
), g AS (
	SELECT name, exc, sum(n)::bigint AS n, min(first) AS first, max(last) AS last FROM p GROUP BY name, exc
)
SELECT g.name, g.exc, g.n, g.first, g.last, ARRAY(
	SELECT e.id FROM ((` + newest(shortException) + `) UNION ALL (` + newest(longException) + `)) AS e
	ORDER BY ` + exampleOrder + ` LIMIT ` + nExamples + `
) FROM g`
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
