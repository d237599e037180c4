package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// BenchmarkListKwargsPair measures a page of GET /api/tasks searched by
// kwargs:key=value from PostgreSQL at a million tasks, each with kwargs
// {'user_id': i % 100000, 'region': 'eu-<i % 7>'}, loaded by SQL:
//   - a selective pair, whose value's word narrows the rows through the
//     trigram index (10 matches, plus the tasks whose user_id or id holds
//     the digits);
//   - a common pair (a seventh of the tasks), found early in the order;
//   - a pair that matches nothing while its words are in every task: the
//     worst case, every row read and checked, which the read timeout
//     bounds (it is lifted here to measure it).
//
// flock /tmp/stamen-it.lock go test -run '^$' -bench BenchmarkListKwargsPair -benchtime 5x ./internal/store/pg/
func BenchmarkListKwargsPair(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	s := loadTasks(b, time.Minute, `INSERT INTO stamen_tasks (id, state, name, received, started, succeeded, args, kwargs, worker, result, ts, runtime, clock)
		SELECT lpad(to_hex(i), 8, '0') || '-0000-4000-8000-' || lpad(to_hex(i), 12, '0'), 'SUCCESS', 'proj.add',
			1e9 + i, 1e9 + i, 1e9 + i, '()', format('{''user_id'': %s, ''region'': ''eu-%s''}', i % 100000, i % 7),
			'w@h', '3', 1e9 + i, 0.001, i
		FROM generate_series(0, $1::bigint - 1) AS i`, n)
	for _, c := range []struct {
		search string
		want   int
	}{
		{"kwargs:user_id=42424", 10},
		{"kwargs:region=eu-3", 100},
		{"kwargs:region=eu", 0},
	} {
		b.Run(c.search, func(b *testing.B) {
			for b.Loop() {
				cur, err := s.List(ctx, state.Query{Limit: 100, Search: c.search})
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for cur.Next(256, func(*taskrec.Task) { got++ }) {
				}
				if err := cur.Err(); err != nil {
					b.Fatal(err)
				}
				if got != c.want {
					b.Fatalf("%d tasks, want %d", got, c.want)
				}
			}
		})
	}
}

// loadTasks opens a store on a new database with readTimeout, fills it
// with insert (SQL with one argument, n), and analyzes the table.
func loadTasks(tb testing.TB, readTimeout time.Duration, insert string, n int) *pg.Store {
	tb.Helper()
	url := newDB(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := pg.Open(ctx, pg.Config{URL: url, ReadTimeout: readTimeout})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, insert, n); err != nil {
		tb.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) stamen_tasks"); err != nil {
		tb.Fatal(err)
	}
	return s
}
