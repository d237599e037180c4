package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// missedTasks is how many tasks finish while no stamen runs.
const missedTasks = 200

// taskStates is /api/tasks?taskname=name as id -> state.
func taskStates(t *testing.T, base, name string) map[string]string {
	t.Helper()
	resp, err := http.Get(base + "/api/tasks?taskname=" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("/api/tasks: %s: %v", b, err)
	}
	out := make(map[string]string, len(m))
	for id, task := range m {
		out[id] = task.State
	}
	return out
}

// countStates counts ids by their state in states ("" when missing).
func countStates(ids []string, states map[string]string) map[string]int {
	n := map[string]int{}
	for _, id := range ids {
		n[states[id]]++
	}
	return n
}

// await polls cond every 100 ms until it holds, failing after within.
func await(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopStamen stops it as an operator would (SIGTERM: the store is flushed).
func stopStamen(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stamen exited with %v", err)
	}
}

// lines splits a client's output into its non-empty lines.
func lines(out []byte) []string {
	var ids []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			ids = append(ids, l)
		}
	}
	return ids
}

// TestEventQueueKeepsEventsWhileDown: with --event_queue the events of 200
// tasks that a Celery client sent, and a real worker ran, while stamen was
// stopped wait in RabbitMQ; the restarted stamen shows every task in its
// final state.
func TestEventQueueKeepsEventsWhileDown(t *testing.T) {
	testcluster.Require(t)
	bin := buildBinary(t)
	broker := testcluster.AMQPURL(testcluster.Vhost)
	queue := "stamen-test-events-" + fmt.Sprint(time.Now().UnixNano())
	// Durable: it outlives stamen, and would outlive the test.
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, testcluster.Vhost, queue) })
	args := []string{"--broker", broker, "--persistent", "--db", filepath.Join(t.TempDir(), "stamen.db"),
		"--state_save_interval", "200", "--event_queue", queue, "--event_queue_ttl", "10m"}

	cmd, _ := startStamen(t, bin, args...)
	testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "evq", Broker: broker, Concurrency: 4})
	await(t, 30*time.Second, "stamen declares its event queue", func() bool {
		_, ok := queueDepth(t, broker, queue)
		return ok
	})
	stopStamen(t, cmd)

	out := testcluster.RunClient(t, testcluster.ClientOptions{Broker: broker, Timeout: 90 * time.Second}, `
import sys
from stamen_testapp import app
n = int(sys.argv[1])
rs = [app.send_task("stamen.add", args=[i, 1]) if i % 4 else app.send_task("stamen.fail", args=["lost %d" % i]) for i in range(n)]
for r in rs:
    r.get(timeout=60, propagate=False)
    print(r.id)
`, fmt.Sprint(missedTasks))
	ids := lines(out)
	if len(ids) != missedTasks {
		t.Fatalf("the client ran %d tasks, want %d", len(ids), missedTasks)
	}
	// The events wait in the queue (messages are batches: fewer than events).
	if n, ok := queueDepth(t, broker, queue); !ok || n < missedTasks/10 {
		t.Fatalf("event queue %s holds %d messages (exists: %v) while stamen is down", queue, n, ok)
	} else {
		t.Logf("%d event messages waited in %s", n, queue)
	}

	cmd2, base2 := startStamen(t, bin, args...)
	defer stopStamen(t, cmd2)
	var counts map[string]int
	await(t, 30*time.Second, "every task final", func() bool {
		states := taskStates(t, base2, "stamen.add")
		for id, s := range taskStates(t, base2, "stamen.fail") {
			states[id] = s
		}
		counts = countStates(ids, states)
		return counts["SUCCESS"]+counts["FAILURE"] == missedTasks
	})
	if counts["FAILURE"] != missedTasks/4 {
		t.Errorf("states after the restart: %v, want %d FAILURE", counts, missedTasks/4)
	}
	t.Logf("after the restart: %v", counts)
}

// TestReconcileAfterRestart: 200 tasks are RECEIVED or STARTED in stamen
// when it stops; they finish (150 succeed, 50 fail) while it is down, so
// their events are lost to Redis pub/sub. Restarted, stamen shows each
// task's final state, from the result backend, within 30 s.
func TestReconcileAfterRestart(t *testing.T) {
	testcluster.Require(t)
	bin := buildBinary(t)
	redis := testcluster.StartRedis(t)
	broker, backend := redis.URL(0), redis.URL(1)
	args := []string{"--broker", broker, "--result_backend", backend, "--persistent",
		"--db", filepath.Join(t.TempDir(), "stamen.db"), "--state_save_interval", "200"}

	cmd, base := startStamen(t, bin, args...)
	// Every task reserved at once (prefetch 4 x 50), 4 running.
	testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "recon", Broker: broker, Backend: backend, Concurrency: 4,
		ExtraArgs: []string{"--prefetch-multiplier", "50"}})
	gate := "stamen-test-gate"
	out := testcluster.RunClient(t, testcluster.ClientOptions{Broker: broker, Backend: backend}, `
import sys
from stamen_testapp import app
for i in range(int(sys.argv[1])):
    print(app.send_task("stamen.gate", args=[sys.argv[2]], kwargs={"fail": i % 4 == 0}).id)
`, fmt.Sprint(missedTasks), gate)
	ids := lines(out)
	if len(ids) != missedTasks {
		t.Fatalf("the client sent %d tasks, want %d", len(ids), missedTasks)
	}
	await(t, 30*time.Second, "every task RECEIVED or STARTED", func() bool {
		n := countStates(ids, taskStates(t, base, "stamen.gate"))
		return n["RECEIVED"]+n["STARTED"] == missedTasks
	})
	stopStamen(t, cmd)

	rdb := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", redis.Port), DB: 1})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, gate, "1", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = "celery-task-meta-" + id
	}
	await(t, 60*time.Second, "every task finished in the result backend", func() bool {
		vals, err := rdb.MGet(ctx, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			s, _ := v.(string)
			if !strings.Contains(s, `"SUCCESS"`) && !strings.Contains(s, `"FAILURE"`) {
				return false
			}
		}
		return true
	})

	cmd2, base2 := startStamen(t, bin, args...)
	defer stopStamen(t, cmd2)
	start := time.Now()
	var counts map[string]int
	await(t, 30*time.Second, "every task reconciled", func() bool {
		counts = countStates(ids, taskStates(t, base2, "stamen.gate"))
		return counts["SUCCESS"]+counts["FAILURE"] == missedTasks
	})
	if counts["FAILURE"] != missedTasks/4 {
		t.Errorf("states after the restart: %v, want %d FAILURE", counts, missedTasks/4)
	}
	// The failures carry the exception the backend holds.
	resp, err := http.Get(base2 + "/api/task/info/" + ids[0])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info["state"] != "FAILURE" || info["exception"] != "ValueError('gate "+gate+"')" || !strings.Contains(fmt.Sprint(info["traceback"]), "ValueError") ||
		!strings.HasPrefix(fmt.Sprint(info["worker"]), "recon-") {
		t.Errorf("task %s after reconciliation: %v", ids[0], info)
	}
	// And counts them.
	mresp, err := http.Get(base2 + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	metrics, _ := io.ReadAll(mresp.Body)
	if want := fmt.Sprintf("stamen_reconciled_tasks_total %d\n", missedTasks); !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %q", want)
	}
	t.Logf("reconciled %v in %s", counts, time.Since(start).Round(time.Millisecond))
}

// queueDepth is the number of messages in queue, and whether it exists.
func queueDepth(t *testing.T, broker, queue string) (int, bool) {
	t.Helper()
	conn, err := amqp091.DialConfig(broker, amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("connect to RabbitMQ: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		q   amqp091.Queue
		err error
	}
	done := make(chan answer, 1)
	go func() {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		done <- answer{q, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			return 0, false // 404: the channel is closed with it
		}
		return a.q.Messages, true
	case <-time.After(10 * time.Second):
		t.Fatal("passive declare: no answer in 10 s")
	}
	return 0, false
}
