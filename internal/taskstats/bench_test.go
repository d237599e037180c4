package taskstats

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkStats24hMillion answers GET /api/stats/tasks's in-memory read
// over 24 hours of a million tasks (received, started, then succeeded or,
// a tenth, failed: 3 million events), on the load driver's shape (3 names,
// 4 workers, one queue) and on a wider one (100 names, 4 workers), by
// minute and by hour, with and without a task name, worker or queue
// filter, and by minute while a writer adds 10,000 events a second (in
// batches of 500, as the ingest path does) to show what the lock costs.
// It reports the p50 and p99 of the iterations (each a request's read),
// the p99 of their own CPU time (on Linux; the wall p99 on a shared
// machine is mostly its scheduling), and the aggregate's size and how
// far back it keeps whole minutes.
//
// go test -run '^$' -bench BenchmarkStats24hMillion -benchtime 200x ./internal/taskstats/
func BenchmarkStats24hMillion(b *testing.B) {
	for _, shape := range []struct {
		name  string
		names int
	}{{"3names", 3}, {"100names", 100}} {
		a, clk := newAt(t0, Config{})
		const tasks = 1_000_000
		const minutes = 24 * 60
		per := tasks / minutes
		evs := make([]Event, 0, 3*per)
		for m := range minutes {
			clk.t = t0.Add(time.Duration(m) * time.Minute)
			evs = evs[:0]
			for i := range per {
				at := unix(clk.t) + float64(i)*60/float64(per)
				name := fmt.Sprintf("bench.task%d", (m*per+i)%shape.names)
				w := fmt.Sprintf("bench@w%d", i%4)
				end := Event{Kind: Succeeded, Time: at + 0.01, Name: name, Worker: w, Queue: "celery", Runtime: 0.001 * float64(1+i%500), HasRuntime: true}
				if i%10 == 0 {
					end = Event{Kind: Failed, Time: at + 0.01, Name: name, Worker: w, Queue: "celery"}
				}
				evs = append(evs, Event{Kind: Received, Time: at, Name: name, Worker: w, Queue: "celery"},
					Event{Kind: Started, Time: at + 0.001, Name: name, Worker: w, Queue: "celery"}, end)
			}
			a.Add(evs...)
		}
		for _, c := range []struct {
			name                    string
			step                    time.Duration
			taskname, worker, queue string
			writing                 bool
		}{
			{name: "by_minute", step: time.Minute},
			{name: "by_minute_taskname", step: time.Minute, taskname: "bench.task1"},
			{name: "by_minute_workername", step: time.Minute, worker: "bench@w2"},
			{name: "by_minute_queue", step: time.Minute, queue: "celery"},
			{name: "by_hour", step: time.Hour},
			{name: "by_hour_taskname", step: time.Hour, taskname: "bench.task1"},
			{name: "by_minute_writing", step: time.Minute, writing: true},
		} {
			b.Run(shape.name+"/"+c.name, func(b *testing.B) {
				q, err := NewQuery(clk.t, 24*time.Hour, c.step)
				if err != nil {
					b.Fatal(err)
				}
				q.TaskName, q.Worker, q.Queue = c.taskname, c.worker, c.queue
				if c.writing {
					stop := make(chan struct{})
					done := make(chan struct{})
					defer func() { close(stop); <-done }()
					go func() {
						defer close(done)
						batch := make([]Event, 500)
						for i := range batch {
							batch[i] = Event{Kind: Received, Time: unix(clk.t) + 1, Name: "bench.task1", Worker: "bench@w1", Queue: "celery"}
						}
						tick := time.NewTicker(50 * time.Millisecond)
						defer tick.Stop()
						for {
							select {
							case <-stop:
								return
							case <-tick.C:
								a.Add(batch...)
							}
						}
					}()
				}
				var took, cpu []time.Duration
				var res Result
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				for b.Loop() {
					c0, ok0 := threadCPU()
					t := time.Now()
					res = a.Stats(q)
					took = append(took, time.Since(t))
					if c1, ok1 := threadCPU(); ok0 && ok1 {
						cpu = append(cpu, time.Duration(c1-c0))
					}
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
				if len(cpu) > 0 {
					// The read's own CPU time: the wall p99 less what the
					// machine's other work took from it.
					slices.Sort(cpu)
					b.ReportMetric(float64(cpu[len(cpu)*99/100].Microseconds())/1000, "cpu-p99-ms")
				}
				b.ReportMetric(float64(a.Size())/(1<<20), "size-MiB")
				kept := 24.0
				if res.KeptSince != nil {
					kept = clk.t.Sub(*res.KeptSince).Hours()
				}
				b.ReportMetric(kept, "hours-kept")
			})
		}
	}
}
