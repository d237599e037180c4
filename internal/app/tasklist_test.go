package app

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/state"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/tasklist.golden from the current code")

// newTaskListApp is an App on its embedded broker whose state the test
// fills directly, and a server on its whole HTTP stack.
func newTaskListApp(t testing.TB, maxTasks int) (*App, *httptest.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	a, err := New(context.Background(), Config{EmbeddedAddr: addr, MaxTasks: maxTasks})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })
	return a, srv
}

// decodeEvent builds an event as the decoder would from its JSON fields.
func decodeEvent(t testing.TB, fields map[string]any) celery.Event {
	t.Helper()
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := celery.DecodeEvents(raw)
	if err != nil || len(evs) != 1 {
		t.Fatal(err, len(evs))
	}
	evs[0].LocalReceived = evs[0].Timestamp
	evs[0].Raw = nil
	return evs[0]
}

// variedEvents is a state with something of everything GET /api/tasks
// orders, filters and writes: canonical and text ids (with characters a
// JSON key must escape), names and workers differing only in case, every
// state, tasks never received, parents and children, equal timestamps
// and received times, strings needing escapes. Tasks are received within
// an hour of midnight UTC on even days of November 2023, so that the
// received filters below, at midnight local time of odd days, cut between
// the same tasks in every time zone.
func variedEvents(t testing.TB) []celery.Event {
	t.Helper()
	day0 := float64(time.Date(2023, 11, 2, 0, 0, 0, 0, time.UTC).Unix())
	var evs []celery.Event
	add := func(fields map[string]any) { evs = append(evs, decodeEvent(t, fields)) }
	textIDs := []string{"job-7", `a<b>&c`, `q"uote`, "Ünïcode-id", "ABCDEF01-2345-4678-9ABC-DEF012345678", "plain"}
	names := []string{"proj.add", "Proj.Add", "proj.mail", "proj.resize"}
	workers := []string{"w1@h", "W1@h", "w2@h"}
	for i := range 72 {
		id := fmt.Sprintf("%08x-1111-4222-8333-%012x", (i*7919)%1000, i)
		if i%12 == 5 {
			id = textIDs[(i/12)%len(textIDs)]
		}
		day := float64(2 * 86400 * (i % 5))
		ts := day0 + day + float64(i%7)*60 - 1800
		if i%9 == 0 {
			ts = day0 + day // several tasks at the same moment
		}
		name, worker := names[i%len(names)], workers[i%len(workers)]
		base := func(typ string, at float64) map[string]any {
			return map[string]any{"type": typ, "uuid": id, "hostname": worker, "timestamp": at, "clock": i*10 + int(at-ts)}
		}
		if i%6 == 0 {
			// Sent by a client, with routing, and maybe never received.
			e := base("task-sent", ts-1)
			e["hostname"] = "gen42@client"
			e["name"], e["args"], e["kwargs"] = name, fmt.Sprintf("(%d, '</script>')", i), "{'user': 'u1'}"
			e["exchange"], e["routing_key"], e["queue"] = "", "celery", "celery"
			e["retries"], e["eta"], e["expires"] = 0, nil, "2023-12-01T00:00:00+00:00"
			add(e)
			if i%12 == 0 {
				continue
			}
		}
		if i%10 != 3 {
			e := base("task-received", ts)
			e["name"], e["args"], e["kwargs"] = name, fmt.Sprintf("(%d,)", i), fmt.Sprintf("{'user': 'u%d', 'note': 'é\\n'}", i%3)
			e["retries"] = i % 2
			if i > 10 && i%4 == 1 {
				parent := fmt.Sprintf("%08x-1111-4222-8333-%012x", ((i-4)*7919)%1000, i-4)
				e["parent_id"], e["root_id"] = parent, parent
			} else {
				e["root_id"] = id
			}
			add(e)
		}
		switch i % 8 {
		case 0: // received only
		case 1:
			add(base("task-started", ts+1))
		case 2, 5:
			add(base("task-started", ts+1))
			e := base("task-succeeded", ts+2)
			e["result"], e["runtime"] = fmt.Sprintf("'r%d'", i), 1.25
			add(e)
		case 3:
			add(base("task-started", ts+1))
			e := base("task-failed", ts+3)
			e["exception"], e["traceback"] = "ValueError('boom')", "Traceback (most recent call last):\n  ValueError: boom\n"
			add(e)
		case 4:
			e := base("task-retried", ts+2)
			e["exception"] = "Retry in 5s"
			add(e)
		case 6:
			e := base("task-revoked", ts+2)
			e["terminated"], e["signum"] = true, 15
			add(e)
		case 7:
			e := base("task-rejected", ts+2)
			e["requeue"] = false
			add(e)
		}
	}
	return evs
}

// taskListQueries are the GET /api/tasks queries compared with the bodies
// of the code before streaming, in testdata/tasklist.golden.
var taskListQueries = []string{
	"",
	"limit=5",
	"limit=0",
	"offset=3",
	"offset=7&limit=4",
	"offset=1000",
	"sort_by=name",
	"sort_by=-name",
	"sort_by=state",
	"sort_by=-state",
	"sort_by=received",
	"sort_by=-received",
	"sort_by=started",
	"sort_by=-started",
	"sort_by=name&offset=5&limit=9",
	"sort_by=-received&offset=2",
	"state=SUCCESS",
	"state=failure",
	"state=All",
	"taskname=proj.add",
	"taskname=nope",
	"workername=w1@h",
	"workername=w2@h&state=STARTED",
	"taskname=proj.mail&sort_by=-started",
	"received_start=2023-11-05 00:00",
	"received_end=2023-11-05 00:00",
	"received_start=2023-11-03 00:00&received_end=2023-11-07 00:00",
	"received_start=2023-11-03 00:00&received_end=2023-11-07 00:00&sort_by=-received&offset=1",
	"received_start=2023-11-03 00:00&sort_by=name",
	"search=proj",
	"search=state:SUCCESS",
	"search=kwargs:user=u1",
	"search=args:script OR result:r17",
	"search=worker:w1@&sort_by=-name",
	"search=" + url.QueryEscape("name:add AND (state:FAILURE OR state:RETRY)") + "&sort_by=-name",
	"search=uote",
	"state=SUCCESS&search=proj&offset=1&limit=3",
	"search=proj&offset=5",
	"search=kwargs:user=u1&sort_by=-received&offset=3",
	"search=state:SUCCESS&sort_by=name&offset=2",
	"search=proj&workername=w2@h&offset=1",
}

func taskListURL(base, query string) string {
	u := base + "/api/tasks"
	if query == "" {
		return u
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		panic(err)
	}
	return u + "?" + v.Encode()
}

// TestTaskListBodyUnchanged holds GET /api/tasks to the exact bytes the
// code answered before it streamed, over a varied state and every kind of
// query.
func TestTaskListBodyUnchanged(t *testing.T) {
	a, srv := newTaskListApp(t, 1000)
	a.State.Apply(variedEvents(t)...)
	if n := a.State.Len(); n != 72 {
		t.Fatalf("state holds %d tasks, want 72", n)
	}
	const golden = "testdata/tasklist.golden"
	var out strings.Builder
	for _, q := range taskListQueries {
		code, body, hdr := get(t, taskListURL(srv.URL, q))
		if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("%q: %d %s %s", q, code, hdr.Get("Content-Type"), body)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("%q: not JSON: %v", q, err)
		}
		sum := sha256.Sum256([]byte(body))
		fmt.Fprintf(&out, "%s\t%d\t%d\t%s\n", hex.EncodeToString(sum[:]), len(m), len(body), q)
	}
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	wantLines, gotLines := strings.Split(string(want), "\n"), strings.Split(out.String(), "\n")
	if len(wantLines) != len(gotLines) {
		t.Fatalf("%d answers, golden has %d", len(gotLines), len(wantLines))
	}
	for i := range wantLines {
		if wantLines[i] != gotLines[i] {
			t.Errorf("body changed (hash, tasks, bytes, query):\n got %s\nwant %s", gotLines[i], wantLines[i])
		}
	}
}

// lifeOf is the received, started and succeeded events of task id at ts,
// copied from a template decoded once (decoding a million would dominate).
func lifeOf(tmpl []celery.Event, id string, ts float64, clock int64) []celery.Event {
	evs := make([]celery.Event, len(tmpl))
	for j := range tmpl {
		e := tmpl[j]
		e.UUID, e.RootID = id, id
		e.Timestamp += ts
		e.LocalReceived = e.Timestamp
		e.Clock += clock
		evs[j] = e
	}
	return evs
}

func lifeTemplate(t testing.TB) []celery.Event {
	base := func(typ string, at float64) map[string]any {
		return map[string]any{"type": typ, "uuid": "x", "hostname": "big@h", "timestamp": at, "clock": int(at * 10)}
	}
	rec := base("task-received", 0)
	rec["name"], rec["args"], rec["kwargs"], rec["retries"], rec["root_id"] = "proj.big", "(1, 2)", "{'user': 'u1'}", 0, "x"
	done := base("task-succeeded", 0.2)
	done["result"], done["runtime"] = "3", 0.19
	return []celery.Event{decodeEvent(t, rec), decodeEvent(t, base("task-started", 0.1)), decodeEvent(t, done)}
}

func bigID(i int) string { return fmt.Sprintf("%08x-2222-4333-8444-%012x", i, i) }

// fill applies n task lives, task i at 1.7e9 + i/100 s, from first on.
func fill(s *state.State, tmpl []celery.Event, first, n int) {
	const batch = 1000
	evs := make([]celery.Event, 0, batch*len(tmpl))
	for i := first; i < first+n; i++ {
		evs = append(evs, lifeOf(tmpl, bigID(i), 1.7e9+float64(i)/100, int64(i))...)
		if len(evs) == cap(evs) || i == first+n-1 {
			s.Apply(evs...)
			evs = evs[:0]
		}
	}
}

// heapObjects is the bytes of heap objects, live or not yet swept: what
// runtime.MemStats.HeapAlloc reports, read without stopping the world.
func heapObjects() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// peakHeap samples the heap every millisecond until stop is called, which
// returns the highest sample.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if h := heapObjects(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		if h := heapObjects(); h > peak.Load() {
			peak.Store(h)
		}
		return peak.Load()
	}
}

// bodyCounter reads a task list body, counting its records, and keeps its
// first and last bytes; it holds no more of it.
type bodyCounter struct {
	records    int
	bytes      int64
	head, tail []byte
	carry      []byte
}

var recordStart = []byte(`{"uuid": `)

func (c *bodyCounter) Write(p []byte) (int, error) {
	if len(c.head) < 64 {
		c.head = append(c.head, p[:min(len(p), 64-len(c.head))]...)
	}
	c.bytes += int64(len(p))
	// Count across the boundary with the previous write.
	joined := append(c.carry, p[:min(len(p), len(recordStart)-1)]...)
	c.records += bytes.Count(joined, recordStart) + bytes.Count(p, recordStart)
	c.carry = append(c.carry[:0], p[max(0, len(p)-len(recordStart)+1):]...)
	c.tail = append(c.tail[:0], p[max(0, len(p)-16):]...)
	return len(p), nil
}

// streamUnpaged asks for every task of a with n tasks (GET /api/tasks
// with query, "" or "?sort_by=..."), reads the first bytes, then, with the
// response still incomplete, applies more tasks and waits until the state
// holds them, then reads the rest. It returns the peak heap growth over
// the request and the body's counts.
func streamUnpaged(t testing.TB, a *App, srvURL, query string, n, more int) (growth uint64, c *bodyCounter, elapsed time.Duration) {
	t.Helper()
	tmpl := lifeTemplate(t)
	runtime.GC()
	base := heapObjects()
	stop := peakHeap()
	start := time.Now()
	resp, err := http.Get(srvURL + "/api/tasks" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	c = &bodyCounter{}
	r := bufio.NewReaderSize(resp.Body, 32<<10)
	if _, err := io.CopyN(c, r, 64<<10); err != nil {
		t.Fatal(err)
	}
	// Ingestion goes on while the client holds the rest of the answer.
	done := make(chan struct{})
	go func() { defer close(done); fill(a.State, tmpl, n, more) }()
	deadline := time.After(30 * time.Second)
	select {
	case <-done:
	case <-deadline:
		t.Fatalf("applying %d tasks did not finish within 30 s while a task list was being read: the list holds the state's lock", more)
	}
	if got := a.State.Len(); got != n+more {
		t.Fatalf("state holds %d tasks during the list, want %d", got, n+more)
	}
	if _, ok := a.State.Task(bigID(n + more - 1)); !ok {
		t.Fatal("a task applied during the list is not in the state")
	}
	if _, err := io.CopyBuffer(c, r, make([]byte, 32<<10)); err != nil {
		t.Fatal(err)
	}
	elapsed = time.Since(start)
	peak := stop()
	if peak > base {
		growth = peak - base
	}
	return growth, c, elapsed
}

// unpagedLists are the unpaged lists the memory test and benchmark ask
// for. Every task has the same name, so by name descending the newest id
// comes first, as in the default order.
var unpagedLists = []struct{ name, query string }{
	{"default", ""},
	{"sort_by=-name", "?sort_by=-name"},
}

// TestUnpagedTaskListBoundedMemory asks for every one of 200,000 tasks
// without a limit, as Flower's default allows, in the default order and
// sorted by name, and holds the process's peak heap growth under
// 64 MiB while ingestion goes on during the answer.
// BenchmarkUnpagedTaskListMillion does the same at a million tasks.
func TestUnpagedTaskListBoundedMemory(t *testing.T) {
	for _, list := range unpagedLists {
		query := list.query
		t.Run(list.name, func(t *testing.T) {
			const n, more = 200000, 2000
			a, srv := newTaskListApp(t, n+more)
			fill(a.State, lifeTemplate(t), 0, n)
			growth, c, elapsed := streamUnpaged(t, a, srv.URL, query, n, more)
			t.Logf("%d tasks, %d bytes in %v, peak heap growth %.1f MiB", c.records, c.bytes, elapsed, float64(growth)/(1<<20))
			if c.records != n {
				t.Errorf("body holds %d records, want the %d tasks there were when it was asked for", c.records, n)
			}
			if !bytes.HasPrefix(c.head, []byte(`{"`+bigID(n-1)+`": {"uuid": `)) || !bytes.HasSuffix(c.tail, []byte(`"big@h"}}`)) {
				t.Errorf("body starts %q and ends %q", c.head, c.tail)
			}
			if growth > 64<<20 {
				t.Errorf("peak heap growth %.1f MiB, want under 64 MiB", float64(growth)/(1<<20))
			}
		})
	}
}

// BenchmarkUnpagedTaskListMillion is an unpaged GET /api/tasks at a
// million tasks through the HTTP stack, in the default order and sorted by
// name, with 10,000 tasks applied during it: the peak heap growth of the
// process and the time to read the body.
func BenchmarkUnpagedTaskListMillion(b *testing.B) {
	for _, list := range unpagedLists {
		query := list.query
		b.Run(list.name, func(b *testing.B) {
			const n, more = 1000000, 10000
			a, srv := newTaskListApp(b, n+more*b.N)
			tmpl := lifeTemplate(b)
			fill(a.State, tmpl, 0, n)
			var worst uint64
			var bodyBytes int64
			b.ResetTimer()
			for i := range b.N {
				growth, c, _ := streamUnpaged(b, a, srv.URL, query, n+i*more, more)
				if c.records != n+i*more {
					b.Fatalf("body holds %d records, want %d", c.records, n+i*more)
				}
				worst, bodyBytes = max(worst, growth), c.bytes
			}
			b.ReportMetric(float64(worst)/(1<<20), "peak-heap-growth-MiB")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/list")
			b.ReportMetric(float64(bodyBytes)/(1<<20), "body-MiB")
		})
	}
}

// slowClient reads through a small socket receive buffer, so that the
// server can run only a little ahead of what the test has read.
func slowClient() *http.Client {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 32<<10)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// TestTaskListSkipsTasksEvictedMidStream evicts the tail of an unpaged
// list while it is being read: the evicted tasks are left out, the others
// come in order, and the body is valid JSON.
func TestTaskListSkipsTasksEvictedMidStream(t *testing.T) {
	const n, evicted = 40000, 10000
	a, srv := newTaskListApp(t, n)
	tmpl := lifeTemplate(t)
	fill(a.State, tmpl, 0, n)
	resp, err := slowClient().Get(srv.URL + "/api/tasks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := io.CopyN(&body, resp.Body, 64<<10); err != nil {
		t.Fatal(err)
	}
	// The oldest tasks, last in the list, make room for new ones.
	fill(a.State, tmpl, n, evicted)
	if _, ok := a.State.Task(bigID(evicted - 1)); ok {
		t.Fatal("the oldest tasks were not evicted")
	}
	if _, err := io.Copy(&body, resp.Body); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&body)
	var ids []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("body starts with %v, %v", tok, err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			UUID string `json:"uuid"`
		}
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		if rec.UUID != tok {
			t.Fatalf("key %v holds task %s", tok, rec.UUID)
		}
		ids = append(ids, rec.UUID)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		t.Fatalf("body ends with %v, %v", tok, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more after the object: %v", err)
	}
	if len(ids) != n-evicted {
		t.Fatalf("%d tasks listed, want the %d not evicted", len(ids), n-evicted)
	}
	for j, id := range ids {
		if want := bigID(n - 1 - j); id != want {
			t.Fatalf("task %d is %s, want %s", j, id, want)
		}
	}
}

// TestTaskListStopsWhenTheClientLeaves reads the start of a large unpaged
// list and hangs up: the handler returns soon after, having written a
// fraction of the body.
func TestTaskListStopsWhenTheClientLeaves(t *testing.T) {
	const n = 40000
	a, err := New(context.Background(), Config{EmbeddedAddr: freeAddr(t), MaxTasks: n})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fill(a.State, lifeTemplate(t), 0, n)
	var written atomic.Int64
	returned := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Handler.ServeHTTP(countingWriter{w, &written}, r)
		returned <- struct{}{}
	}))
	defer srv.Close()
	resp, err := slowClient().Get(srv.URL + "/api/tasks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, resp.Body, 64<<10); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // unread: the connection closes
	select {
	case <-returned:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler still runs 20 s after its client left")
	}
	t.Logf("the handler wrote %d bytes", written.Load())
	// A whole body is about 725 bytes a task.
	if w := written.Load(); w > n*725/2 {
		t.Errorf("the handler wrote %d bytes after its client left at 64 KiB, of about %d", w, n*725)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// countingWriter counts the bytes a handler got written.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

func (w countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestTaskListContentLength: a task list that fits in one chunk of the
// state (a page) is sent with its length, in one piece; a longer one is
// streamed chunked. Both are whole.
func TestTaskListContentLength(t *testing.T) {
	a, srv := newTaskListApp(t, 1000)
	fill(a.State, lifeTemplate(t), 0, 300) // more than a chunk (taskListChunk)
	tests := []struct {
		query   string
		tasks   int
		chunked bool
	}{
		{"limit=100", 100, false},
		{"limit=1&offset=299", 1, false},
		{"state=NONE", 0, false},
		{"", 300, true},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			resp, err := http.Get(srv.URL + "/api/tasks?" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v %s", resp.StatusCode, err, body)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(body, &m); err != nil || len(m) != tc.tasks {
				t.Fatalf("%d tasks (%v), want %d", len(m), err, tc.tasks)
			}
			chunked := slices.Contains(resp.TransferEncoding, "chunked")
			if chunked != tc.chunked {
				t.Errorf("chunked %t, want %t (Content-Length %d)", chunked, tc.chunked, resp.ContentLength)
			}
			if !tc.chunked && resp.ContentLength != int64(len(body)) {
				t.Errorf("Content-Length %d, body %d bytes", resp.ContentLength, len(body))
			}
		})
	}
}
