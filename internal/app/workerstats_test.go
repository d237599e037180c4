package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

const workerStatsDB = 7

type workerStats struct {
	Instance       string
	Since          time.Time
	Seq            uint64
	DroppedWorkers int64 `json:"dropped_workers"`
	DroppedEvents  int64 `json:"dropped_events"`
	Workers        map[string]map[string]int64
}

func getWorkerStats(t *testing.T, base string) workerStats {
	t.Helper()
	code, body, hdr := get(t, base+"/api/stats/workers")
	var s workerStats
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("/api/stats/workers: %d %s %s", code, hdr.Get("Content-Type"), body)
	}
	return s
}

// TestWorkerStatsCountAppliedEvents: the task events applied through the
// ingest path are counted by worker and kind in GET /api/stats/workers,
// and /api/events numbers the same events with the answer's instance, so
// that the answer's seq says which streamed events it holds.
func TestWorkerStatsCountAppliedEvents(t *testing.T) {
	a, srv := newTaskListApp(t, 100)
	before := getWorkerStats(t, srv.URL)
	if len(before.Workers) != 0 || before.Instance == "" || time.Since(before.Since) > time.Minute {
		t.Fatalf("before any event: %+v", before)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	testcluster.Eventually(t, 5*time.Second, "the stream subscribed", func() bool { return a.Events.Subscribers() > 0 })

	now := float64(time.Now().Unix())
	var batch []celery.Event
	for _, f := range []map[string]any{
		{"type": "task-sent", "uuid": "t1", "name": "proj.a", "hostname": "client"},
		{"type": "task-received", "uuid": "t1", "name": "proj.a", "hostname": "w1@h"},
		{"type": "task-started", "uuid": "t1", "hostname": "w1@h"},
		{"type": "task-retried", "uuid": "t1", "hostname": "w1@h"},
		{"type": "task-received", "uuid": "t1", "name": "proj.a", "hostname": "w1@h"},
		{"type": "task-started", "uuid": "t1", "hostname": "w1@h"},
		{"type": "task-succeeded", "uuid": "t1", "hostname": "w1@h", "runtime": 0.5},
		{"type": "worker-heartbeat", "hostname": "w2@h", "freq": 2.0},
		{"type": "task-received", "uuid": "t2", "name": "proj.b", "hostname": "w2@h"},
		{"type": "task-failed", "uuid": "t2", "hostname": "w2@h", "exception": "ValueError()"},
		{"type": "task-revoked", "uuid": "t3", "hostname": "w2@h"},
	} {
		f["timestamp"] = now
		batch = append(batch, decodeEvent(t, f))
	}
	a.ingester.Apply(t.Context(), batch[:4])
	a.ingester.Apply(t.Context(), batch[4:])

	s := getWorkerStats(t, srv.URL)
	want := map[string]map[string]int64{
		"w1@h": {"received": 2, "started": 2, "succeeded": 1, "failed": 0, "retried": 1, "revoked": 0, "rejected": 0},
		"w2@h": {"received": 1, "started": 0, "succeeded": 0, "failed": 1, "retried": 0, "revoked": 1, "rejected": 0},
	}
	if fmt.Sprint(s.Workers) != fmt.Sprint(want) || s.Instance != before.Instance || s.Seq != before.Seq+uint64(len(batch)) {
		t.Errorf("after the batch: %+v, want workers %v and seq %d", s, want, before.Seq+uint64(len(batch)))
	}

	// The stream's ids: the answer's instance, numbered on from its seq.
	sc := bufio.NewScanner(resp.Body)
	var ids, types []string
	for len(types) < len(batch) && sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, id)
		}
		if typ, ok := strings.CutPrefix(line, "event: "); ok {
			types = append(types, typ)
		}
	}
	for i := range batch {
		if i >= len(ids) || i >= len(types) {
			t.Fatalf("the stream sent %d ids for %d events: %v", len(ids), len(batch), ids)
		}
		if want := fmt.Sprintf("%s:%d", s.Instance, before.Seq+uint64(i)+1); ids[i] != want || types[i] != batch[i].Type {
			t.Errorf("event %d: id %s type %s, want %s %s", i, ids[i], types[i], want, batch[i].Type)
		}
	}
}

// TestWorkerStatsWithRealWorker: a real Celery worker runs tasks that
// succeed, fail and retry, and GET /api/stats/workers shows exactly those
// counts for it.
func TestWorkerStatsWithRealWorker(t *testing.T) {
	testcluster.Require(t)
	testcluster.FlushRedisDB(t, workerStatsDB)
	url := testcluster.RedisURL(workerStatsDB)
	queue := "workerstats"
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "wstats", Broker: url, Backend: url, Queues: []string{queue}})
	a, err := New(context.Background(), Config{BrokerURL: url, ResultBackend: url})
	if err != nil {
		t.Fatal(err)
	}
	awaitSubscribed(t, a, workerStatsDB, "workerstats")
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })

	var ids []string
	send := func(name string, args ...any) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"args": args, "queue": queue})
		resp, err := http.Post(srv.URL+"/api/task/async-apply/"+name, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			ID string `json:"task-id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.ID == "" {
			t.Fatalf("send %s: %d %v", name, resp.StatusCode, err)
		}
		ids = append(ids, out.ID)
	}
	const succeed, fail, retrying = 3, 2, 2
	for i := range succeed {
		send("stamen.add", i, 1)
	}
	for range fail {
		send("stamen.fail", "no")
	}
	// Each fails twice, retried, and succeeds on its third attempt.
	for range retrying {
		send("stamen.retry", 3)
	}
	const runs = succeed + fail + 3*retrying
	want := map[string]int64{
		"received": runs, "started": runs, "succeeded": succeed + retrying, "failed": fail,
		"retried": 2 * retrying, "revoked": 0, "rejected": 0,
	}
	var got map[string]int64
	testcluster.Eventually(t, 60*time.Second, "the worker's counts", func() bool {
		got = getWorkerStats(t, srv.URL).Workers[w.Name]
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	// Every task finished: their last events are applied, so the counts
	// must not move past what was asked for.
	testcluster.Eventually(t, 30*time.Second, "every task finished", func() bool {
		for _, id := range ids {
			if task, ok := a.State.Task(id); !ok || (task.State != "SUCCESS" && task.State != "FAILURE") {
				return false
			}
		}
		return true
	})
	s := getWorkerStats(t, srv.URL)
	if got = s.Workers[w.Name]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("once every task finished, %s counted %v, want %v", w.Name, got, want)
	}
	t.Logf("%s counted %v", w.Name, got)
	if s.DroppedWorkers != 0 || s.DroppedEvents != 0 {
		t.Errorf("dropped %d workers, %d events", s.DroppedWorkers, s.DroppedEvents)
	}
}
