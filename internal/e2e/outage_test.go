package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestRedisOutage takes stamen's broker (a private redis-server) away
// while a real worker runs a task, then brings it back: during the outage
// the stored state is served and every operation that needs the broker
// answers 503 with a JSON error within its timeout; once the broker is
// back, ingestion resumes within 5 s without a restart and nothing stored
// is lost. (Whether the worker then consumes again is Celery's business:
// Celery 5.2's Redis consumer often does not after its broker restarts.)
func TestRedisOutage(t *testing.T) {
	testcluster.Require(t)
	redis := testcluster.StartRedis(t)
	const brokerTimeout = 2 * time.Second
	a, c := serveApp(t, app.Config{
		BrokerURL: redis.URL(0), ResultBackend: redis.URL(1),
		DBPath: filepath.Join(t.TempDir(), "stamen.db"), SaveInterval: 200 * time.Millisecond,
		InspectTimeout: time.Second, BrokerTimeout: brokerTimeout, ApplyTimeout: 10 * time.Second,
	})
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "outage", Broker: redis.URL(0), Backend: redis.URL(1), Concurrency: 2})
	c.awaitWorkerReady(w.Name)

	var done []string
	for i := range 5 {
		r := c.mustOK(c.post("/api/task/async-apply/stamen.add", nil, map[string]any{"args": []int{i, 1}}))
		done = append(done, fmt.Sprint(r["task-id"]))
	}
	busy := fmt.Sprint(c.mustOK(c.post("/api/task/async-apply/stamen.sleep", nil, map[string]any{"args": []any{3}}))["task-id"])
	c.awaitDoneAndRunning(done, busy)

	redis.Stop()
	// The stored state is still served.
	for _, id := range done {
		if got := c.taskState(id); got != "SUCCESS" {
			t.Errorf("during the outage, task %s: %s", id, got)
		}
	}
	// What needs the broker fails fast and says so.
	args := map[string]any{"args": []int{1, 1}}
	for _, op := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/api/task/async-apply/stamen.add", args},
		{http.MethodPost, "/api/task/send-task/stamen.add", args},
		{http.MethodGet, "/api/queues/length", nil},
		{http.MethodGet, "/api/task/result/" + done[0], nil},
		{http.MethodPost, "/api/task/revoke/" + busy, nil},
		{http.MethodPost, "/api/worker/pool/grow/" + pathEscape(w.Name), nil},
	} {
		start := time.Now()
		r := c.do(op.method, op.path, nil, op.body)
		took := time.Since(start)
		if r.Status != http.StatusServiceUnavailable || r.JSON(t)["error"] == nil {
			t.Errorf("%s %s during the outage: %d %s, want 503 with a JSON error", op.method, op.path, r.Status, r.Body)
		}
		if took > 2*brokerTimeout+time.Second {
			t.Errorf("%s %s took %s to fail, beyond its timeout", op.method, op.path, took)
		}
	}

	redis.Start()
	back := time.Now()
	rdb := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", redis.Port)})
	defer rdb.Close()
	// An event as a worker sends it, until stamen has it.
	const probe = "00000000-0000-4000-8000-00000000a0a0"
	for {
		_ = rdb.Publish(context.Background(), "/0.celeryev/task.multi",
			testcluster.SucceededTaskEnvelope(probe, "stamen.add", w.Name, 1)).Err()
		if _, ok := a.State.Task(probe); ok {
			t.Logf("ingestion resumed %s after the broker came back", time.Since(back).Round(time.Millisecond))
			break
		}
		if time.Since(back) > 5*time.Second {
			t.Fatal("ingestion did not resume within 5 s of the broker's return")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range done {
		if got := c.taskState(id); got != "SUCCESS" {
			t.Errorf("after the outage, task %s: %s", id, got)
		}
	}
}

// serveApp starts stamen's App with cfg behind a test HTTP server, both
// stopped when the test ends, and returns a client for it.
func serveApp(t *testing.T, cfg app.Config) (*app.App, *api) {
	t.Helper()
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	return a, &api{t: t, base: srv.URL, hc: &http.Client{Timeout: 30 * time.Second}}
}
