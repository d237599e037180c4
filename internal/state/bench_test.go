package state

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stamen-dev/stamen/internal/celery"
)

// benchEvents is the life of n tasks on four workers: received, started,
// succeeded (or failed), with a heartbeat every 50 events.
func benchEvents(b *testing.B, n int) []celery.Event {
	b.Helper()
	var evs []celery.Event
	for i := range n {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		w := fmt.Sprintf("w%d@host", i%4)
		ts := 1.7e9 + float64(i)/100
		name := []string{"proj.add", "proj.mail", "proj.resize"}[i%3]
		evs = append(evs,
			taskEv(b, "received", id, w, ts, map[string]any{"name": name, "args": fmt.Sprintf("(%d, 2)", i),
				"kwargs": "{'user': 'u" + fmt.Sprint(i%100) + "'}", "root_id": id, "parent_id": nil, "retries": 0, "eta": nil, "expires": nil}),
			taskEv(b, "started", id, w, ts+0.001, nil))
		if i%10 == 0 {
			evs = append(evs, taskEv(b, "failed", id, w, ts+0.002, map[string]any{"exception": "ValueError('x')", "traceback": "Traceback..."}))
		} else {
			evs = append(evs, taskEv(b, "succeeded", id, w, ts+0.002, map[string]any{"result": "42", "runtime": 0.0015}))
		}
		if i%16 == 0 {
			hb := ev(b, map[string]any{"type": "worker-heartbeat", "hostname": w, "timestamp": ts, "freq": 2.0,
				"active": 1, "processed": i, "loadavg": []float64{0.1, 0.2, 0.3}})
			hb.LocalReceived = ts
			evs = append(evs, hb)
		}
	}
	return evs
}

// BenchmarkApply measures ingestion with eviction running (MaxTasks well
// below the number of tasks streamed).
func BenchmarkApply(b *testing.B) {
	evs := benchEvents(b, 50000)
	s := New(Config{MaxTasks: 10000})
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		s.Apply(evs[n%len(evs)])
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkApplyMillion fills a state to a million tasks and keeps going.
func BenchmarkApplyMillion(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a million tasks")
	}
	evs := benchEvents(b, 20000)
	s := New(Config{MaxTasks: 1000000})
	// Re-label the stream so that every pass creates new tasks.
	pass := 0
	apply := func(e celery.Event) {
		e.UUID = fmt.Sprintf("%s-%d", e.UUID, pass)
		s.Apply(e)
	}
	for s.Len() < 1000000 {
		for _, e := range evs {
			apply(e)
		}
		pass++
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		if n%len(evs) == 0 {
			pass++
		}
		apply(evs[n%len(evs)])
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	b.StopTimer()
	// What the state holds at a million tasks, after a collection.
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heapMiB@1M")
	b.ReportMetric(float64(ms.HeapInuse)/1e6, "heapB/task")
	if s.Len() != 1000000 {
		b.Fatalf("Len() = %d", s.Len())
	}
	b.StartTimer()
	for range 1 {
		if got, _ := s.Tasks(Query{Limit: 100}); len(got) != 100 {
			b.Fatal("short page")
		}
	}
}

func filled(b *testing.B, n int) *State {
	b.Helper()
	s := New(Config{MaxTasks: n})
	s.Apply(benchEvents(b, n)...)
	if s.Len() != n {
		b.Fatalf("Len() = %d", s.Len())
	}
	return s
}

// BenchmarkTasksLimit100 is the default /api/tasks page at 100k tasks.
func BenchmarkTasksLimit100(b *testing.B) {
	s := filled(b, 100000)
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.Tasks(Query{Limit: 100})
		if err != nil || len(got) != 100 {
			b.Fatal(err, len(got))
		}
	}
}

// BenchmarkTasksFilteredSorted is a page that must look at every task.
func BenchmarkTasksFilteredSorted(b *testing.B) {
	s := filled(b, 100000)
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.Tasks(Query{Limit: 100, State: "FAILURE", SortBy: "-received"})
		if err != nil || len(got) != 100 {
			b.Fatal(err, len(got))
		}
	}
}

// BenchmarkTasksSearch runs a search that matches nothing over 100k tasks.
func BenchmarkTasksSearch(b *testing.B) {
	s := filled(b, 100000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Tasks(Query{Limit: 100, Search: "kwargs:user=nobody OR nothing-like-this"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTaskListJSON writes a 100-task page as the handler does.
func BenchmarkTaskListJSON(b *testing.B) {
	s := filled(b, 1000)
	page, _ := s.Tasks(Query{Limit: 100})
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = buf[:0]
		for i := range page {
			buf = page[i].AppendListJSON(buf)
		}
	}
	b.SetBytes(int64(len(buf)))
}
