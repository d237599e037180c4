package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestAMQPOutage takes RabbitMQ away from stamen alone, through a proxy
// between the two, while a real worker (connected to RabbitMQ directly)
// runs a task, then brings it back on the same address. First the proxy
// stalls, as a network path that drops packets does: no error reaches
// stamen, only silence, which is where a broker call without a timeout
// would hang. Then it cuts every connection and refuses new ones. In both
// the stored state is served and every operation that needs the broker
// answers a JSON error within its timeout, without the password; once the
// proxy listens again stamen reconnects by itself and ingests the worker's
// events again, and nothing stored is lost.
func TestAMQPOutage(t *testing.T) {
	testcluster.Require(t)
	proxy := testcluster.StartProxy(t, "127.0.0.1:5672")
	const brokerTimeout = time.Second
	// guest's password is "guest": the bodies must not hold "guest:guest"
	// or ":guest@", which only an unmasked URL would.
	brokerURL := fmt.Sprintf("amqp://guest:guest@%s/%s", proxy.Addr(), amqpVhost)
	a, c := serveApp(t, app.Config{
		BrokerURL: brokerURL, ResultBackend: "rpc://",
		InspectTimeout: time.Second, BrokerTimeout: brokerTimeout, ApplyTimeout: 10 * time.Second,
	})

	// A queue of this test's own, so that no other worker on the vhost
	// takes its tasks. The deletion is registered before the worker starts
	// so that it runs after the worker has stopped.
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	queue := "outage-" + hex.EncodeToString(suffix)
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, queue) })
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{
		Name: "amqp-outage", Broker: testcluster.AMQPURL(amqpVhost), Backend: "rpc://",
		Concurrency: 2, Queues: []string{queue},
	})
	c.awaitWorkerReady(w.Name)

	apply := func(task string, args ...any) string {
		t.Helper()
		r := c.mustOK(c.post("/api/task/async-apply/"+task, nil, map[string]any{"args": args, "queue": queue}))
		return fmt.Sprint(r["task-id"])
	}
	var done []string
	for i := range 5 {
		done = append(done, apply("stamen.add", i, 1))
	}
	busy := apply("stamen.sleep", 2)
	c.awaitDoneAndRunning(done, busy)
	// The results came back over rpc:// before the outage.
	for _, id := range done {
		c.mustOK(c.get("/api/task/result/"+id, q("timeout", "10")))
	}

	args := map[string]any{"args": []int{1, 1}, "queue": queue}
	type op struct {
		method, path string
		query        []string
		body         any
	}
	writes := []op{
		{http.MethodPost, "/api/task/async-apply/stamen.add", nil, args},
		{http.MethodPost, "/api/task/send-task/stamen.add", nil, args},
		{http.MethodGet, "/api/queues/length", nil, nil},
		{http.MethodPost, "/api/task/revoke/" + busy, nil, nil},
		{http.MethodPost, "/api/worker/pool/grow/" + pathEscape(w.Name), nil, nil},
		{http.MethodPost, "/api/worker/queue/add-consumer/" + pathEscape(w.Name), []string{"queue", queue + "-more"}, nil},
	}
	// fails checks that every op answers an error in want within its
	// bound: a publish checks its queue and then waits for the confirm,
	// each bounded by the broker timeout.
	fails := func(phase string, ops []op, want ...int) {
		t.Helper()
		for _, o := range ops {
			start := time.Now()
			r := c.do(o.method, o.path, q(o.query...), o.body)
			took := time.Since(start)
			msg, _ := r.JSON(t)["error"].(string)
			if !slices.Contains(want, r.Status) || msg == "" {
				t.Errorf("%s: %s %s: %d %s, want %v with a JSON error", phase, o.method, o.path, r.Status, r.Body, want)
			}
			if body := string(r.Body); strings.Contains(body, "guest:guest") || strings.Contains(body, ":guest@") {
				t.Errorf("%s: %s %s: the error shows the password: %s", phase, o.method, o.path, body)
			}
			if took > 2*brokerTimeout+time.Second {
				t.Errorf("%s: %s %s took %s to fail, beyond its timeout", phase, o.method, o.path, took.Round(time.Millisecond))
			}
			t.Logf("%s: %s %s: %d in %s: %s", phase, o.method, o.path, r.Status, took.Round(time.Millisecond), msg)
		}
	}
	served := func(phase string) {
		t.Helper()
		for _, id := range done {
			if got := c.taskState(id); got != "SUCCESS" {
				t.Errorf("%s: task %s: %s", phase, id, got)
			}
		}
		if _, ok := c.mustOK(c.get("/api/workers", nil))[w.Name]; !ok {
			t.Errorf("%s: the cached worker %s is gone", phase, w.Name)
		}
	}

	// Silence: stamen's connection still looks open, so every call has to
	// give up on its own. A broker that does not answer in time is a
	// gateway timeout (504) or, once amqp091 notices, unavailable (503).
	proxy.Stall()
	served("stalled")
	fails("stalled", writes, http.StatusServiceUnavailable, http.StatusGatewayTimeout)

	// Cut: the connection is gone and reconnecting is refused.
	proxy.Cut()
	cut := time.Now()
	served("cut")
	// rpc:// keeps the finished results it received; one still running
	// cannot be known while the results queue is gone.
	if r := c.mustOK(c.get("/api/task/result/"+done[0], nil)); r["state"] != "SUCCESS" {
		t.Errorf("cut: the stored result of %s: %v", done[0], r)
	}
	fails("cut", append(writes, op{http.MethodGet, "/api/task/result/" + busy, nil, nil}), http.StatusServiceUnavailable)
	// Let a few reconnect attempts fail, so that the backoff is under way.
	time.Sleep(max(0, 3*time.Second-time.Since(cut)))

	proxy.Start()
	back := time.Now()
	// A new task: stamen has to publish it and follow its events again.
	var id string
	eventually(t, 20*time.Second, "async-apply accepted again", func() bool {
		r := c.post("/api/task/async-apply/stamen.add", nil, map[string]any{"args": []int{20, 22}, "queue": queue})
		if r.Status != http.StatusOK {
			return false
		}
		id = fmt.Sprint(r.JSON(t)["task-id"])
		return true
	})
	t.Logf("publishing again %s after the proxy came back", time.Since(back).Round(time.Millisecond))
	eventually(t, 20*time.Second, "the new task's events ingested", func() bool { return c.taskState(id) == "SUCCESS" })
	t.Logf("ingesting again %s after the proxy came back", time.Since(back).Round(time.Millisecond))
	if r := c.mustOK(c.get("/api/task/result/"+id, q("timeout", "10"))); r["result"] != float64(42) {
		t.Errorf("result over rpc:// after the outage: %v", r)
	}
	c.mustOK(c.get("/api/queues/length", nil))
	if rb, ok := a.Broker().(interface{ Reconnects() int64 }); !ok || rb.Reconnects() < 1 {
		t.Errorf("the broker connection was not re-established (reconnect count unavailable or 0)")
	}
	served("after the outage")
}
