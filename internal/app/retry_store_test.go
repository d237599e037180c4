package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

const sentDB = 6

// TestRetryFromStoreAfterRestart sends a failing task through stamen, restarts
// stamen on the same --db, and retries it: the arguments come from the
// store's sent-task log (not memory, not the events), and a real worker runs
// the new task with them.
func TestRetryFromStoreAfterRestart(t *testing.T) {
	testcluster.RequireRedis(t)
	testcluster.FlushRedisDB(t, sentDB)
	url := testcluster.RedisURL(sentDB)
	queue := "retry-store"
	testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "wretry", Broker: url, Backend: url, Queues: []string{queue}})
	cfg := Config{BrokerURL: url, ResultBackend: url, DBPath: filepath.Join(t.TempDir(), "stamen.db"), SaveInterval: 100 * time.Millisecond}

	post := func(srv *httptest.Server, path string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(srv.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %v %v", path, resp.StatusCode, out, err)
		}
		return out
	}
	failedWith := func(a *App, id string) string {
		t.Helper()
		var exception string
		testcluster.Eventually(t, 30*time.Second, "task "+id+" failing", func() bool {
			task, ok := a.State.Task(id)
			exception = task.Exception
			return ok && task.State == "FAILURE"
		})
		return exception
	}

	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	awaitSubscribed(t, a, sentDB, "first")
	srv := httptest.NewServer(a.Handler)
	old := fmt.Sprint(post(srv, "/api/task/send-task/stamen.echo_fail", map[string]any{
		"args": []any{"stored", 2}, "kwargs": map[string]any{"z": []any{1}}, "queue": queue,
	})["task-id"])
	want := `ValueError('{"args": ["stored", 2], "kwargs": {"z": [1]}}')`
	if got := failedWith(a, old); got != want {
		t.Fatalf("original failed with %s, want %s", got, want)
	}
	srv.Close()
	a.Close()

	b, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer b.Close()
	// The worker runs the retry within milliseconds: the restarted stamen
	// must be listening before it is sent, or the task's events are gone.
	awaitSubscribed(t, b, sentDB, "restarted")
	srv = httptest.NewServer(b.Handler)
	defer srv.Close()
	r := post(srv, "/api/task/retry/"+old, nil)
	if r["source"] != "sent" || r["retry-of"] != old || r["task-id"] == old {
		t.Fatalf("retry after restart: %v, want source sent", r)
	}
	if got := failedWith(b, fmt.Sprint(r["task-id"])); got != want {
		t.Errorf("the retry failed with %s, want %s", got, want)
	}
}

// awaitSubscribed returns once a has subscribed to the events of Redis
// database db: it publishes a probe task's events until a has ingested
// them. Redis pub/sub drops what is published before the subscription, so
// a test whose worker is already running must wait for this before it
// sends a task whose events it expects. name names the probe's task and
// worker.
func awaitSubscribed(t *testing.T, a *App, db int, name string) {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: db})
	defer rdb.Close()
	// A new id each time: a restarted stamen restores the earlier probes.
	id := uuid.NewString()
	testcluster.PublishUntil(t, rdb, fmt.Sprintf("/%d.celeryev/task.multi", db),
		testcluster.SucceededTaskEnvelope(id, "probe."+name, "probe@"+name, 1), func() bool {
			_, ok := a.State.Task(id)
			return ok
		})
}
