package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestUnreadableResult: a worker that stores its results with pickle. The
// task runs; stamen cannot read the result and says so, with the task's
// state, instead of reporting an outage.
func TestUnreadableResult(t *testing.T) {
	testcluster.SkipIfShort(t, "real workers on Redis and RabbitMQ")
	testcluster.Require(t)
	for _, tc := range []struct {
		kind string
		cfg  func(t *testing.T) (app.Config, string, string)
	}{
		{"redis", func(t *testing.T) (app.Config, string, string) {
			redis := testcluster.StartRedis(t)
			return app.Config{BrokerURL: redis.URL(0), ResultBackend: redis.URL(1)}, redis.URL(0), redis.URL(1)
		}},
		// rpc:// result messages carry their content type.
		{"amqp rpc", func(t *testing.T) (app.Config, string, string) {
			b := testcluster.AMQPURL(amqpVhost)
			return app.Config{BrokerURL: b, ResultBackend: "rpc://"}, b, "rpc://"
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			cfg, wb, wr := tc.cfg(t)
			cfg.InspectTimeout, cfg.ApplyTimeout = time.Second, 20*time.Second
			testUnreadableResult(t, cfg, wb, wr)
		})
	}
}

func testUnreadableResult(t *testing.T, cfg app.Config, wb, wr string) {
	_, c := serveApp(t, cfg)
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{
		Name: "pickler", Broker: wb, Backend: wr,
		Env: []string{"STAMEN_TEST_RESULT_SERIALIZER=pickle"},
	})
	c.awaitWorkerReady(w.Name)

	check := func(op string, r response, id string) {
		t.Helper()
		if r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %d %s, want 422", op, r.Status, r.Body)
		}
		body := r.JSON(t)
		msg, _ := body["error"].(string)
		if body["serializer"] != "pickle" || body["state"] != "SUCCESS" || (id != "" && body["task-id"] != id) ||
			!strings.Contains(msg, "'pickle'") || !strings.Contains(msg, "state SUCCESS") {
			t.Errorf("%s: %s, want serializer pickle, state SUCCESS and an error naming both", op, r.Body)
		}
	}

	r := c.post("/api/task/apply/stamen.add", nil, map[string]any{"args": []int{2, 3}})
	check("apply", r, "")
	id, _ := r.JSON(t)["task-id"].(string)
	if id == "" {
		t.Fatalf("apply: no task-id in %s", r.Body)
	}
	check("result", c.get("/api/task/result/"+id, nil), id)
	check("result with timeout", c.get("/api/task/result/"+id, q("timeout", "5")), id)
	// A task that has not run yet is PENDING as before.
	unknown := uuid.NewString()
	if got := c.mustOK(c.get("/api/task/result/"+unknown, nil)); got["state"] != "PENDING" {
		t.Errorf("result of an unknown id: %v", got)
	}
}

// TestApplyThroughExchange: exchange and routing_key reach a worker that
// consumes only a queue bound to that exchange with that key, on Redis and
// on RabbitMQ. A route to nowhere is a 400, and an unknown body key too.
func TestApplyThroughExchange(t *testing.T) {
	testcluster.SkipIfShort(t, "real workers on Redis and RabbitMQ")
	testcluster.Require(t)
	suffix := uuid.NewString()[:8]
	queue, exchange := "routed-"+suffix, "media-"+suffix
	for _, tc := range []struct {
		kind string
		cfg  func(t *testing.T) (app.Config, string, string)
	}{
		{"redis", func(t *testing.T) (app.Config, string, string) {
			redis := testcluster.StartRedis(t)
			return app.Config{BrokerURL: redis.URL(0), ResultBackend: redis.URL(1)}, redis.URL(0), redis.URL(1)
		}},
		{"amqp", func(t *testing.T) (app.Config, string, string) {
			b := testcluster.AMQPURL(amqpVhost)
			t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, queue) })
			return app.Config{BrokerURL: b, ResultBackend: "rpc://"}, b, "rpc://"
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			cfg, wb, wr := tc.cfg(t)
			cfg.InspectTimeout, cfg.ApplyTimeout = time.Second, 20*time.Second
			_, c := serveApp(t, cfg)
			w := testcluster.StartWorker(t, testcluster.WorkerOptions{
				Name: "routed", Broker: wb, Backend: wr, Queues: []string{queue},
				Env: []string{"STAMEN_TEST_ROUTE=" + queue + ":" + exchange + ":video"},
			})
			c.awaitWorkerReady(w.Name)

			// The worker consumes nothing else: only the route gets it there.
			r := c.mustOK(c.post("/api/task/apply/stamen.add", q("timeout", "15"),
				map[string]any{"args": []int{20, 22}, "exchange": exchange, "routing_key": "video"}))
			if r["state"] != "SUCCESS" || r["result"] != 42.0 {
				t.Errorf("apply through %s/video: %v", exchange, r)
			}
			id := r["task-id"].(string)
			eventually(t, 10*time.Second, "the task's events show the worker", func() bool {
				info := c.get("/api/task/info/"+id, nil)
				return info.Status == http.StatusOK && info.JSON(t)["worker"] == w.Name
			})

			bads := []struct {
				body map[string]any
				want string
			}{
				{map[string]any{"exchange": "no-such-" + suffix, "routing_key": "video"}, "no-such-" + suffix},
				{map[string]any{"args": []int{1, 2}, "retry_policy": map[string]any{"max_retries": 1}}, `"retry_policy"`},
				// Redis bindings are looked up first; RabbitMQ returns the
				// mandatory message instead of confirming and dropping it.
				{map[string]any{"exchange": exchange, "routing_key": "nothing-bound"}, "no queue is bound"},
			}
			for _, bad := range bads {
				r := c.post("/api/task/send-task/stamen.add", nil, bad.body)
				msg, _ := r.JSON(t)["error"].(string)
				if r.Status != http.StatusBadRequest || !strings.Contains(msg, bad.want) {
					t.Errorf("send-task %v: %d %s, want 400 mentioning %s", bad.body, r.Status, r.Body, bad.want)
				}
			}
		})
	}
}
