package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestQuorumDelayedDelivery: a Celery 5.6 worker on a RabbitMQ quorum queue
// (no global QoS) holds every task with an eta it has fetched, so a task
// with a countdown sent straight to the queue takes a prefetch slot until
// its eta. Sent through stamen, ten countdown=10 tasks must go through the
// workers' native delayed-delivery exchanges as Celery's own client sends
// them: an immediate task sent after them starts within 1 s, and none of
// them starts before its countdown.
func TestQuorumDelayedDelivery(t *testing.T) {
	testcluster.SkipIfShort(t, "a real Celery 5.6 worker on RabbitMQ quorum queues")
	testcluster.RequireCelery(t, testcluster.Celery56)
	queue := "quorum-" + uuid.NewString()[:8]
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, queue) })
	broker := testcluster.AMQPURL(amqpVhost)
	conf, err := json.Marshal(map[string]any{
		// The queue as Celery's quorum-queue docs set it up: quorum, behind
		// a topic exchange (workers bind no direct exchange to the
		// delayed-delivery exchanges), with publisher confirms, which a
		// quorum queue needs to be safe.
		"task_default_queue":          queue,
		"task_default_exchange":       queue,
		"task_default_exchange_type":  "topic",
		"task_default_routing_key":    queue,
		"task_default_queue_type":     "quorum",
		"worker_detect_quorum_queues": true,
		"broker_transport_options":    map[string]any{"confirm_publish": true},
		// Quorum queues take no x-max-priority (the test app sets it).
		"task_queue_max_priority": nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, c := serveApp(t, app.Config{BrokerURL: broker, ResultBackend: "rpc://",
		InspectTimeout: time.Second, ApplyTimeout: 20 * time.Second})
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{
		Name: "quorum", Broker: broker, Celery: testcluster.Celery56, Queues: []string{queue},
		Env: []string{"STAMEN_TEST_CONF=" + string(conf)},
	})
	c.awaitWorkerReady(w.Name)
	// stamen learns from the worker's active_queues that the queue is a
	// quorum queue behind a topic exchange.
	eventually(t, 15*time.Second, w.Name+" reporting "+queue+" as a quorum queue", func() bool {
		r := c.mustOK(c.get("/api/workers", q("refresh", "true", "workername", w.Name)))
		info, _ := r[w.Name].(map[string]any)
		qs, _ := info["active_queues"].([]any)
		return slices.ContainsFunc(qs, func(x any) bool {
			m, _ := x.(map[string]any)
			args, _ := m["queue_arguments"].(map[string]any)
			return m["name"] == queue && args["x-queue-type"] == "quorum"
		})
	})

	const countdown = 10
	delayed := make([]string, 10)
	sent := time.Now()
	for i := range delayed {
		r := c.mustOK(c.post("/api/task/async-apply/stamen.add", nil,
			map[string]any{"args": []int{i, 1}, "countdown": countdown, "queue": queue}))
		delayed[i] = r["task-id"].(string)
	}
	immediateSent := time.Now()
	r := c.mustOK(c.post("/api/task/async-apply/stamen.add", nil, map[string]any{"args": []int{40, 2}, "queue": queue}))
	immediate := r["task-id"].(string)

	started := func(id string) (float64, bool) {
		r := c.get("/api/task/info/"+id, nil)
		if r.Status != http.StatusOK {
			return 0, false
		}
		s, ok := r.JSON(t)["started"].(float64)
		return s, ok && s > 0
	}
	var at float64
	eventually(t, 30*time.Second, "the immediate task started", func() bool {
		var ok bool
		at, ok = started(immediate)
		return ok
	})
	t.Logf("the immediate task started %.3f s after it was sent", at-unix(immediateSent))
	if wait := at - unix(immediateSent); wait > 1 {
		t.Errorf("the immediate task started %.2f s after it was sent, behind the countdown tasks; want at most 1 s", wait)
	}

	// Each countdown task starts, and no earlier than its countdown. The
	// eta stamen writes is taken after sent; 1 ms allows for the
	// microseconds of the eta header and of the event's timestamp.
	earliest := unix(sent) + countdown - 0.001
	for _, id := range delayed {
		var at float64
		eventually(t, 40*time.Second, "countdown task "+id+" started", func() bool {
			var ok bool
			at, ok = started(id)
			return ok
		})
		t.Logf("countdown task %s started %.3f s after the first was sent", id, at-unix(sent))
		if at < earliest {
			t.Errorf("countdown task %s started %.3f s after it was sent, before its countdown of %d s", id, at-unix(sent), countdown)
		}
	}
	for _, id := range append(delayed, immediate) {
		eventually(t, 10*time.Second, fmt.Sprintf("task %s succeeded", id), func() bool { return c.taskState(id) == "SUCCESS" })
	}
}

// unix is t as the seconds since the epoch that Celery's events carry.
func unix(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
