package taskstats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newAt(t0 time.Time, cfg Config) (*Aggregate, *clock) {
	c := &clock{t0}
	cfg.Now = c.now
	return New(cfg), c
}

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func TestCountsInTheirBuckets(t *testing.T) {
	a, c := newAt(t0, Config{})
	at := func(d time.Duration) float64 { return unix(t0.Add(d)) }
	a.Add(
		Event{Kind: Received, Time: at(10 * time.Second), Name: "add", Worker: "w1", Queue: "celery"},
		Event{Kind: Started, Time: at(11 * time.Second), Name: "add", Worker: "w1", Queue: "celery"},
		Event{Kind: Succeeded, Time: at(12 * time.Second), Name: "add", Worker: "w1", Queue: "celery", Runtime: 0.5, HasRuntime: true},
		Event{Kind: Received, Time: at(70 * time.Second), Name: "Fail", Worker: "w2", Queue: "other"},
		Event{Kind: Failed, Time: at(130 * time.Second), Name: "Fail", Worker: "w2", Queue: "other"},
		Event{Kind: Retried, Time: at(131 * time.Second), Name: "add", Worker: "w1", Queue: "celery"},
		Event{Kind: Revoked, Time: at(-30 * time.Second), Name: "add", Worker: "w1", Queue: "celery"},
	)
	c.t = t0.Add(150 * time.Second)
	q, err := NewQuery(c.t, 5*time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if q.N != 5 || !q.From.Equal(t0.Add(-2*time.Minute)) {
		t.Fatalf("query %+v", q)
	}
	res := a.Stats(q)
	want := [][NumKinds]int64{
		{},
		{0, 0, 0, 0, 0, 1},
		{1, 1, 1, 0, 0, 0},
		{1, 0, 0, 0, 0, 0},
		{0, 0, 0, 1, 1, 0},
	}
	for i, b := range res.Buckets {
		if b.Counts != want[i] {
			t.Errorf("bucket %d (%s): %v, want %v", i, b.Start, b.Counts, want[i])
		}
	}
	if p := res.Buckets[2].P50; p == nil || math.Abs(*p-0.5)/0.5 > MaxRelativeError {
		t.Errorf("p50 %v, want 0.5 within %.3f", p, MaxRelativeError)
	}
	if res.Buckets[3].P50 != nil {
		t.Errorf("a bucket without successes has a p50")
	}

	q.TaskName = "FAIL" // case-insensitive, as the task list's filters
	res = a.Stats(q)
	if got := res.Buckets[3].Counts[Received] + res.Buckets[4].Counts[Failed]; got != 2 || res.Buckets[2].Counts[Received] != 0 {
		t.Errorf("taskname filter: %+v", res.Buckets)
	}
	q.TaskName, q.Queue = "", "celery"
	if res = a.Stats(q); res.Buckets[4].Counts[Retried] != 1 || res.Buckets[4].Counts[Failed] != 0 {
		t.Errorf("queue filter: %+v", res.Buckets)
	}
	q.Queue, q.Worker = "", "w2"
	if res = a.Stats(q); res.Buckets[4].Counts[Failed] != 1 || res.Buckets[2].Counts[Received] != 0 {
		t.Errorf("worker filter: %+v", res.Buckets)
	}
}

func TestQueryBounds(t *testing.T) {
	for _, c := range []struct{ window, step time.Duration }{
		{0, time.Minute}, {8 * 24 * time.Hour, time.Hour}, {time.Hour, 30 * time.Second},
		{time.Hour, 90 * time.Second}, {time.Hour, 2 * time.Hour},
	} {
		if _, err := NewQuery(t0, c.window, c.step); err == nil {
			t.Errorf("window %s step %s: no error", c.window, c.step)
		}
	}
	q, err := NewQuery(t0.Add(30*time.Second), 7*24*time.Hour, time.Minute)
	if err != nil || q.N != MaxBuckets {
		t.Fatalf("7 days of minutes: %+v %v", q, err)
	}
}

func TestPercentileError(t *testing.T) {
	a, c := newAt(t0, Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	var runtimes []float64
	for range 5000 {
		r := math.Exp(rng.Float64()*12 - 6) // 2.5 ms to 400 s
		runtimes = append(runtimes, r)
		a.Add(Event{Kind: Succeeded, Time: unix(t0) + 1, Name: "x", Runtime: r, HasRuntime: true})
	}
	slices.Sort(runtimes)
	c.t = t0.Add(time.Second)
	q, _ := NewQuery(c.t, time.Minute, time.Minute)
	b := a.Stats(q).Buckets[0]
	for _, p := range []struct {
		got  *float64
		rank float64
	}{{b.P50, 0.5}, {b.P95, 0.95}} {
		want := runtimes[int(math.Ceil(p.rank*float64(len(runtimes))))-1]
		if e := math.Abs(*p.got-want) / want; e > MaxRelativeError {
			t.Errorf("p%.0f: %g, want %g (error %.3f > %.3f)", p.rank*100, *p.got, want, e, MaxRelativeError)
		}
	}
}

// TestManyNamesStayWithinBound runs 100,000 distinct task names through a
// day of fast-forwarded minutes (four events each, one a success) and
// checks the aggregate stays within its stated bound, by its own
// accounting and by the heap, and that the totals stay exact.
func TestManyNamesStayWithinBound(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		// keysPerMinute: distinct keys each minute, cycling through the names.
		perMinute int
	}{
		{"defaults", Config{}, 70},
		// Every key allowed, in every minute: the cells outgrow MaxBytes
		// and the oldest minutes go.
		{"cells bound", Config{MaxKeys: 100000}, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			a, clk := newAt(t0, c.cfg)
			const names = 100000
			var total int64
			next := 0
			for m := range 24 * 60 {
				clk.t = t0.Add(time.Duration(m) * time.Minute)
				evs := make([]Event, 0, 4*c.perMinute)
				for range c.perMinute {
					name := fmt.Sprintf("tasks.generated.task_%06d", next%names)
					next++
					at := unix(clk.t) + 1
					w := fmt.Sprintf("celery@worker-%d", next%16)
					evs = append(evs,
						Event{Kind: Received, Time: at, Name: name, Worker: w, Queue: "celery"},
						Event{Kind: Started, Time: at, Name: name, Worker: w, Queue: "celery"},
						Event{Kind: Succeeded, Time: at + 1, Name: name, Worker: w, Queue: "celery", Runtime: float64(next%1000) / 100, HasRuntime: true},
						Event{Kind: Failed, Time: at + 2, Name: name, Worker: w, Queue: "celery"})
				}
				total += int64(len(evs))
				a.Add(evs...)
				if s := a.Size(); s > a.cfg.MaxBytes {
					t.Fatalf("minute %d: size %d over the bound %d", m, s, a.cfg.MaxBytes)
				}
			}
			if next < names {
				t.Fatalf("only %d names", next)
			}
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("%d events, %d keys, size %d bytes (high water %d), heap growth %d bytes", total, a.Keys(), a.Size(), a.HighWater(), heap)
			const stated = 16 << 20
			if a.HighWater() > stated || heap > stated {
				t.Fatalf("over the stated 16 MiB: high water %d, heap %d", a.HighWater(), heap)
			}
			q, err := NewQuery(clk.t, 24*time.Hour, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			res := a.Stats(q)
			var sum int64
			for _, b := range res.Buckets {
				for _, n := range b.Counts {
					sum += n
				}
			}
			if res.KeptSince == nil || res.KeptSince.Equal(q.From) {
				if sum != total {
					t.Fatalf("totals %d, want %d", sum, total)
				}
			} else {
				// Minutes dropped for the bound: the ones kept are whole.
				kept := clk.t.Sub(*res.KeptSince)
				wantKept := int64(kept/time.Minute+1) * int64(4*c.perMinute)
				if sum != wantKept {
					t.Fatalf("totals since %s: %d, want %d", res.KeptSince, sum, wantKept)
				}
				t.Logf("kept since %s (%s back)", res.KeptSince, kept)
			}
			// A filter on a name folded into `other` says so.
			q.TaskName = fmt.Sprintf("tasks.generated.task_%06d", names-1)
			if res := a.Stats(q); c.cfg.MaxKeys == 0 && res.Folded == 0 {
				t.Errorf("no folded events reported for a folded name")
			}
			runtime.KeepAlive(a)
		})
	}
}

func TestRetentionAndRestore(t *testing.T) {
	a, c := newAt(t0, Config{})
	for m := range 10 {
		a.Add(Event{Kind: Received, Time: unix(t0.Add(time.Duration(m)*time.Minute)) + 5, Name: "n", Worker: "w", Queue: "q"},
			Event{Kind: Succeeded, Time: unix(t0.Add(time.Duration(m)*time.Minute)) + 6, Name: "n", Worker: "w", Queue: "q", Runtime: 2, HasRuntime: true})
	}
	a.Add(Event{Kind: Failed, Time: unix(t0) + 7}) // no name, worker or queue
	put, del := a.Drain()
	if len(put) != 10 || len(del) != 0 {
		t.Fatalf("drained %d minutes, %d deleted", len(put), len(del))
	}
	c.t = t0.Add(10 * time.Minute)
	b, c2 := newAt(c.t, Config{})
	for m, rec := range put {
		if err := b.Restore(m, rec); err != nil {
			t.Fatal(err)
		}
	}
	b.SetSince(a.Since())
	q, _ := NewQuery(c.t, 15*time.Minute, 5*time.Minute)
	if ra, rb := a.Stats(q), b.Stats(q); !reflect.DeepEqual(ra, rb) {
		t.Fatalf("restored %v\nwant %v", rb, ra)
	}
	// Seven days on, every minute has gone, and its record is to delete.
	c2.t = c.t.Add(DefaultRetention + time.Minute)
	b.Add()
	put, del = b.Drain()
	if len(put) != 0 || len(del) != 10 || b.Keys() != 0 {
		t.Fatalf("after the retention: %d put, %d deleted, %d keys", len(put), len(del), b.Keys())
	}
	if err := b.Restore(c2.t.Unix()/60, []byte{5, 1}); err == nil {
		t.Fatal("a corrupt record restored")
	}
}

func TestCellEncoding(t *testing.T) {
	var c Cell
	c.N = [NumKinds]int64{3, -2, 1 << 40, 0, 7, -1}
	c.Hist[0], c.Hist[5], c.Hist[Bins-1] = 4, -3, 1<<33
	var got Cell
	got.N[0], got.Hist[5] = 1, 3
	if err := got.AddEncoded(AppendCell(nil, &c)); err != nil {
		t.Fatal(err)
	}
	want := c
	want.N[0]++
	want.Hist[5] += 3
	if got != want {
		t.Fatalf("decoded %+v\nwant %+v", got, want)
	}
	for _, bad := range [][]byte{{1, 2}, append(AppendCell(nil, &Cell{}), 0, 2), append(AppendCell(nil, &Cell{}), 0xff, 0x01, 2)} {
		var x Cell
		if x.AddEncoded(bad) == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}

// TestFilteredReadsMatchEvents: every way a read takes a minute's counts
// (the minute's total, the taken keys' cells scanned or looked up by the
// minute's index, the total less the keys not taken) answers what the
// events themselves add up to, per bucket, with the same percentiles and
// the same count of events folded into `other`, after a restore too.
func TestFilteredReadsMatchEvents(t *testing.T) {
	a, clk := newAt(t0, Config{MaxKeys: 25})
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"proj.a", "proj.B", "proj.c", "proj.d", "proj.e"}
	workers := []string{"w1@h", "W2@h", "w3@h", "w4@h"}
	queues := []string{"celery", "high", "low", "Bulk"}
	var evs []Event
	for m := range 180 {
		clk.t = t0.Add(time.Duration(m) * time.Minute)
		// Minutes of few keys (scanned) and of many (indexed); more keys
		// than MaxKeys over all, so some events go to `other`.
		keys := 3
		if m%3 == 0 {
			keys = 70
		}
		var batch []Event
		for range 4 * keys {
			k := rng.IntN(keys)
			// Most keys on one queue, so that a filter on it takes most.
			q := queues[0]
			if k >= 50 {
				q = queues[1+k%3]
			}
			e := Event{Kind: rng.IntN(NumKinds), Time: unix(clk.t) + rng.Float64()*59,
				Name: names[k%len(names)], Worker: workers[(k/5)%len(workers)], Queue: q}
			if e.Kind == Succeeded {
				e.Runtime, e.HasRuntime = math.Exp(rng.Float64()*10-5), true
			}
			batch = append(batch, e)
		}
		a.Add(batch...)
		evs = append(evs, batch...)
	}
	// Which key each event counted under: the first MaxKeys distinct keys
	// in order, then `other`.
	seen := map[key]bool{}
	folded := make([]bool, len(evs))
	for i, e := range evs {
		k := key{e.Name, e.Worker, e.Queue}
		if !seen[k] && len(seen) >= 25 {
			folded[i] = true
			continue
		}
		seen[k] = true
	}
	check := func(t *testing.T, a *Aggregate) {
		for _, f := range []struct{ name, worker, queue string }{
			{}, {name: "PROJ.B"}, {worker: "w2@h"}, {queue: "celery"}, {queue: "CELERY", worker: "w1@h"},
			{name: "proj.a", worker: "w3@h", queue: "high"}, {name: "nope"}, {queue: "bulk"},
		} {
			for _, step := range []time.Duration{time.Minute, 7 * time.Minute, time.Hour} {
				q, err := NewQuery(clk.t, 3*time.Hour, step)
				if err != nil {
					t.Fatal(err)
				}
				q.TaskName, q.Worker, q.Queue = f.name, f.worker, f.queue
				filtered := f != struct{ name, worker, queue string }{}
				want := make([][NumKinds]int64, q.N)
				hists := make([][Bins]int64, q.N)
				var wantFolded int64
				for i, e := range evs {
					d := time.Unix(0, int64(e.Time*1e9)).Sub(q.From)
					b := int(d / step)
					if d < 0 || b >= q.N {
						continue
					}
					if filtered && folded[i] {
						wantFolded++
						continue
					}
					if (f.name != "" && Fold(f.name) != Fold(e.Name)) || (f.worker != "" && Fold(f.worker) != Fold(e.Worker)) ||
						(f.queue != "" && Fold(f.queue) != Fold(e.Queue)) {
						continue
					}
					want[b][e.Kind]++
					if e.HasRuntime {
						hists[b][Bin(e.Runtime)]++
					}
				}
				res := a.Stats(q)
				if res.Folded != wantFolded {
					t.Errorf("%+v step %s: folded %d, want %d", f, step, res.Folded, wantFolded)
				}
				for b, bk := range res.Buckets {
					p50, p95 := Percentiles(&hists[b])
					if bk.Counts != want[b] || !reflect.DeepEqual(bk.P50, p50) || !reflect.DeepEqual(bk.P95, p95) {
						t.Fatalf("%+v step %s bucket %d: %v %v %v, want %v %v %v", f, step, b, bk.Counts, bk.P50, bk.P95, want[b], p50, p95)
					}
				}
			}
		}
	}
	check(t, a)
	b, _ := newAt(clk.t, Config{MaxKeys: 25})
	b.SetSince(t0)
	put, _ := a.Drain()
	// Restored in an order of its own: keys are interned as they come.
	ms := slices.Sorted(func(yield func(int64) bool) {
		for m := range put {
			if !yield(m) {
				return
			}
		}
	})
	for _, m := range ms {
		if err := b.Restore(m, put[m]); err != nil {
			t.Fatal(err)
		}
	}
	check(t, b)
}
