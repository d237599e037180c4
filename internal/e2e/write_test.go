package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// workerInfo refreshes and returns one worker's inspection.
func workerInfo(t *testing.T, c *cluster, worker string) map[string]any {
	t.Helper()
	r := c.api.mustOK(c.api.get("/api/workers", q("refresh", "true", "workername", worker)))
	info, ok := r[worker].(map[string]any)
	if !ok {
		t.Fatalf("no info for %s: %v", worker, r)
	}
	return info
}

func queueNames(info map[string]any) []string {
	var names []string
	qs, _ := info["active_queues"].([]any)
	for _, q := range qs {
		if m, ok := q.(map[string]any); ok {
			names = append(names, fmt.Sprint(m["name"]))
		}
	}
	return names
}

func poolProcesses(info map[string]any) int {
	stats, _ := info["stats"].(map[string]any)
	pool, _ := stats["pool"].(map[string]any)
	procs, _ := pool["processes"].([]any)
	return len(procs)
}

// consumeOn makes worker consume an extra queue (and only that worker), so
// that a task can be sent to it alone.
func consumeOn(t *testing.T, c *cluster, worker, queue string) {
	t.Helper()
	r := c.api.mustOK(c.api.post("/api/worker/queue/add-consumer/"+pathEscape(worker), q("queue", queue), nil))
	if r["message"] != "add consumer "+queue {
		t.Fatalf("add-consumer: %v", r)
	}
	eventually(t, 15*time.Second, worker+" consuming "+queue, func() bool {
		return slices.Contains(queueNames(workerInfo(t, c, worker)), queue)
	})
}

// declaredByWorker has worker declare queue, as it does the queues it
// consumes, and stop consuming it: the queue then exists, empty, and
// messages sent to it wait there.
func declaredByWorker(t *testing.T, c *cluster, worker, queue string) {
	t.Helper()
	consumeOn(t, c, worker, queue)
	c.api.mustOK(c.api.post("/api/worker/queue/cancel-consumer/"+pathEscape(worker), q("queue", queue), nil))
	eventually(t, 15*time.Second, worker+" no longer consuming "+queue, func() bool {
		return !slices.Contains(queueNames(workerInfo(t, c, worker)), queue)
	})
}

func flowerTime(t time.Time) string { return t.Format("2006-01-02 15:04:05.000000") }

func writeCases() []suiteCase {
	return []suiteCase{
		{"apply returns the result", func(t *testing.T, c *cluster) {
			r := c.api.mustOK(c.api.post("/api/task/apply/stamen.add", nil, map[string]any{"args": []any{4, 5}}))
			if r["state"] != "SUCCESS" || r["result"] != float64(9) || r["task-id"] == "" {
				t.Errorf("apply: %v", r)
			}
		}},
		{"apply of a failing task returns exception and traceback", func(t *testing.T, c *cluster) {
			r := c.api.mustOK(c.api.post("/api/task/apply/stamen.fail", nil, map[string]any{"args": []any{"kaput"}}))
			if r["state"] != "FAILURE" || r["result"] != "ValueError('kaput')" || !strings.Contains(fmt.Sprint(r["traceback"]), "ValueError: kaput") {
				t.Errorf("apply fail: %v", r)
			}
		}},
		{"apply with a short bound on a long task answers 504", func(t *testing.T, c *cluster) {
			start := time.Now()
			r := c.api.post("/api/task/apply/stamen.sleep", q("timeout", "1"), map[string]any{"args": []any{4}})
			if r.Status != http.StatusGatewayTimeout || r.JSON(t)["error"] == nil {
				t.Errorf("status %d: %s", r.Status, r.Body)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("504 took %s", d)
			}
		}},
		{"result with timeout waits then answers", func(t *testing.T, c *cluster) {
			id := runTask(t, c, "stamen.sleep", map[string]any{"args": []any{1}})
			r := c.api.mustOK(c.api.get("/api/task/result/"+id, q("timeout", "20")))
			if r["state"] != "SUCCESS" || r["result"] != float64(1) || r["task-id"] != id {
				t.Errorf("result: %v", r)
			}
			fail := runTask(t, c, "stamen.fail", map[string]any{"args": []any{"oops"}})
			f := c.api.mustOK(c.api.get("/api/task/result/"+fail, q("timeout", "20")))
			if f["state"] != "FAILURE" || f["result"] != "ValueError('oops')" || f["traceback"] == nil {
				t.Errorf("failed result: %v", f)
			}
			slow := runTask(t, c, "stamen.sleep", map[string]any{"args": []any{5}})
			if r := c.api.get("/api/task/result/"+slow, q("timeout", "0.5")); r.Status != http.StatusGatewayTimeout {
				t.Errorf("result wait past its timeout: status %d: %s", r.Status, r.Body)
			}
		}},
		{"async-apply countdown and eta delay the run", func(t *testing.T, c *cluster) {
			t0 := float64(time.Now().UnixMicro()) / 1e6
			cd := runTask(t, c, "stamen.add", map[string]any{"args": []any{1, 1}, "countdown": 3})
			eta := runTask(t, c, "stamen.add", map[string]any{"args": []any{1, 2}, "eta": flowerTime(time.Now().Add(3 * time.Second))})
			for _, id := range []string{cd, eta} {
				info := taskInfo(t, c, id, "SUCCESS")
				if started, _ := info["started"].(float64); started < t0+2.5 {
					t.Errorf("task %s started %.2fs after publish, want >= 3s", id, started-t0)
				}
				if info["eta"] == nil {
					t.Errorf("task %s has no eta: %v", id, info)
				}
			}
		}},
		{"async-apply expires revokes a task that waited too long", func(t *testing.T, c *cluster) {
			id := runTask(t, c, "stamen.add", map[string]any{"args": []any{1, 1}, "countdown": 3, "expires": 1})
			info := taskInfo(t, c, id, "REVOKED", "SUCCESS")
			if info["state"] != "REVOKED" {
				t.Errorf("expired task ran: %v", info)
			}
		}},
		{"async-apply queue routes to the consuming worker", func(t *testing.T, c *cluster) {
			queue := "only-w1-" + c.kind
			consumeOn(t, c, c.w1.Name, queue)
			id := runTask(t, c, "stamen.add", map[string]any{"args": []any{2, 2}, "queue": queue})
			info := taskInfo(t, c, id, "SUCCESS")
			if info["worker"] != c.w1.Name {
				t.Errorf("task on queue %s ran on %v", queue, info["worker"])
			}
		}},
		{"a queue no worker declares is not created, and add-consumer keeps the worker alive", func(t *testing.T, c *cluster) {
			queue := fmt.Sprintf("fresh-%s-%d", c.kind, time.Now().UnixNano())
			if c.amqp {
				// Registered first, so that it runs after the consumer is cancelled.
				t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, queue) })
			}
			body := map[string]any{"args": []any{3, 4}, "queue": queue}
			for _, op := range []string{"async-apply", "send-task"} {
				r := c.api.post("/api/task/"+op+"/stamen.add", nil, body)
				switch {
				case !c.amqp && r.Status != http.StatusOK:
					// Redis has nothing to declare: the message waits in its list.
					t.Errorf("%s to a new Redis queue: %d %s", op, r.Status, r.Body)
				case c.amqp && (r.Status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(r.JSON(t)["error"]), "does not exist")):
					// The sample app's workers declare their queues with
					// x-max-priority 10: a queue stamen declared without it
					// would make their own declaration fail with 406.
					t.Errorf("%s to a queue no worker declares: %d %s, want 400 saying it does not exist", op, r.Status, r.Body)
				}
			}
			// The worker declares the queue itself, with its arguments.
			consumeOn(t, c, c.w1.Name, queue)
			id := runTask(t, c, "stamen.add", body)
			if info := taskInfo(t, c, id, "SUCCESS"); info["worker"] != c.w1.Name {
				t.Errorf("task on %s ran on %v", queue, info["worker"])
			}
			for _, w := range []*testcluster.Worker{c.w1, c.w2, c.w3, c.w4} {
				if err := w.Ping(10 * time.Second); err != nil {
					t.Errorf("%s does not answer ping any more: %v", w.Name, err)
				}
			}
			c.api.mustOK(c.api.post("/api/worker/queue/cancel-consumer/"+pathEscape(c.w1.Name), q("queue", queue), nil))
			eventually(t, 15*time.Second, c.w1.Name+" no longer consuming "+queue, func() bool {
				return !slices.Contains(queueNames(workerInfo(t, c, c.w1.Name)), queue)
			})
		}},
		{"async-apply priority orders a backlog", func(t *testing.T, c *cluster) {
			queue := "prio-" + c.kind
			// Redis serves a lower number first (kombu's priority lists),
			// RabbitMQ a higher one.
			first, last := 0, 9
			if c.amqp {
				first, last = 9, 0
				// RabbitMQ honours priority only on a queue declared with
				// x-max-priority, as the sample app's workers declare the
				// queues they consume (task_queue_max_priority). stamen
				// does not create a queue no worker declares: so a worker
				// declares the queue first, and stops consuming while the
				// backlog builds up. (Not on
				// Redis: a worker's BRPOP in flight may still take a
				// message for a queue it has just stopped consuming.)
				consumeOn(t, c, c.w1.Name, queue)
				c.api.mustOK(c.api.post("/api/worker/queue/cancel-consumer/"+pathEscape(c.w1.Name), q("queue", queue), nil))
				eventually(t, 15*time.Second, c.w1.Name+" no longer consuming "+queue, func() bool {
					return !slices.Contains(queueNames(workerInfo(t, c, c.w1.Name)), queue)
				})
			}
			// Published in the opposite order, so that FIFO alone fails.
			lastID := runTask(t, c, "stamen.add", map[string]any{"args": []any{1, 0}, "queue": queue, "priority": last})
			firstID := runTask(t, c, "stamen.add", map[string]any{"args": []any{0, 1}, "queue": queue, "priority": first})
			// Both wait, and both are counted: Redis keeps them on one list
			// per priority step, RabbitMQ in one priority queue.
			lengths := c.api.mustOK(c.api.get("/api/queues/length", nil))
			var waiting any
			for _, e := range lengths["active_queues"].([]any) {
				if m := e.(map[string]any); m["name"] == queue {
					waiting = m["messages"]
				}
			}
			if waiting != float64(2) {
				t.Errorf("queue %s: %v messages waiting, want 2: %v", queue, waiting, lengths)
			}
			consumeOn(t, c, c.w1.Name, queue)
			fi, li := taskInfo(t, c, firstID, "SUCCESS"), taskInfo(t, c, lastID, "SUCCESS")
			if fi["received"].(float64) > li["received"].(float64) {
				t.Errorf("priority %d received after priority %d: %v > %v", first, last, fi["received"], li["received"])
			}
		}},
		{"revoke terminate stops a running task", func(t *testing.T, c *cluster) {
			id := runTask(t, c, "stamen.sleep", map[string]any{"args": []any{30}})
			info := taskInfo(t, c, id, "STARTED")
			r := c.api.mustOK(c.api.post("/api/task/revoke/"+id, q("terminate", "true", "signal", "SIGKILL"), nil))
			if r["message"] != fmt.Sprintf("Revoked '%s'", id) {
				t.Errorf("revoke: %v", r)
			}
			taskInfo(t, c, id, "REVOKED")
			worker := info["worker"].(string)
			if !slices.Contains(toStrings(workerInfo(t, c, worker)["revoked"]), id) {
				t.Errorf("%s not in %s's revoked list", id, worker)
			}
		}},
		{"abort stops an abortable task", func(t *testing.T, c *cluster) {
			id := runTask(t, c, "stamen.abortable", map[string]any{"kwargs": map[string]any{"seconds": 30}})
			info := taskInfo(t, c, id, "STARTED")
			r := c.api.post("/api/task/abort/"+id, nil, nil)
			if !c.hasAbort {
				if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "rpc://") {
					t.Errorf("abort on rpc://: status %d: %s", r.Status, r.Body)
				}
				// Ended for sure before the next case: a task left running
				// would hold its worker's pool (one process on w4), and
				// the tasks prefetched behind it. The REVOKED event comes
				// before the signal lands, so the worker's active list
				// tells.
				c.api.mustOK(c.api.post("/api/task/revoke/"+id, q("terminate", "true", "signal", "SIGKILL"), nil))
				worker := info["worker"].(string)
				eventually(t, 20*time.Second, id+" no longer active on "+worker, func() bool {
					return !strings.Contains(fmt.Sprint(workerInfo(t, c, worker)["active"]), id)
				})
				return
			}
			if m := c.api.mustOK(r); m["message"] != fmt.Sprintf("Aborted '%s'", id) {
				t.Errorf("abort: %v", m)
			}
			res := c.api.mustOK(c.api.get("/api/task/result/"+id, q("timeout", "20")))
			if out, _ := res["result"].(map[string]any); res["state"] != "SUCCESS" || out["aborted"] != true {
				t.Errorf("aborted task result: %v", res)
			}
		}},
		{"rate-limit shows in the worker's registered tasks", func(t *testing.T, c *cluster) {
			r := c.api.mustOK(c.api.post("/api/task/rate-limit/stamen.add", q("workername", c.w1.Name, "rateLimit", "10/m"), nil))
			if r["message"] != "new rate limit set successfully" {
				t.Errorf("rate-limit: %v", r)
			}
			if !slices.Contains(toStrings(workerInfo(t, c, c.w1.Name)["registered"]), "stamen.add [rate_limit=10/m]") {
				t.Errorf("rate limit not visible on %s", c.w1.Name)
			}
			// Flower's own parameter name works too, and an empty rate lifts the limit.
			r = c.api.mustOK(c.api.post("/api/task/rate-limit/stamen.add", q("workername", c.w1.Name, "ratelimit", ""), nil))
			if r["message"] != "rate limit disabled successfully" {
				t.Errorf("rate-limit reset: %v", r)
			}
		}},
		{"timeout changes the task's limits on the worker", func(t *testing.T, c *cluster) {
			r := c.api.mustOK(c.api.post("/api/task/timeout/stamen.sleep", q("workername", c.w1.Name, "soft", "1.5", "hard", "2.5"), nil))
			if r["message"] != "time limits set successfully" {
				t.Errorf("timeout: %v", r)
			}
			// Celery 5.2's prefork request class captures a task's limits when
			// the worker starts, so a running worker shows the new limits in
			// its registry rather than applying them; ask for them.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			replies, err := c.app.Broker().Broadcast(ctx, celery.ControlCommand{
				Method: "registered", Arguments: map[string]any{"taskinfoitems": []any{"time_limit", "soft_time_limit"}},
				Destination: []string{c.w1.Name}, Reply: true, Limit: 1,
			})
			if err != nil || len(replies) != 1 {
				t.Fatalf("registered: %v %v", replies, err)
			}
			if want := "stamen.sleep [time_limit=2.5 soft_time_limit=1.5]"; !strings.Contains(string(replies[0].Value), want) {
				t.Errorf("want %q in %s", want, replies[0].Value)
			}
		}},
		{"pool grow and shrink change the process count", func(t *testing.T, c *cluster) {
			before := poolProcesses(workerInfo(t, c, c.w1.Name))
			r := c.api.mustOK(c.api.post("/api/worker/pool/grow/"+pathEscape(c.w1.Name), q("n", "1"), nil))
			if r["message"] != fmt.Sprintf("Growing '%s' worker's pool by 1", c.w1.Name) {
				t.Errorf("grow: %v", r)
			}
			eventually(t, 20*time.Second, "pool grown", func() bool { return poolProcesses(workerInfo(t, c, c.w1.Name)) == before+1 })
			r = c.api.mustOK(c.api.post("/api/worker/pool/shrink/"+pathEscape(c.w1.Name), nil, nil))
			if r["message"] != fmt.Sprintf("Shrinking '%s' worker's pool by 1", c.w1.Name) {
				t.Errorf("shrink: %v", r)
			}
			eventually(t, 20*time.Second, "pool shrunk", func() bool { return poolProcesses(workerInfo(t, c, c.w1.Name)) == before })
			// A worker with an autoscaler refuses: 403 with its reason.
			r2 := c.api.post("/api/worker/pool/grow/"+pathEscape(c.w2.Name), nil, nil)
			if r2.Status != http.StatusForbidden || !strings.Contains(string(r2.Body), "not supported with autoscale") {
				t.Errorf("grow with autoscaler: %d %s", r2.Status, r2.Body)
			}
		}},
		{"autoscale changes the autoscaler range", func(t *testing.T, c *cluster) {
			r := c.api.mustOK(c.api.post("/api/worker/pool/autoscale/"+pathEscape(c.w2.Name), q("min", "1", "max", "3"), nil))
			if r["message"] != fmt.Sprintf("Autoscaling '%s' worker (min=1, max=3)", c.w2.Name) {
				t.Errorf("autoscale: %v", r)
			}
			eventually(t, 10*time.Second, "autoscaler range 1..3", func() bool {
				stats, _ := workerInfo(t, c, c.w2.Name)["stats"].(map[string]any)
				as, _ := stats["autoscaler"].(map[string]any)
				return as["min"] == float64(1) && as["max"] == float64(3)
			})
			r2 := c.api.post("/api/worker/pool/autoscale/"+pathEscape(c.w1.Name), q("min", "1", "max", "3"), nil)
			if r2.Status != http.StatusForbidden || !strings.Contains(string(r2.Body), "Autoscale not enabled") {
				t.Errorf("autoscale without --autoscale: %d %s", r2.Status, r2.Body)
			}
		}},
		{"pool restart needs pool restarts enabled", func(t *testing.T, c *cluster) {
			r := c.api.mustOK(c.api.post("/api/worker/pool/restart/"+pathEscape(c.w2.Name), nil, nil))
			if r["message"] != fmt.Sprintf("Restarting '%s' worker's pool", c.w2.Name) {
				t.Errorf("restart: %v", r)
			}
			r2 := c.api.post("/api/worker/pool/restart/"+pathEscape(c.w1.Name), nil, nil)
			if r2.Status != http.StatusForbidden || !strings.Contains(string(r2.Body), "Pool restarts not enabled") {
				t.Errorf("restart without pool restarts: %d %s", r2.Status, r2.Body)
			}
		}},
		{"add and cancel consumer change active queues", func(t *testing.T, c *cluster) {
			queue := "extra-" + c.kind
			consumeOn(t, c, c.w2.Name, queue)
			r := c.api.mustOK(c.api.post("/api/worker/queue/cancel-consumer/"+pathEscape(c.w2.Name), q("queue", queue), nil))
			if r["message"] != "no longer consuming from "+queue {
				t.Errorf("cancel-consumer: %v", r)
			}
			eventually(t, 15*time.Second, "queue dropped", func() bool {
				return !slices.Contains(queueNames(workerInfo(t, c, c.w2.Name)), queue)
			})
		}},
		{"bad and missing parameters are 4xx and send nothing", func(t *testing.T, c *cluster) {
			w1 := pathEscape(c.w1.Name)
			w2 := pathEscape(c.w2.Name)
			long := strings.Repeat("x", 256) // the spec's names and ids stop at 255
			// Revokes with a bad signal use their own id: had one reached a
			// worker, the worker would list it as revoked (it flags the id
			// before it fails on the signal).
			badSignalID := "bad-signal-" + c.kind
			for _, tc := range []struct {
				method string
				path   string
				query  []string
				body   any
				status int
			}{
				{"POST", "/api/worker/queue/add-consumer/" + w1, nil, nil, 400},
				{"POST", "/api/worker/queue/add-consumer/" + w1, []string{"queue", ""}, nil, 400},
				{"POST", "/api/worker/queue/add-consumer/" + w1, []string{"queue", "a b"}, nil, 400},
				{"POST", "/api/worker/queue/cancel-consumer/" + w1, nil, nil, 400},
				{"POST", "/api/worker/queue/add-consumer/nobody@nowhere", []string{"queue", "x"}, nil, 404},
				{"POST", "/api/worker/pool/autoscale/" + w2, []string{"max", "3"}, nil, 400},
				{"POST", "/api/worker/pool/autoscale/" + w2, []string{"min", "abc", "max", "3"}, nil, 400},
				{"POST", "/api/worker/pool/autoscale/" + w2, []string{"min", "5", "max", "3"}, nil, 400},
				{"POST", "/api/worker/pool/grow/" + w1, []string{"n", "two"}, nil, 400},
				{"POST", "/api/worker/pool/grow/" + w1, []string{"n", "0"}, nil, 400},
				{"POST", "/api/worker/pool/shrink/" + w1, []string{"n", "-1"}, nil, 400},
				{"POST", "/api/worker/pool/grow/nobody@nowhere", nil, nil, 404},
				{"POST", "/api/worker/pool/restart/nobody@nowhere", nil, nil, 404},
				{"POST", "/api/worker/shutdown/nobody@nowhere", nil, nil, 404},
				{"POST", "/api/task/timeout/stamen.sleep", []string{"soft", "1"}, nil, 400},
				{"POST", "/api/task/timeout/stamen.sleep", []string{"workername", c.w1.Name, "soft", "abc"}, nil, 400},
				{"POST", "/api/task/timeout/no.such.task", []string{"workername", c.w1.Name, "soft", "1"}, nil, 404},
				{"POST", "/api/task/timeout/stamen.sleep", []string{"workername", "nobody@nowhere", "soft", "1"}, nil, 404},
				{"POST", "/api/task/rate-limit/stamen.add", []string{"workername", c.w1.Name}, nil, 400},
				{"POST", "/api/task/rate-limit/stamen.add", []string{"workername", c.w1.Name, "rateLimit", "xx/q"}, nil, 400},
				{"POST", "/api/task/rate-limit/no.such.task", []string{"workername", c.w1.Name, "rateLimit", "1"}, nil, 404},
				{"POST", "/api/task/revoke/some-id", []string{"terminate", "perhaps"}, nil, 400},
				{"POST", "/api/task/async-apply/no.such.task", nil, map[string]any{}, 404},
				{"POST", "/api/task/apply/no.such.task", nil, map[string]any{}, 404},
				{"POST", "/api/task/async-apply/stamen.add", nil, "{not json", 400},
				{"POST", "/api/task/async-apply/stamen.add", nil, map[string]any{"args": "notalist"}, 400},
				{"POST", "/api/task/async-apply/stamen.add", nil, "[1, 2]", 400},
				{"POST", "/api/task/async-apply/stamen.add", nil, map[string]any{"eta": "2030-01-01T00:00"}, 400},
				{"POST", "/api/task/async-apply/stamen.add", nil, map[string]any{"countdown": "soon"}, 400},
				{"POST", "/api/task/async-apply/stamen.add", nil, map[string]any{"priority": 300}, 400},
				{"POST", "/api/task/send-task/stamen.add", nil, map[string]any{"kwargs": []any{1}}, 400},
				// Signal names Celery's worker refuses; Flower would forward them.
				{"POST", "/api/task/revoke/" + badSignalID, []string{"terminate", "true", "signal", "SIGBOGUS"}, nil, 400},
				{"POST", "/api/task/revoke/" + badSignalID, []string{"terminate", "true", "signal", "sigkill"}, nil, 400},
				{"POST", "/api/task/revoke/" + badSignalID, []string{"terminate", "true", "signal", "9"}, nil, 400},
				{"POST", "/api/task/revoke/" + badSignalID, []string{"signal", "SIG_DFL"}, nil, 400},
				// Flower answers 500 for a timeout that is not a number.
				{"POST", "/api/task/apply/stamen.add", []string{"timeout", "soon"}, map[string]any{"args": []any{1, 2}}, 400},
				{"POST", "/api/task/apply/stamen.add", []string{"timeout", "-1"}, map[string]any{"args": []any{1, 2}}, 400},
				{"GET", "/api/task/result/some-id", []string{"timeout", "soon"}, nil, 400},
				{"GET", "/api/task/result/some-id", []string{"timeout", "1e9"}, nil, 400},
				// Ids and names: at most 255 characters (the spec), no white
				// space or control characters (no Celery id or name has them).
				{"POST", "/api/task/abort/" + long, nil, nil, 400},
				{"POST", "/api/task/abort/" + pathEscape("id with spaces"), nil, nil, 400},
				{"POST", "/api/task/send-task/" + long, nil, map[string]any{}, 400},
				{"POST", "/api/task/send-task/" + pathEscape("stamen.add now"), nil, map[string]any{}, 400},
				{"POST", "/api/task/send-task/" + pathEscape("stamen.add\x01"), nil, map[string]any{}, 400},
				{"POST", "/api/task/async-apply/" + long, nil, map[string]any{}, 400},
				{"POST", "/api/task/async-apply/" + pathEscape("stamen.add\n"), nil, map[string]any{}, 400},
				{"POST", "/api/task/apply/" + pathEscape("stamen. add"), nil, map[string]any{}, 400},
			} {
				r := c.api.do(tc.method, tc.path, q(tc.query...), tc.body)
				if r.Status != tc.status {
					t.Errorf("%s %.80s %v %v: status %d, want %d: %s", tc.method, tc.path, tc.query, tc.body, r.Status, tc.status, r.Body)
					continue
				}
				if e, _ := r.JSON(t)["error"].(string); e == "" {
					t.Errorf("%s %.80s %v: no error message: %s", tc.method, tc.path, tc.query, r.Body)
				}
			}
			// Nothing malformed reached the workers: they are all still alive
			// and answering, and none heard of the bad revokes.
			for _, w := range []string{c.w1.Name, c.w2.Name, c.w3.Name, c.w4.Name} {
				info := workerInfo(t, c, w)
				if !slices.Contains(toStrings(info["registered"]), "stamen.sleep") {
					t.Errorf("%s does not answer any more", w)
				}
				if slices.Contains(toStrings(info["revoked"]), badSignalID) {
					t.Errorf("a revoke with a bad signal reached %s", w)
				}
			}
		}},
	}
}

func lifecycleCases() []suiteCase {
	return []suiteCase{
		{"a killed worker goes offline", func(t *testing.T, c *cluster) {
			// flower_worker_online too: a killed worker sends no
			// worker-offline, and an alert on the gauge is how it is noticed.
			online := map[string]string{"worker": c.w3.Name}
			eventually(t, 10*time.Second, c.w3.Name+" online in the metrics", func() bool {
				return scrape(t, c).Sum("flower_worker_online", online) == 1
			})
			c.w3.Kill()
			eventually(t, 20*time.Second, c.w3.Name+" offline", func() bool {
				return c.api.mustOK(c.api.get("/api/workers", q("status", "true")))[c.w3.Name] == false
			})
			eventually(t, 10*time.Second, c.w3.Name+" offline in the metrics", func() bool {
				m := scrape(t, c)
				return m.Sum("flower_worker_online", online) == 0 && m["flower_worker_online"] != nil
			})
		}},
		{"shutdown makes the worker exit", func(t *testing.T, c *cluster) {
			r := c.api.mustOK(c.api.post("/api/worker/shutdown/"+pathEscape(c.w4.Name), nil, nil))
			if r["message"] != "Shutting down!" {
				t.Errorf("shutdown: %v", r)
			}
			eventually(t, 20*time.Second, c.w4.Name+" exited", func() bool { return !c.w4.Alive() })
			eventually(t, 10*time.Second, c.w4.Name+" offline", func() bool {
				return c.api.mustOK(c.api.get("/api/workers", q("status", "true")))[c.w4.Name] == false
			})
		}},
	}
}
