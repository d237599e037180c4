package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// runTask publishes a task through async-apply and returns its id.
func runTask(t *testing.T, c *cluster, name string, body any) string {
	t.Helper()
	r := c.api.mustOK(c.api.post("/api/task/async-apply/"+name, nil, body))
	id, _ := r["task-id"].(string)
	if id == "" {
		t.Fatalf("no task-id in %v", r)
	}
	return id
}

// taskInfo waits until the events state has the task in one of the states
// and returns its record.
func taskInfo(t *testing.T, c *cluster, id string, states ...string) map[string]any {
	t.Helper()
	var info map[string]any
	eventually(t, 30*time.Second, fmt.Sprintf("task %s in %v", id, states), func() bool {
		r := c.api.get("/api/task/info/"+id, nil)
		if r.Status != http.StatusOK {
			return false
		}
		info = r.JSON(t)
		return slices.Contains(states, info["state"].(string))
	})
	return info
}

func taskKeys(t *testing.T, r response) []string {
	t.Helper()
	// The key order of /api/tasks is the result order, so decode it as a
	// token stream rather than into a map.
	dec := json.NewDecoder(strings.NewReader(string(r.Body)))
	var keys []string
	if _, err := dec.Token(); err != nil {
		t.Fatalf("not a JSON object: %s", r.Body)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func readCases() []suiteCase {
	return []suiteCase{
		{"workers have Flower's keys", func(t *testing.T, c *cluster) {
			workers := c.api.mustOK(c.api.get("/api/workers", nil))
			for _, w := range []string{c.w1.Name, c.w2.Name} {
				info, ok := workers[w].(map[string]any)
				if !ok {
					t.Fatalf("worker %s missing from %v", w, workers)
				}
				for _, k := range []string{"stats", "active_queues", "registered", "scheduled", "active", "reserved", "revoked", "conf", "timestamp"} {
					if _, ok := info[k]; !ok {
						t.Errorf("worker %s has no %q", w, k)
					}
				}
				if !slices.Contains(toStrings(info["registered"]), "stamen.add") {
					t.Errorf("worker %s does not list stamen.add: %v", w, info["registered"])
				}
			}
			one := c.api.mustOK(c.api.get("/api/workers", q("workername", c.w1.Name)))
			if len(one) != 1 || one[c.w1.Name] == nil {
				t.Errorf("workername filter: %v", one)
			}
		}},
		{"workers status online", func(t *testing.T, c *cluster) {
			status := c.api.mustOK(c.api.get("/api/workers", q("status", "1")))
			for _, w := range []string{c.w1.Name, c.w2.Name, c.w3.Name, c.w4.Name} {
				if status[w] != true {
					t.Errorf("%s not online: %v", w, status)
				}
			}
		}},
		{"tasks succeed fail and retry", func(t *testing.T, c *cluster) {
			add := runTask(t, c, "stamen.add", map[string]any{"args": []any{2, 3}})
			fail := runTask(t, c, "stamen.fail", map[string]any{"args": []any{"kaput"}})
			retry := runTask(t, c, "stamen.retry", map[string]any{"kwargs": map[string]any{"succeed_on": 2}})

			ai := taskInfo(t, c, add, "SUCCESS")
			if ai["result"] != "5" || ai["worker"] == nil || ai["runtime"] == nil || ai["name"] != "stamen.add" {
				t.Errorf("add info: %v", ai)
			}
			fi := taskInfo(t, c, fail, "FAILURE")
			if fi["exception"] != "ValueError('kaput')" || !strings.Contains(fmt.Sprint(fi["traceback"]), "ValueError: kaput") {
				t.Errorf("fail info: %v", fi)
			}
			ri := taskInfo(t, c, retry, "SUCCESS")
			if ri["retries"] != float64(1) || ri["retried"] == nil {
				t.Errorf("retry info: %v", ri)
			}

			all := c.api.mustOK(c.api.get("/api/tasks", nil))
			for _, id := range []string{add, fail, retry} {
				if _, ok := all[id]; !ok {
					t.Errorf("task %s missing from /api/tasks", id)
				}
			}
			for _, tc := range []struct {
				name    string
				query   []string
				want    []string
				notWant []string
			}{
				{"state", []string{"state", "FAILURE"}, []string{fail}, []string{add, retry}},
				{"state case-insensitive", []string{"state", "failure"}, []string{fail}, []string{add}},
				{"taskname", []string{"taskname", "stamen.add"}, []string{add}, []string{fail, retry}},
				{"workername", []string{"workername", ai["worker"].(string)}, []string{add}, nil},
				{"search substring", []string{"search", "kaput"}, []string{fail}, []string{add}},
				{"search qualifier", []string{"search", "name:stamen.retry"}, []string{retry}, []string{add, fail}},
			} {
				got := c.api.mustOK(c.api.get("/api/tasks", q(tc.query...)))
				for _, id := range tc.want {
					if _, ok := got[id]; !ok {
						t.Errorf("%s: %s missing", tc.name, id)
					}
				}
				for _, id := range tc.notWant {
					if _, ok := got[id]; ok {
						t.Errorf("%s: %s should be filtered out", tc.name, id)
					}
				}
				for id, v := range got {
					rec := v.(map[string]any)
					if rec["uuid"] != id {
						t.Errorf("%s: record keyed %s has uuid %v", tc.name, id, rec["uuid"])
					}
				}
			}

			// limit and offset page through the newest-first order.
			keys := taskKeys(t, c.api.get("/api/tasks", nil))
			if len(keys) < 3 {
				t.Fatalf("want at least 3 tasks, got %v", keys)
			}
			if got := taskKeys(t, c.api.get("/api/tasks", q("limit", "1"))); !slices.Equal(got, keys[:1]) {
				t.Errorf("limit=1: %v, want %v", got, keys[:1])
			}
			if got := taskKeys(t, c.api.get("/api/tasks", q("limit", "2", "offset", "1"))); !slices.Equal(got, keys[1:3]) {
				t.Errorf("limit=2&offset=1: %v, want %v", got, keys[1:3])
			}
			byName := taskKeys(t, c.api.get("/api/tasks", q("sort_by", "name")))
			first := c.api.mustOK(c.api.get("/api/task/info/"+byName[0], nil))
			last := c.api.mustOK(c.api.get("/api/task/info/"+byName[len(byName)-1], nil))
			if fmt.Sprint(first["name"]) > fmt.Sprint(last["name"]) {
				t.Errorf("sort_by=name: %v before %v", first["name"], last["name"])
			}
			// In /api/tasks the worker key comes last, as in Flower.
			rec := c.api.get("/api/tasks", q("taskname", "stamen.add", "limit", "1"))
			if !strings.Contains(string(rec.Body), `"children": [], "worker": "`) {
				t.Errorf("worker is not the last key: %s", rec.Body)
			}
		}},
		{"task types", func(t *testing.T, c *cluster) {
			r := c.api.mustOK(c.api.get("/api/task/types", nil))
			types := toStrings(r["task-types"])
			for _, want := range []string{"stamen.add", "stamen.fail", "stamen.retry"} {
				if !slices.Contains(types, want) {
					t.Errorf("task-types %v lacks %s", types, want)
				}
			}
			if !slices.IsSorted(types) {
				t.Errorf("task-types not sorted: %v", types)
			}
		}},
		{"queue length counts parked messages", func(t *testing.T, c *cluster) {
			queue := fmt.Sprintf("parked-%s-%d", c.kind, time.Now().UnixNano())
			if c.amqp {
				// RabbitMQ queues outlive the test: drop this one afterwards.
				t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, amqpVhost, queue) })
				// stamen creates no queue that no worker declares: one
				// declares it, and leaves it.
				declaredByWorker(t, c, c.w1.Name, queue)
			}
			for i := range 3 {
				c.api.mustOK(c.api.post("/api/task/send-task/stamen.add", nil, map[string]any{"args": []any{i, i}, "queue": queue}))
			}
			r := c.api.mustOK(c.api.get("/api/queues/length", nil))
			got := map[string]float64{}
			for _, e := range r["active_queues"].([]any) {
				m := e.(map[string]any)
				got[m["name"].(string)] = m["messages"].(float64)
			}
			if got[queue] != 3 {
				t.Errorf("queue %s: %v messages, want 3 (all: %v)", queue, got[queue], got)
			}
			if _, ok := got["celery"]; !ok {
				t.Errorf("the workers' queue celery is not listed: %v", got)
			}
		}},
		{"bad input is a 4xx JSON error", func(t *testing.T, c *cluster) {
			for _, tc := range []struct {
				path   string
				query  []string
				status int
			}{
				{"/api/tasks", []string{"limit", "abc"}, 400},
				{"/api/tasks", []string{"limit", ""}, 400},
				{"/api/tasks", []string{"offset", "-1"}, 400},
				{"/api/tasks", []string{"sort_by", "bogus"}, 400},
				{"/api/tasks", []string{"received_start", "yesterday"}, 400},
				{"/api/tasks", []string{"search", "ab"}, 400},
				{"/api/tasks", []string{"search", strings.Repeat("x", 3000)}, 400},
				{"/api/task/info/00000000-0000-0000-0000-000000000000", nil, 404},
				{"/api/workers", []string{"refresh", "maybe"}, 400},
				{"/api/workers", []string{"workername", "nobody@nowhere"}, 404},
				{"/api/nothing-here", nil, 404},
			} {
				r := c.api.get(tc.path, q(tc.query...))
				if r.Status != tc.status {
					t.Errorf("GET %s %v: status %d, want %d: %s", tc.path, tc.query, r.Status, tc.status, r.Body)
					continue
				}
				if e, _ := r.JSON(t)["error"].(string); e == "" {
					t.Errorf("GET %s %v: no error message: %s", tc.path, tc.query, r.Body)
				}
			}
		}},
	}
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, e := range l {
			out = append(out, fmt.Sprint(e))
		}
	}
	return out
}
