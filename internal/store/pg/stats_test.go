package pg_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/taskstats"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestTaskStatsOnceAcrossReplicas: two replicas write the same tasks'
// records, one in stages and one at once, with the deltas folded half
// way; the fleet's activity counts each task once per state, and equals
// what the in-memory aggregate counts from the same events (no task here
// enters a state twice), percentiles included, for every filter.
func TestTaskStatsOnceAcrossReplicas(t *testing.T) {
	testcluster.RequirePostgres(t)
	s := openStore(t, newDB(t))
	ctx := context.Background()
	now := time.Now()
	base := float64(now.Add(-10*time.Minute).Unix()/60*60) + 0.5
	agg := taskstats.New(taskstats.Config{})
	var first, second []celery.Event
	for i := range 40 {
		id := fmt.Sprintf("stats-%02d", i)
		name, worker, queue := fmt.Sprintf("proj.t%d", i%3), fmt.Sprintf("w%d@h", i%2), "celery"
		if i%5 == 0 {
			queue = "Other"
		}
		at := base + float64(i*13) // over 9 minutes
		runtime := 0.01 * float64(1+i)
		evs := []celery.Event{
			taskEv(t, "sent", id, "client@h", at, map[string]any{"name": name, "queue": queue, "routing_key": queue, "exchange": ""}),
			taskEv(t, "received", id, worker, at+1, map[string]any{"name": name}),
			taskEv(t, "started", id, worker, at+2, nil),
		}
		end := taskEv(t, "succeeded", id, worker, at+3+runtime, map[string]any{"runtime": runtime})
		kinds := []int{taskstats.Received, taskstats.Started, taskstats.Succeeded}
		if i%4 == 0 {
			end = taskEv(t, "failed", id, worker, at+3, map[string]any{"exception": "ValueError()"})
			kinds[2] = taskstats.Failed
		}
		evs = append(evs, end)
		for j, k := range kinds {
			e := evs[j+1]
			agg.Add(taskstats.Event{Kind: k, Time: e.Timestamp, Name: name, Worker: worker, Queue: queue,
				Runtime: runtime, HasRuntime: k == taskstats.Succeeded})
		}
		first = append(first, evs[:2]...)
		second = append(second, evs[2:]...)
	}
	a := state.New(state.Config{MaxTasks: 100, TrackChanges: true, DrainEvicted: true})
	b := state.New(state.Config{MaxTasks: 100, TrackChanges: true, DrainEvicted: true})
	a.Apply(first...)
	drainTo(t, a, s)
	if _, err := s.CompactStats(ctx, now); err != nil {
		t.Fatal(err)
	}
	a.Apply(second...)
	drainTo(t, a, s)
	b.Apply(first...)
	b.Apply(second...)
	drainTo(t, b, s)
	drainTo(t, a, s) // nothing new: no write at all

	for _, compacted := range []bool{false, true} {
		if compacted {
			if n, err := s.CompactStats(ctx, now); err != nil || n == 0 {
				t.Fatalf("compaction: %d folded, %v", n, err)
			}
		}
		for _, f := range []struct{ name, worker, queue string }{
			{}, {name: "PROJ.T1"}, {worker: "w0@h"}, {queue: "other"}, {name: "proj.t2", worker: "w1@h"}, {name: "nothing"},
		} {
			// By minute (the minute levels), by hour and by day (the
			// hour levels).
			for _, w := range []struct{ window, step time.Duration }{
				{15 * time.Minute, time.Minute}, {24 * time.Hour, time.Hour}, {7 * 24 * time.Hour, 24 * time.Hour},
			} {
				q, err := taskstats.NewQuery(now, w.window, w.step)
				if err != nil {
					t.Fatal(err)
				}
				q.TaskName, q.Worker, q.Queue = f.name, f.worker, f.queue
				got, err := s.TaskStats(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				want := agg.Stats(q)
				want.KeptSince, want.Folded = nil, 0
				if !reflect.DeepEqual(counts(got), counts(want)) || !reflect.DeepEqual(pcts(got), pcts(want)) {
					t.Errorf("compacted %v, filter %+v, step %s:\n got %v %v\nwant %v %v", compacted, f, w.step, counts(got), pcts(got), counts(want), pcts(want))
				}
			}
		}
	}
}

func counts(r taskstats.Result) [][taskstats.NumKinds]int64 {
	out := make([][taskstats.NumKinds]int64, len(r.Buckets))
	for i, b := range r.Buckets {
		out[i] = b.Counts
	}
	return out
}

func pcts(r taskstats.Result) []float64 {
	var out []float64
	for _, b := range r.Buckets {
		if b.P50 == nil {
			out = append(out, -1)
			continue
		}
		out = append(out, math.Round(*b.P50*1e9), math.Round(*b.P95*1e9))
	}
	return out
}

// TestTaskStatsMigrationCountsExistingTasks: a database written by a
// stamen without the activity (schema 5) has its tasks of the last 7 days
// counted by the migration that adds it, and older ones left out.
func TestTaskStatsMigrationCountsExistingTasks(t *testing.T) {
	testcluster.RequirePostgres(t)
	ctx := context.Background()
	url := newDB(t)
	old, err := pg.OpenAtVersion(ctx, pg.Config{URL: url}, 5)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	st := state.New(state.Config{MaxTasks: 100, TrackChanges: true})
	recent := float64(now.Add(-5*time.Minute).Unix()) + 1
	ancient := float64(now.Add(-8 * 24 * time.Hour).Unix())
	for i, at := range []float64{recent, recent + 1, ancient} {
		id := fmt.Sprintf("old-%d", i)
		st.Apply(taskEv(t, "received", id, "w@h", at, map[string]any{"name": "proj.old"}),
			taskEv(t, "succeeded", id, "w@h", at+0.5, map[string]any{"runtime": 0.5}))
	}
	drainTo(t, st, old)
	_ = old.Close()
	s := openStore(t, url)
	// The last 7 days in one-day buckets: the recent tasks in the last.
	q, err := taskstats.NewQuery(now, 7*24*time.Hour, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := totalCounts(t, s, q)
	if c[taskstats.Received] != 2 || c[taskstats.Succeeded] != 2 {
		t.Fatalf("after the migration: %v", c)
	}
}

// TestTaskStatsRollupMigration: the minute cells a schema 6 database had
// folded (some negative, some large, every histogram bin) are counted
// once in every level after the migration that adds the rollups, read by
// minute, by hour, with and without a filter.
func TestTaskStatsRollupMigration(t *testing.T) {
	testcluster.RequirePostgres(t)
	ctx := context.Background()
	url := newDB(t)
	old, err := pg.OpenAtVersion(ctx, pg.Config{URL: url}, 6)
	if err != nil {
		t.Fatal(err)
	}
	_ = old.Close()
	now := time.Now()
	base := now.Add(-3*time.Hour).Unix() / 60
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	type key struct{ name, worker, queue string }
	want := map[key]*taskstats.Cell{}
	for i := range 150 {
		k := key{fmt.Sprintf("proj.T%d", i%3), fmt.Sprintf("w%d@h", i%2), "celery"}
		var c taskstats.Cell
		c.N = [taskstats.NumKinds]int64{int64(i), int64(i % 7), 1 << 30, -int64(i % 3), 0, 5}
		for b := range taskstats.Bins {
			if (b+i)%5 == 0 {
				c.Hist[b] = int64(b*1000 + i)
			}
		}
		c.Hist[taskstats.Bins-1] = 3
		// Minutes 0..149 after base, one cell each.
		if _, err := conn.Exec(ctx, `INSERT INTO stamen_task_stats (minute, name, worker, queue, data) VALUES ($1, $2, $3, $4, $5)`,
			base+int64(i), k.name, k.worker, k.queue, taskstats.AppendCell(nil, &c)); err != nil {
			t.Fatal(err)
		}
		if want[k] == nil {
			want[k] = &taskstats.Cell{}
		}
		want[k].Add(&c)
	}
	s := openStore(t, url)
	if _, err := s.CompactStats(ctx, now); err != nil {
		t.Fatal(err)
	}
	var all taskstats.Cell
	for _, c := range want {
		all.Add(c)
	}
	for _, step := range []time.Duration{time.Minute, time.Hour} {
		for _, f := range []struct {
			name, worker string
			want         *taskstats.Cell
		}{{"", "", &all}, {"PROJ.t1", "w1@h", want[key{"proj.T1", "w1@h", "celery"}]}} {
			q, err := taskstats.NewQuery(now, 6*time.Hour, step)
			if err != nil {
				t.Fatal(err)
			}
			q.TaskName, q.Worker = f.name, f.worker
			got := totalCounts(t, s, q)
			if got != f.want.N {
				t.Errorf("step %s, taskname %q: %v, want %v", step, f.name, got, f.want.N)
			}
		}
	}
	// The histograms too: the whole window as one bucket, by hour.
	var n int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM stamen_task_stats_delta`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d deltas left unfolded, %v", n, err)
	}
	var data []byte
	var sum taskstats.Cell
	rows, err := conn.Query(ctx, `SELECT data FROM stamen_task_stats_total_hour`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&data}, func() error { return sum.AddEncoded(data) }); err != nil {
		t.Fatal(err)
	}
	if sum != all {
		t.Errorf("the hour totals' sum differs from the cells':\n got %v\nwant %v", sum, all)
	}
}

// TestTaskStatsDeltasOnceAStatement: tasks written by a stamen of schema
// 7 (a delta insert a row) are completed after the migration to
// statement triggers; each task counts once per state, and the write of
// many tasks of one minute and key appends one delta row per kind (and
// runtime bin), summed, not one per task.
func TestTaskStatsDeltasOnceAStatement(t *testing.T) {
	testcluster.RequirePostgres(t)
	ctx := context.Background()
	url := newDB(t)
	old, err := pg.OpenAtVersion(ctx, pg.Config{URL: url}, 7)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	at := float64(now.Add(-5*time.Minute).Unix()/60*60) + 1
	const n = 50
	st := state.New(state.Config{MaxTasks: 2 * n, TrackChanges: true})
	for i := range n {
		st.Apply(taskEv(t, "received", fmt.Sprintf("m8-%02d", i), "w@h", at, map[string]any{"name": "proj.m8"}))
	}
	drainTo(t, st, old) // received, through the row trigger
	_ = old.Close()
	s := openStore(t, url)
	if _, err := s.CompactStats(ctx, now); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("m8-%02d", i)
		st.Apply(taskEv(t, "started", id, "w@h", at+1, nil),
			taskEv(t, "succeeded", id, "w@h", at+2, map[string]any{"runtime": 0.5}))
	}
	drainTo(t, st, s) // started and succeeded, through the statement trigger
	// A second replica writing the same records changes nothing.
	again := state.New(state.Config{MaxTasks: 2 * n, TrackChanges: true})
	for i := range n {
		id := fmt.Sprintf("m8-%02d", i)
		again.Apply(taskEv(t, "received", id, "w@h", at, map[string]any{"name": "proj.m8"}),
			taskEv(t, "started", id, "w@h", at+1, nil),
			taskEv(t, "succeeded", id, "w@h", at+2, map[string]any{"runtime": 0.5}))
	}
	drainTo(t, again, s)

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, sum int64
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(n), 0) FROM stamen_task_stats_delta`).Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	// Received moved nowhere (-1 and +1 cancel); started, succeeded and
	// the success's runtime bin: one row each, n each.
	if rows != 3 || sum != 3*n {
		t.Errorf("deltas after the completion: %d rows summing to %d, want 3 rows summing to %d", rows, sum, 3*n)
	}
	q, err := taskstats.NewQuery(now, 15*time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, compact := range []bool{false, true} {
		if compact {
			if _, err := s.CompactStats(ctx, now); err != nil {
				t.Fatal(err)
			}
		}
		c := totalCounts(t, s, q)
		if c[taskstats.Received] != n || c[taskstats.Started] != n || c[taskstats.Succeeded] != n || c[taskstats.Failed] != 0 {
			t.Errorf("compacted %v: counts %v, want %d received, started and succeeded", compact, c, n)
		}
	}
}

// totalCounts is the sum of q's buckets' counts, by kind.
func totalCounts(t *testing.T, s *pg.Store, q taskstats.Query) [taskstats.NumKinds]int64 {
	t.Helper()
	res, err := s.TaskStats(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var c [taskstats.NumKinds]int64
	for _, b := range res.Buckets {
		for k, n := range b.Counts {
			c[k] += n
		}
	}
	return c
}
