package pg_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/state"

	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/taskstats"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// BenchmarkTaskStats measures GET /api/stats/tasks's read from PostgreSQL
// at STAMEN_BENCH_STATS_TASKS tasks (default 1,000,000; make bench runs it
// at 10,000,000) received over the last 7 days (less an hour): 4 names, 4 workers, 3
// queues (48 keys), uuid-shaped ids, 85% succeeded (runtimes 1-500 ms),
// 10% failed, 3% started, 1% retried, 1% revoked. The rows are loaded by
// SQL (loadStatsTasks), not through stamen, with the full schema; the
// activity is then filled as the trigger and the fold fill it: the
// deltas of every task (the trigger's own function, summed by minute and
// key as migration 6 does), folded by CompactStats into every level. It
// reads the last 24 hours by minute (with and without each filter) and
// by hour, and the last 7 days by hour, by minute and by day, checks
// each answer's received count against the tasks' own rows, and reports
// the p50 and p99 of the iterations (each a request's read) and the
// rows the read's plan returned.
//
// STAMEN_BENCH_STATS_DB names a database to load once and keep (dropped
// by hand); without it the bench loads a database of its own and drops it.
//
// STAMEN_INTEGRATION=1 STAMEN_BENCH_STATS_TASKS=10000000 go test -run '^$' -bench BenchmarkTaskStats -benchtime 200x -timeout 2h ./internal/store/pg/
func BenchmarkTaskStats(b *testing.B) {
	testcluster.RequirePostgres(b)
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("STAMEN_BENCH_STATS_TASKS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	url := newDB(b)
	if db := os.Getenv("STAMEN_BENCH_STATS_DB"); db != "" {
		url = statsBenchDB(b, db)
	}
	loadStatsTasks(b, url, n)
	// A store of its own for the reads: the loading backends are reniced.
	s, err := pg.Open(ctx, pg.Config{URL: url, ReadTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows [4]int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM stamen_task_stats), (SELECT count(*) FROM stamen_task_stats_hour),
		(SELECT count(*) FROM stamen_task_stats_total), (SELECT count(*) FROM stamen_task_stats_total_hour)`).Scan(&rows[0], &rows[1], &rows[2], &rows[3]); err != nil {
		b.Fatal(err)
	}
	// The tasks' received times by minute and key, from their rows, to
	// check the answers against.
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE received_by AS SELECT floor(received / 60)::bigint AS m,
		lower(name) AS n, lower(worker) AS w, lower(routing_key) AS q, count(*) AS c FROM stamen_tasks GROUP BY 1, 2, 3, 4`); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d tasks; folded rows: %d by minute and key, %d by hour and key, %d totals by minute, %d by hour", n, rows[0], rows[1], rows[2], rows[3])
	for _, c := range []struct {
		name                    string
		window, step            time.Duration
		taskname, worker, queue string
	}{
		{name: "24h_by_minute", window: 24 * time.Hour, step: time.Minute},
		{name: "24h_by_minute_taskname", window: 24 * time.Hour, step: time.Minute, taskname: "bench.mul"},
		{name: "24h_by_minute_workername", window: 24 * time.Hour, step: time.Minute, worker: "bench@w2"},
		{name: "24h_by_minute_queue", window: 24 * time.Hour, step: time.Minute, queue: "high"},
		{name: "24h_by_hour", window: 24 * time.Hour, step: time.Hour},
		{name: "24h_by_hour_taskname", window: 24 * time.Hour, step: time.Hour, taskname: "bench.mul"},
		{name: "7d_by_hour", window: 7 * 24 * time.Hour, step: time.Hour},
		{name: "7d_by_hour_taskname_queue", window: 7 * 24 * time.Hour, step: time.Hour, taskname: "bench.mul", queue: "high"},
		{name: "7d_by_minute", window: 7 * 24 * time.Hour, step: time.Minute},
		{name: "7d_by_day", window: 7 * 24 * time.Hour, step: 24 * time.Hour},
	} {
		b.Run(c.name, func(b *testing.B) {
			q, err := taskstats.NewQuery(time.Now(), c.window, c.step)
			if err != nil {
				b.Fatal(err)
			}
			q.TaskName, q.Worker, q.Queue = c.taskname, c.worker, c.queue
			var took []time.Duration
			var res taskstats.Result
			for b.Loop() {
				t0 := time.Now()
				res, err = s.TaskStats(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
			}
			b.StopTimer()
			var got int64
			for _, bk := range res.Buckets {
				got += bk.Counts[taskstats.Received]
			}
			// The same count from the tasks' own rows (the window's
			// minutes within the retention, as the read takes them).
			from := max(q.From.Unix(), time.Now().Add(-pg.StatsRetention).Unix()/60*60)
			var want int64
			if err := conn.QueryRow(ctx, `SELECT coalesce(sum(c), 0) FROM received_by WHERE m >= $1 / 60 AND m < $2 / 60
				AND ($3 = '' OR n = $3) AND ($4 = '' OR w = $4) AND ($5 = '' OR q = $5)`,
				from, q.End().Unix(), taskstats.Fold(c.taskname), taskstats.Fold(c.worker), taskstats.Fold(c.queue)).Scan(&want); err != nil {
				b.Fatal(err)
			}
			if got != want || got == 0 {
				b.Fatalf("%d received, the tasks' rows say %d", got, want)
			}
			plan, err := s.ExplainTaskStats(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%d received in the window\n%s", got, plan)
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// statsBenchDB is the URL of database db, created when missing; it is
// kept after the bench, to be read again without loading it again.
func statsBenchDB(b *testing.B, db string) string {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testcluster.PostgresURL(testcluster.PostgresAddr, "postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db).Scan(&exists); err != nil {
		b.Fatal(err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
			b.Fatal(err)
		}
	}
	return testcluster.PostgresURL(testcluster.PostgresAddr, db)
}

// loadStatsTasks opens a store at url (migrating the schema) and, unless
// it holds n tasks already, loads n tasks by set-based SQL, their
// received times spread over the last 7 days less an hour (ending a
// minute ago): the
// secondary indexes dropped and rebuilt from their own definitions
// afterwards, the activity's triggers disabled meanwhile and the
// activity then counted from the rows by the trigger's own function, as
// migration 6 counts the tasks there, and folded. The loading sessions'
// backends are reniced to 19 (when this process may), so that they yield
// to the others on a shared machine.
func loadStatsTasks(b *testing.B, url string, n int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	s, err := pg.Open(ctx, pg.Config{URL: url, ReadTimeout: 10 * time.Second, WriteTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var have int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM stamen_tasks`).Scan(&have); err != nil {
		b.Fatal(err)
	}
	if have == int64(n) {
		b.Logf("%d tasks there already", n)
		return
	}
	// Every backend of the database, the store's pool's among them, as
	// they come, until the load is done.
	reniced := map[int]bool{}
	renice := func(conn *pgx.Conn) {
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
		if err != nil {
			return
		}
		pids, _ := pgx.CollectRows(rows, pgx.RowTo[int32])
		for _, pid := range pids {
			if !reniced[int(pid)] {
				reniced[int(pid)] = true
				if out, err := exec.Command("renice", "-n", "19", "-p", strconv.Itoa(int(pid))).CombinedOutput(); err != nil {
					b.Logf("renice backend %d: %v %s", pid, err, out)
				}
			}
		}
	}
	renice(conn)
	watcher, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		defer watcher.Close(context.Background())
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				renice(watcher)
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	step := func(conn *pgx.Conn, what string, sql string, args ...any) error {
		began := time.Now()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		b.Logf("%s: %s", what, time.Since(began).Round(time.Millisecond))
		return nil
	}
	// parallel runs jobs on workers connections of their own.
	parallel := func(workers int, jobs []func(*pgx.Conn) error) {
		b.Helper()
		ch := make(chan func(*pgx.Conn) error)
		errs := make(chan error, workers)
		for range workers {
			go func() {
				c, err := pgx.Connect(ctx, url)
				if err == nil {
					defer c.Close(context.Background())
					_, err = c.Exec(ctx, `SET work_mem = '256MB'; SET maintenance_work_mem = '512MB'`)
				}
				for job := range ch {
					if err == nil {
						err = job(c)
					}
				}
				errs <- err
			}()
		}
		for _, job := range jobs {
			ch <- job
		}
		close(ch)
		for range workers {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	rows, err := conn.Query(ctx, `SELECT i.indexname, i.indexdef FROM pg_indexes i
		WHERE i.schemaname = current_schema() AND i.tablename = 'stamen_tasks'
		AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
		ORDER BY i.indexname <> 'stamen_tasks_search'`)
	if err != nil {
		b.Fatal(err)
	}
	type index struct{ name, def string }
	var indexes []index
	var ix index
	if _, err := pgx.ForEachRow(rows, []any{&ix.name, &ix.def}, func() error {
		indexes = append(indexes, ix)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	must(step(conn, "truncate", `TRUNCATE stamen_tasks, stamen_task_stats, stamen_task_stats_hour, stamen_task_stats_total,
		stamen_task_stats_total_hour, stamen_task_stats_delta`))
	for _, ix := range indexes {
		must(step(conn, "drop "+ix.name, "DROP INDEX "+pgx.Identifier{ix.name}.Sanitize()))
	}
	must(step(conn, "disable the triggers", `ALTER TABLE stamen_tasks DISABLE TRIGGER USER`))
	// Within the retention for an hour after the load began.
	span := 6*24*3600.0 + 23*3600 - 60
	start := float64(time.Now().Unix()) - span - 60
	// Each chunk's rows, and their activity counted by the trigger's own
	// function (as migration 6 counts the tasks there) in key order, as
	// the fold takes them (the table's order): each batch of the fold
	// then holds all the deltas of a few cells rather than a few deltas
	// of many, so that each cell is written about once.
	const chunk = 500_000
	var jobs []func(*pgx.Conn) error
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		jobs = append(jobs, func(c *pgx.Conn) error {
			return step(c, fmt.Sprintf("insert and count %d..%d", lo, hi-1), `WITH ins AS (INSERT INTO stamen_tasks (id, state, name, received, started, succeeded,
			failed, retried, revoked, args, kwargs, retries, worker, result, exception, ts, runtime, routing_key, clock)
		SELECT md5(i::text)::uuid::text,
			(ARRAY['SUCCESS', 'FAILURE', 'STARTED', 'RETRY', 'REVOKED'])[st + 1],
			(ARRAY['bench.add', 'bench.mul', 'bench.div', 'bench.send_mail'])[i % 4 + 1],
			at,
			CASE WHEN st <> 4 THEN at + 0.01 END,
			CASE WHEN st = 0 THEN at + 0.01 + rt END,
			CASE WHEN st = 1 THEN at + 0.02 END,
			CASE WHEN st = 3 THEN at + 0.02 END,
			CASE WHEN st = 4 THEN at + 0.005 END,
			'(1, 2)', '{}', CASE WHEN st = 3 THEN 1 ELSE 0 END,
			(ARRAY['bench@w0', 'bench@w1', 'bench@w2', 'bench@w3'])[(i / 4) % 4 + 1],
			CASE WHEN st = 0 THEN '3' END,
			CASE WHEN st = 1 THEN 'ValueError(''boom'')' END,
			at + 0.02 + CASE WHEN st = 0 THEN rt ELSE 0 END,
			CASE WHEN st = 0 THEN rt END,
			(ARRAY['celery', 'high', 'low'])[(i / 16) % 3 + 1], i
		FROM (SELECT i, $3::float8 + i * $4::float8 AS at, 0.001 * (1 + (i * 7919) % 500) AS rt,
			CASE WHEN i % 100 < 85 THEN 0 WHEN i % 100 < 95 THEN 1 WHEN i % 100 < 98 THEN 2 WHEN i % 100 < 99 THEN 3 ELSE 4 END AS st
			FROM generate_series($1::bigint, $2::bigint) AS i) AS g
		RETURNING *)
		INSERT INTO stamen_task_stats_delta
		SELECT r.minute, r.name, r.worker, r.queue, r.kind, r.bin, sum(r.n)
		FROM ins, stamen_task_stats_rows(ROW(ins.*)::stamen_tasks, 1) r GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4`,
				lo, hi-1, start, span/float64(n))
		})
	}
	parallel(3, jobs)
	jobs = jobs[:0]
	for _, ix := range indexes {
		jobs = append(jobs, func(c *pgx.Conn) error { return step(c, "rebuild "+ix.name, ix.def) })
	}
	parallel(3, jobs)
	must(step(conn, "enable the triggers", `ALTER TABLE stamen_tasks ENABLE TRIGGER USER`))
	began := time.Now()
	folded, err := s.CompactStats(ctx, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("fold %d deltas: %s", folded, time.Since(began).Round(time.Millisecond))
	jobs = jobs[:0]
	for _, t := range []string{"stamen_tasks", "stamen_task_stats", "stamen_task_stats_hour", "stamen_task_stats_total",
		"stamen_task_stats_total_hour", "stamen_task_stats_delta"} {
		jobs = append(jobs, func(c *pgx.Conn) error { return step(c, "vacuum analyze "+t, "VACUUM (ANALYZE) "+t) })
	}
	parallel(3, jobs)
}

// BenchmarkWriteWithStats measures what the activity's trigger adds to the
// writes of task records: batches of 1,000 tasks written as a replica
// writes them (received, then succeeded), with the trigger and with it
// disabled, on databases of their own. ns/op is per task (two writes).
//
// flock /tmp/stamen-it.lock go test -run '^$' -bench BenchmarkWriteWithStats -benchtime 20000x ./internal/store/pg/
func BenchmarkWriteWithStats(b *testing.B) {
	for _, trigger := range []bool{true, false} {
		name := "trigger"
		if !trigger {
			name = "no_trigger"
		}
		b.Run(name, func(b *testing.B) {
			url := newDB(b)
			s := openStore(b, url)
			if !trigger {
				conn, err := pgx.Connect(context.Background(), url)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Exec(context.Background(), "ALTER TABLE stamen_tasks DISABLE TRIGGER USER"); err != nil {
					b.Fatal(err)
				}
				conn.Close(context.Background())
			}
			st := state.New(state.Config{MaxTasks: 2000, TrackChanges: true, DrainEvicted: true})
			base := float64(time.Now().Unix())
			i := 0
			for b.Loop() {
				id := fmt.Sprintf("w-%08d", i)
				at := base + float64(i)/1000
				st.Apply(taskEv(b, "received", id, "w@h", at, map[string]any{"name": "bench.add"}))
				if i%1000 == 999 {
					drainTo(b, st, s)
					for j := i - 999; j <= i; j++ {
						st.Apply(taskEv(b, "succeeded", fmt.Sprintf("w-%08d", j), "w@h", at+0.5, map[string]any{"runtime": 0.01}))
					}
					drainTo(b, st, s)
				}
				i++
			}
		})
	}
}
