package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestAMQPFailoverURLs starts stamen on Celery's failover syntax: a dead
// URL, then two live ones (two proxies to the same RabbitMQ). stamen skips
// the dead one, runs tasks and ingests a real worker's events through the
// first live one, and when that one is cut it fails over to the second
// and does both again.
func TestAMQPFailoverURLs(t *testing.T) {
	testcluster.Require(t)
	first := testcluster.StartProxy(t, "127.0.0.1:5672")
	second := testcluster.StartProxy(t, "127.0.0.1:5672")
	at := func(addr string) string { return fmt.Sprintf("amqp://guest:guest@%s/%s", addr, amqpVhost) }
	dead := at(fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t)))
	_, c := serveApp(t, app.Config{
		BrokerURL: dead + ";" + at(first.Addr()) + ";" + at(second.Addr()), ResultBackend: "rpc://",
		InspectTimeout: time.Second, BrokerTimeout: time.Second, ApplyTimeout: 10 * time.Second,
	})

	queue := fmt.Sprintf("failover-%d", time.Now().UnixNano())
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, queue) })
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{
		Name: "amqp-failover", Broker: testcluster.AMQPURL(amqpVhost), Backend: "rpc://",
		Concurrency: 1, Queues: []string{queue},
	})
	c.awaitWorkerReady(w.Name)

	runs := func(when string) {
		t.Helper()
		var id string
		eventually(t, 20*time.Second, "async-apply accepted "+when, func() bool {
			r := c.post("/api/task/async-apply/stamen.add", nil, map[string]any{"args": []int{20, 22}, "queue": queue})
			if r.Status != http.StatusOK {
				return false
			}
			id = fmt.Sprint(r.JSON(t)["task-id"])
			return true
		})
		eventually(t, 20*time.Second, "the task's events ingested "+when, func() bool { return c.taskState(id) == "SUCCESS" })
		r := c.mustOK(c.get("/api/task/result/"+id, q("timeout", "10")))
		if r["result"] != float64(42) {
			t.Errorf("%s: result %v", when, r)
		}
	}
	runs("on the first live URL")
	first.Cut()
	cut := time.Now()
	runs("after the first live URL was cut")
	t.Logf("failed over in %s", time.Since(cut).Round(time.Millisecond))
	if r := c.get("/api/workers", nil); strings.Contains(string(r.Body), "guest:guest") {
		t.Errorf("a body holds the password: %s", r.Body)
	}
}
