package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-openapi/runtime"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/workercount"
	"github.com/stamen-dev/stamen/restapi/operations/workers"
)

// TestWorkerStatsBody: the counter's snapshot is answered with every kind
// by name (zeros included), the instance, the start and the seq; without
// a counter fed, it answers that none was counted.
func TestWorkerStatsBody(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := workercount.New(10, since)
	evs, err := celery.DecodeEvents([]byte(`[{"type":"task-received","uuid":"a","hostname":"w@h","timestamp":1},
		{"type":"task-failed","uuid":"a","hostname":"w@h","timestamp":2},{"type":"worker-heartbeat","hostname":"w@h","timestamp":3}]`))
	if err != nil {
		t.Fatal(err)
	}
	c.Add(evs)
	answer := func(h *Handlers) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.getWorkerStats(workers.GetWorkerStatsParams{}, nil).WriteResponse(rec, runtime.JSONProducer())
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
		}
		return rec.Code, m
	}
	code, m := answer(New(Config{WorkerCounts: c}))
	w, _ := m["workers"].(map[string]any)
	want := map[string]float64{"received": 1, "started": 0, "succeeded": 0, "failed": 1, "retried": 0, "revoked": 0, "rejected": 0}
	counts, _ := w["w@h"].(map[string]any)
	if code != http.StatusOK || len(w) != 1 || len(counts) != len(want) {
		t.Fatalf("%d %v", code, m)
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s: %v, want %v", k, counts[k], v)
		}
	}
	if m["instance"] != c.Instance() || m["seq"] != 3.0 || m["since"] != "2026-01-02T03:04:05.000Z" || m["dropped_workers"] != 0.0 || m["dropped_events"] != 0.0 {
		t.Errorf("%v", m)
	}
	if code, m := answer(New(Config{})); code != http.StatusOK || m["seq"] != 0.0 || len(m["workers"].(map[string]any)) != 0 {
		t.Errorf("without a counter: %d %v", code, m)
	}
}
