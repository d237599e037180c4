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
	testcluster.Eventually(t, within, what, cond)
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
	for _, st := range missedStores() {
		t.Run(st.name, func(t *testing.T) { testEventQueueKeepsEventsWhileDown(t, bin, st) })
	}
}

// missedStore is where the stamen processes of the missed-events tests
// keep their history: alone with a bbolt file, or as a fleet of two
// replicas on one PostgreSQL database, all of them stopped together.
type missedStore struct {
	name     string
	replicas int
	db       func(t *testing.T) string
}

func missedStores() []missedStore {
	return []missedStore{
		{"bbolt", 1, func(t *testing.T) string { return filepath.Join(t.TempDir(), "stamen.db") }},
		{"postgres-2-replicas", 2, func(t *testing.T) string {
			return testcluster.PostgresURL(testcluster.PostgresAddr, testcluster.PostgresDB(t))
		}},
	}
}

// startReplicas starts st.replicas stamen processes with args, and returns
// them and their base URLs.
func startReplicas(t *testing.T, bin string, st missedStore, args []string) ([]*exec.Cmd, []string) {
	t.Helper()
	var cmds []*exec.Cmd
	var bases []string
	for range st.replicas {
		cmd, base := startStamen(t, bin, args...)
		cmds, bases = append(cmds, cmd), append(bases, base)
	}
	return cmds, bases
}

func stopReplicas(t *testing.T, cmds []*exec.Cmd) {
	t.Helper()
	for _, cmd := range cmds {
		stopStamen(t, cmd)
	}
}

func testEventQueueKeepsEventsWhileDown(t *testing.T, bin string, st missedStore) {
	broker := testcluster.AMQPURL(testcluster.Vhost)
	queue := "stamen-test-events-" + fmt.Sprint(time.Now().UnixNano())
	// Durable: it outlives stamen, and would outlive the test.
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, testcluster.Vhost, queue) })
	args := []string{"--broker", broker, "--persistent", "--db", st.db(t),
		"--state_save_interval", "200", "--event_queue", queue, "--event_queue_ttl", "10m"}

	cmds, _ := startReplicas(t, bin, st, args)
	testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "evq", Broker: broker, Concurrency: 4})
	await(t, 30*time.Second, "stamen declares its event queue", func() bool {
		_, ok := queueDepth(t, broker, queue)
		return ok
	})
	stopReplicas(t, cmds)

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

	cmds2, bases := startReplicas(t, bin, st, args)
	defer stopReplicas(t, cmds2)
	// Every replica shows every task final, whichever consumed its events.
	for _, base2 := range bases {
		var counts map[string]int
		await(t, 30*time.Second, "every task final at "+base2, func() bool {
			states := taskStates(t, base2, "stamen.add")
			for id, s := range taskStates(t, base2, "stamen.fail") {
				states[id] = s
			}
			counts = countStates(ids, states)
			return counts["SUCCESS"]+counts["FAILURE"] == missedTasks
		})
		if counts["FAILURE"] != missedTasks/4 {
			t.Errorf("states after the restart at %s: %v, want %d FAILURE", base2, counts, missedTasks/4)
		}
		t.Logf("after the restart at %s: %v", base2, counts)
	}
}

// TestReconcileAfterRestart: 200 tasks are RECEIVED or STARTED in stamen
// when it stops; they finish (150 succeed, 50 fail) while it is down, so
// their events are lost to Redis pub/sub. Restarted, stamen shows each
// task's final state, from the result backend, within 30 s.
func TestReconcileAfterRestart(t *testing.T) {
	testcluster.Require(t)
	bin := buildBinary(t)
	for _, st := range missedStores() {
		t.Run(st.name, func(t *testing.T) { testReconcileAfterRestart(t, bin, st) })
	}
}

func testReconcileAfterRestart(t *testing.T, bin string, st missedStore) {
	redis := testcluster.StartRedis(t)
	broker, backend := redis.URL(0), redis.URL(1)
	args := []string{"--broker", broker, "--result_backend", backend, "--persistent",
		"--db", st.db(t), "--state_save_interval", "200"}

	cmds, bases := startReplicas(t, bin, st, args)
	base := bases[0]
	// Every task reserved at once (prefetch 4 x 50), 4 running.
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "recon", Broker: broker, Backend: backend, Concurrency: 4,
		ExtraArgs: []string{"--prefetch-multiplier", "50"}})
	// Redis pub/sub drops the events published before stamen subscribes:
	// the worker alive by its events says stamen listens before the tasks go.
	await(t, 30*time.Second, "stamen ingesting "+w.Name+"'s events", func() bool {
		resp, err := http.Get(base + "/api/workers?status=1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"`+w.Name+`": true`)
	})
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
	stopReplicas(t, cmds)

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

	cmds2, bases2 := startReplicas(t, bin, st, args)
	defer stopReplicas(t, cmds2)
	start := time.Now()
	var counts map[string]int
	// Every replica shows every task final; with PostgreSQL they may share
	// the lookups, so the metric counts them over the fleet.
	reconciled := 0
	for _, base2 := range bases2 {
		await(t, 30*time.Second, "every task reconciled at "+base2, func() bool {
			counts = countStates(ids, taskStates(t, base2, "stamen.gate"))
			return counts["SUCCESS"]+counts["FAILURE"] == missedTasks
		})
		if counts["FAILURE"] != missedTasks/4 {
			t.Errorf("states after the restart at %s: %v, want %d FAILURE", base2, counts, missedTasks/4)
		}
		// The failures carry the exception the backend holds, and the
		// worker the task ran on.
		resp, err := http.Get(base2 + "/api/task/info/" + ids[0])
		if err != nil {
			t.Fatal(err)
		}
		var info map[string]any
		err = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if info["state"] != "FAILURE" || info["exception"] != "ValueError('gate "+gate+"')" || !strings.Contains(fmt.Sprint(info["traceback"]), "ValueError") ||
			!strings.HasPrefix(fmt.Sprint(info["worker"]), "recon-") || info["name"] != "stamen.gate" {
			t.Errorf("task %s after reconciliation at %s: %v", ids[0], base2, info)
		}
		mresp, err := http.Get(base2 + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(mresp.Body)
		mresp.Body.Close()
		var n int
		for _, line := range strings.Split(string(metrics), "\n") {
			if _, err := fmt.Sscanf(line, "stamen_reconciled_tasks_total %d", &n); err == nil {
				reconciled += n
			}
		}
	}
	if reconciled < missedTasks || (st.replicas == 1 && reconciled != missedTasks) {
		t.Errorf("stamen_reconciled_tasks_total over %d replicas: %d, want %d", st.replicas, reconciled, missedTasks)
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
