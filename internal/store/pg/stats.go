package pg

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
// (migrations 6 and 7), so that every replica answers the same: each task
// counts once per state, in the minute of its record's time of that state
// (received, started, succeeded, failed, retried, revoked), and the
// successes' runtimes fill the same histogram as in memory, whose
// percentiles are estimated the same way. The read takes the window's
// folded cells and sums the deltas not folded yet, in one statement (one
// snapshot: a fold between two reads would count its deltas twice, or
// not at all). Its rows follow the buckets, not the tasks nor, without a
// filter, the keys: without a filter it reads all keys' sums
// (stamen_task_stats_total, by minute), with one the matching keys'
// cells by the filter's index; with a step of whole hours, the hour
// levels (_hour, _total_hour) for the hours the retention keeps whole.
func (s *Store) TaskStats(ctx context.Context, q taskstats.Query) (taskstats.Result, error) {
	return s.taskStats(ctx, q, time.Now())
}

func (s *Store) taskStats(ctx context.Context, q taskstats.Query, now time.Time) (taskstats.Result, error) {
	query, args := statsQuery(q, now)
	stepMin := int64(q.Step / time.Minute)
	// The rows, by bucket, then summed a bucket at a time into one cell:
	// a cell per bucket would be a kilobyte each, ten megabytes for a
	// week of minutes.
	type row struct {
		b         int
		data      []byte
		kind, bin int16
		n         int64
	}
	var got []row
	err := s.read(ctx, func(ctx context.Context) error {
		got = got[:0]
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		var r row
		var m int64
		_, err = pgx.ForEachRow(rows, []any{&m, &r.data, &r.kind, &r.bin, &r.n}, func() error {
			if b := (m - q.From.Unix()/60) / stepMin; b >= 0 && b < int64(q.N) {
				r.b = int(b)
				got = append(got, r)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return taskstats.Result{}, err
	}
	// By bucket: a counting sort.
	start := make([]int32, q.N+1)
	for i := range got {
		start[got[i].b+1]++
	}
	for b := range q.N {
		start[b+1] += start[b]
	}
	order := make([]int32, len(got))
	next := slices.Clone(start[:q.N])
	for i := range got {
		order[next[got[i].b]] = int32(i)
		next[got[i].b]++
	}
	res := taskstats.Result{Buckets: make([]taskstats.Bucket, q.N)}
	var sum taskstats.Cell
	for b := range res.Buckets {
		res.Buckets[b].Start = q.From.Add(time.Duration(b) * q.Step).UTC()
		if start[b] == start[b+1] {
			continue
		}
		sum = taskstats.Cell{}
		for _, i := range order[start[b]:start[b+1]] {
			if r := &got[i]; r.data == nil {
				addDelta(&sum, r.kind, r.bin, r.n)
			} else if err := sum.AddEncoded(r.data); err != nil {
				return taskstats.Result{}, err
			}
		}
		res.Buckets[b].Counts = sum.N
		res.Buckets[b].P50, res.Buckets[b].P95 = taskstats.Percentiles(&sum.Hist)
	}
	return res, nil
}

// statsQuery is the statement TaskStats runs for q at now: rows of
// (minute, data) cells, and of (minute, kind, bin, n) deltas not folded
// yet (data NULL).
func statsQuery(q taskstats.Query, now time.Time) (string, []any) {
	m0 := q.From.Unix() / 60
	m1 := q.End().Unix() / 60
	stepMin := int64(q.Step / time.Minute)
	// The minutes before the retention are gone from the minute level
	// (CompactStats drops them), but not from an hour row they share
	// with kept minutes: the hour level is read only from the first
	// whole hour kept, the minutes before it from the minute level.
	m0 = max(m0, now.Add(-StatsRetention).Unix()/60)
	if m0 >= m1 {
		m0 = m1
	}
	args := []any{m0, m1}
	var where strings.Builder
	for _, f := range []struct{ col, v string }{{"name", q.TaskName}, {"worker", q.Worker}, {"queue", q.Queue}} {
		if v := taskstats.Fold(f.v); v != "" {
			args = append(args, v)
			fmt.Fprintf(&where, " AND lower(%s) = $%d", f.col, len(args))
		}
	}
	minutes, hours := "stamen_task_stats_total", "stamen_task_stats_total_hour"
	if where.Len() > 0 {
		minutes, hours = "stamen_task_stats", "stamen_task_stats_hour"
	}
	cells := `SELECT minute, data, 0::smallint, 0::smallint, 0::bigint FROM ` + minutes + ` WHERE minute >= $1 AND minute < $2` + where.String()
	if stepMin%60 == 0 {
		// Buckets of whole hours: hour rows from the first whole hour
		// kept (h), minute rows before it.
		args = append(args, (m0+59)/60*60)
		h := "$" + fmt.Sprint(len(args)) + "::bigint"
		cells = `SELECT minute, data, 0::smallint, 0::smallint, 0::bigint FROM ` + minutes + ` WHERE minute >= $1 AND minute < least(` + h + `, $2)` + where.String() + `
		UNION ALL SELECT minute, data, 0::smallint, 0::smallint, 0::bigint FROM ` + hours + ` WHERE minute >= ` + h + ` AND minute < $2` + where.String()
	}
	query := cells + `
		UNION ALL SELECT minute, NULL, kind, bin, sum(n)::bigint FROM stamen_task_stats_delta
		WHERE minute >= $1 AND minute < $2` + where.String() + ` GROUP BY 1, 3, 4`
	return query, args
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
	// A backlog folded leaves as many dead deltas, whose entries every
	// read's scan of the deltas' minute index would walk until autovacuum
	// comes: they are cleaned at once.
	if total > compactBatch {
		err := s.write(ctx, true, func(ctx context.Context) error {
			_, err := s.pool.Exec(ctx, `VACUUM stamen_task_stats_delta`)
			return err
		})
		if err != nil {
			return total, unavailable(err)
		}
	}
	// By the primary keys' minute range: a few minutes' rows each time.
	// An hour row goes once all its minutes are before the cut (a read
	// takes the hour level only from the first whole hour kept).
	err := s.write(ctx, true, func(ctx context.Context) error {
		for _, l := range statsLevels {
			c := cut
			if l.hour {
				c = floorDiv(cut, 60) * 60
			}
			if _, err := s.pool.Exec(ctx, `DELETE FROM `+l.table+` WHERE minute < $1`, c); err != nil {
				return err
			}
		}
		return nil
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
	// Every level takes the batch's sums, in the same transaction; each
	// its own (a level's fold adds its rows to them).
	sums := make([]map[statsKey]*taskstats.Cell, len(statsLevels))
	for i, l := range statsLevels {
		sums[i] = map[statsKey]*taskstats.Cell{}
		for k, c := range cells {
			lk := l.of(k)
			if sum := sums[i][lk]; sum != nil {
				sum.Add(c)
			} else {
				cp := *c
				sums[i][lk] = &cp
			}
		}
	}
	for i, l := range statsLevels {
		if err := l.fold(ctx, tx, sums[i]); err != nil {
			return moved, true, err
		}
	}
	return moved, true, nil
}

// statsLevel is a table of folded cells: by minute and key (the deltas'
// own level), or summed over an hour, or over every key.
type statsLevel struct {
	table string
	hour  bool // a row per hour, its minute the hour's first
	keyed bool // a row per key; else one for all keys
}

// statsLevels are the levels the fold keeps (migrations 6 and 7), the
// deltas' own first.
var statsLevels = []statsLevel{
	{"stamen_task_stats", false, true},
	{"stamen_task_stats_hour", true, true},
	{"stamen_task_stats_total", false, false},
	{"stamen_task_stats_total_hour", true, false},
}

// of is the key of the level's row that a minute cell's key adds to.
func (l statsLevel) of(k statsKey) statsKey {
	if l.hour {
		k.minute = floorDiv(k.minute, 60) * 60
	}
	if !l.keyed {
		k.name, k.worker, k.queue = "", "", ""
	}
	return k
}

func floorDiv(x, y int64) int64 {
	q := x / y
	if x%y != 0 && (x < 0) != (y < 0) {
		q--
	}
	return q
}

// fold adds cells to the level's rows: it reads those there (locking
// them, in key order, as every fold does: one folder at a time, but a
// trim may run beside it), adds, and writes them back.
func (l statsLevel) fold(ctx context.Context, tx pgx.Tx, cells map[statsKey]*taskstats.Cell) error {
	keys := slices.SortedFunc(maps.Keys(cells), func(a, b statsKey) int {
		return cmp.Or(cmp.Compare(a.minute, b.minute), strings.Compare(a.name, b.name),
			strings.Compare(a.worker, b.worker), strings.Compare(a.queue, b.queue))
	})
	mins := make([]int64, len(keys))
	names, workers, queues := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		mins[i], names[i], workers[i], queues[i] = k.minute, k.name, k.worker, k.queue
	}
	var rows pgx.Rows
	var err error
	var k statsKey
	var data []byte
	var dest []any
	if l.keyed {
		rows, err = tx.Query(ctx, `SELECT s.minute, s.name, s.worker, s.queue, s.data FROM `+l.table+` s
		JOIN unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS u(minute, name, worker, queue)
		USING (minute, name, worker, queue) ORDER BY 1, 2, 3, 4 FOR UPDATE OF s`, mins, names, workers, queues)
		dest = []any{&k.minute, &k.name, &k.worker, &k.queue, &data}
	} else {
		rows, err = tx.Query(ctx, `SELECT minute, data FROM `+l.table+` WHERE minute = ANY ($1) ORDER BY 1 FOR UPDATE`, mins)
		dest = []any{&k.minute, &data}
	}
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		if c := cells[k]; c != nil {
			return c.AddEncoded(data)
		}
		return nil
	})
	if err != nil {
		return err
	}
	datas := make([][]byte, len(keys))
	for i, k := range keys {
		datas[i] = taskstats.AppendCell(nil, cells[k])
	}
	if l.keyed {
		_, err = tx.Exec(ctx, `INSERT INTO `+l.table+` (minute, name, worker, queue, data)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bytea[])
		ON CONFLICT (minute, name, worker, queue) DO UPDATE SET data = EXCLUDED.data`, mins, names, workers, queues, datas)
	} else {
		_, err = tx.Exec(ctx, `INSERT INTO `+l.table+` (minute, data) SELECT * FROM unnest($1::bigint[], $2::bytea[])
		ON CONFLICT (minute) DO UPDATE SET data = EXCLUDED.data`, mins, datas)
	}
	return err
}
