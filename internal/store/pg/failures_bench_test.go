package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/state"
)

// BenchmarkFailures measures GET /api/failures's grouping from PostgreSQL
// at a million tasks, a tenth of them failed in 3 groups (the fleet
// bench's bulk load, bench/loadgen/pg.go, at a tenth of its size), plus a
// group of 3 failures at the start of the history: the whole history, one
// task name, and a received window of a tenth of the history (the narrow
// path, read through the received index). The figures at ten million
// tasks are in bench/RESULTS.md; loading those took fifteen minutes.
//
// flock /tmp/stamen-it.lock go test -run '^$' -bench BenchmarkFailures -benchtime 5x ./internal/store/pg/
func BenchmarkFailures(b *testing.B) {
	const n = 1_000_000
	const start, step = 1e9, 0.006
	s := loadTasks(b, time.Minute, `INSERT INTO stamen_tasks (id, state, name, received, started, succeeded, failed,
			args, kwargs, retries, worker, result, exception, traceback, ts, runtime, clock)
		SELECT md5(i::text), CASE WHEN f THEN 'FAILURE' ELSE 'SUCCESS' END,
			(ARRAY['bench.add', 'bench.mul', 'bench.div'])[i % 3 + 1],
			at, at, CASE WHEN f THEN NULL ELSE at END, CASE WHEN f THEN at END,
			'(1, 2)', '{}', 0,
			(ARRAY['bench@w0', 'bench@w1', 'bench@w2', 'bench@w3'])[i % 4 + 1],
			CASE WHEN f THEN NULL ELSE '3' END,
			CASE WHEN f THEN 'ValueError(''boom'')' END,
			CASE WHEN f THEN E'Traceback (most recent call last):\nValueError: boom\n' END,
			at, CASE WHEN f THEN NULL ELSE 0.001 END, i
		FROM (SELECT i, 1e9::float8 + i * 0.006::float8 AS at, (i / 12) % 10 = 0 AS f
			FROM generate_series(0, $1::bigint - 1) AS i) AS g
		UNION ALL
		SELECT 'rare-' || k, 'FAILURE', 'bench.add', 1e9 - 100 + k, 1e9 - 100 + k, NULL, 1e9 - 100 + k,
			'(1, 2)', '{}', 0, 'bench@w0', NULL, 'RareError(''old'')', 'Traceback', 1e9 - 100 + k, NULL, 0
		FROM generate_series(1, 3) AS k`, n)
	at := func(sec float64) *time.Time { x := time.UnixMicro(int64(sec * 1e6)); return &x }
	span := n * step
	for _, c := range []struct {
		name   string
		q      state.Query
		groups int
	}{
		{"all", state.Query{State: "FAILURE"}, 4},
		{"taskname", state.Query{State: "FAILURE", TaskName: "bench.mul"}, 1},
		{"window", state.Query{State: "FAILURE", ReceivedStart: at(start + span/2), ReceivedEnd: at(start + span*0.6)}, 3},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				gs, err := s.Failures(context.Background(), c.q)
				if err != nil {
					b.Fatal(err)
				}
				if len(gs) != c.groups {
					b.Fatalf("%d groups, want %d", len(gs), c.groups)
				}
			}
		})
	}
}
