package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestTaskRoutes: Flower sends a task with the workers' own Celery app,
// so a task given no queue goes where the app's task_routes say, else to
// its task_default_queue. stamen has no app: it must read both from the
// workers' conf. Two Celery 5.6 workers on RabbitMQ, one consuming only
// the routed queue and one only the default queue, must each run the
// tasks routed to them (none consumes Celery's "celery").
func TestTaskRoutes(t *testing.T) {
	testcluster.SkipIfShort(t, "real Celery 5.6 workers on RabbitMQ")
	testcluster.RequireCelery(t, testcluster.Celery56)
	suffix := uuid.NewString()[:8]
	routed, dflt := "routed-"+suffix, "default-"+suffix
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, routed, dflt) })
	broker := testcluster.AMQPURL(amqpVhost)
	conf, err := json.Marshal(map[string]any{
		"task_default_queue": dflt,
		"task_routes": map[string]any{
			"stamen.echo":    map[string]any{"queue": routed},
			"stamen.raise_*": routed,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, c := serveApp(t, app.Config{BrokerURL: broker, ResultBackend: "rpc://",
		InspectTimeout: time.Second, ApplyTimeout: 20 * time.Second})
	env := []string{"STAMEN_TEST_CONF=" + string(conf)}
	var wr, wd *testcluster.Worker
	done := make(chan struct{})
	go func() {
		defer close(done)
		wr = testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "routed", Broker: broker, Celery: testcluster.Celery56, Queues: []string{routed}, Env: env})
	}()
	wd = testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "dflt", Broker: broker, Celery: testcluster.Celery56, Queues: []string{dflt}, Env: env})
	<-done
	if wr == nil || wd == nil {
		t.FailNow()
	}
	c.awaitWorkerReady(wr.Name)
	c.awaitWorkerReady(wd.Name)

	for _, tc := range []struct {
		op, task string
		body     map[string]any
		worker   string
		state    string
	}{
		{"async-apply", "stamen.echo", map[string]any{"args": []any{1}}, wr.Name, "SUCCESS"},
		{"send-task", "stamen.raise_a", map[string]any{"args": []any{"ValueError"}}, wr.Name, "FAILURE"},
		{"async-apply", "stamen.add", map[string]any{"args": []any{1, 2}}, wd.Name, "SUCCESS"},
		{"apply", "stamen.add", map[string]any{"args": []any{2, 3}}, wd.Name, "SUCCESS"},
	} {
		t.Run(tc.op+" "+tc.task, func(t *testing.T) {
			c.t = t
			id, _ := c.mustOK(c.post("/api/task/"+tc.op+"/"+tc.task, nil, tc.body))["task-id"].(string)
			var info map[string]any
			eventually(t, 20*time.Second, "task "+id+" "+tc.state, func() bool {
				r := c.get("/api/task/info/"+id, nil)
				if r.Status != 200 {
					return false
				}
				info = r.JSON(t)
				return info["state"] == tc.state
			})
			if info["worker"] != tc.worker {
				t.Errorf("%s ran on %v, want %s (the worker consuming the queue the workers' task_routes or task_default_queue name)", tc.task, info["worker"], tc.worker)
			}
		})
	}
}
