package app

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

const storeDB = 8

// TestRestartRestoresState ingests real-shaped events from Redis, restarts
// stamen gracefully and checks that tasks, their records, task types and
// workers come back from the store.
func TestRestartRestoresState(t *testing.T) {
	testcluster.RequireRedis(t)
	testcluster.FlushRedisDB(t, storeDB)
	cfg := Config{
		BrokerURL: testcluster.RedisURL(storeDB), DBPath: filepath.Join(t.TempDir(), "stamen.db"),
		SaveInterval: 100 * time.Millisecond,
	}
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: storeDB})
	defer rdb.Close()
	const n = 500
	channel := fmt.Sprintf("/%d.celeryev/task.multi", storeDB)
	payloads := eventPayloads(n)
	testcluster.PublishUntil(t, rdb, channel, payloads[0], func() bool { return a.State.Len() > 0 })
	for _, p := range payloads[1:] {
		if err := rdb.Publish(context.Background(), channel, p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for a.State.Len() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if a.State.Len() != n {
		t.Fatalf("ingested %d of %d tasks", a.State.Len(), n)
	}
	before, _ := a.State.Task("00000000-0000-4000-8000-000000000042")
	beforeJSON, _ := before.MarshalJSON()
	a.Close()

	b, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer b.Close()
	if b.State.Len() != n {
		t.Errorf("restored %d of %d tasks", b.State.Len(), n)
	}
	after, ok := b.State.Task("00000000-0000-4000-8000-000000000042")
	afterJSON, _ := after.MarshalJSON()
	if !ok || string(afterJSON) != string(beforeJSON) {
		t.Errorf("task record changed across the restart:\n%s\n%s", beforeJSON, afterJSON)
	}
	if !slices.Contains(b.State.TaskTypes(), "bench.add") {
		t.Errorf("task types not restored: %v", b.State.TaskTypes())
	}
	if !slices.Contains(b.State.WorkerNames(), "bench@h") {
		t.Errorf("workers not restored: %v", b.State.WorkerNames())
	}
}
