package app

import (
	"encoding/json"

	"github.com/stamen-dev/stamen/internal/celery"
	"net/http"
	"testing"
	"time"
)

// TestStatsCountsAppliedEvents: events applied through the ingest path
// are counted by GET /api/stats/tasks in their minute, keyed by the
// task's name, worker and routing key, and bad parameters answer 400 JSON.
func TestStatsCountsAppliedEvents(t *testing.T) {
	a, srv := newTaskListApp(t, 100)
	now := float64(time.Now().Unix())
	ev := func(fields map[string]any) map[string]any { fields["timestamp"] = now; return fields }
	evs := []map[string]any{
		ev(map[string]any{"type": "task-sent", "uuid": "t1", "name": "proj.a", "queue": "q1", "routing_key": "q1", "hostname": "client"}),
		ev(map[string]any{"type": "task-received", "uuid": "t1", "name": "proj.a", "hostname": "w1@h"}),
		ev(map[string]any{"type": "task-started", "uuid": "t1", "hostname": "w1@h"}),
		ev(map[string]any{"type": "task-succeeded", "uuid": "t1", "hostname": "w1@h", "runtime": 1.5}),
		ev(map[string]any{"type": "task-received", "uuid": "t2", "name": "proj.b", "hostname": "w2@h"}),
		ev(map[string]any{"type": "task-failed", "uuid": "t2", "hostname": "w2@h", "exception": "ValueError()"}),
	}
	batch := make([]celery.Event, 0, len(evs))
	for _, f := range evs {
		batch = append(batch, decodeEvent(t, f))
	}
	a.ingester.Apply(t.Context(), batch)

	get := func(query string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/api/stats/tasks" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	last := func(m map[string]any) map[string]any {
		bs := m["buckets"].([]any)
		return bs[len(bs)-1].(map[string]any)
	}
	for _, c := range []struct {
		query                                string
		received, started, succeeded, failed float64
	}{
		{"", 2, 1, 1, 1},
		{"?taskname=PROJ.A", 1, 1, 1, 0},
		{"?workername=w2@h", 1, 0, 0, 1},
		{"?queue=q1", 1, 1, 1, 0},
		{"?queue=q1&taskname=proj.b", 0, 0, 0, 0},
	} {
		status, m := get(c.query)
		if status != http.StatusOK || m["step"] != 60.0 || len(m["buckets"].([]any)) != 60 {
			t.Fatalf("%s: %d %v", c.query, status, m)
		}
		b := last(m)
		if b["received"] != c.received || b["started"] != c.started || b["succeeded"] != c.succeeded || b["failed"] != c.failed {
			t.Errorf("%s: last bucket %v", c.query, b)
		}
		if c.succeeded > 0 && (b["runtime_p50"] == nil || b["runtime_p50"].(float64) < 1.5/1.08 || b["runtime_p50"].(float64) > 1.5*1.08) {
			t.Errorf("%s: p50 %v", c.query, b["runtime_p50"])
		}
	}
	for _, q := range []string{"?step=30", "?window=86400&step=60&step=90", "?window=60&step=120", "?window=700000", "?step=x"} {
		if status, m := get(q); status != http.StatusBadRequest || m["error"] == nil {
			t.Errorf("%s: %d %v", q, status, m)
		}
	}
}
