package pg_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

func openStore(t testing.TB, url string) *pg.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := pg.Open(ctx, pg.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newDB(t testing.TB) string {
	t.Helper()
	return testcluster.PostgresURL(testcluster.PostgresAddr, testcluster.PostgresDB(t))
}

func ev(t testing.TB, fields map[string]any) celery.Event {
	t.Helper()
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := celery.DecodeEvents(raw)
	if err != nil {
		t.Fatal(err)
	}
	return evs[0]
}

func taskEv(t testing.TB, kind, uuid, host string, ts float64, extra map[string]any) celery.Event {
	t.Helper()
	f := map[string]any{"type": "task-" + kind, "uuid": uuid, "hostname": host, "timestamp": ts, "clock": int(ts * 10)}
	for k, v := range extra {
		f[k] = v
	}
	e := ev(t, f)
	e.LocalReceived = ts
	return e
}

// drainTo writes what changed in st to s, as the app's flush does.
func drainTo(t testing.TB, st *state.State, s *pg.Store) {
	t.Helper()
	c := st.Drain()
	b := history.Batch{FirstSeq: c.FirstSeq, Types: c.Types}
	for _, r := range c.Tasks {
		b.Tasks = append(b.Tasks, history.Task{Seq: r.Seq, Data: r.Data})
	}
	if err := s.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// dataset is n tasks of three names (two cases), two workers, all states,
// some never received, some with text ids, some children of the one
// before, args and kwargs to search.
func dataset(t testing.TB, st *state.State, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		if i%7 == 6 {
			id = fmt.Sprintf("text-%d", i)
		}
		w := fmt.Sprintf("w%d@h", i%2)
		extra := map[string]any{"name": []string{"proj.add", "Proj.Mul", "proj.sleep"}[i%3], "args": fmt.Sprintf("(%d, 'x%d')", i, i%4),
			"kwargs": fmt.Sprintf("{'k': %d, 'kk': %d, 'f': %.1f}", i%5, i%11, 1.5+float64(i%4)), "root_id": id}
		if i%4 == 1 {
			parent := fmt.Sprintf("%08x-0000-4000-8000-%012x", i-1, i-1)
			extra["parent_id"], extra["root_id"] = parent, parent
		}
		ts := 1000 + float64(i)
		if i%6 == 5 {
			st.Apply(taskEv(t, "sent", id, "client@h", ts, extra)) // never received
			continue
		}
		st.Apply(taskEv(t, "received", id, w, ts, extra))
		switch i % 5 {
		case 0:
		case 1:
			st.Apply(taskEv(t, "started", id, w, ts+0.5, nil))
		case 2:
			st.Apply(taskEv(t, "started", id, w, ts+0.5, nil), taskEv(t, "succeeded", id, w, ts+0.7, map[string]any{"result": fmt.Sprintf("'r%d'", i), "runtime": 0.2}))
		case 3:
			st.Apply(taskEv(t, "started", id, w, ts+0.5, nil), taskEv(t, "failed", id, w, ts+0.6, map[string]any{"exception": "KeyError('boom')", "traceback": "tb"}))
		case 4:
			st.Apply(taskEv(t, "retried", id, w, ts+0.3, map[string]any{"exception": "Retry"}))
		}
	}
}

// ties adds tasks whose timestamp is another's (task 120 of dataset is
// received at 1120), received or never received, so that the default
// order's ties by id are read inside and outside a received window.
func ties(t testing.TB, st *state.State) {
	t.Helper()
	for _, id := range []string{"tie-b", "tie-A", "tie-c", "tie-a"} {
		st.Apply(taskEv(t, "received", id, "w0@h", 1120, map[string]any{"name": "proj.add", "args": "()", "kwargs": "{}"}))
	}
	for _, id := range []string{"tie-sent-2", "tie-sent-1"} {
		st.Apply(taskEv(t, "sent", id, "client@h", 1120, map[string]any{"name": "proj.add", "args": "()", "kwargs": "{}"}))
	}
}

// windowQueries are received windows in the default order, narrow ones
// (read in two steps through the received index) and wider ones: pages,
// offsets past the end, the never received tasks the window lets through,
// ties, and the other filters and the search inside a window.
func windowQueries(at func(int64) *time.Time) []state.Query {
	return []state.Query{
		{Limit: 10, ReceivedStart: at(1100), ReceivedEnd: at(1200)},
		{Limit: 10, Offset: 45, ReceivedStart: at(1100), ReceivedEnd: at(1200)},
		{Limit: 12, Offset: 60, ReceivedStart: at(1110), ReceivedEnd: at(1130)},
		{Limit: 3, Offset: 65, ReceivedStart: at(1120), ReceivedEnd: at(1120)},
		{Limit: state.NoLimit, ReceivedStart: at(1115), ReceivedEnd: at(1125)},
		{Limit: state.NoLimit, Offset: 50, ReceivedStart: at(1115), ReceivedEnd: at(1125)},
		{Limit: 5, Offset: 1000, ReceivedStart: at(1100), ReceivedEnd: at(1200)},
		{Limit: 10, ReceivedStart: at(1200), ReceivedEnd: at(1100)},
		{Limit: 10, Offset: 2, ReceivedStart: at(1100), ReceivedEnd: at(1200), TaskName: "proj.add"},
		{Limit: state.NoLimit, ReceivedStart: at(1100), ReceivedEnd: at(1200), Worker: "w0@h", State: "received"},
		{Limit: 10, ReceivedStart: at(1100), ReceivedEnd: at(1200), Search: "tie"},
		{Limit: 10, Offset: 5, ReceivedStart: at(1000), ReceivedEnd: at(1000 + 24*3600)},
		{Limit: 10, Offset: 5, ReceivedStart: at(1000), ReceivedEnd: at(1001 + 24*3600)},
		{Limit: 10, ReceivedStart: at(1100), ReceivedEnd: at(1200), SortBy: "-received"},
	}
}

// listPG reads a List of the store as the handler writes it.
func listPG(t testing.TB, s *pg.Store, q state.Query) (ids, bodies []string, err error) {
	t.Helper()
	c, err := s.List(context.Background(), q)
	if err != nil {
		return nil, nil, err
	}
	for more := true; more; {
		more = c.Next(100, func(tk *taskrec.Task) {
			ids = append(ids, tk.UUID)
			bodies = append(bodies, string(tk.AppendListJSON(nil)))
		})
	}
	return ids, bodies, c.Err()
}

// sameList fails t unless the store lists for q the ids and bodies the
// in-memory state lists.
func sameList(t testing.TB, st *state.State, s *pg.Store, q state.Query) {
	t.Helper()
	wantIDs, wantBodies, err := listMem(t, st, q)
	if err != nil {
		t.Fatal(err)
	}
	gotIDs, gotBodies, err := listPG(t, s, q)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
		t.Fatalf("%+v: ids (-state +postgres):\n%s", q, diff)
	}
	if diff := cmp.Diff(wantBodies, gotBodies); diff != "" {
		t.Fatalf("%+v: bodies (-state +postgres):\n%s", q, diff)
	}
}

func listMem(t testing.TB, st *state.State, q state.Query) (ids, bodies []string, err error) {
	t.Helper()
	l, err := st.List(q)
	if err != nil {
		return nil, nil, err
	}
	for more := true; more; {
		more = l.Next(100, func(tk *taskrec.Task) {
			ids = append(ids, strings.Clone(tk.UUID))
			bodies = append(bodies, string(tk.AppendListJSON(nil)))
		})
	}
	return ids, bodies, nil
}

// TestListMatchesState: every filter, sort, page and search of GET
// /api/tasks lists the same tasks in the same order, with the same bytes,
// from PostgreSQL as from the in-memory state holding the same events.
func TestListMatchesState(t *testing.T) {
	s := openStore(t, newDB(t))
	st := state.New(state.Config{MaxTasks: 1000, TrackChanges: true})
	dataset(t, st, 300)
	ties(t, st)
	drainTo(t, st, s)
	at := func(sec int64) *time.Time { x := time.Unix(sec, 0); return &x }
	queries := []state.Query{
		{Limit: state.NoLimit},
		{Limit: 10},
		{Limit: 10, Offset: 25},
		{Limit: 0},
		{Limit: -5},
		{Limit: state.NoLimit, Offset: -3},
		{Limit: state.NoLimit, State: "SUCCESS"},
		{Limit: state.NoLimit, State: "started"},
		{Limit: state.NoLimit, State: "All"},
		{Limit: state.NoLimit, State: "NOPE"},
		{Limit: state.NoLimit, TaskName: "proj.mul"},
		{Limit: 5, TaskName: "PROJ.ADD", Offset: 3},
		{Limit: state.NoLimit, Worker: "W1@h"},
		{Limit: state.NoLimit, Worker: "w0@h", State: "FAILURE", TaskName: "proj.sleep"},
		{Limit: state.NoLimit, ReceivedStart: at(1100)},
		{Limit: state.NoLimit, ReceivedEnd: at(1050)},
		{Limit: 20, ReceivedStart: at(1100), ReceivedEnd: at(1200), State: "RETRY"},
		{Limit: state.NoLimit, SortBy: "name"},
		{Limit: state.NoLimit, SortBy: "-name"},
		{Limit: state.NoLimit, SortBy: "state"},
		{Limit: 17, SortBy: "-state", Offset: 40},
		{Limit: state.NoLimit, SortBy: "received"},
		{Limit: state.NoLimit, SortBy: "-received"},
		{Limit: state.NoLimit, SortBy: "started"},
		{Limit: 30, SortBy: "-started", Worker: "w1@h"},
		{Limit: 30, SortBy: "received", ReceivedStart: at(1150)},
		{Limit: state.NoLimit, Search: "0000000000a"},
		// Id fragments at each offset of a gram, across hyphens, folded,
		// under five characters (no grams), of text ids, with a filter.
		{Limit: state.NoLimit, Search: "0000000a-0000-4000-8000-00000000000a"},
		{Limit: state.NoLimit, Search: "0000a-0000"},
		{Limit: state.NoLimit, Search: "000A-0000-4"},
		{Limit: state.NoLimit, Search: "0a-0000-40"},
		{Limit: state.NoLimit, Search: "1c-00"},
		{Limit: state.NoLimit, Search: "8000-00000000001"},
		{Limit: state.NoLimit, Search: "0001c"},
		{Limit: state.NoLimit, Search: "01c"},
		{Limit: state.NoLimit, Search: "0012"},
		{Limit: state.NoLimit, Search: "ext-13"},
		{Limit: state.NoLimit, Search: "TEXT-2"},
		{Limit: 5, Search: "000000001", State: "SUCCESS", SortBy: "name"},
		{Limit: state.NoLimit, Search: "text-1"},
		{Limit: state.NoLimit, Search: "PROJ.MUL"},
		{Limit: state.NoLimit, Search: "name:sleep"},
		{Limit: state.NoLimit, Search: "state:success"},
		{Limit: state.NoLimit, Search: `worker:w1@ args:"x3'"`},
		{Limit: state.NoLimit, Search: `result:'r1 OR "kwargs:'k': 4"`},
		{Limit: state.NoLimit, Search: `(name:add OR name:mul) AND args:"'x2'"`},
		{Limit: 7, Search: "retry", SortBy: "-received"},
		{Limit: state.NoLimit, Search: "100%"},
		{Limit: state.NoLimit, Search: "w_@"},
		// kwargs:key=value: a superset selected by the pair's words (here
		// also the tasks whose 'kk' is 1 or 10), each row then checked and
		// the matches paged; f=1.5 has one word, so its superset is every
		// task, read in several FETCHes.
		{Limit: state.NoLimit, Search: "kwargs:k=1"},
		{Limit: 5, Offset: 3, Search: "kwargs:K=2"},
		{Limit: state.NoLimit, Search: "kwargs:f=1.5"},
		{Limit: 4, Offset: 70, Search: "kwargs:f=1.5", SortBy: "-name"},
		{Limit: 10, Search: "kwargs:kk=10 OR name:sleep", SortBy: "started"},
		{Limit: state.NoLimit, Search: "kwargs:k=3 state:failure", Worker: "w1@h"},
		{Limit: 10, Offset: 2, ReceivedStart: at(1100), ReceivedEnd: at(1200), Search: "kwargs:k=4"},
		{Limit: state.NoLimit, Search: "kwargs:k=9"},
		{Limit: 0, Search: "kwargs:k=1"},
	}
	// An id filter (the bulk operations' ids): UUIDs and text ids, one
	// unknown, one UUID in upper case (ids match exactly), with the other
	// filters, sorts and pages; an empty list selects nothing.
	ids := []string{"00000000-0000-4000-8000-000000000000", "text-6", "text-13", "0000000a-0000-4000-8000-00000000000a",
		"0000000B-0000-4000-8000-00000000000B", "00000011-0000-4000-8000-000000000011", "nope", "0000001c-0000-4000-8000-00000000001c"}
	queries = append(queries,
		state.Query{Limit: state.NoLimit, IDs: ids},
		state.Query{Limit: 2, Offset: 1, IDs: ids},
		state.Query{Limit: state.NoLimit, IDs: ids, State: "FAILURE"},
		state.Query{Limit: state.NoLimit, IDs: ids, SortBy: "-name"},
		state.Query{Limit: state.NoLimit, IDs: ids, SortBy: "received", Search: "name:add OR name:sleep"},
		state.Query{Limit: state.NoLimit, IDs: ids, Search: "kwargs:k=1"},
		state.Query{Limit: state.NoLimit, IDs: []string{}},
	)
	queries = append(queries, windowQueries(at)...)
	for _, q := range queries {
		t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) { sameList(t, st, s, q) })
	}
	// Task info, and the types.
	for _, id := range []string{"00000000-0000-4000-8000-000000000000", "text-6", "00000000-0000-4000-8000-000000000009"} {
		want, ok := st.Task(id)
		got, found, err := s.Task(context.Background(), id)
		if err != nil || found != ok {
			t.Fatalf("Task(%s): found %v, err %v; want found %v", id, found, err, ok)
		}
		wb, _ := want.MarshalJSON()
		gb, _ := got.MarshalJSON()
		if string(wb) != string(gb) {
			t.Errorf("Task(%s):\nstate    %s\npostgres %s", id, wb, gb)
		}
	}
	types, err := s.TaskTypes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st.TaskTypes(), types); diff != "" {
		t.Errorf("task types (-state +postgres):\n%s", diff)
	}
}

// TestListRefusesUntranslatable: what the store cannot answer from an
// index is a 400-kind error naming it, and bad input is refused as the
// state refuses it.
func TestListRefusesUntranslatable(t *testing.T) {
	s := openStore(t, newDB(t))
	for _, c := range []struct {
		q    state.Query
		want string
	}{
		{state.Query{Limit: 1, Search: "ab"}, "at least 3"},
		{state.Query{Limit: 1, SortBy: "bogus"}, "invalid sort_by"},
	} {
		_, err := s.List(context.Background(), c.q)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, history.ErrUnavailable) {
			t.Errorf("List(%+v) = %v, want an error with %q", c.q, err, c.want)
		}
	}
}

// TestMigrateConcurrentAndIdempotent: replicas opening one database at
// once create the schema exactly once, and opening again changes nothing.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	url := newDB(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*pg.Store, n)
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = pg.Open(context.Background(), pg.Config{URL: url})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	again := openStore(t, url)
	v, err := again.SchemaVersion(context.Background())
	if err != nil || v != pg.LatestVersion() {
		t.Fatalf("schema version %d, %v; want %d (the last migration)", v, err, pg.LatestVersion())
	}
}

// TestMigrateFromVersion2: a database an older stamen left at version 2,
// holding tasks, is migrated to 3 when a replica opens it: the received
// index is replaced by the one holding ts, built over the rows already
// there (and the later migrations run), and the lists read through it
// match the state.
func TestMigrateFromVersion2(t *testing.T) {
	ctx := context.Background()
	url := newDB(t)
	old, err := pg.OpenAtVersion(ctx, pg.Config{URL: url}, 2)
	if err != nil {
		t.Fatal(err)
	}
	st := state.New(state.Config{MaxTasks: 1000, TrackChanges: true})
	dataset(t, st, 300)
	ties(t, st)
	drainTo(t, st, old)
	if v, err := old.SchemaVersion(ctx); err != nil || v != 2 {
		t.Fatalf("schema version %d, %v; want 2", v, err)
	}
	indexes := func() map[string]string {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i
			JOIN pg_class c ON c.oid = i.indexrelid
			WHERE i.indrelid = 'stamen_tasks'::regclass AND i.indisvalid AND c.relname LIKE 'stamen_tasks_received%'`)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for rows.Next() {
			var n, d string
			if err := rows.Scan(&n, &d); err != nil {
				t.Fatal(err)
			}
			m[n] = d
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := indexes(); len(got) != 1 || got["stamen_tasks_received"] == "" {
		t.Fatalf("received indexes at version 2: %v", got)
	}
	_ = old.Close()

	s := openStore(t, url)
	if v, err := s.SchemaVersion(ctx); err != nil || v != pg.LatestVersion() {
		t.Fatalf("schema version %d, %v; want %d", v, err, pg.LatestVersion())
	}
	got := indexes()
	if len(got) != 1 || !strings.Contains(got["stamen_tasks_received_ts"], "(received NULLS FIRST, id) INCLUDE (ts)") {
		t.Fatalf("received indexes at version 3: %v", got)
	}
	at := func(sec int64) *time.Time { x := time.Unix(sec, 0); return &x }
	for _, q := range append(windowQueries(at), state.Query{Limit: 20, SortBy: "received", Offset: 3}) {
		sameList(t, st, s, q)
	}
}

// TestParallelWorkersOff: the store's connections plan no parallel workers
// for its reads, unless the URL sets the parameter.
func TestParallelWorkersOff(t *testing.T) {
	ctx := context.Background()
	url := newDB(t)
	for _, c := range []struct{ url, want string }{
		{url, "0"},
		{url + "&max_parallel_workers_per_gather=3", "3"},
	} {
		s := openStore(t, c.url)
		// Concurrent reads, on several of the pool's connections.
		var wg sync.WaitGroup
		got := make([]string, 4)
		errs := make([]error, 4)
		for i := range got {
			wg.Go(func() {
				got[i], errs[i] = s.Setting(ctx, "max_parallel_workers_per_gather")
			})
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil || got[i] != c.want {
				t.Errorf("%s: max_parallel_workers_per_gather = %q, %v; want %q", c.url, got[i], errs[i], c.want)
			}
		}
	}
}

// heartbeat is host's worker-heartbeat event at time at, as a store keeps
// a worker's latest event.
func heartbeat(t testing.TB, host string, at float64) []byte {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"type": "worker-heartbeat", "hostname": host, "timestamp": at, "freq": 2.0})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestMaxWorkersBoundsReads: a read returns at most Config.MaxWorkers
// workers (--max_workers), the state's default bound without it.
func TestMaxWorkersBoundsReads(t *testing.T) {
	testcluster.Require(t)
	url := newDB(t)
	writer := openStore(t, url)
	workers := map[string][]byte{}
	for _, h := range []string{"a@h", "b@h", "c@h"} {
		workers[h] = heartbeat(t, h, 1000)
	}
	if err := writer.Write(context.Background(), history.Batch{Workers: workers}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		max, want int
	}{{0, 3}, {2, 2}} {
		s, err := pg.Open(ctx, pg.Config{URL: url, MaxWorkers: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Workers(ctx)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want {
			t.Errorf("MaxWorkers %d: %d workers read, want %d", tc.max, len(got), tc.want)
		}
	}
}

// TestWorkersKeepMostRecentlyWritten: with more workers in the table than
// Config.MaxWorkers (several replicas, or autoscaled hostnames), a read
// keeps the workers whose latest event was written last, as the events
// state keeps those heard last, and hands them on first written first. A
// worker written early and written again since counts as written last.
func TestWorkersKeepMostRecentlyWritten(t *testing.T) {
	testcluster.Require(t)
	url := newDB(t)
	writer := openStore(t, url)
	// w0..w5 in turn, each its own write, then w1 again.
	for i := range 6 {
		h := fmt.Sprintf("w%d@h", i)
		if err := writer.Write(context.Background(), history.Batch{Workers: map[string][]byte{h: heartbeat(t, h, 1000+float64(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := writer.Write(context.Background(), history.Batch{Workers: map[string][]byte{"w1@h": heartbeat(t, "w1@h", 2000)}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		max  int
		want string
	}{
		{3, "[w4@h w5@h w1@h]"},
		{1, "[w1@h]"},
		{6, "[w0@h w2@h w3@h w4@h w5@h w1@h]"},
	} {
		s, err := pg.Open(ctx, pg.Config{URL: url, MaxWorkers: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		var replayed []string
		err = s.WorkerEvents(ctx, func(raw []byte) {
			evs, err := celery.DecodeEvents(raw)
			if err != nil {
				t.Errorf("stored event %q: %v", raw, err)
				return
			}
			replayed = append(replayed, evs[0].Hostname)
		})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := s.Workers(ctx)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		var read []string
		for _, w := range ws {
			read = append(read, w.Hostname)
		}
		if fmt.Sprint(replayed) != tc.want || fmt.Sprint(read) != tc.want {
			t.Errorf("MaxWorkers %d: WorkerEvents %v, Workers %v; want %s", tc.max, replayed, read, tc.want)
		}
	}
}

// TestWorkersAboveTheDefaultBound: Workers returns as many workers as a
// MaxWorkers above the state's default bound lets it read (its scratch
// state is bounded the same).
func TestWorkersAboveTheDefaultBound(t *testing.T) {
	testcluster.Require(t)
	url := newDB(t)
	writer := openStore(t, url)
	n := state.DefaultMaxWorkers + 2
	workers := make(map[string][]byte, n)
	for i := range n {
		h := fmt.Sprintf("w%d@h", i)
		workers[h] = heartbeat(t, h, 1000)
	}
	if err := writer.Write(context.Background(), history.Batch{Workers: workers}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pg.Open(ctx, pg.Config{URL: url, MaxWorkers: n - 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n-1 {
		t.Errorf("MaxWorkers %d: %d workers read", n-1, len(got))
	}
}

// TestTaskTypesOfWrittenTasks: the history's task names are those of the
// tasks written, whatever the batch's Types say. A writer's Types name
// only what its state newly knows: a name whose tasks came and went
// between two flushes, or during an outage whose kept batch still holds
// their records, is in none.
func TestTaskTypesOfWrittenTasks(t *testing.T) {
	s := openStore(t, newDB(t))
	st := state.New(state.Config{TrackChanges: true})
	st.Apply(
		taskEv(t, "received", "t-churned", "w@h", 100, map[string]any{"name": "proj.churned"}),
		taskEv(t, "received", "t-kept", "w@h", 101, map[string]any{"name": "proj.kept"}),
		taskEv(t, "started", "t-nameless", "w@h", 102, nil),
	)
	c := st.Drain()
	b := history.Batch{FirstSeq: c.FirstSeq, Types: []string{"proj.kept"}}
	for _, r := range c.Tasks {
		b.Tasks = append(b.Tasks, history.Task{Seq: r.Seq, Data: r.Data})
	}
	if err := s.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	types, err := s.TaskTypes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"proj.churned", "proj.kept"}; !slices.Equal(types, want) {
		t.Errorf("task types %v, want %v", types, want)
	}
}

// TestWriteLeavesOutKeysOverTheIndexes: a task whose id, name, state,
// parent id or worker name is longer than PostgreSQL's b-tree entries take
// (random bytes do not compress) failed the whole batch, at every retry.
// Write now leaves such records and worker events out, counts them, and
// writes the rest of the batch.
func TestWriteLeavesOutKeysOverTheIndexes(t *testing.T) {
	long := func(n int) string {
		b := make([]byte, n/2)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	s := openStore(t, newDB(t))
	st := state.New(state.Config{TrackChanges: true})
	longWorker := "celery@" + long(3000)
	st.Apply(
		taskEv(t, "received", "t-ok", "w@h", 100, map[string]any{"name": "proj.ok"}),
		taskEv(t, "received", "t-"+long(3000), "w@h", 101, map[string]any{"name": "proj.long-id"}),
		taskEv(t, "received", "t-long-name", "w@h", 102, map[string]any{"name": "proj." + long(3000)}),
		taskEv(t, long(3000), "t-long-state", "w@h", 103, map[string]any{"name": "proj.long-state"}),
		taskEv(t, "received", "t-long-parent", "w@h", 104, map[string]any{"name": "proj.long-parent", "parent_id": long(3000)}),
		taskEv(t, "started", "t-long-worker", longWorker, 105, map[string]any{"name": "proj.long-worker"}),
		taskEv(t, "received", "t-wide", "celery@"+strings.Repeat("h", 253), 106, map[string]any{"name": strings.Repeat("n", 256)}),
	)
	c := st.Drain()
	b := history.Batch{FirstSeq: c.FirstSeq, Types: c.Types, Workers: map[string][]byte{
		"w@h":      []byte(`{"type": "worker-heartbeat", "hostname": "w@h", "timestamp": 106}`),
		longWorker: []byte(`{"type": "worker-heartbeat", "hostname": "x", "timestamp": 106}`),
	}}
	for _, r := range c.Tasks {
		b.Tasks = append(b.Tasks, history.Task{Seq: r.Seq, Data: r.Data})
	}
	if err := s.Write(context.Background(), b); err != nil {
		t.Fatalf("the batch was not written: %v", err)
	}
	ids, _, err := listPG(t, s, state.Query{Limit: state.NoLimit})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if want := []string{"t-ok", "t-wide"}; !slices.Equal(ids, want) {
		t.Errorf("tasks written %v, want %v", ids, want)
	}
	types, err := s.TaskTypes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{strings.Repeat("n", 256), "proj.ok"}; !slices.Equal(types, want) {
		t.Errorf("task types %.80v, want proj.ok and the 256-byte name", types)
	}
	var workers []string
	if err := s.WorkerEvents(context.Background(), func(raw []byte) { workers = append(workers, string(raw)) }); err != nil {
		t.Fatal(err)
	}
	if len(workers) != 1 || !strings.Contains(workers[0], `"w@h"`) {
		t.Errorf("worker events written: %.200v, want w@h's only", workers)
	}
	if n := s.Unwritable(); n != 6 {
		t.Errorf("Unwritable() = %d, want 6 (5 tasks, 1 worker)", n)
	}
}

// TestWindowPageBeyondHead: a narrow window's page holds the tasks
// received early in the window that finished last, which the newest
// received entries (the head the page's bound comes from) do not hold,
// and the tasks whose time ties the bound's; pages deep into the window
// and past its end are the state's too.
func TestWindowPageBeyondHead(t *testing.T) {
	s := openStore(t, newDB(t))
	const n = 2600
	st := state.New(state.Config{MaxTasks: 2 * n, TrackChanges: true})
	extra := map[string]any{"name": "proj.add", "args": "()", "kwargs": "{}"}
	done := func(i int) float64 { return 5000 + float64(i)/10 + 0.05 }
	for i := range n {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i*7919%n, i)
		if i == 1550 {
			id = "ffffffff-0000-4000-8000-000000001550"
		}
		st.Apply(taskEv(t, "received", id, "w0@h", 5000+float64(i)/10, extra))
		switch {
		case i < n/2 && i%97 == 0:
			// Received early, done after every other task.
			st.Apply(taskEv(t, "succeeded", id, "w0@h", 6000+float64(i), nil))
		case i < n/2 && i%89 == 0:
			// Received early, done at the time of a task of the head.
			st.Apply(taskEv(t, "succeeded", id, "w0@h", done(n-1-i%50), nil))
		case i == 1550:
			// Done with the newest received, and first of the two by id:
			// the whole page of one in a window without the early tasks.
			st.Apply(taskEv(t, "succeeded", id, "w0@h", done(n-1), nil))
		case i == 1501:
			// The oldest received of the head of the window ending with
			// task 2500, done after every task: on the page once.
			st.Apply(taskEv(t, "succeeded", id, "w0@h", 8000, nil))
		default:
			st.Apply(taskEv(t, "succeeded", id, "w0@h", done(i), nil))
		}
	}
	st.Apply(taskEv(t, "sent", "never-received", "client@h", 5100, extra))
	drainTo(t, st, s)
	at := func(sec int64) *time.Time { x := time.Unix(sec, 0); return &x }
	for _, q := range []state.Query{
		{Limit: 100, ReceivedStart: at(5000), ReceivedEnd: at(5300)},
		{Limit: 30, Offset: 10, ReceivedStart: at(5000), ReceivedEnd: at(5300)},
		{Limit: 50, Offset: 1200, ReceivedStart: at(5000), ReceivedEnd: at(5300)},
		{Limit: 2000, ReceivedStart: at(5000), ReceivedEnd: at(5300)},
		{Limit: 100, Offset: 2550, ReceivedStart: at(5000), ReceivedEnd: at(5300)},
		{Limit: 20, ReceivedStart: at(5010), ReceivedEnd: at(5150)},
		{Limit: 1, ReceivedStart: at(5151), ReceivedEnd: at(5300)},
		{Limit: 3, ReceivedStart: at(5151), ReceivedEnd: at(5300)},
		{Limit: 3, ReceivedStart: at(5040), ReceivedEnd: at(5250)},
		{Limit: 100, Offset: 19900, ReceivedStart: at(5000), ReceivedEnd: at(5300)},
		{Limit: 100, Offset: 19901, ReceivedStart: at(5000), ReceivedEnd: at(5300)},
		{Limit: 20001, ReceivedStart: at(5000), ReceivedEnd: at(5300)},
	} {
		sameList(t, st, s, q)
	}
	// The first page is the early tasks that finished last, found past
	// the head, after the one done last of all.
	ids, _, err := listPG(t, s, state.Query{Limit: n/2/97 + 2, ReceivedStart: at(5000), ReceivedEnd: at(5300)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 || !strings.HasSuffix(ids[0], fmt.Sprintf("-%012x", 1501)) {
		t.Fatalf("page %v, want task 1501 first", ids)
	}
	for k, id := range ids[1:] {
		i := (n/2/97 - k) * 97
		if want := fmt.Sprintf("%08x-0000-4000-8000-%012x", i*7919%n, i); id != want {
			t.Fatalf("page place %d: %s, want %s", k, id, want)
		}
	}
}
