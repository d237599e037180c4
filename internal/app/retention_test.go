package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

const retentionDB = 5

// TestMaxTaskAge ingests a task from two hours ago and a current one with
// a one-hour limit: the old one goes within a couple of seconds, the
// current one stays.
func TestMaxTaskAge(t *testing.T) {
	testcluster.RequireRedis(t)
	testcluster.FlushRedisDB(t, retentionDB)
	a, err := New(context.Background(), Config{BrokerURL: testcluster.RedisURL(retentionDB), MaxTaskAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rdb := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: retentionDB})
	defer rdb.Close()
	channel := fmt.Sprintf("/%d.celeryev/task.multi", retentionDB)
	now := float64(time.Now().UnixMicro()) / 1e6
	const oldID, newID = "00000000-0000-4000-8000-0000000000a1", "00000000-0000-4000-8000-0000000000a2"
	// The old task first, until stamen has it (each publication adds it
	// again should the eviction have taken it meanwhile), then the current
	// one. In this order:
	// eviction walks the tasks in the order they arrived and stops at the
	// first current one.
	testcluster.PublishUntil(t, rdb, channel, testcluster.TaskEnvelope(oldID, "age.old", "age@h", 1, now-2*3600, false), func() bool {
		_, ok := a.State.Task(oldID)
		return ok
	})
	if err := rdb.Publish(context.Background(), channel, testcluster.TaskEnvelope(newID, "age.t", "age@h", 2, now, false)).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, oldKept := a.State.Task(oldID)
		_, newKept := a.State.Task(newID)
		// Both go through one channel in order: the current task in the
		// state proves the old one was ingested before it.
		if !oldKept && newKept {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: old task kept %v, current task kept %v", oldKept, newKept)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
