package taskstats

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkStats24hMillion answers GET /api/stats/tasks's in-memory read
// over 24 hours of a million tasks (received, started, then succeeded or,
// a tenth, failed: 3 million events), on the load driver's shape (3 names,
// 4 workers, one queue) and on a wider one (100 names, 4 workers), by
// minute and by hour, with and without a task name filter. It reports the
// p99 of the iterations, and the aggregate's size and how far back it
// keeps whole minutes.
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
			name     string
			step     time.Duration
			taskname string
		}{{"by_minute", time.Minute, ""}, {"by_minute_taskname", time.Minute, "bench.task1"}, {"by_hour", time.Hour, ""}} {
			b.Run(shape.name+"/"+c.name, func(b *testing.B) {
				q, err := NewQuery(clk.t, 24*time.Hour, c.step)
				if err != nil {
					b.Fatal(err)
				}
				q.TaskName = c.taskname
				var took []time.Duration
				var res Result
				for b.Loop() {
					t := time.Now()
					res = a.Stats(q)
					took = append(took, time.Since(t))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
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
