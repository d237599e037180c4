package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// workerStatus is a replica's /api/workers?status=1, or why it could not
// be read.
func workerStatus(r *replica) (map[string]bool, error) {
	code, body, err := r.get("/api/workers", q("status", "1"))
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", code, body)
	}
	var m map[string]bool
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%w: %s", err, body)
	}
	return m, nil
}

// TestFleetWorkerKilledGoesOffline kills a worker (SIGKILL: no
// worker-offline event) under two replicas sharing PostgreSQL, and checks
// that /api/workers?status=1, which every replica reads from PostgreSQL,
// shows it offline once its heartbeats stop, as Flower does (after twice
// its heartbeat interval), on both replicas and on a third started after
// the death, while the worker left running stays online. The replicas
// replay each worker's latest stored event to compute liveness: replayed
// as if received at the read, a dead worker's last heartbeat was always
// new, and it showed online until purged a day later.
func TestFleetWorkerKilledGoesOffline(t *testing.T) {
	broker, backend, bin, args := newFleet(t)

	var keep, dead *testcluster.Worker
	var wg sync.WaitGroup
	wg.Go(func() {
		keep = testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "keep", Broker: broker, Backend: backend, Celery: testcluster.Celery56})
	})
	wg.Go(func() {
		dead = testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "dead", Broker: broker, Backend: backend, Celery: testcluster.Celery56})
	})
	rs := startReplicas(t, bin, args, "a", "b")
	wg.Wait()
	if keep == nil || dead == nil {
		t.FailNow()
	}
	for _, r := range rs {
		r.api.awaitWorkerReady(keep.Name)
		r.api.awaitWorkerReady(dead.Name)
	}

	// offline holds when every replica shows dead offline and keep online.
	offline := func(rs []*replica) func() bool {
		return func() bool {
			for _, r := range rs {
				m, err := workerStatus(r)
				if err != nil {
					t.Logf("replica %s: %v", r.name, err)
					return false
				}
				alive, known := m[dead.Name]
				if !known || alive || !m[keep.Name] {
					return false
				}
			}
			return true
		}
	}
	dead.Kill()
	killed := time.Now()
	// Celery's window is 4 s (heartbeats every 2 s, HEARTBEAT_EXPIRE_WINDOW
	// 200%); a written event reaches PostgreSQL within a second more.
	eventually(t, 20*time.Second, dead.Name+" offline and "+keep.Name+" online on a and b", offline(rs))
	t.Logf("%s offline on both replicas %s after SIGKILL", dead.Name, time.Since(killed).Round(100*time.Millisecond))

	c := newReplica(t, bin, "c", args...)
	eventually(t, 20*time.Second, dead.Name+" offline and "+keep.Name+" online on c, started after the death", offline([]*replica{c}))
	// And it stays so: every read replays the dead worker's stored event
	// anew, so a read after the ones above must not find it alive.
	for _, r := range append(rs, c) {
		m, err := workerStatus(r)
		if err != nil {
			t.Fatalf("replica %s: %v", r.name, err)
		}
		if m[dead.Name] {
			t.Fatalf("replica %s shows %s online again: %v", r.name, dead.Name, m)
		}
	}
}
