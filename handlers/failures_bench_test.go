package handlers

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
)

// failedState is a state holding n failed tasks over 20 task names and 5
// exception types, each with a traceback.
func failedState(b *testing.B, n int) *state.State {
	b.Helper()
	st := state.New(state.Config{MaxTasks: n})
	excs := []string{"ValueError", "KeyError", "TypeError", "RuntimeError", "OSError"}
	var batch strings.Builder
	flush := func() {
		evs, err := celery.DecodeEvents([]byte("[" + strings.TrimSuffix(batch.String(), ",") + "]"))
		if err != nil {
			b.Fatal(err)
		}
		st.Apply(evs...)
		batch.Reset()
	}
	for i := range n {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		ts := 1700000000 + float64(i)/1000
		fmt.Fprintf(&batch, `{"type": "task-received", "uuid": "%s", "name": "bench.t%d", "args": "(%d,)", "kwargs": "{}", "hostname": "w@h", "timestamp": %f, "clock": %d},`,
			id, i%20, i, ts, 2*i)
		fmt.Fprintf(&batch, `{"type": "task-failed", "uuid": "%s", "exception": "%s('boom %d')", "traceback": "Traceback (most recent call last):\\n  ...\\n%s: boom", "hostname": "w@h", "timestamp": %f, "clock": %d},`,
			id, excs[(i/20)%5], i, excs[(i/20)%5], ts+0.0005, 2*i+1)
		if i%1000 == 999 {
			flush()
		}
	}
	if batch.Len() > 0 {
		flush()
	}
	return st
}

// BenchmarkListFailures groups 100 000 failed tasks (100 groups), as
// GET /api/failures does.
func BenchmarkListFailures(b *testing.B) {
	h := New(Config{State: failedState(b, 100_000)})
	req := httptest.NewRequest("GET", "/api/failures", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := h.listFailures(tasks.ListFailuresParams{HTTPRequest: req}, nil)
		ok, _ := r.(*tasks.ListFailuresOK)
		if ok == nil || len(ok.Payload.Groups) != 100 || *ok.Payload.Groups[0].Count != 1000 {
			b.Fatalf("unexpected answer %T", r)
		}
	}
}

// BenchmarkBulkMatch selects 5 000 of 100 000 tasks by task name
// and collects their ids, as the bulk operations do before acting.
func BenchmarkBulkMatch(b *testing.B) {
	h := New(Config{State: failedState(b, 100_000)})
	name := "bench.t7"
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ids, fail := h.matching(context.Background(), bulkFilter{taskname: &name}, 10_000)
		if fail != nil || len(ids) != 5000 {
			b.Fatalf("%d ids, %v", len(ids), fail)
		}
	}
}
