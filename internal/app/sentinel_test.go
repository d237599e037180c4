package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestSentinelFailover runs a real Celery worker and stamen on sentinel://
// URLs (master_name and the sentinels' password in the transport options,
// a dead sentinel listed first), kills the master and lets the sentinel
// promote the replica: within 10 s stamen publishes a task that runs and
// whose events it ingests, a control command reaches the worker, and
// /api/queues/length still counts a backlog parked before the failover.
func TestSentinelFailover(t *testing.T) {
	testcluster.Require(t)
	for _, release := range []string{testcluster.Celery52, testcluster.Celery56} {
		t.Run("celery"+release, func(t *testing.T) {
			s := testcluster.StartSentinel(t)
			broker, backend := s.URL(0), s.URL(1)
			var opts map[string]any
			if err := json.Unmarshal([]byte(s.TransportOptions()), &opts); err != nil {
				t.Fatal(err)
			}
			conf, _ := json.Marshal(map[string]any{"broker_transport_options": opts, "result_backend_transport_options": opts})

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := New(ctx, Config{BrokerURL: broker, ResultBackend: backend, InspectTimeout: time.Second,
				BrokerTransportOptions: s.TransportOptions()})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(a.Handler)
			t.Cleanup(func() { srv.Close(); a.Close() })
			w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "sentinel", Broker: broker, Backend: backend,
				Celery: release, Env: []string{"STAMEN_TEST_CONF=" + string(conf)}})

			// runs sends stamen.add until one such task is seen SUCCESS with
			// its result within d. After a failover the worker may publish a
			// task's events before stamen has resubscribed on the promoted
			// master; Redis pub/sub keeps nothing for a subscriber that is not
			// there yet, so a task whose events were lost that way is followed
			// by another one, as a user watching the dashboard would see.
			runs := func(d time.Duration, what string) {
				t.Helper()
				deadline := time.Now().Add(d)
				var sent struct {
					TaskID string `json:"task-id"`
				}
				ran := func() bool {
					code, body, _ := get(t, srv.URL+"/api/task/info/"+sent.TaskID)
					var task map[string]any
					if code != 200 || json.Unmarshal([]byte(body), &task) != nil || task["state"] != "SUCCESS" {
						return false
					}
					code, body, _ = get(t, srv.URL+"/api/task/result/"+sent.TaskID)
					var res map[string]any
					return code == 200 && json.Unmarshal([]byte(body), &res) == nil && res["result"] == 42.0
				}
				for attempt := 1; ; attempt++ {
					// Right after the promotion a publish may still meet the
					// dead master (503): the client retries, as a user would.
					pollUntil(t, time.Until(deadline), what+": a task sent", func() bool {
						code, body := post(t, srv.URL+"/api/task/async-apply/stamen.add", `{"args": [20, 22]}`)
						if code != 200 {
							t.Logf("%s: send: %d %s", what, code, body)
						}
						return code == 200 && json.Unmarshal([]byte(body), &sent) == nil && sent.TaskID != ""
					})
					wait := min(3*time.Second, time.Until(deadline))
					if testcluster.Within(wait, ran) {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: no task sent in %s was seen SUCCESS with result 42 (%d sent, the last %s)", what, d, attempt, sent.TaskID)
					}
					t.Logf("%s: task %s not seen SUCCESS in %s; sending another", what, sent.TaskID, wait)
				}
			}
			runs(20*time.Second, "before the failover")
			for range 2 {
				if code, body := post(t, srv.URL+"/api/task/async-apply/stamen.add", `{"args": [1, 1], "queue": "parked"}`); code != 200 {
					t.Fatalf("send to parked: %d %s", code, body)
				}
			}
			// The backlog must have reached the replica before the master
			// dies, or the failover loses it whoever the client is.
			replica := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.Replica.Port), Password: s.Password})
			defer replica.Close()
			pollUntil(t, 10*time.Second, "the backlog on the replica", func() bool {
				n, err := replica.LLen(ctx, "parked").Result()
				return err == nil && n == 2
			})

			s.KillMaster()
			promoted := time.Now()
			runs(10*time.Second, "after the failover")
			t.Logf("a task ran and its events were ingested %s after the promotion", time.Since(promoted).Round(time.Millisecond))
			pollUntil(t, 10*time.Second-time.Since(promoted), "pool grow after the failover", func() bool {
				code, _ := post(t, srv.URL+"/api/worker/pool/grow/"+w.Name+"?n=1", "")
				return code == 200
			})
			t.Logf("pool grow answered %s after the promotion", time.Since(promoted).Round(time.Millisecond))
			// The worker's reply proves it got the command; its effect may
			// show in inspect a little later.
			pollUntil(t, 10*time.Second, w.Name+" has grown to two pool processes", func() bool {
				return workerProcesses(t, srv.URL, w.Name) >= 2
			})
			if n := parkedLength(t, srv.URL); n != 2 {
				t.Errorf("/api/queues/length after the failover: parked %d, want 2", n)
			}
			t.Logf("pool grown and queue length read %s after the promotion", time.Since(promoted).Round(time.Millisecond))
		})
	}
}

// parkedLength is what /api/queues/length says of the queue "parked".
func parkedLength(t *testing.T, base string) int {
	t.Helper()
	code, body, _ := get(t, base+"/api/queues/length")
	var lengths struct {
		ActiveQueues []struct {
			Name     string `json:"name"`
			Messages int    `json:"messages"`
		} `json:"active_queues"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &lengths) != nil {
		t.Fatalf("/api/queues/length: %d %s", code, body)
	}
	for _, q := range lengths.ActiveQueues {
		if q.Name == "parked" {
			return q.Messages
		}
	}
	return -1
}
