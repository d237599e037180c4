package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestLateWorkerIsListed starts stamen first and a real worker afterwards:
// without ?refresh=1, /api/workers must list it with its inspect data
// within a few seconds. The inspect stamen sends when the worker comes
// online races the worker's own mailbox subscription and is lost.
func TestLateWorkerIsListed(t *testing.T) {
	testcluster.Require(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, queue string) (broker, backend string)
	}{
		{"redis", func(t *testing.T, _ string) (string, string) {
			r := testcluster.StartRedis(t)
			return r.URL(0), r.URL(1)
		}},
		{"rabbitmq", func(t *testing.T, queue string) (string, string) {
			testcluster.DeleteAMQPQueues(t, testcluster.Vhost, queue)
			return testcluster.AMQPURL(testcluster.Vhost), "rpc://"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A queue of the test's own, so that the worker takes no task
			// another test left behind.
			queue := "late-" + uuid.NewString()[:8]
			broker, backend := tc.setup(t, queue)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := New(ctx, Config{BrokerURL: broker, ResultBackend: backend, InspectTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(a.Handler)
			t.Cleanup(func() { srv.Close(); a.Close() })

			w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "late", Broker: broker, Backend: backend, Queues: []string{queue}})
			started := time.Now()
			deadline := started.Add(15 * time.Second)
			for {
				code, body, _ := get(t, srv.URL+"/api/workers")
				var workers map[string]map[string]json.RawMessage
				if code != 200 || json.Unmarshal([]byte(body), &workers) != nil {
					t.Fatalf("/api/workers: %d %s", code, body)
				}
				info, listed := workers[w.Name]
				if listed && hasInspectData(info) {
					t.Logf("%s listed with its inspect data %s after it started", w.Name, time.Since(started).Round(time.Millisecond))
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("15 s after %s started, /api/workers (no refresh) lists it: %v, with %s",
						w.Name, listed, keys(info))
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// hasInspectData reports whether a worker's /api/workers entry holds its
// stats and the tasks it registers.
func hasInspectData(info map[string]json.RawMessage) bool {
	var stats map[string]any
	var registered []string
	return json.Unmarshal(info["stats"], &stats) == nil && stats["pid"] != nil &&
		json.Unmarshal(info["registered"], &registered) == nil && len(registered) > 0
}

func keys(m map[string]json.RawMessage) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return fmt.Sprint(ks)
}
