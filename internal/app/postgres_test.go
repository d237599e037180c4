package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// publishUntil publishes payloads[from:to] on the embedded broker until
// the state holds `want` tasks (the subscription starts in the
// background, and an event published before it is lost).
func publishUntil(t *testing.T, a *App, payloads [][]byte, want func() bool) {
	t.Helper()
	rdb := brokerClient(t, a)
	defer rdb.Close()
	deadline := time.Now().Add(20 * time.Second)
	for !want() {
		if time.Now().After(deadline) {
			t.Fatal("events not ingested in time")
		}
		for _, p := range payloads {
			if err := rdb.Publish(context.Background(), "/0.celeryev/task.multi", p).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for end := time.Now().Add(time.Second); !want() && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func getStatus(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// requestStatus is getStatus for "METHOD /path" (GET when no method).
func requestStatus(t *testing.T, srv *httptest.Server, req string) (int, string) {
	t.Helper()
	method, path, ok := strings.Cut(req, " ")
	if !ok {
		return getStatus(t, srv, req)
	}
	r, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// storedTasks is how many tasks PostgreSQL holds, or -1 while it cannot
// be read.
func storedTasks(a *App) int {
	n, _, _, err := a.Postgres.Counts(context.Background())
	if err != nil {
		return -1
	}
	return n
}

// TestPostgresOutage: while PostgreSQL is unreachable, reads (the failures,
// the bulk operations' selection and a retry's look-up of the events
// included) answer 503 JSON within the read timeout and ingestion goes on; once it is back,
// the records buffered meanwhile are written. With a buffer (--max_tasks)
// smaller than what the outage brought, the excess is counted in
// stamen_store_lost_records_total.
func TestPostgresOutage(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxTasks int
		// tasks during the outage, and how many must reach PostgreSQL
		during, want int
		lost         bool
	}{
		{"within the buffer", 1000, 150, 200, false},
		{"beyond the buffer", 60, 150, 50 + 60, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			proxy := testcluster.StartProxy(t, testcluster.PostgresAddr)
			db := testcluster.PostgresDB(t)
			a, err := New(context.Background(), Config{
				EmbeddedAddr: fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t)),
				DBPath:       testcluster.PostgresURL(proxy.Addr(), db),
				MaxTasks:     c.maxTasks,
				SaveInterval: 100 * time.Millisecond,
				// It bounds New's connection too: at 500 ms one failed
				// to connect through the proxy on a busy 2-core machine.
				DBTimeout: 1500 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			srv := httptest.NewServer(a.Handler)
			defer srv.Close()
			payloads := eventPayloads(50 + c.during)

			publishUntil(t, a, payloads[:50], func() bool { return storedTasks(a) == 50 })
			if code, body := getStatus(t, srv, "/api/tasks?limit=1000"); code != 200 || strings.Count(body, `"uuid"`) != 50 {
				t.Fatalf("before the outage: %d %.200s", code, body)
			}

			proxy.Cut()
			for _, path := range []string{"/api/tasks?limit=10", "/api/task/info/00000000-0000-4000-8000-000000000001", "/api/task/types", "/api/workers?status=1",
				"/api/failures", "POST /api/tasks/revoke?max=10&dry_run=true", "POST /api/tasks/retry?max=10&dry_run=true&state=FAILURE",
				// Not in the sent log, no result backend: the events are read.
				"POST /api/task/retry/00000000-0000-4000-8000-000000000001"} {
				start := time.Now()
				code, body := requestStatus(t, srv, path)
				var e struct{ Error string }
				if code != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
					t.Fatalf("GET %s during the outage: %d %s, want 503 JSON", path, code, body)
				}
				if took := time.Since(start); took > 3*time.Second {
					t.Errorf("GET %s took %v to fail", path, took)
				}
				if strings.Contains(body, "stamen_test@") || strings.Contains(body, ":stamen_test") {
					t.Errorf("the password reached the body: %s", body)
				}
			}
			// Ingestion goes on in memory.
			publishUntil(t, a, payloads[50:], func() bool {
				_, ok := a.State.Task(fmt.Sprintf("00000000-0000-4000-8000-%012d", 50+c.during-1))
				return ok && a.State.Len() == min(50+c.during, c.maxTasks)
			})
			// Then a flush fails with the whole outage's records in hand.
			failed := a.buffer.FailedFlushes()
			testcluster.Eventually(t, 10*time.Second, "a flush failing during the outage", func() bool {
				return a.buffer.FailedFlushes() >= failed+2
			})

			proxy.Start()
			testcluster.Eventually(t, 20*time.Second, fmt.Sprintf("PostgreSQL holding %d tasks after the outage", c.want), func() bool {
				return storedTasks(a) >= c.want
			})
			if n := storedTasks(a); n != c.want {
				t.Fatalf("PostgreSQL holds %d tasks, want %d", n, c.want)
			}
			lost := testutil.ToFloat64(a.lost)
			if c.lost && lost != float64(50+c.during-c.want) {
				t.Errorf("lost records %v, want %d", lost, 50+c.during-c.want)
			}
			if !c.lost && lost != 0 {
				t.Errorf("lost records %v, want 0", lost)
			}
			code, body := getStatus(t, srv, "/api/tasks")
			if code != 200 || strings.Count(body, `"uuid"`) != c.want {
				t.Fatalf("after the outage: %d, %d tasks", code, strings.Count(body, `"uuid"`))
			}
		})
	}
}

// TestTaskListCutShortFromPostgres: an unpaged list that PostgreSQL stops
// serving mid-body (its connection cut while a slow client reads) ends
// without its closing brace, not as a shorter list that parses.
func TestTaskListCutShortFromPostgres(t *testing.T) {
	const n = 300_000 // more than the sockets between them buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proxy := testcluster.StartProxy(t, testcluster.PostgresAddr)
	db := testcluster.PostgresDB(t)
	a, err := New(ctx, Config{
		EmbeddedAddr: fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t)),
		DBPath:       testcluster.PostgresURL(proxy.Addr(), db),
		DBTimeout:    500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	conn, err := pgx.Connect(ctx, testcluster.PostgresURL(testcluster.PostgresAddr, db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO stamen_tasks (id, state, name, kwargs, ts)
		SELECT format('t-%s', i), 'SUCCESS', 'proj.add', '{}', i FROM generate_series(1, $1::bigint) AS i`, n); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/tasks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(resp.Body, head); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the list's first bytes: %d, %v", resp.StatusCode, err)
	}
	proxy.Cut()
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the rest: %v", err)
	}
	body := append(head, rest...)
	listed := bytes.Count(body, []byte(`"uuid"`))
	if listed == n || json.Valid(body) {
		t.Fatalf("%d of %d tasks listed, valid JSON %v: the cut went unnoticed", listed, n, json.Valid(body))
	}
	if !json.Valid(append(body, '}')) {
		t.Errorf("the body is not the tasks listed before the cut (ends %q)", body[max(0, len(body)-40):])
	}
}

// TestPostgresStoreSize: with --db postgres://, stamen_store_size_bytes is
// the size of stamen's tables in the database, indexes included, as
// PostgreSQL reports it (pg_total_relation_size), not 0.
func TestPostgresStoreSize(t *testing.T) {
	db := testcluster.PostgresDB(t)
	url := testcluster.PostgresURL(testcluster.PostgresAddr, db)
	a, err := New(context.Background(), Config{
		EmbeddedAddr: fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t)),
		DBPath:       url,
		SaveInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	publishUntil(t, a, eventPayloads(200), func() bool { return storedTasks(a) == 200 })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The tables only grow meanwhile (nothing is deleted; autovacuum may
	// add a table's free space and visibility maps): the gauge lies
	// between their size before the scrape and after it.
	size := func() float64 {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
			WHERE c.relkind = 'r' AND c.relname LIKE 'stamen\_%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return float64(n)
	}
	before := size()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	got := testcluster.ParseMetrics(t, resp.Body).Sum("stamen_store_size_bytes", nil)
	resp.Body.Close()
	after := size()
	if got < before || got > after || before < 200*100 {
		t.Errorf("stamen_store_size_bytes = %.0f, want the stamen tables' size, %.0f (%.0f after the scrape)", got, before, after)
	}
}
