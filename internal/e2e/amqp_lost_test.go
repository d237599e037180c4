package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// queueExists reports whether queue exists in the suite's vhost, by a
// passive declare on a connection of its own.
func queueExists(t *testing.T, queue string) bool {
	t.Helper()
	conn, err := amqp091.DialConfig(testcluster.AMQPURL(amqpVhost), amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("dial RabbitMQ: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	var aerr *amqp091.Error
	switch {
	case err == nil:
		return true
	case errors.As(err, &aerr) && aerr.Code == amqp091.NotFound:
		return false
	}
	t.Fatalf("passive declare of %s: %v", queue, err)
	return false
}

// TestAMQPDeletedQueueOfStoppedWorker: a worker consumed a queue, stamen
// sent it a task there (and so trusts the queue for a minute), the worker
// stopped and the queue was deleted (rabbitmqctl delete_queue). A task for
// that queue is refused with 400 "does not exist", and the queue is not
// declared again: neither trusted from the declare cache (RabbitMQ would
// confirm and drop the message) nor declared from the stopped worker's
// last active_queues (the task would wait for good in a queue nobody
// consumes). Once a worker consuming it is alive again, tasks run.
func TestAMQPDeletedQueueOfStoppedWorker(t *testing.T) {
	testcluster.SkipIfShort(t, "real workers on RabbitMQ")
	testcluster.Require(t)
	queue := "gone-" + uuid.NewString()[:8]
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, queue) })
	b := testcluster.AMQPURL(amqpVhost)
	cfg := app.Config{BrokerURL: b, ResultBackend: "rpc://", InspectTimeout: time.Second, ApplyTimeout: 20 * time.Second}
	_, c := serveApp(t, cfg)
	start := func(name string) *testcluster.Worker {
		w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: name, Broker: b, Backend: "rpc://", Queues: []string{queue}})
		c.awaitWorkerReady(w.Name)
		return w
	}
	apply := func(want string) {
		t.Helper()
		r := c.mustOK(c.post("/api/task/apply/stamen.add", q("timeout", "15"), map[string]any{"args": []int{20, 22}, "queue": queue}))
		if r["state"] != "SUCCESS" || r["result"] != 42.0 {
			t.Fatalf("apply on %s: %v", queue, r)
		}
		id := r["task-id"].(string)
		eventually(t, 10*time.Second, "the task's events show the worker", func() bool {
			info := c.get("/api/task/info/"+id, nil)
			return info.Status == http.StatusOK && info.JSON(t)["worker"] == want
		})
	}

	w := start("gone")
	apply(w.Name)

	w.Stop()
	eventually(t, 20*time.Second, w.Name+" offline", func() bool {
		return c.mustOK(c.get("/api/workers", q("status", "true")))[w.Name] == false
	})
	testcluster.DeleteAMQPQueues(t, amqpVhost, queue)

	for _, op := range []string{"async-apply", "send-task"} {
		r := c.post("/api/task/"+op+"/stamen.add", nil, map[string]any{"args": []int{1, 2}, "queue": queue})
		msg, _ := r.JSON(t)["error"].(string)
		if r.Status != http.StatusBadRequest || !strings.Contains(msg, "does not exist") {
			t.Errorf("%s to the deleted queue of a stopped worker: %d %s, want 400 saying it does not exist", op, r.Status, r.Body)
		}
	}
	if queueExists(t, queue) {
		t.Fatalf("stamen declared %s again for a worker that is gone: the task waits there for nobody", queue)
	}

	// A worker alive again declares it itself, and tasks reach it.
	w2 := start("back")
	apply(w2.Name)
}
