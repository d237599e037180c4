package testcluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SucceededTaskEnvelope is what a worker publishes on the Redis
// /<db>.celeryev/task.multi channel for a task that was received, started
// and succeeded: one kombu envelope holding a list of three events. Tests
// and benchmarks publish it to feed stamen without running a worker.
func SucceededTaskEnvelope(id, name, worker string, clock int) []byte {
	return TaskEnvelope(id, name, worker, clock, float64(time.Now().UnixMicro())/1e6, false)
}

// TaskEnvelope is SucceededTaskEnvelope with the events stamped at (epoch
// seconds), so that benchmarks can spread tasks over time for the received
// filters, and with task-failed in place of task-succeeded when failed.
func TaskEnvelope(id, name, worker string, clock int, at float64, failed bool) []byte {
	common := func(typ string) map[string]any {
		return map[string]any{"type": typ, "uuid": id, "hostname": worker, "timestamp": at, "clock": clock, "pid": 1, "utcoffset": 0}
	}
	received := common("task-received")
	received["name"], received["args"], received["kwargs"], received["retries"] = name, "(1, 2)", "{}", 0
	var done map[string]any
	if failed {
		done = common("task-failed")
		done["exception"], done["traceback"] = "ValueError('boom')", "Traceback (most recent call last):\nValueError: boom\n"
	} else {
		done = common("task-succeeded")
		done["result"], done["runtime"] = "3", 0.001
	}
	return EventsEnvelope(worker, id, received, common("task-started"), done)
}

// EventsEnvelope is the kombu envelope a worker publishes on the
// /<db>.celeryev/task.multi channel for a list of events, tagged tag.
func EventsEnvelope(worker, tag string, events ...map[string]any) []byte {
	body, _ := json.Marshal(events)
	env, _ := json.Marshal(map[string]any{
		"body": base64.StdEncoding.EncodeToString(body), "content-encoding": "utf-8", "content-type": "application/json",
		"headers": map[string]any{"hostname": worker},
		"properties": map[string]any{
			"delivery_mode": 1, "delivery_info": map[string]any{"exchange": "celeryev", "routing_key": "task.multi"},
			"priority": 0, "body_encoding": "base64", "delivery_tag": tag,
		},
	})
	return env
}

// PublishUntil publishes payload on a Redis pub/sub channel every 100 ms
// until ingested reports true, failing the test after 15 s. Redis drops
// what is published while nobody listens, and a stamen that has just started
// subscribes some time later: this waits for the effect instead of guessing
// that time. The payload must be safe to ingest more than once, as a task's
// events are.
func PublishUntil(t testing.TB, rdb *redis.Client, channel string, payload []byte, ingested func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := rdb.Publish(ctx, channel, payload).Err()
		cancel()
		if err != nil {
			t.Fatalf("testcluster: publish on %s: %v", channel, err)
		}
		if ingested() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testcluster: what was published on %s for 15 s was not ingested", channel)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
