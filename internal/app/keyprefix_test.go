package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestGlobalKeyPrefix runs a real Celery worker configured with kombu's
// global_keyprefix (and, on 5.3+, result_backend_transport_options'
// global_keyprefix), among the options a production configuration sets
// beside it (visibility_timeout, the fanout switches, socket tuning), and
// stamen with the very same options: a task sent through
// stamen runs and shows in /api/tasks with its result, pool grow reaches
// the worker, and /api/queues/length counts a parked backlog, which lies
// under the prefixed key only.
func TestGlobalKeyPrefix(t *testing.T) {
	testcluster.Require(t)
	for _, tc := range []struct {
		celery string
		// resultPrefix is result_backend_transport_options'
		// global_keyprefix: Celery 5.2 ignores it.
		resultPrefix string
	}{
		{testcluster.Celery52, ""},
		{testcluster.Celery56, "res"},
	} {
		t.Run("celery"+tc.celery, func(t *testing.T) {
			const prefix = "pfx:"
			r := testcluster.StartRedis(t)
			broker, backend := r.URL(0), r.URL(1)
			transport := map[string]any{
				"global_keyprefix": prefix, "visibility_timeout": 43200, "fanout_prefix": true, "fanout_patterns": true,
				"socket_timeout": 5, "socket_connect_timeout": 5, "health_check_interval": 10,
			}
			brokerOptsJSON, _ := json.Marshal(transport)
			brokerOpts := string(brokerOptsJSON)
			resultOpts := ""
			conf := map[string]any{"broker_transport_options": transport}
			if tc.resultPrefix != "" {
				resultOpts = fmt.Sprintf(`{"global_keyprefix": %q}`, tc.resultPrefix)
				conf["result_backend_transport_options"] = map[string]any{"global_keyprefix": tc.resultPrefix}
			}
			confJSON, _ := json.Marshal(conf)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := New(ctx, Config{BrokerURL: broker, ResultBackend: backend, InspectTimeout: time.Second,
				BrokerTransportOptions: brokerOpts, ResultBackendTransportOptions: resultOpts})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(a.Handler)
			t.Cleanup(func() { srv.Close(); a.Close() })

			w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "pfx", Broker: broker, Backend: backend,
				Celery: tc.celery, Env: []string{"STAMEN_TEST_CONF=" + string(confJSON)}})

			// A task through stamen runs, its events reach stamen, its
			// result is read back.
			var sent struct {
				TaskID string `json:"task-id"`
			}
			// stamen learns the task name from the worker's inspect
			// replies, which come through the prefixed reply queue.
			pollUntil(t, 10*time.Second, "stamen.add known and sent", func() bool {
				code, body := post(t, srv.URL+"/api/task/async-apply/stamen.add", `{"args": [2, 3]}`)
				return code == 200 && json.Unmarshal([]byte(body), &sent) == nil && sent.TaskID != ""
			})
			pollUntil(t, 20*time.Second, "task "+sent.TaskID+" SUCCESS in /api/tasks with result 5", func() bool {
				code, body, _ := get(t, srv.URL+"/api/tasks")
				var tasks map[string]map[string]any
				if code != 200 || json.Unmarshal([]byte(body), &tasks) != nil {
					return false
				}
				task := tasks[sent.TaskID]
				if task["state"] != "SUCCESS" || task["worker"] != w.Name {
					return false
				}
				code, body, _ = get(t, srv.URL+"/api/task/result/"+sent.TaskID)
				var res map[string]any
				return code == 200 && json.Unmarshal([]byte(body), &res) == nil && res["result"] == 5.0
			})

			// Control reaches the worker and its reply comes back: the
			// pool grows from one process to two.
			pollUntil(t, 10*time.Second, w.Name+" answers inspect with one pool process", func() bool {
				return workerProcesses(t, srv.URL, w.Name) == 1
			})
			if code, body := post(t, srv.URL+"/api/worker/pool/grow/"+w.Name+"?n=1", ""); code != 200 {
				t.Fatalf("pool grow: %d %s", code, body)
			}
			pollUntil(t, 10*time.Second, w.Name+" has two pool processes", func() bool {
				return workerProcesses(t, srv.URL, w.Name) == 2
			})

			// A backlog on a queue nobody consumes is counted, and lies
			// under the prefixed key.
			for range 3 {
				if code, body := post(t, srv.URL+"/api/task/async-apply/stamen.add", `{"args": [1, 1], "queue": "parked"}`); code != 200 {
					t.Fatalf("send to parked: %d %s", code, body)
				}
			}
			if n := parkedLength(t, srv.URL); n != 3 {
				t.Errorf("/api/queues/length: parked %d, want 3", n)
			}
			rc := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.Port)})
			defer rc.Close()
			if n, err := rc.LLen(ctx, prefix+"parked").Result(); err != nil || n != 3 {
				t.Errorf("LLEN %sparked = %d, %v; want 3", prefix, n, err)
			}
			if n, err := rc.Exists(ctx, "parked", "celery", "_kombu.binding.celery").Result(); err != nil || n != 0 {
				t.Errorf("%d unprefixed kombu keys exist (%v), want none", n, err)
			}
		})
	}
}

// workerProcesses is the number of pool processes /api/workers?refresh=1
// reports for worker (0 when it is not listed, -1 when the call fails).
func workerProcesses(t *testing.T, base, worker string) int {
	t.Helper()
	code, body, _ := get(t, base+"/api/workers?refresh=1&workername="+worker)
	var workers map[string]struct {
		Stats struct {
			Pool struct {
				Processes []any `json:"processes"`
			} `json:"pool"`
		} `json:"stats"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &workers) != nil {
		t.Logf("/api/workers: %d %s", code, body)
		return -1
	}
	n := len(workers[worker].Stats.Pool.Processes)
	if n == 0 {
		t.Logf("/api/workers: %.300s", body)
	}
	return n
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// pollUntil polls cond every 100 ms until it holds, failing t after d.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testcluster.Eventually(t, d, what, cond)
}
