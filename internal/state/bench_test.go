package state

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// benchEvents is the life of n tasks on four workers: received, started,
// succeeded (or failed), with a heartbeat every 50 events.
func benchEvents(b testing.TB, n int) []celery.Event {
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

// million fills a state to a million tasks: passes of the same 20,000
// task lives, each relabelled with new ids (in Celery's form) and moved
// 200 s later, so that the million tasks span 10,000 s as a cluster
// running 100 tasks a second would leave them. It returns the state and a
// function that streams further events, and the heap the state holds.
func million(b *testing.B) (*State, func(n int), float64) {
	s, next, heap := filledTo(b, 1000000)
	return s, func(count int) {
		for _, e := range next(count) {
			s.Apply(e)
		}
	}, heap
}

// filledTo fills a state to n tasks as million does, and returns a
// function that makes the next events of the stream, to apply.
func filledTo(b *testing.B, n int) (*State, func(count int) []celery.Event, float64) {
	b.Helper()
	evs := benchEvents(b, 20000)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(Config{MaxTasks: n})
	pass := 0
	relabel := func(e celery.Event) celery.Event {
		if e.UUID != "" {
			own := e.RootID == e.UUID
			e.UUID = fmt.Sprintf("%s%04x%s", e.UUID[:9], pass, e.UUID[13:])
			if own {
				e.RootID = e.UUID
			}
		}
		shift := float64(pass) * 200
		e.Timestamp += shift
		if e.LocalReceived != 0 {
			e.LocalReceived += shift
		}
		return e
	}
	for s.Len() < n {
		for _, e := range evs {
			s.Apply(relabel(e))
		}
		pass++
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap := float64(ms.HeapInuse - before.HeapInuse)
	k := 0
	var out []celery.Event
	return s, func(count int) []celery.Event {
		out = out[:0]
		for range count {
			if k%len(evs) == 0 {
				pass++
			}
			out = append(out, relabel(evs[k%len(evs)]))
			k++
		}
		return out
	}, heap
}

// BenchmarkApplyMillion is ingestion into a state of a million tasks,
// each new task evicting the oldest.
func BenchmarkApplyMillion(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a million tasks")
	}
	s, stream, heap := million(b)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		stream(1)
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	// Reported after the loop, which resets the metrics.
	b.ReportMetric(heap/(1<<20), "heapMiB@1M")
	b.ReportMetric(heap/1e6, "heapB/task")
	if s.Len() != 1000000 {
		b.Fatalf("Len() = %d", s.Len())
	}
}

// BenchmarkTasksMillion is a page of GET /api/tasks?limit=100 with each
// filter at a million tasks (see million for what they are).
func BenchmarkTasksMillion(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a million tasks")
	}
	s, _, _ := million(b)
	at := func(sec float64) *time.Time {
		t := time.Unix(1700000000, 0).Add(time.Duration(sec * float64(time.Second)))
		return &t
	}
	for _, tc := range []struct {
		name string
		q    Query
		want int
	}{
		{"none", Query{}, 100},
		{"state=SUCCESS", Query{State: "SUCCESS"}, 100},
		{"state=FAILURE", Query{State: "FAILURE"}, 100},
		{"taskname", Query{TaskName: "proj.mail"}, 100},
		{"workername", Query{Worker: "w3@host"}, 100},
		{"taskname+workername+state", Query{TaskName: "proj.add", Worker: "w2@host", State: "FAILURE"}, 100},
		{"received=last-hour", Query{ReceivedStart: at(10000 - 3600), ReceivedEnd: at(10000)}, 100},
		{"received=an-hour-ago", Query{ReceivedStart: at(10000 - 3600), ReceivedEnd: at(10000 - 3500)}, 100},
		{"received=oldest-100s", Query{ReceivedStart: at(100), ReceivedEnd: at(200)}, 100},
		{"offset=10000", Query{Offset: 10000}, 100},
		{"taskname=unknown", Query{TaskName: "nope"}, 0},
		{"sort_by=-received", Query{SortBy: "-received"}, 100},
		{"sort_by=name", Query{SortBy: "name"}, 100},
		{"sort_by=name+state=FAILURE", Query{SortBy: "name", State: "FAILURE"}, 100},
		{"sort_by=-started+workername", Query{SortBy: "-started", Worker: "w3@host"}, 100},
		{"sort_by=state+taskname+workername", Query{SortBy: "state", TaskName: "proj.add", Worker: "w2@host"}, 100},
		{"search", Query{Search: "kwargs:user=u7"}, 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.q.Limit = 100
			b.ReportAllocs()
			for b.Loop() {
				got, err := s.Tasks(tc.q)
				if err != nil || len(got) != tc.want {
					b.Fatal(err, len(got))
				}
			}
		})
	}
}

func filled(b *testing.B, n int) *State {
	b.Helper()
	s := New(Config{MaxTasks: n})
	s.Apply(benchEvents(b, n)...)
	if s.Len() != n {
		b.Fatalf("Len() = %d", s.Len())
	}
	// The events are garbage now: collect them before the timer starts,
	// or a collection of the setup's heap runs during the measured loop.
	runtime.GC()
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

// BenchmarkListMillion is the selection of an unpaged GET /api/tasks at a
// million tasks, which the list makes when it is first read (Len here):
// under one read lock before writing chunks, except that a sort by name,
// state or started reads 16,384 tasks per lock and sorts unlocked
// (sortDetached). A search is matched as the chunks are written, so it
// is not in this figure.
func BenchmarkListMillion(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a million tasks")
	}
	s, _, _ := million(b)
	for _, tc := range []struct {
		name string
		q    Query
	}{
		{"none", Query{}},
		{"state=SUCCESS", Query{State: "SUCCESS"}},
		{"sort_by=name", Query{SortBy: "name"}},
		{"sort_by=-received", Query{SortBy: "-received"}},
		{"search", Query{Search: "kwargs:user=u7"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.q.Limit = NoLimit
			b.ReportAllocs()
			for b.Loop() {
				l, err := s.List(tc.q)
				if err != nil {
					b.Fatal(err)
				}
				l.Len()
			}
		})
	}
}

// BenchmarkIngestIDs ingests the same number of tasks (a task-received
// event each) with random ids and with ids chosen to collide under a
// fixed hash (floodIDs); the two must cost about the same per id.
func BenchmarkIngestIDs(b *testing.B) {
	const n = 80000
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]string, n)
	for i := range random {
		var u [16]byte
		for j := range u {
			u[j] = byte(rng.Uint32())
		}
		random[i] = taskrec.FormatUUID(u)
	}
	for _, c := range []struct {
		name string
		ids  []string
	}{{"random", random}, {"colliding", floodIDs(n)}} {
		evs := make([]celery.Event, n)
		for i, id := range c.ids {
			evs[i] = taskEv(b, "received", id, "w@host", 1.7e9+float64(i)/100, map[string]any{"name": "proj.add"})
		}
		runtime.GC() // the building's garbage is not the benchmark's
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				s := New(Config{MaxTasks: n})
				s.Apply(evs...)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/id")
		})
	}
}

// BenchmarkListWhileApplying is the task-list read under ingestion of
// bench/RESULTS.md, in process: one goroutine
// per P lists the newest 100 tasks of a million (selection, then the chunk
// rendered as the handler does) with no ingestion, then while another
// goroutine applies events of new tasks at 50,000 a second, one Apply
// each (the broker's messages carry three), in bursts every millisecond.
// It reports the reads' p50 and p99: the difference is what ingestion's
// write locks cost the reads, without HTTP, Redis or another process.
// Readers that never block, more of them than Ps, would wait for each
// other's 10 ms time slices and measure the scheduler instead: an HTTP
// handler blocks on its connection between requests.
func BenchmarkListWhileApplying(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a million tasks")
	}
	s, stream, _ := million(b)
	for _, rate := range []int{0, 50000} {
		b.Run(fmt.Sprintf("events/s=%d", rate), func(b *testing.B) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if rate > 0 {
				wg.Go(func() {
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							stream(rate / 1000)
						}
					}
				})
			}
			readers := runtime.GOMAXPROCS(0)
			lat := make([][]time.Duration, readers)
			next := atomic.Int64{}
			b.ResetTimer()
			var rg sync.WaitGroup
			for r := range readers {
				rg.Go(func() {
					var buf []byte
					for next.Add(1) <= int64(b.N) {
						began := time.Now()
						if !readPage(b, s, &buf) {
							return
						}
						lat[r] = append(lat[r], time.Since(began))
					}
				})
			}
			rg.Wait()
			b.StopTimer()
			close(stop)
			wg.Wait()
			reportLatencies(b, slices.Concat(lat...))
		})
	}
}

// BenchmarkApplyWhileSorting is ingestion while another goroutine lists
// tasks by name of a million, over and over: the first 100 ("page"), or
// all of them as GET /api/tasks without a limit reads them, chunk by
// chunk ("unpaged"). The sort reads every task, and each Apply waits for
// the read lock it holds. It reports the p50, p99 and maximum of an
// Apply, the lists made a second and the tasks a list holds, with the
// default chunk and with one chunk for the whole state ("one-lock"). Run
// it with -benchtime 10s: an unpaged list takes about a second, and the
// figures need several.
func BenchmarkApplyWhileSorting(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a million tasks")
	}
	s, stream, _ := million(b)
	for _, list := range []struct {
		name string
		q    Query
	}{{"page", Query{Limit: 100, SortBy: "name"}}, {"unpaged", Query{Limit: NoLimit, SortBy: "name"}}} {
		for _, mode := range []struct {
			name  string
			chunk int
		}{{"chunks", selectChunk}, {"one-lock", 1 << 32}} {
			b.Run(list.name+"/"+mode.name, func(b *testing.B) {
				defer func(was int) { selectChunk = was }(selectChunk)
				selectChunk = mode.chunk
				stop := make(chan struct{})
				var wg sync.WaitGroup
				// The lists made a second are counted over the lists the
				// goroutine completed, not the timed applies, which may
				// be fewer than one unpaged list takes.
				lists, listed := 0, 0
				var listing time.Duration
				// The applies are timed once a first list is done, so that
				// the first of them do not run before any list does.
				first := make(chan struct{})
				var once sync.Once
				listedOnce := func() { once.Do(func() { close(first) }) }
				wg.Go(func() {
					defer listedOnce()
					began := time.Now()
					for {
						select {
						case <-stop:
							return
						default:
						}
						l, err := s.List(list.q)
						if err != nil {
							b.Error(err)
							return
						}
						for l.Next(listChunk, func(*taskrec.Task) { listed++ }) {
						}
						lists++
						listing = time.Since(began)
						listedOnce()
					}
				})
				<-first
				// b.Loop, not b.N: an Apply costs microseconds or waits
				// for a whole sort, and b.N, predicted from a round in
				// which no list had begun, once ran 10,000 Applies of
				// 40 ms (make bench, 525 s).
				var lat []time.Duration
				for b.Loop() {
					began := time.Now()
					stream(1)
					lat = append(lat, time.Since(began))
				}
				close(stop)
				wg.Wait()
				reportLatencies(b, lat)
				if lists > 0 {
					b.ReportMetric(float64(lists)/listing.Seconds(), "lists/s")
					b.ReportMetric(float64(listed)/float64(lists), "tasks/list")
				}
			})
		}
	}
}

// reportLatencies reports the p50, p99 and maximum of lat, which it sorts.
func reportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkSearchIDFragment is GET /api/tasks?limit=100&search= with 12
// hex characters of one task's id at a million tasks: the last group, as
// bench/loadgen's search_id, and from the middle across two hyphens.
func BenchmarkSearchIDFragment(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a million tasks")
	}
	s, heap := millionRandomIDs(b)
	mid, err := s.Tasks(Query{Limit: 1, Offset: 333333})
	if err != nil || len(mid) != 1 {
		b.Fatal(err, len(mid))
	}
	id := mid[0].UUID
	// The first searches build the arena chunks' digests, a few chunks
	// each: their time is reported once, and the cases below measure the
	// searches after it.
	t0 := time.Now()
	for range 20 {
		if _, err := s.Tasks(Query{Limit: 100, Search: id[24:]}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("the first 20 searches, building the digests: %v", time.Since(t0))
	some, err := s.Tasks(Query{Limit: 1000, Offset: 300000})
	if err != nil || len(some) != 1000 {
		b.Fatal(err, len(some))
	}
	r := rand.New(rand.NewPCG(3, 4))
	// random12 is 12 hex characters from anywhere in one of some's ids,
	// with the hyphens among them.
	random12 := func() (string, string) {
		id := some[r.IntN(len(some))].UUID
		start := r.IntN(21)
		for id[start] == '-' {
			start++
		}
		end, n := start, 0
		for n < 12 && end < len(id) {
			if id[end] != '-' {
				n++
			}
			end++
		}
		if n < 12 {
			return id, id[len(id)-12:]
		}
		return id, id[start:end]
	}
	for _, tc := range []struct {
		name string
		frag func() (string, string)
	}{
		{"node", func() (string, string) { return id, id[24:] }},
		{"middle", func() (string, string) { return id, id[9:23] }},
		{"middle-upper", func() (string, string) { return id, strings.ToUpper(id[10:24]) }},
		{"random12", random12},
		// A nibble, a hyphen and the variant nibble: a 64th of the tasks, too
		// many candidates, so the walk finds the page.
		{"common", func() (string, string) { return "", id[17:20] }},
		// A piece of a task name, in a third of the tasks: the walk.
		{"name", func() (string, string) { return "", "mai" }},
		// Hex letters only: found in the arena by one letter in both cases.
		{"letters", func() (string, string) { return "*", "fbdeca" }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var lat []time.Duration
			for b.Loop() {
				id, frag := tc.frag()
				t0 := time.Now()
				got, err := s.Tasks(Query{Limit: 100, Search: frag})
				lat = append(lat, time.Since(t0))
				if id == "" && len(got) == 100 || id == "*" && err == nil {
					continue
				}
				if err != nil || len(got) == 0 || !slices.ContainsFunc(got, func(t taskrec.Task) bool { return t.UUID == id }) {
					b.Fatal(frag, err, len(got))
				}
			}
			reportLatencies(b, lat)
			b.ReportMetric(heap/1e6, "heapB/task")
		})
	}
}

// millionRandomIDs is million with random ids: million's repeat their
// groups from pass to pass, where Celery's are random (uuid4).
func millionRandomIDs(b *testing.B) (*State, float64) {
	b.Helper()
	evs := benchEvents(b, 20000)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(Config{MaxTasks: 1000000})
	r := rand.New(rand.NewPCG(1, 2))
	ids := map[string]string{}
	for pass := 0; s.Len() < 1000000; pass++ {
		clear(ids)
		for _, e := range evs {
			if e.UUID != "" {
				id, ok := ids[e.UUID]
				if !ok {
					var u [16]byte
					for i := range u {
						u[i] = byte(r.Uint32())
					}
					id = taskrec.FormatUUID(u)
					ids[e.UUID] = id
				}
				own := e.RootID == e.UUID
				e.UUID = id
				if own {
					e.RootID = id
				}
			}
			shift := float64(pass) * 200
			e.Timestamp += shift
			if e.LocalReceived != 0 {
				e.LocalReceived += shift
			}
			s.Apply(e)
		}
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap := float64(ms.HeapInuse - before.HeapInuse)
	return s, heap
}

// BenchmarkApplyUnderReaders is ingestion in batches, as the broker hands
// them over, into a state of 200,000 tasks, alone and under closed-loop
// readers of the newest page of 100 tasks formatted as GET
// /api/tasks?limit=100 writes them. It reports the events applied a
// second, their share of the rate alone (from the readers=0 run before
// it, same batch and hold), and the reads a second. batch=192 is a
// message each of 64 workers' batches of three events (the ingest loop
// keeping up), batch=1536 what it hands over when it has fallen behind;
// hold is how long Apply keeps the write lock before it lets waiting
// readers in. Run it with -mutexprofile and -blockprofile to see where
// the writer waits: on this lock, a writer waits in (*RWMutex).Lock for
// the readers inside.
func BenchmarkApplyUnderReaders(b *testing.B) {
	if testing.Short() {
		b.Skip("builds 200,000 tasks")
	}
	s, next, _ := filledTo(b, 200000)
	defer func(h time.Duration) { maxWriteHold = h }(maxWriteHold)
	for _, batch := range []int{192, 1536} {
		for _, hold := range []time.Duration{150 * time.Microsecond, time.Millisecond} {
			alone := 0.0
			for _, readers := range []int{0, 1, 4, 16} {
				name := fmt.Sprintf("batch=%d/hold=%s/readers=%d", batch, hold, readers)
				b.Run(name, func(b *testing.B) {
					maxWriteHold = hold
					rate, reads := applyUnderReaders(b, s, next, batch, readers)
					if readers == 0 {
						alone = rate
					}
					b.ReportMetric(rate, "events/s")
					if alone > 0 {
						b.ReportMetric(100*rate/alone, "%alone")
					}
					b.ReportMetric(reads, "reads/s")
				})
			}
		}
	}
}

// readPage reads the newest page of 100 tasks as GET /api/tasks?limit=100
// does, formatting each into buf, and reports whether it could.
func readPage(b *testing.B, s *State, buf *[]byte) bool {
	l, err := s.List(Query{Limit: 100})
	if err != nil {
		b.Error(err)
		return false
	}
	defer l.Close()
	for more := true; more; {
		more = l.Next(256, func(t *taskrec.Task) { *buf = t.AppendListJSON((*buf)[:0]) })
	}
	return true
}

// applyUnderReaders applies batches of events to s for b's loop under
// readers closed-loop readers of the newest page, and returns the events
// applied and the pages read a second.
func applyUnderReaders(b *testing.B, s *State, next func(int) []celery.Event, batch, readers int) (rate, readRate float64) {
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			var buf []byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !readPage(b, s, &buf) {
					return
				}
				reads.Add(1)
			}
		})
	}
	n := 0
	for b.Loop() {
		s.Apply(next(batch)...)
		n += batch
	}
	close(stop)
	wg.Wait()
	return float64(n) / b.Elapsed().Seconds(), float64(reads.Load()) / b.Elapsed().Seconds()
}

// BenchmarkListPage100 is the page of GET /api/tasks?limit=100 at 100k
// tasks as the handler reads and writes it: List, then Next.
func BenchmarkListPage100(b *testing.B) {
	s := filled(b, 100000)
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		l, err := s.List(Query{Limit: 100})
		if err != nil {
			b.Fatal(err)
		}
		buf = buf[:0]
		for more := true; more; {
			more = l.Next(256, func(t *taskrec.Task) { buf = t.AppendListJSON(buf) })
		}
	}
}

// floodIDs are n ids in the shape that collided in one bucket under the
// table's former fixed hash: the first eight bytes vary, the last eight
// are fixed.
func floodIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-%04x-%04x-4feb-d4273daeb2c2", i*2654435761%(1<<32), i%65536, (i/65536)%65536)
	}
	return ids
}
