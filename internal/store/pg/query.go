package pg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/tasksearch"
)

// List answers a GET /api/tasks query over the whole history, with the
// in-memory state's rules (state.Query): the same filters, the same search
// language, the same order and ties. An invalid sort is a plain error, an
// invalid search a *tasksearch.Error, and so is a search construct SQL
// cannot answer from an index (kwargs:key=value, a term holding a control
// character that separates fields), which is refused rather than scanned.
//
// The rows are streamed: Next reads them in chunks as the body is written.
// A paged query (limit given) is bounded by the read timeout; an unpaged
// one, which Flower allows and which may list millions, by UnpagedTimeout.
func (s *Store) List(ctx context.Context, q state.Query) (*Cursor, error) {
	sel, err := buildList(q)
	if err != nil {
		return nil, err
	}
	if sel.empty {
		return &Cursor{}, nil
	}
	timeout := s.cfg.ReadTimeout
	if q.Limit == state.NoLimit {
		timeout = UnpagedTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	return s.open(ctx, cancel, sel)
}

// open runs sel and reads its first task: pgx reports a failed query at
// its first row, so that an outage is an error (503) rather than an empty
// 200. A connection that fails before that first task (see Store.retry) is
// replaced and sel run once more, within ctx; once a task is handed out
// it is not. cancel ends ctx; the cursor calls it when closed.
func (s *Store) open(ctx context.Context, cancel context.CancelFunc, sel selection) (*Cursor, error) {
	c, cause, err := s.start(ctx, sel)
	if err != nil && s.retry(ctx, cause) {
		c, _, err = s.start(ctx, sel)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if c.rows == nil {
		cancel()
		return c, nil
	}
	c.cancel = cancel
	return c, nil
}

// start runs sel and reads its first task, as open says, returning the
// error and, for retry, the driver's error it came from. The cursor has
// no cancel yet: open sets it.
func (s *Store) start(ctx context.Context, sel selection) (*Cursor, error, error) {
	c := &Cursor{ctx: ctx, match: sel.match, skip: sel.offset, left: sel.limit, scansIDs: sel.scansIDs}
	if sel.match == nil {
		rows, err := s.pool.Query(ctx, sel.sql, sel.args...)
		if err != nil {
			return nil, err, unavailable(err)
		}
		c.rows = rows
	} else {
		// A superset is read through a server-side cursor, some rows
		// at a time (fetch), so that the read stops once the page is
		// found: closing a query's rows early reads them to their end.
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
		if err != nil {
			return nil, err, unavailable(err)
		}
		c.tx = tx
		// A walk of the whole order, filtered, is costed past
		// jit_above_cost; compiling it made a page take 72 ms instead
		// of 5 (BenchmarkListKwargsPair).
		if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
			c.fail(err)
		} else if _, err := tx.Exec(ctx, "DECLARE stamen_list NO SCROLL CURSOR FOR "+sel.sql, sel.args...); err != nil {
			c.fail(err)
		} else {
			c.fetch()
		}
	}
	if !c.advance() {
		c.Close()
		if err := c.Err(); err != nil {
			return nil, c.cause, err
		}
		return &Cursor{}, nil, nil
	}
	return c, nil, nil
}

// UnpagedTimeout bounds the query of a GET /api/tasks without limit.
const UnpagedTimeout = 5 * time.Minute

// A superset's FETCHes read firstFetch rows, then twice as many each
// time up to maxFetch: a page found in the first rows reads few, and a
// long read makes few round trips.
const (
	firstFetch = 256
	maxFetch   = 8192
)

// Cursor is the answer of List, read in chunks with Next.
type Cursor struct {
	ctx    context.Context
	rows   pgx.Rows
	cancel context.CancelFunc
	err    error
	// cause is the driver's error err came from.
	cause error
	t     taskrec.Task
	// ready is set when t holds a task not yet passed on.
	ready bool
	// A superset (selection) is read from tx's cursor, fetchN rows a
	// FETCH, fetched counting the rows of the last; match checks each row
	// (checked counts them), and skip and left page the matches (left
	// NoLimit: all).
	tx         pgx.Tx
	fetchN     int
	fetched    int
	match      *tasksearch.Search
	checked    int
	skip, left int
	// scansIDs is the selection's: a term read every id.
	scansIDs bool
}

// Next calls fn with each of the next n tasks, in order, and reports
// whether more may follow. The task is valid only during the call.
func (c *Cursor) Next(n int, fn func(t *taskrec.Task)) bool {
	if c.rows == nil {
		return false
	}
	for range n {
		if !c.ready && !c.advance() {
			c.Close()
			return false
		}
		c.ready = false
		fn(&c.t)
	}
	return true
}

// advance reads the next task to pass on into t, and reports whether there
// is one: the next row, or with match the next matching row of the page.
func (c *Cursor) advance() bool {
	if c.rows == nil || c.match != nil && c.left == 0 {
		return false
	}
	for {
		if !c.rows.Next() {
			if err := c.rows.Err(); err != nil {
				c.fail(err)
				return false
			}
			if c.tx == nil || c.fetched < c.fetchN {
				return false
			}
			c.rows.Close()
			if !c.fetch() {
				return false
			}
			continue
		}
		c.fetched++
		var r row
		if err := c.rows.Scan(r.dest()...); err != nil {
			c.fail(err)
			return false
		}
		c.t = r.task()
		if c.match == nil {
			c.ready = true
			return true
		}
		c.checked++
		if !c.match.Match(&c.t) {
			continue
		}
		if c.skip > 0 {
			c.skip--
			continue
		}
		if c.left > 0 {
			c.left--
		}
		c.ready = true
		return true
	}
}

// fetch reads the next rows of tx's cursor.
func (c *Cursor) fetch() bool {
	c.fetchN = min(max(2*c.fetchN, firstFetch), maxFetch)
	rows, err := c.tx.Query(c.ctx, "FETCH "+strconv.Itoa(c.fetchN)+" FROM stamen_list")
	if err != nil {
		c.fail(err)
		return false
	}
	c.rows, c.fetched = rows, 0
	return true
}

// fail records err as what ended the rows, unless one is recorded. A
// superset that passed its deadline while its rows were coming is a search
// too broad for the timeout, not an outage: a 400 that says so, where a
// 503 would have a load balancer repeat it on another replica. So is a
// selection that read every id for a short term and passed its deadline.
func (c *Cursor) fail(err error) {
	if c.err != nil {
		return
	}
	c.cause = err
	if c.match != nil && c.checked > 0 && errors.Is(c.ctx.Err(), context.DeadlineExceeded) {
		c.err = &tasksearch.Error{Position: -1, Message: fmt.Sprintf("Search terms kwargs:key=value are checked on each task their words select: "+
			"%d were checked within the store's read timeout without completing the answer; narrow the search or add a filter", c.checked)}
		return
	}
	if c.scansIDs && errors.Is(c.ctx.Err(), context.DeadlineExceeded) {
		c.err = &tasksearch.Error{Position: -1, Message: fmt.Sprintf("Search terms of fewer than %d hex digits and hyphens are looked for in every task id, "+
			"which took longer than the store's read timeout; give more of the id or add a filter", minGramTerm)}
		return
	}
	c.err = unavailable(err)
}

// Err is the error that ended the rows early, if any.
func (c *Cursor) Err() error {
	if c.rows != nil {
		if err := c.rows.Err(); err != nil {
			c.fail(err)
		}
	}
	return c.err
}

// Close releases the query's connection; Next calls it at the end.
func (c *Cursor) Close() {
	if c.rows != nil {
		c.rows.Close()
		if err := c.rows.Err(); err != nil {
			c.fail(err)
		}
	}
	if c.tx != nil {
		// Ends the cursor with the transaction; an error here loses no
		// row, and the pool discards a connection left in a bad state.
		_ = c.tx.Rollback(c.ctx)
		c.tx = nil
	}
	if c.cancel != nil {
		c.cancel()
	}
}

// builder collects a query's arguments. superset is set when a search
// term was translated to a condition that selects more than it matches
// (kwargs:key=value): each row must then be checked (selection).
// scansIDs is set when a term is looked for in every id (idFragment).
type builder struct {
	args     []any
	superset bool
	scansIDs bool
}

func (b *builder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// narrowWindow is the longest received window read through the received
// index rather than the order's (see buildList).
const narrowWindow = 24 * time.Hour

// selection is a query translated to SQL; empty is set when nothing can
// match. A search with a kwargs:key=value pair selects in SQL a superset
// of its matches, found through the trigram index by the pair's words
// (tasksearch.PairWords): the pair itself needs the kwargs repr parsed, which
// only the state's code does. Then match checks each row as the state's
// list would, and pages the matches: offset and limit are applied to the
// rows that match, not in SQL.
type selection struct {
	sql           string
	args          []any
	empty         bool
	match         *tasksearch.Search
	offset, limit int
	scansIDs      bool
}

// buildList translates q, selecting the columns of a task (row).
func buildList(q state.Query) (selection, error) {
	return buildSelect(selectColumns, q)
}

// buildSelect translates q, selecting cols, which must be selectColumns
// when the selection has match.
func buildSelect(cols string, q state.Query) (selection, error) {
	field, desc, err := state.ParseSort(q.SortBy)
	if err != nil {
		return selection{}, err
	}
	if q.Limit == 0 || q.Limit < state.NoLimit {
		if _, err := tasksearch.Parse(q.Search); err != nil {
			return selection{}, err
		}
		return selection{empty: true}, nil
	}
	b := &builder{}
	where, window, err := b.filters(q)
	if err != nil {
		return selection{}, err
	}
	sel := selection{scansIDs: b.scansIDs}
	if b.superset {
		if sel.match, err = tasksearch.Compile(q.Search); err != nil {
			return selection{}, err
		}
		sel.offset, sel.limit = max(q.Offset, 0), q.Limit
	}
	var sb strings.Builder
	page := func() string {
		if sel.match != nil {
			return ""
		}
		var p string
		if q.Limit != state.NoLimit {
			p = " LIMIT " + b.arg(int64(q.Limit))
		}
		if q.Offset > 0 {
			p += " OFFSET " + b.arg(int64(q.Offset))
		}
		return p
	}
	if window != "" && field == "" && len(where) == 0 && q.Limit != state.NoLimit &&
		q.Limit <= maxWindowPage && q.Offset <= maxWindowPage-q.Limit {
		sel.sql, sel.args = windowPage(cols, window, b, q.Limit+max(q.Offset, 0), page()), b.args
		return sel, nil
	}
	if window != "" && field == "" {
		// The default order of a narrow window, in two steps: the page's
		// ids are chosen from the window's entries of the received index,
		// which holds each task's ts (migration 3), then only those rows
		// are read. The window is two arms, received in range and received
		// NULL (the state lets a task without a received time through), as
		// an index-only scan cannot answer an OR. The order key is
		// coalesce(ts, 0) + 0, an expression no index provides, so that
		// PostgreSQL does not walk the newest-first index arm by arm.
		// With another filter the arms read the rows they test: the same
		// work as one scan, and still only the page's rows read whole.
		//
		// Alone (a page deeper than windowPage reads, or every task), the
		// range arm is read newest received first: received and ts go
		// together (ts is a task's latest event), so the sort's bound of a
		// page is reached at once and most entries are then rejected at
		// one comparison, where oldest first each would displace the
		// bound (24 ms a read against 17, 100,000 entries). With another
		// filter the arm may come from another index, which the ORDER BY
		// would make PostgreSQL sort.
		and, newest := "", ""
		if len(where) > 0 {
			and = " AND " + strings.Join(where, " AND ")
		} else {
			newest = " ORDER BY t.received DESC NULLS LAST, t.id DESC"
		}
		const arm = "SELECT t.id, coalesce(t.ts, 0) + 0 AS o FROM stamen_tasks t WHERE "
		sb.WriteString("SELECT " + cols + " FROM (SELECT k.id, k.o FROM ((" +
			arm + "t.received IS NULL" + and + ") UNION ALL (" + arm + window + and + newest +
			")) AS k ORDER BY k.o DESC, k.id DESC")
		sb.WriteString(page())
		sb.WriteString(") AS k JOIN stamen_tasks t ON t.id = k.id ORDER BY k.o DESC, k.id DESC")
		sel.sql, sel.args = sb.String(), b.args
		return sel, nil
	}
	where = withWindow(where, window)
	sb.WriteString("SELECT " + cols + " FROM stamen_tasks t")
	if len(where) > 0 {
		sb.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	sb.WriteString(" ORDER BY " + orderBy(field, desc))
	sb.WriteString(page())
	sel.sql, sel.args = sb.String(), b.args
	return sel, nil
}

// windowHead is the fewest entries of a narrow window windowPage reads
// newest received first before it knows a page's bound.
const windowHead = 1000

// maxWindowPage is the deepest page (limit and offset) windowPage reads:
// a deeper one sorts a head as long as the page, and at 10M tasks, a
// 100,000-task window, that took longer than sorting the whole window
// from 50,000 entries on (145 ms against 91), as long up to 20,000.
const maxWindowPage = 20_000

// windowPage is a page of a narrow received window in the default order
// (newest first), without other filters: the page's ids come from the
// received index alone, which holds each task's ts (migration 3), then
// only those rows are read. Sorting every entry of the window by ts,
// even in a bounded sort, copied each one into the sort (42 ms for a
// window of 100,000 tasks at 10M, most of it the sort), so the page's
// bound is found first: the newest-received head of the window, at least
// windowHead and at least the page's entries, holds a page's worth of
// tasks, and any task of the rest that belongs on the page is at least
// as new as the page-th newest of them (else the page would be those).
// The rest is then read from the same index with that bound as a filter,
// which rejects most entries without copying them (25 ms). ts follows
// received (a task's latest event comes after its receipt), so the bound
// is close to the page's own. A head that is not full is the whole
// window: no entry of it is older than the head's last, so the rest reads
// nothing (and a head of fewer than the page's entries leaves the bound
// NULL). The tasks never received pass the window too (withWindow), from
// the same index. depth is the page's limit and offset, page its LIMIT
// and OFFSET clause.
func windowPage(cols, window string, b *builder, depth int, page string) string {
	n := b.arg(int64(depth))
	head := b.arg(int64(max(windowHead, depth)))
	const o = "coalesce(t.ts, 0) + 0"
	return "WITH head AS MATERIALIZED (SELECT t.id, " + o + " AS o, t.received FROM stamen_tasks t WHERE " + window +
		" ORDER BY t.received DESC NULLS LAST, t.id DESC LIMIT " + head + ") " +
		"SELECT " + cols + " FROM (SELECT k.id, k.o FROM (SELECT id, o FROM head UNION ALL " +
		"SELECT t.id, " + o + " FROM stamen_tasks t WHERE " + window +
		" AND (t.received, t.id) < (SELECT received, id FROM head ORDER BY received, id LIMIT 1)" +
		" AND " + o + " >= (SELECT min(o) FROM (SELECT o FROM head ORDER BY o DESC, id DESC LIMIT " + n + ") AS p HAVING count(*) = " + n + ")" +
		" UNION ALL SELECT t.id, " + o + " FROM stamen_tasks t WHERE t.received IS NULL) AS k ORDER BY k.o DESC, k.id DESC" + page +
		") AS k JOIN stamen_tasks t ON t.id = k.id ORDER BY k.o DESC, k.id DESC"
}

// filters translates q's filters and search (not its order, limit and
// offset) to conditions on the rows of t. A received window bounded on
// both sides and at most narrowWindow long is left out of where and
// returned as window, its range alone (the tasks never received pass it
// too: see withWindow), for buildSelect to read through the received
// index rather than by walking the newest-first one: PostgreSQL, assuming
// matches spread evenly, would walk that and filter, which for a window
// far back reads most of the table (2 s at 10M tasks). A wider window
// stays in where and keeps the walk, which finds its rows sooner.
func (b *builder) filters(q state.Query) (where []string, window string, err error) {
	search, err := tasksearch.Parse(q.Search)
	if err != nil {
		return nil, "", err
	}
	for _, f := range []struct{ col, v string }{
		{"state", state.FoldFilter(q.State)}, {"name", state.FoldFilter(q.TaskName)}, {"worker", state.FoldFilter(q.Worker)},
	} {
		if f.v != "" {
			where = append(where, fmt.Sprintf("lower(t.%s) = %s", f.col, b.arg(f.v)))
		}
	}
	if q.IDs != nil {
		// By primary key: the bulk operations' list of ids, exact, as
		// state.Query.IDs matches them.
		where = append(where, "t.id = ANY("+b.arg(q.IDs)+"::text[])")
	}
	narrow := q.ReceivedStart != nil && q.ReceivedEnd != nil &&
		q.ReceivedEnd.Sub(*q.ReceivedStart) <= narrowWindow
	switch {
	case narrow:
		window = fmt.Sprintf("t.received >= %s AND t.received <= %s",
			b.arg(state.Epoch(*q.ReceivedStart)), b.arg(state.Epoch(*q.ReceivedEnd)))
	default:
		if q.ReceivedStart != nil {
			where = append(where, fmt.Sprintf("(t.received IS NULL OR t.received >= %s)", b.arg(state.Epoch(*q.ReceivedStart))))
		}
		if q.ReceivedEnd != nil {
			where = append(where, fmt.Sprintf("(t.received IS NULL OR t.received <= %s)", b.arg(state.Epoch(*q.ReceivedEnd))))
		}
	}
	if search != nil {
		cond, err := b.search(search)
		if err != nil {
			return nil, "", err
		}
		where = append(where, cond)
	}
	return where, window, nil
}

// withWindow adds a narrow window (see filters) to where as one condition,
// with the tasks never received, which the state lets through.
func withWindow(where []string, window string) []string {
	if window == "" {
		return where
	}
	return append(where, "(t.received IS NULL OR ("+window+"))")
}

// orderBy is the state's order in SQL: a missing value first ascending
// (last descending), ties by id; the default is newest first.
func orderBy(field string, desc bool) string {
	var asc string
	switch field {
	case "":
		return "coalesce(t.ts, 0) DESC, t.id DESC"
	case "name":
		asc = "(t.name IS NOT NULL), lower(t.name), t.id"
		if desc {
			return "(t.name IS NOT NULL) DESC, lower(t.name) DESC, t.id DESC"
		}
		return asc
	case "state":
		if desc {
			return "lower(t.state) DESC, t.id DESC"
		}
		return "lower(t.state), t.id"
	default: // received, started
		if desc {
			return "t." + field + " DESC NULLS LAST, t.id DESC"
		}
		return "t." + field + " NULLS FIRST, t.id"
	}
}

// search translates a parsed search to a condition. Every substring term
// is answered through the trigram index over the searched fields, an
// unqualified one also through the id's (idFragment); a qualified one is
// then checked on its own column.
func (b *builder) search(n *tasksearch.Node) (string, error) {
	switch n.Op {
	case "and", "or":
		parts := make([]string, len(n.Children))
		for i, c := range n.Children {
			p, err := b.search(c)
			if err != nil {
				return "", err
			}
			parts[i] = p
		}
		return "(" + strings.Join(parts, " "+strings.ToUpper(n.Op)+" ") + ")", nil
	}
	if n.Pair != "" {
		// A superset: the tasks with kwargs holding the pair's words.
		// Words of 3 characters or more go through the trigram index.
		b.superset = true
		cond := []string{"t.kwargs IS NOT NULL"}
		for _, w := range tasksearch.PairWords(n.Pair) {
			if w == "" {
				continue
			}
			pattern := b.arg("%" + likeEscape(w) + "%")
			if len(w) >= 3 {
				cond = append(cond, searchTextOf("t.")+" LIKE "+pattern)
			}
			cond = append(cond, "lower(t.kwargs) LIKE "+pattern)
		}
		return "(" + strings.Join(cond, " AND ") + ")", nil
	}
	if strings.ContainsFunc(n.Value, func(r rune) bool { return r == 0 || r == 0x1f }) {
		return "", &tasksearch.Error{Message: "Search terms with control characters are not supported with the PostgreSQL store", Position: -1}
	}
	if n.Field == "state" {
		return "lower(t.state) = " + b.arg(n.Value), nil
	}
	pattern := b.arg("%" + likeEscape(n.Value) + "%")
	cond := searchTextOf("t.") + " LIKE " + pattern
	if n.Field != "" {
		return "(" + cond + " AND lower(t." + n.Field + ") LIKE " + pattern + ")", nil
	}
	return "(" + b.idFragment(n.Value, pattern) + " OR " + cond + ")", nil
}

// idFragment is the condition that a task's id holds the folded term,
// whose LIKE pattern is the argument pattern: through the id's grams
// (grams.go), or for a row without them through the trigram index of
// those rows' ids. A hex term too short for grams is looked for in every
// id.
func (b *builder) idFragment(term, pattern string) string {
	like := "lower(t.id) LIKE " + pattern
	withoutGrams := "(t.id_grams IS NULL AND " + like + ")"
	if !hexTerm(term) {
		return withoutGrams
	}
	offsets := termGrams(term)
	if offsets == nil {
		b.scansIDs = true
		return like
	}
	parts := []string{withoutGrams}
	for _, g := range offsets {
		parts = append(parts, "(t.id_grams @> "+b.arg(g)+"::int4[] AND "+like+")")
	}
	return strings.Join(parts, " OR ")
}

// searchTextOf is the trigram index's expression with columns of alias.
func searchTextOf(alias string) string {
	r := strings.NewReplacer("(name,", "("+alias+"name,", "|| state ||", "|| "+alias+"state ||",
		"(worker,", "("+alias+"worker,", "(args,", "("+alias+"args,", "(kwargs,", "("+alias+"kwargs,", "(result,", "("+alias+"result,")
	return r.Replace(searchText)
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
