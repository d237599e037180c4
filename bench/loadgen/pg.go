package main

// The PostgreSQL scale run (-pg): a fleet of stamen replicas on one
// database, stamen_bench, created and dropped by the run.
//
//  1. Bulk load: a replica starts and migrates the schema, and is stopped;
//     the table is filled with SQL (generate_series) to -pg-tasks rows less
//     those ingested next: the same tasks the driver would have published
//     (names, workers, states, timestamps), instead of ingesting ten
//     million tasks' events. The table's secondary indexes are dropped
//     first and recreated from their own definitions afterwards (faster
//     than maintaining them row by row), so the schema read is stamen's.
//  2. Ingestion into the loaded table: one replica, then two, ingest
//     -pg-ingest tasks' events each from Redis pub/sub; the rate is the
//     tasks' rows landing in Postgres in their final state, per second
//     (both replicas write every task).
//  3. Reads: vegeta measures /api/tasks?limit=100 per filter and
//     /api/task/info on the same replicas, and each one's VmRSS is read
//     once the reads are done.
//
// The measured phases (2 and 3) hold -lock (flock), the lock the
// integration tests take, so that neither disturbs the other's timings; the
// bulk load does not, as it measures nothing and would hold it for many
// minutes.

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
)

// benchDB is the database the run creates and drops (-pg-db changes it,
// for a trial run beside a real one).
var benchDB = "stamen_bench"

type pgConfig struct {
	admin  string // URL of a database to create stamen_bench from
	tasks  int    // rows in stamen_tasks for the reads
	ingest int    // tasks published per ingestion phase
	chunk  int    // rows per INSERT of the bulk load
	// maxTasks is the replicas' --max_tasks, which bounds the records a
	// replica holds unwritten; the driver keeps half of it in flight.
	maxTasks int
	// rate, when not 0, paces the publishing at that many tasks a
	// second, as a cluster's workers send them, instead of as fast as
	// the bounds allow.
	rate  float64
	lock  string
	keep  bool
	reuse bool
}

// flock takes an exclusive lock on path (waiting for it) and returns its
// release; "" takes none.
func flock(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	progress("waiting for the lock %s", path)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// dbURL is admin with its database replaced by name.
func dbURL(admin, name string) (string, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", fmt.Errorf("-pg: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func pgExec(ctx context.Context, dsn string, sqls ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%.80s: %w", s, err)
		}
	}
	return nil
}

func runPG(ctx context.Context, c config, pc pgConfig) (err error) {
	tolerateFailures = true
	if pc.ingest <= 0 || 2*pc.ingest > pc.tasks {
		return errors.New("need 0 < 2 × -pg-ingest <= -pg-tasks")
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: c.redis, DB: c.db})
	defer rdb.Close()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("flush Redis db %d: %w", c.db, err)
	}
	defer rdb.FlushDB(context.WithoutCancel(ctx))
	dsn, err := dbURL(pc.admin, benchDB)
	if err != nil {
		return err
	}
	drop := "DROP DATABASE IF EXISTS " + benchDB + " WITH (FORCE)"
	if !pc.reuse {
		if err := pgExec(ctx, pc.admin, drop, "CREATE DATABASE "+benchDB); err != nil {
			return fmt.Errorf("create %s: %w", benchDB, err)
		}
	}
	if !pc.keep {
		defer func() {
			if derr := pgExec(context.WithoutCancel(ctx), pc.admin, drop); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	dir, err := os.MkdirTemp("", "stamen-loadgen-pg-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var logs []string
	defer func() {
		if err != nil {
			for _, l := range logs {
				if b, rerr := os.ReadFile(l); rerr == nil {
					fmt.Fprintf(os.Stderr, "%s:\n%s", l, lastLines(b, 40))
				}
			}
		}
	}()
	replica := func(name string) (*stamen, error) {
		l := filepath.Join(dir, name+".log")
		logs = append(logs, l)
		s, _, err := startArgs(ctx, c.stamen, l, 60*time.Second,
			"--db", dsn, "--broker", fmt.Sprintf("redis://%s/%d", c.redis, c.db), "--max_tasks", strconv.Itoa(pc.maxTasks))
		return s, err
	}
	epoch := time.Now().Add(-span)
	step := float64(span) / float64(time.Second) / float64(pc.tasks)
	start := float64(epoch.UnixMicro()) / 1e6
	if pc.reuse {
		if start, err = reuseLoad(ctx, conn, 2*pc.ingest, step); err != nil {
			return err
		}
		epoch = time.UnixMicro(int64(start * 1e6))
	}
	fmt.Printf("# stamen %s, database %s, redis %s/%d, %d tasks in Postgres, %d tasks per ingestion phase, attacks of %s with %d clients\n",
		c.stamen, benchDB, c.redis, c.db, pc.tasks, pc.ingest, c.duration, c.clients)

	// 1. The schema, migrated by stamen itself; then the bulk load.
	if !pc.reuse {
		m, err := replica("migrate")
		if err != nil {
			return err
		}
		m.kill()
		loaded := time.Now()
		if err := bulkLoad(ctx, conn, 2*pc.ingest, pc.tasks, pc.chunk, start, step); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, `CREATE TABLE stamen_bench_start AS SELECT $1::float8 AS start`, start); err != nil {
			return err
		}
		figure("pg_load_s", time.Since(loaded).Seconds())
	}

	// 2. Ingestion on the loaded table, one replica then two.
	unlock, err := flock(pc.lock)
	if err != nil {
		return err
	}
	defer unlock()
	r1, err := replica("replica1")
	if err != nil {
		return err
	}
	defer r1.kill()
	channel := fmt.Sprintf("/%d.celeryev/task.multi", c.db)
	var r2 *stamen
	for n, from := 1, 0; n <= 2; n, from = n+1, from+pc.ingest {
		fleet := []*stamen{r1}
		if n == 2 {
			if r2, err = replica("replica2"); err != nil {
				return err
			}
			defer r2.kill()
			fleet = append(fleet, r2)
		}
		if err := waitSubscribers(ctx, rdb, c.db, n); err != nil {
			return err
		}
		progress("ingestion with %d replica(s): %d tasks", n, pc.ingest)
		payloads := make([][]byte, pc.ingest)
		for i := range payloads {
			payloads[i] = envelope(from+i, start, step)
		}
		w0, err := writes(ctx, conn)
		if err != nil {
			return err
		}
		cpu0 := phaseCPU(fleet)
		ph, err := feedPG(ctx, rdb, channel, fleet, conn, payloads, from, pc.maxTasks/2, pc.rate, start, step)
		if err != nil {
			return err
		}
		cpu1 := phaseCPU(fleet)
		took := ph.took
		figure(fmt.Sprintf("pg_ingest_rows_per_s_%d", n), float64(pc.ingest)/took.Seconds())
		figure(fmt.Sprintf("pg_ingest_steady_rows_per_s_%d", n), ph.steady())
		figure(fmt.Sprintf("pg_ingest_events_per_s_%d", n), 3*float64(pc.ingest)/took.Seconds())
		// Where the machine's cores went during the phase: each replica,
		// PostgreSQL's processes, and all of them (in cores).
		for i := range fleet {
			figure(fmt.Sprintf("pg_ingest_cpus_%d_replica%d", n, i+1), (cpu1.replicas[i]-cpu0.replicas[i])/took.Seconds())
			// The same per task, in µs: finer than the cores' tenths.
			figure(fmt.Sprintf("pg_ingest_cpu_us_per_task_%d_replica%d", n, i+1), (cpu1.replicas[i]-cpu0.replicas[i])*1e6/float64(pc.ingest))
		}
		figure(fmt.Sprintf("pg_ingest_cpus_%d_postgres", n), (cpu1.postgres-cpu0.postgres)/took.Seconds())
		figure(fmt.Sprintf("pg_ingest_cpus_%d_machine", n), (cpu1.machine-cpu0.machine)/took.Seconds())
		for i, r := range fleet {
			// The records each replica wrote, and of them those it wrote
			// for another that had not (the replicas share the writing).
			written, _ := r.metric("stamen_store_written_records_total")
			taken, _ := r.metric("stamen_store_taken_over_records_total")
			figure(fmt.Sprintf("pg_written_records_%d_replica%d", n, i+1), written)
			figure(fmt.Sprintf("pg_taken_over_records_%d_replica%d", n, i+1), taken)
		}
		w1, err := settledWrites(ctx, conn)
		if err != nil {
			return err
		}
		figure(fmt.Sprintf("pg_row_writes_per_task_%d", n), float64(w1.rows-w0.rows)/float64(pc.ingest))
		figure(fmt.Sprintf("pg_wal_bytes_per_task_%d", n), float64(w1.wal-w0.wal)/float64(pc.ingest))
		figure(fmt.Sprintf("pg_wal_fpi_per_task_%d", n), float64(w1.fpi-w0.fpi)/float64(pc.ingest))
	}
	for i, s := range []*stamen{r1, r2} {
		rss, _, err := s.memory(fmt.Sprintf("ingest_replica%d", i+1))
		if err != nil {
			return err
		}
		figure(fmt.Sprintf("pg_rss_mb_ingest_replica%d", i+1), rss)
	}
	var rows int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM stamen_tasks").Scan(&rows); err != nil {
		return err
	}
	fmt.Printf("pg_tasks %d\n", rows)
	var dbBytes, tableBytes, indexBytes int64
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database()), pg_table_size('stamen_tasks'), pg_indexes_size('stamen_tasks')`).Scan(&dbBytes, &tableBytes, &indexBytes); err != nil {
		return err
	}
	figure("pg_db_mb", float64(dbBytes)/1e6)
	figure("pg_table_mb", float64(tableBytes)/1e6)
	figure("pg_indexes_mb", float64(indexBytes)/1e6)
	figure("pg_bytes_per_task", float64(dbBytes)/float64(rows))
	figure("pg_table_bytes_per_task", float64(tableBytes)/float64(rows))
	figure("pg_index_bytes_per_task", float64(indexBytes)/float64(rows))
	if err := indexSizes(ctx, conn); err != nil {
		return err
	}

	// 3. Reads on the full table, from the same two replicas.
	for _, t := range pgTargets(epoch, int(rows)) {
		if err := attack(ctx, c, r1.base, target{"pg_" + t.label, t.path}, int(rows)); err != nil {
			return err
		}
	}
	if err := attack(ctx, c, r2.base, target{"pg_info_replica2", "/api/task/info/" + pgTaskID(int(rows)/3)}, int(rows)); err != nil {
		return err
	}
	for i, s := range []*stamen{r1, r2} {
		rss, hwm, err := s.memory(fmt.Sprintf("reads_replica%d", i+1))
		if err != nil {
			return err
		}
		figure(fmt.Sprintf("pg_rss_mb_replica%d", i+1), rss)
		figure(fmt.Sprintf("pg_hwm_mb_replica%d", i+1), hwm)
	}
	return nil
}

// pgTargets are the loadgen's reads, plus the sorts Postgres serves by
// index, an info of a task the bulk load wrote, and /api/failures.
func pgTargets(epoch time.Time, n int) []target {
	ts := targets(epoch, n, pgTaskID)
	ts = append(ts,
		target{"sort_name", "/api/tasks?limit=100&sort_by=name"},
		target{"sort_received", "/api/tasks?limit=100&sort_by=-received"},
		target{"deep_offset", "/api/tasks?limit=100&offset=10000&state=FAILURE"},
		target{"info_ingested", "/api/task/info/" + pgTaskID(7)},
		// stamen's own grouping of every failure (schema migration 4's
		// index), and of one task name's.
		target{"failures", "/api/failures"},
		target{"failures_taskname", "/api/failures?taskname=bench.mul"},
	)
	return ts
}

// pgTaskID is task i's id in the PostgreSQL run: shaped as the uuid4 Celery
// gives a task (random hex, version 4, variant 8-b), drawn from md5 of i so
// that the driver and the bulk load's SQL (pgTaskIDSQL) agree. Sequential
// ids would share most of their grams, which makes the index of them
// useless for an id fragment where real ids make it selective.
func pgTaskID(i int) string {
	sum := md5.Sum([]byte(strconv.Itoa(i)))
	h := hex.EncodeToString(sum[:])
	v := "89ab"[sum[8]>>4&3]
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-" + string(v) + h[17:20] + "-" + h[20:32]
}

// pgTaskIDSQL is pgTaskID in SQL, of the bigint i.
const pgTaskIDSQL = `(SELECT substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3) || '-' ||
		substr('89ab', (('x' || substr(h, 17, 1))::bit(4)::int & 3) + 1, 1) || substr(h, 18, 3) || '-' || substr(h, 21, 12)
	FROM md5(i::text) AS h)`

func failed(i int) bool { return (i/12)%10 == 0 }

// envelope is task i's received, started and succeeded (or failed) events,
// stamped as the bulk load stamps row i.
func envelope(i int, start, step float64) []byte {
	return taskEnvelope(pgTaskID(i), taskNames[i%len(taskNames)], workers[i%len(workers)], i, start+float64(i)*step, failed(i))
}

// waitSubscribers returns once n subscribers receive what is published
// on the event channels.
func waitSubscribers(ctx context.Context, rdb *goredis.Client, db, n int) error {
	for range 1500 {
		got, err := rdb.Publish(ctx, fmt.Sprintf("/%d.celeryev/probe", db), "{}").Result()
		if err != nil {
			return err
		}
		if got >= int64(n) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%d replicas did not subscribe to the events within 30 s", n)
}

// feedPG publishes payloads (tasks from.. of the bench) in pipelined
// batches and returns once every task's row is in Postgres in its final
// state, with how long that took from the first publish. It publishes
// while Redis holds less than window tasks' messages for every replica
// (see backlog) and at most maxLag tasks ahead of the rows landed (what
// the replicas hold unwritten: under their --max_tasks, which bounds it).
// Bounding the publishing by the rows landed alone, by window, measured
// the driver: with the flush interval of a second, the replicas could
// never write more than window tasks a flush, 2,100 tasks/s. Reading
// each replica's ingestion from its /metrics cost the replicas too: the
// driver waits on that bound most of a phase, so it read 35 KB of metrics
// from every replica every pollEvery, 200 times a second, on the cores
// the replicas share with the database.
func feedPG(ctx context.Context, rdb *goredis.Client, channel string, fleet []*stamen, conn *pgx.Conn, payloads [][]byte, from, maxLag int, rate, start, step float64) (phase, error) {
	size := 0
	for _, p := range payloads {
		size += len(p)
	}
	// A pmessage reply is the payload and its pattern, channel and framing.
	most := int64(window) * int64(size/max(1, len(payloads))+2*len(channel)+64)
	l := &landing{conn: conn, start: start, step: step, from: from, n: len(payloads)}
	var ph phase
	began := time.Now()
	counted := began
	moved, last := time.Now(), -1
	landed := func() (int, error) {
		rows, err := l.count(ctx)
		if err != nil {
			return 0, err
		}
		if rows > last {
			moved, last = time.Now(), rows
			ph.mark(rows, len(payloads), moved)
		}
		if time.Since(moved) > stall {
			lost := 0.0
			for _, s := range fleet {
				n, _ := s.metric("stamen_store_lost_records_total")
				lost += n
			}
			return 0, fmt.Errorf("rows in Postgres stalled at %d of %d (records lost by the replicas: %.0f)", rows, len(payloads), lost)
		}
		return rows, nil
	}
	held, rows := int64(0), 0
	for i := 0; i < len(payloads); {
		// Paced, the tasks due by now; else all of them.
		due := len(payloads)
		if rate > 0 {
			due = min(due, int(rate*time.Since(began).Seconds()))
		}
		var err error
		switch {
		case held > most:
			if held, err = backlog(ctx, rdb, len(fleet)); err == nil && held > most {
				time.Sleep(pollEvery)
			}
		case i-rows > maxLag:
			if rows, err = landed(); err == nil && i-rows > maxLag {
				time.Sleep(pollLanded)
			}
		case i >= due:
			time.Sleep(paceTick)
		default:
			j := min(i+batch, due)
			if err = publish(ctx, rdb, channel, payloads[i:j]); err == nil {
				held, err = backlog(ctx, rdb, len(fleet))
			}
			i = j
			// Counted while publishing too, for the steady rate's marks.
			if err == nil && time.Since(counted) >= pollLanded {
				counted = time.Now()
				rows, err = landed()
			}
		}
		if err != nil {
			return ph, err
		}
	}
	for {
		rows, err := landed()
		if err != nil {
			return ph, err
		}
		if rows >= len(payloads) {
			ph.took = time.Since(began)
			return ph, nil
		}
		time.Sleep(pollLanded)
	}
}

// phase is how an ingestion phase went: how long from its first publish
// to its last row landed, and when the rows landed first reached a fifth
// and four fifths of the phase. The rate between those two marks is the
// steady one: the whole phase's also holds the pipeline's latency at its
// end (the rows of the last flush interval, written after it), about two
// seconds whatever the phase's length, a fifth of a 100,000-task phase
// at 15,000 tasks/s. The rows land a flush at a time, so the marks fall
// on flushes: the steady rate is off by up to a flush interval over the
// marks' span, which wants phases of many flush intervals (400,000 tasks
// at 20,000 a second span 12 s).
type phase struct {
	took                 time.Duration
	fifth, fourFifths    time.Time
	atFifth, atFourFifth int
}

func (p *phase) mark(rows, n int, at time.Time) {
	if p.fifth.IsZero() && rows >= n/5 {
		p.fifth, p.atFifth = at, rows
	}
	if p.fourFifths.IsZero() && rows >= 4*n/5 {
		p.fourFifths, p.atFourFifth = at, rows
	}
}

// steady is the rows a second between the marks, 0 without both.
func (p phase) steady() float64 {
	d := p.fourFifths.Sub(p.fifth).Seconds()
	if p.fifth.IsZero() || p.fourFifths.IsZero() || d <= 0 {
		return 0
	}
	return float64(p.atFourFifth-p.atFifth) / d
}

// backlog is the most Redis holds unsent for one of the replicas'
// subscriptions: the output buffer of each pub/sub client stamen named
// (CLIENT LIST), beyond which Redis would drop the subscriber. It is read
// from Redis, not from the replicas, so that the driver takes none of
// their CPU. It fails unless there are n such clients.
func backlog(ctx context.Context, rdb *goredis.Client, n int) (int64, error) {
	list, err := rdb.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		return 0, fmt.Errorf("client list: %w", err)
	}
	var most int64
	seen := 0
	for line := range strings.Lines(list) {
		var name string
		var omem int64
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "name="); ok {
				name = v
			} else if v, ok := strings.CutPrefix(f, "omem="); ok {
				omem, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if name == "stamen" {
			seen++
			most = max(most, omem)
		}
	}
	if seen < n {
		return 0, fmt.Errorf("%d of the %d replicas subscribed to Redis (did Redis drop a subscriber?)", seen, n)
	}
	return most, nil
}

// writeCount is what the database has written: the rows of stamen_tasks
// inserted and updated (pg_stat_user_tables: this database's, as its
// backends report them, at the latest 10 s after a write), the WAL's
// position and the whole pages written to it (pg_stat_wal's full page
// images: the first change of a page after a checkpoint writes all of
// it). The WAL is the whole server's: the run holds the integration
// tests' lock, so that the bench's database is the one writing.
type writeCount struct{ rows, wal, fpi int64 }

func writes(ctx context.Context, conn *pgx.Conn) (writeCount, error) {
	var w writeCount
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT n_tup_ins + n_tup_upd FROM pg_stat_user_tables WHERE relname = 'stamen_tasks'), 0),
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, (SELECT wal_fpi FROM pg_stat_wal)`).Scan(&w.rows, &w.wal, &w.fpi)
	return w, err
}

// settledWrites is writes once the rows' count has stopped moving for 11 s
// (an idle backend reports its statistics within 10 s), at most 60 s
// after the call.
func settledWrites(ctx context.Context, conn *pgx.Conn) (writeCount, error) {
	w, err := writes(ctx, conn)
	for still, deadline := time.Now(), time.Now().Add(60*time.Second); err == nil && time.Since(still) < 11*time.Second && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		var next writeCount
		if next, err = writes(ctx, conn); err == nil {
			if next.rows != w.rows {
				still = time.Now()
			}
			w = next
		}
	}
	return w, err
}

// reuseLoad readies a database a run with -pg-keep left for another run
// (-pg-reuse, for trials: the bulk load takes minutes): it deletes the
// rows of the tasks ingested, 0..ingested-1, and returns the start its
// bulk load was stamped from.
func reuseLoad(ctx context.Context, conn *pgx.Conn, ingested int, step float64) (float64, error) {
	var start float64
	if err := conn.QueryRow(ctx, `SELECT start FROM stamen_bench_start`).Scan(&start); err != nil {
		return 0, fmt.Errorf("-pg-reuse: %s was not left by a run with -pg-keep: %w", benchDB, err)
	}
	lo, hi := start-0.5*step, start+(float64(ingested)-0.5)*step
	if _, err := conn.Exec(ctx, `DELETE FROM stamen_tasks WHERE coalesce(ts, 0) BETWEEN $1 AND $2`, lo, hi); err != nil {
		return 0, err
	}
	progress("reuse: the ingested tasks' rows deleted; vacuuming")
	_, err := conn.Exec(ctx, `VACUUM (ANALYZE) stamen_tasks`)
	return start, err
}

// pollLanded is how often feedPG counts the rows landed: each count reads
// the rows written since the last run of tasks known whole (landing), up
// to tens of thousands, and counted every pollEvery it took the database
// most of a core beside the writes it measures.
const pollLanded = 25 * time.Millisecond

// landing counts the rows of tasks from..from+n-1 in Postgres in their
// final state. The tasks are told apart from the bulk load's by their
// timestamps (the ids are random), through the default order's index;
// half a step either side absorbs a float's rounding. It remembers the
// longest run of tasks from the first that have all landed, a chunk at a
// time, and counts only the chunk after it: a count over every task of
// the phase took Postgres more time the further the phase went, and one
// over every task past the run, up to the lag allowed, still took a
// sixth of Postgres's CPU at 7,000 tasks/s (perf, 2026-11-28), beside
// the writes it measures. The chunk is small because the driver counts
// it every pollLanded while it waits: 2,000 rows took 5.7% of the
// machine at 8,600 tasks/s (perf, 2026-11-29). The rows landed past that
// chunk are counted once the run reaches them, so the count may lag the
// rows by about a flush; the run's end is exact.
type landing struct {
	conn        *pgx.Conn
	start, step float64
	from, n     int
	done        int
}

func (l *landing) between(ctx context.Context, a, b int) (int, error) {
	lo, hi := l.start+(float64(l.from+a)-0.5)*l.step, l.start+(float64(l.from+b)-0.5)*l.step
	var rows int
	err := l.conn.QueryRow(ctx, `SELECT count(*) FROM stamen_tasks WHERE coalesce(ts, 0) BETWEEN $1 AND $2 AND state IN ('SUCCESS', 'FAILURE')`, lo, hi).Scan(&rows)
	return rows, err
}

func (l *landing) count(ctx context.Context) (int, error) {
	const chunk = 250
	for l.done < l.n {
		k := min(chunk, l.n-l.done)
		c, err := l.between(ctx, l.done, l.done+k)
		if err != nil {
			return 0, err
		}
		if c < k {
			break
		}
		l.done += k
	}
	if l.done == l.n {
		return l.n, nil
	}
	c, err := l.between(ctx, l.done, min(l.done+chunk, l.n))
	return l.done + c, err
}

// bulkLoad fills stamen_tasks with tasks from..to-1 by SQL, as envelope
// would have described them, chunk rows per statement, with the secondary
// indexes dropped meanwhile and recreated from their definitions.
func bulkLoad(ctx context.Context, conn *pgx.Conn, from, to, chunk int, start, step float64) error {
	rows, err := conn.Query(ctx, `SELECT i.indexname, i.indexdef FROM pg_indexes i
		WHERE i.schemaname = current_schema() AND i.tablename = 'stamen_tasks'
		AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`)
	if err != nil {
		return err
	}
	var names, defs []string
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			return err
		}
		names, defs = append(names, n), append(defs, d)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	progress("bulk load: dropping %d secondary indexes", len(names))
	for _, n := range names {
		if _, err := conn.Exec(ctx, "DROP INDEX "+pgx.Identifier{n}.Sanitize()); err != nil {
			return err
		}
	}
	// The activity's triggers would add each row's deltas one by one;
	// the rows' activity is counted once they are in, by set, as the
	// migration that adds it counts the tasks already there (in key
	// order, so that a batch of the fold holds whole cells).
	if _, err := conn.Exec(ctx, `ALTER TABLE stamen_tasks DISABLE TRIGGER USER`); err != nil {
		return err
	}
	// Everything a task's three events set, as the state machine sets it.
	// The ids' grams as stamen writes them (stamen_id_grams computes what
	// its write path does), so that their index is at its full size.
	const insert = `INSERT INTO stamen_tasks (id, state, name, received, started, succeeded, failed,
		args, kwargs, retries, worker, result, exception, traceback, ts, runtime, clock, id_grams)
	SELECT id, state, name, received, started, succeeded, failed,
		args, kwargs, retries, worker, result, exception, traceback, ts, runtime, clock, stamen_id_grams(id)
	FROM (SELECT ` + pgTaskIDSQL + ` AS id,
		CASE WHEN f THEN 'FAILURE' ELSE 'SUCCESS' END,
		(ARRAY['bench.add', 'bench.mul', 'bench.div'])[i % 3 + 1],
		at, at, CASE WHEN f THEN NULL ELSE at END, CASE WHEN f THEN at END,
		'(1, 2)', '{}', 0,
		(ARRAY['bench@w0', 'bench@w1', 'bench@w2', 'bench@w3'])[i % 4 + 1],
		CASE WHEN f THEN NULL ELSE '3' END,
		CASE WHEN f THEN 'ValueError(''boom'')' END,
		CASE WHEN f THEN E'Traceback (most recent call last):\nValueError: boom\n' END,
		at, CASE WHEN f THEN NULL ELSE 0.001 END, i
	FROM (SELECT i, $3::float8 + i * $4::float8 AS at, (i / 12) % 10 = 0 AS f
		FROM generate_series($1::bigint, $2::bigint) AS i) AS g)
		AS r(id, state, name, received, started, succeeded, failed, args, kwargs, retries, worker, result,
			exception, traceback, ts, runtime, clock)`
	for lo := from; lo < to; lo += chunk {
		hi := min(lo+chunk, to) - 1
		began := time.Now()
		if _, err := conn.Exec(ctx, insert, lo, hi, start, step); err != nil {
			return fmt.Errorf("bulk insert %d..%d: %w", lo, hi, err)
		}
		progress("bulk load: rows %d..%d in %s", lo, hi, time.Since(began).Round(time.Millisecond))
	}
	if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '512MB'"); err != nil {
		return err
	}
	for i, d := range defs {
		began := time.Now()
		if _, err := conn.Exec(ctx, d); err != nil {
			return fmt.Errorf("recreate %s: %w", names[i], err)
		}
		progress("bulk load: %s rebuilt in %s", names[i], time.Since(began).Round(time.Millisecond))
	}
	began := time.Now()
	if _, err := conn.Exec(ctx, `ALTER TABLE stamen_tasks ENABLE TRIGGER USER`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `INSERT INTO stamen_task_stats_delta
		SELECT r.minute, r.name, r.worker, r.queue, r.kind, r.bin, sum(r.n)
		FROM stamen_tasks t, stamen_task_stats_rows(t, 1) r GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4`); err != nil {
		return fmt.Errorf("count the activity: %w", err)
	}
	progress("bulk load: activity counted in %s", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) stamen_tasks"); err != nil {
		return err
	}
	progress("bulk load: vacuum analyze in %s", time.Since(began).Round(time.Millisecond))
	return nil
}

// indexSizes prints each index of stamen_tasks's size.
func indexSizes(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index
		WHERE indrelid = 'stamen_tasks'::regclass ORDER BY 2 DESC`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		var b int64
		if err := rows.Scan(&n, &b); err != nil {
			return err
		}
		fmt.Printf("pg_index_mb %s %.1f\n", n, float64(b)/1e6)
	}
	return rows.Err()
}

// startArgs runs the binary with args on a free loopback port and returns
// once /healthcheck answers 200.
func startArgs(ctx context.Context, bin, logPath string, timeout time.Duration, args ...string) (*stamen, time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(bin, append(args, "--port", strconv.Itoa(port))...)
	return launch(ctx, cmd, logf, port, timeout)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// cpuReading is CPU time used so far, in seconds: by each replica, by
// PostgreSQL's processes, and by the whole machine (every core's busy
// time).
type cpuReading struct {
	replicas          []float64
	postgres, machine float64
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100
// on Linux's supported architectures.
const clockTicks = 100

// phaseCPU reads the CPU time of the fleet, of PostgreSQL and of the
// machine; what it cannot read counts 0.
func phaseCPU(fleet []*stamen) cpuReading {
	var r cpuReading
	for _, s := range fleet {
		r.replicas = append(r.replicas, procCPU(s.cmd.Process.Pid))
	}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) == "postgres" {
				r.postgres += procCPU(pid)
			}
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		// cpu user nice system idle iowait irq softirq steal: busy is all
		// but idle and iowait.
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		for i, v := range f[1:] {
			if i == 3 || i == 4 || i >= 8 {
				continue
			}
			n, _ := strconv.ParseFloat(v, 64)
			r.machine += n / clockTicks
		}
	}
	return r
}

// procCPU is the user and system CPU time of process pid so far, in
// seconds (0 if it cannot be read).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 12th and 13th of them.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clockTicks
}
