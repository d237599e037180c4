package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// replicaQueueLength is a queue's messages in a replica's /api/queues/length, -1
// when the queue is not listed.
func replicaQueueLength(r *replica, queue string) (int, error) {
	code, body, err := r.get("/api/queues/length", nil)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("status %d: %s", code, body)
	}
	var out struct {
		ActiveQueues []struct {
			Name     string `json:"name"`
			Messages int    `json:"messages"`
		} `json:"active_queues"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return 0, fmt.Errorf("%w: %s", err, body)
	}
	for _, q := range out.ActiveQueues {
		if q.Name == queue {
			return q.Messages, nil
		}
	}
	return -1, nil
}

// TestFleetQueuesPublishedByAnotherReplica sends tasks through replica a
// to a queue no worker consumes, and checks that replica b, and c started
// afterwards, list its backlog in /api/queues/length as a does, and that b
// purges it without force=true: the queues stamen published to were each
// replica's own, so behind a load balancer the backlog came and went from
// one answer to the next, and b refused the purge with 404 ("stamen never
// published to it").
func TestFleetQueuesPublishedByAnotherReplica(t *testing.T) {
	broker, backend, bin, args := newFleet(t)

	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "fleetq", Broker: broker, Backend: backend, Celery: testcluster.Celery56})
	rs := startReplicas(t, bin, args, "a", "b")
	a, b := rs[0], rs[1]
	for _, r := range rs {
		r.api.awaitWorkerReady(w.Name)
	}
	const parked = "fleet-parked"
	for i := range 3 {
		a.api.mustOK(a.api.post("/api/task/async-apply/stamen.add", nil, map[string]any{"args": []int{i, 1}, "queue": parked}))
	}
	backlog := func(r *replica, want int) func() bool {
		return func() bool {
			n, err := replicaQueueLength(r, parked)
			if err != nil {
				t.Logf("replica %s: %v", r.name, err)
			}
			return err == nil && n == want
		}
	}
	eventually(t, 10*time.Second, "a listing the backlog of "+parked, backlog(a, 3))
	eventually(t, 10*time.Second, "b listing the backlog of "+parked, backlog(b, 3))
	c := newReplica(t, bin, "c", args...)
	eventually(t, 10*time.Second, "c, started afterwards, listing the backlog of "+parked, backlog(c, 3))

	purged := b.api.mustOK(b.api.post("/api/queues/purge/"+parked, nil, nil))
	if purged["purged"] != float64(3) {
		t.Fatalf("b purged %v, want 3", purged)
	}
	eventually(t, 10*time.Second, "a listing "+parked+" empty", backlog(a, 0))
}
