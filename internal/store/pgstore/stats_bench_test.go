package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/state"

	"github.com/stamen-dev/stamen/internal/store/pgstore"
	"github.com/stamen-dev/stamen/internal/taskstats"
)

// BenchmarkTaskStats measures GET /api/stats/tasks's read from PostgreSQL
// over the last 24 hours, by minute and by hour, with and without a task
// name filter, on the fleet bench's shape (bench/loadgen/pg.go: 3 names,
// 4 workers, a tenth failed, received times spread over 1,000 minutes),
// STAMEN_BENCH_STATS_TASKS tasks (default 1,000,000) inserted by SQL
// through the activity's trigger, their deltas then folded. The read sums
// the window's minutes of the folded activity, a row per minute, key,
// kind and runtime bin, so its cost follows the minutes and keys, not the
// tasks: ten million tasks of the same shape fold into the same rows.
// It reports the p99 of the iterations and the load's rate.
//
// flock /tmp/stamen-it.lock go test -run '^$' -bench BenchmarkTaskStats -benchtime 200x ./internal/store/pgstore/
func BenchmarkTaskStats(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("STAMEN_BENCH_STATS_TASKS")); err == nil && v > 0 {
		n = v
	}
	now := time.Now()
	span := 1000 * 60.0
	start := float64(now.Unix()) - span
	began := time.Now()
	url := newDB(b)
	s := loadTasksAt(b, url, `INSERT INTO stamen_tasks (id, state, name, received, started, succeeded, failed,
			retries, worker, ts, runtime, routing_key, clock)
		SELECT md5(i::text), CASE WHEN f THEN 'FAILURE' ELSE 'SUCCESS' END,
			(ARRAY['bench.add', 'bench.mul', 'bench.div'])[i % 3 + 1],
			at, at + 0.001, CASE WHEN f THEN NULL ELSE at + 0.002 + rt END, CASE WHEN f THEN at + 0.002 END, 0,
			(ARRAY['bench@w0', 'bench@w1', 'bench@w2', 'bench@w3'])[i % 4 + 1],
			at + 0.002 + rt, CASE WHEN f THEN NULL ELSE rt END, 'celery', i
		FROM (SELECT i, `+strconv.FormatFloat(start, 'f', 3, 64)+` + i * `+strconv.FormatFloat(span, 'f', 3, 64)+` / $1::float8 AS at,
			(i / 12) % 10 = 0 AS f, 0.001 * (1 + i % 500) AS rt
			FROM generate_series(0, $1::bigint - 1) AS i) AS g`, n)
	ctx := context.Background()
	folded, err := s.CompactStats(ctx, now)
	if err != nil {
		b.Fatal(err)
	}
	load := time.Since(began)
	conn, err := pgx.Connect(ctx, url)
	if err == nil {
		_, _ = conn.Exec(ctx, "VACUUM (ANALYZE) stamen_task_stats")
		var rows int64
		_ = conn.QueryRow(ctx, "SELECT count(*) FROM stamen_task_stats").Scan(&rows)
		b.Logf("%d tasks loaded and folded in %s (%d deltas folded into %d rows)", n, load.Round(time.Millisecond), folded, rows)
		conn.Close(ctx)
	}
	for _, c := range []struct {
		name         string
		window, step time.Duration
		taskname     string
	}{
		{"24h_by_minute", 24 * time.Hour, time.Minute, ""},
		{"24h_by_minute_taskname", 24 * time.Hour, time.Minute, "bench.mul"},
		{"24h_by_hour", 24 * time.Hour, time.Hour, ""},
		{"7d_by_hour", 7 * 24 * time.Hour, time.Hour, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			q, err := taskstats.NewQuery(time.Now(), c.window, c.step)
			if err != nil {
				b.Fatal(err)
			}
			q.TaskName = c.taskname
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				res, err := s.TaskStats(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
				var got int64
				for _, bk := range res.Buckets {
					got += bk.Counts[taskstats.Received]
				}
				if want := int64(n); c.taskname == "" && got != want {
					b.Fatalf("%d received, want %d", got, want)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// loadTasksAt is loadTasks on the database at url.
func loadTasksAt(b *testing.B, url, insert string, n int) *pgstore.Store {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, pgstore.Config{URL: url, ReadTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, insert, n); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkWriteWithStats measures what the activity's trigger adds to the
// writes of task records: batches of 1,000 tasks written as a replica
// writes them (received, then succeeded), with the trigger and with it
// disabled, on databases of their own. ns/op is per task (two writes).
//
// flock /tmp/stamen-it.lock go test -run '^$' -bench BenchmarkWriteWithStats -benchtime 20000x ./internal/store/pgstore/
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
