package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// clientSteady has a Celery client send argv[1] stamen.add tasks, one
// every argv[2] seconds (a steady stream, the pace of a busy application
// rather than a burst), and print their ids, one a line.
const clientSteady = `
import sys, time
from stamen_testapp import app
ids = []
for i in range(int(sys.argv[1])):
    ids.append(app.send_task("stamen.add", (i, 1)).id)
    time.sleep(float(sys.argv[2]))
print("\n".join(ids))
`

// pgRow scans the one row of query, read from PostgreSQL directly, not
// through stamen, within 10 s.
func pgRow(t *testing.T, dsn, query string, args []any, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, query, args...).Scan(dest...); err != nil {
		t.Fatal(err)
	}
}

// pgStates reads the tasks' states from stamen's table directly.
func pgStates(t *testing.T, dsn string, ids []string) map[string]string {
	t.Helper()
	var got, states []string
	pgRow(t, dsn, "SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(state), '{}') FROM stamen_tasks WHERE id = ANY($1)", []any{ids}, &got, &states)
	out := make(map[string]string, len(got))
	for i, id := range got {
		out[id] = states[i]
	}
	return out
}

// pgCount is how many tasks stamen's table holds, read directly.
func pgCount(t *testing.T, dsn string) (n int, id string) {
	t.Helper()
	pgRow(t, dsn, "SELECT count(*), coalesce(min(id), '') FROM stamen_tasks", nil, &n, &id)
	return n, id
}

// proxiedReplica starts a replica whose PostgreSQL is reached through a
// TCP proxy that the test can cut, with a private Redis (databases 0 and 1
// the broker and the result backend) and extra arguments; direct is the
// URL of the replica's database without the proxy.
func proxiedReplica(t *testing.T, extra ...string) (a *replica, redis *testcluster.Redis, proxy *testcluster.Proxy, direct string) {
	t.Helper()
	testcluster.Require(t)
	redis = testcluster.StartRedis(t)
	name := testcluster.PostgresDB(t)
	direct = testcluster.PostgresURL(testcluster.PostgresAddr, name)
	proxy = testcluster.StartProxy(t, testcluster.PostgresAddr)
	args := append(fleetArgs(testcluster.PostgresURL(proxy.Addr(), name), redis.URL(0), redis.URL(1)), extra...)
	return newReplica(t, buildStamen(t), "a", args...), redis, proxy, direct
}

// TestFleetPostgresOutage takes PostgreSQL away from a replica for 20 s
// while a real worker runs a steady stream of tasks. Meanwhile the reads
// answer 503 with a JSON error, fast. Afterwards every task of the stream
// is in the store with its final state (read from Postgres directly): the
// replica buffered the events, well inside its bound, and wrote them on
// reconnect, and its loss counter stayed at zero.
//
// The server is taken away by cutting a TCP proxy between the replica and
// it: from stamen's side a stopped server and a cut proxy look the same
// (connections reset, new ones refused), while the shared server stays up
// for the other tests and for this test's own direct reads.
func TestFleetPostgresOutage(t *testing.T) {
	a, redis, proxy, direct := proxiedReplica(t)
	broker, backend := redis.URL(0), redis.URL(1)
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "steady", Broker: broker, Backend: backend, Concurrency: 2})
	a.api.awaitWorkerReady(w.Name)

	// About 25 s of tasks, five a second (longer on a loaded machine): the
	// outage, from the tenth task stored on, lies within the stream.
	const tasks, every = 125, 0.2
	ids := make(chan []string, 1)
	go func() {
		defer close(ids)
		out := testcluster.RunClient(t, testcluster.ClientOptions{Broker: broker, Backend: backend, Timeout: 2 * time.Minute},
			clientSteady, fmt.Sprint(tasks), fmt.Sprint(every))
		ids <- strings.Fields(string(out))
	}()
	var someID string
	eventually(t, 30*time.Second, "the first tasks in Postgres", func() bool {
		n, id := pgCount(t, direct)
		someID = id
		return n >= 10
	})

	proxy.Cut()
	cut := time.Now()
	t.Logf("PostgreSQL cut away from the replica at %d tasks stored", func() int { n, _ := pgCount(t, direct); return n }())
	var unavailable int
	for time.Since(cut) < 20*time.Second {
		for _, path := range []string{"/api/tasks?limit=10", "/api/tasks?state=SUCCESS", "/api/task/info/" + someID} {
			began := time.Now()
			status, body, err := a.get(path, nil)
			took := time.Since(began)
			if err != nil {
				t.Fatalf("GET %s during the outage: %v", path, err)
			}
			if took > 6*time.Second {
				t.Errorf("GET %s took %s to answer during the outage", path, took)
			}
			// The pool may hand out a connection the cut has not yet been
			// noticed on for the very first read; from a second on every
			// read must say the store is unavailable.
			if time.Since(cut) < time.Second && status == http.StatusOK {
				continue
			}
			if status != http.StatusServiceUnavailable {
				t.Fatalf("GET %s during the outage: %d %.300s, want 503", path, status, body)
			}
			if m := (response{Status: status, Body: body}).JSON(t); m["error"] == nil || m["error"] == "" {
				t.Fatalf("GET %s during the outage: %s, want a JSON error", path, body)
			}
			unavailable++
		}
		time.Sleep(200 * time.Millisecond)
	}
	if unavailable < 30 {
		t.Fatalf("only %d reads answered 503 during the 20 s outage", unavailable)
	}
	proxy.Start()
	t.Logf("PostgreSQL back after %s; %d reads answered 503 meanwhile", time.Since(cut).Round(time.Millisecond), unavailable)

	sent := <-ids
	if len(sent) != tasks {
		t.Fatalf("the client sent %d tasks, want %d", len(sent), tasks)
	}
	// Every task of the stream, those that ran during the outage included,
	// in the store with its final state.
	eventually(t, 60*time.Second, "every task SUCCESS in Postgres", func() bool {
		states := pgStates(t, direct, sent)
		for _, id := range sent {
			if states[id] != "SUCCESS" {
				return false
			}
		}
		return true
	})
	lost, err := a.metric(lostMetric)
	if err != nil {
		t.Fatal(err)
	}
	if lost != 0 {
		t.Errorf("%s = %v, want 0: the outage stayed inside the buffer's bound", lostMetric, lost)
	}
	// And reads are served again, from the store.
	awaitSame(t, []*replica{a}, 10*time.Second, "/api/tasks", q("taskname", "stamen.add"), func(body []byte) string {
		if n := len(taskMap(t, body)); n != tasks {
			return fmt.Sprintf("%d tasks listed, want %d", n, tasks)
		}
		return ""
	})
}

// lostMetric counts the task records a replica dropped because its buffer
// of unwritten records (one per task, up to --max_tasks) was full during an
// outage. The test's 200 tasks are far inside the default bound of 10,000.
const lostMetric = "stamen_store_lost_records_total"
