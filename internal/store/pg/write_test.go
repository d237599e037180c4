package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/taskstats"
)

// TestWriteBatchWithRecordsOfOneTask: a batch holding several records of
// one task (a task evicted from the hot set and seen again, both records
// kept through an outage) is written, and its row ends as the records
// written one a batch leave it, whatever their order in the batch; the
// other tasks of the batch, before and after it in id order, are
// written too. Also in chunks of two on two connections, where the
// task's records span a chunk's end.
func TestWriteBatchWithRecordsOfOneTask(t *testing.T) {
	for _, cfg := range []pg.Config{{}, {WriteChunk: 2, WriteConns: 2}} {
		t.Run(fmt.Sprintf("chunk%d", cfg.WriteChunk), func(t *testing.T) {
			cfg.URL = newDB(t)
			s, err := pg.Open(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			writeRecordsOfOneTask(t, s)
		})
	}
}

func writeRecordsOfOneTask(t *testing.T, s *pg.Store) {
	events := func(id string) []celery.Event {
		return []celery.Event{
			taskEv(t, "received", id, "w@h", 11, map[string]any{"name": "proj.add", "args": "(1, 2)", "kwargs": "{}", "retries": 0}),
			taskEv(t, "started", id, "w@h", 12, nil),
			taskEv(t, "succeeded", id, "w@h", 13, map[string]any{"result": "3", "runtime": 0.5}),
		}
	}
	// record is the record of a replica that saw only event i of id.
	record := func(id string, i int, seq uint64) history.Task {
		st := state.New(state.Config{TrackChanges: true})
		st.Apply(events(id)[i])
		c := st.Drain()
		if len(c.Tasks) != 1 {
			t.Fatalf("%d records", len(c.Tasks))
		}
		return history.Task{Seq: seq, Data: c.Tasks[0].Data}
	}
	ref := "ref"
	for i := range 3 {
		if err := s.Write(context.Background(), history.Batch{Tasks: []history.Task{record(ref, i, 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	want := info(t, s, ref)
	permutations(3, func(order []int) {
		id := fmt.Sprintf("m%d%d%d", order[0], order[1], order[2])
		var b history.Batch
		b.Tasks = append(b.Tasks, record("a-"+id, 0, 1))
		for k, i := range order {
			b.Tasks = append(b.Tasks, record(id, i, uint64(2+k)))
		}
		b.Tasks = append(b.Tasks, record("z-"+id, 2, 9))
		if err := s.Write(context.Background(), b); err != nil {
			t.Fatalf("order %v: %v", order, err)
		}
		if got := info(t, s, id); got != want {
			t.Fatalf("order %v:\ngot  %s\nwant %s", order, got, want)
		}
		for _, other := range []string{"a-" + id, "z-" + id} {
			if tk, ok, err := s.Task(t.Context(), other); err != nil || !ok || tk.UUID != other {
				t.Fatalf("task %s: %v %v", other, ok, err)
			}
		}
	})
}

// TestWriteThatChangesNothingKeepsTheRow: a record that changes nothing
// in its row (the same record written again, as by two replicas that
// each took the task for their own for a moment, or a replica's older
// view of the task) writes no new
// version of the row, while one that changes something does.
func TestWriteThatChangesNothingKeepsTheRow(t *testing.T) {
	url := newDB(t)
	s := openStore(t, url)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	version := func() string {
		var v string
		if err := conn.QueryRow(t.Context(), `SELECT xmin::text || ctid::text FROM stamen_tasks WHERE id = 'k'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	received := taskEv(t, "received", "k", "w@h", 11, map[string]any{"name": "proj.add", "args": "(1, 2)", "kwargs": "{}", "retries": 0})
	succeeded := taskEv(t, "succeeded", "k", "w@h", 13, map[string]any{"result": "3", "runtime": 0.5})
	whole := state.New(state.Config{TrackChanges: true})
	whole.Apply(received, succeeded)
	drainTo(t, whole, s)
	first, want := version(), info(t, s, "k")
	for _, evs := range [][]celery.Event{{received, succeeded}, {received}, {succeeded}} {
		other := state.New(state.Config{TrackChanges: true})
		other.Apply(evs...)
		drainTo(t, other, s)
		if got := version(); got != first {
			t.Fatalf("a record of %d events that changes nothing wrote a new row version: %s, was %s", len(evs), got, first)
		}
	}
	if got := info(t, s, "k"); got != want {
		t.Fatalf("row changed:\ngot  %s\nwant %s", got, want)
	}
	later := state.New(state.Config{TrackChanges: true})
	later.Apply(taskEv(t, "succeeded", "k", "w2@h", 14, map[string]any{"result": "4", "runtime": 0.5}))
	drainTo(t, later, s)
	if got := version(); got == first {
		t.Fatal("a newer record left the row as it was")
	}
}

// TestWriteInChunks: a batch larger than WriteChunk is written a chunk at
// a time (one connection here), each its own transaction; when a chunk
// fails, Write fails, and the same batch written again lands whole while
// the chunks already written keep their rows as they were.
func TestWriteInChunks(t *testing.T) {
	url := newDB(t)
	s, err := pg.Open(t.Context(), pg.Config{URL: url, WriteChunk: 4, WriteConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	st := state.New(state.Config{TrackChanges: true})
	for i := range 10 {
		st.Apply(taskEv(t, "received", fmt.Sprintf("c%02d", i), "w@h", 11, map[string]any{"name": "proj.add"}))
	}
	c := st.Drain()
	b := history.Batch{FirstSeq: c.FirstSeq, Types: c.Types, Workers: map[string][]byte{"w@h": []byte(`{}`)}}
	for _, r := range c.Tasks {
		b.Tasks = append(b.Tasks, history.Task{Seq: r.Seq, Data: r.Data})
	}
	// The third chunk (c08, c09) cannot be written yet.
	if _, err := conn.Exec(t.Context(), `ALTER TABLE stamen_tasks ADD CONSTRAINT not_yet CHECK (id <> 'c09')`); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), b); err == nil {
		t.Fatal("a batch whose last chunk fails was written")
	}
	versions := func() map[string]string {
		rows, err := conn.Query(t.Context(), `SELECT id, xmin::text FROM stamen_tasks ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		var id, xmin string
		if _, err := pgx.ForEachRow(rows, []any{&id, &xmin}, func() error { out[id] = xmin; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := versions()
	if len(before) != 8 {
		t.Fatalf("after the failed write: rows %v, want the first two chunks' 8", before)
	}
	if _, err := conn.Exec(t.Context(), `ALTER TABLE stamen_tasks DROP CONSTRAINT not_yet`); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	after := versions()
	txs := map[string]bool{}
	for id, x := range after {
		if v, ok := before[id]; ok && v != x {
			t.Errorf("task %s written again: version %s, was %s", id, x, v)
		}
		txs[x] = true
	}
	if len(after) != 10 || len(txs) != 3 {
		t.Errorf("rows %v: want 10, in 3 transactions", after)
	}
	var workers, types int
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM stamen_workers), (SELECT count(*) FROM stamen_task_types)`).Scan(&workers, &types); err != nil {
		t.Fatal(err)
	}
	if workers != 1 || types != 1 {
		t.Errorf("%d workers and %d task types written, want 1 and 1", workers, types)
	}
}

// TestWriteChunksAtOnceAcrossReplicas: two replicas write the same 3,000
// tasks at the same moment, each its batch in chunks on four connections
// at once (one the tasks' whole lives, one their reception only, so that
// the rows are both inserted and updated under each other). Neither write
// fails (a deadlock between chunks would fail one), every row ends final,
// and the activity counts each task once per state.
func TestWriteChunksAtOnceAcrossReplicas(t *testing.T) {
	url := newDB(t)
	var stores [2]*pg.Store
	for i := range stores {
		// One name for both: neither sees the other among the live
		// replicas, so each writes every task (as replicas did before
		// they shared the writing), all at once.
		s, err := pg.Open(t.Context(), pg.Config{URL: url, MaxConns: 8, WriteConns: 4, ReplicaID: "one-name"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	const n = 3000
	at := float64(time.Now().Add(-5*time.Minute).Unix()/60*60) + 1
	for round := range 2 {
		whole := state.New(state.Config{MaxTasks: n, TrackChanges: true})
		received := state.New(state.Config{MaxTasks: n, TrackChanges: true})
		for i := range n {
			id := fmt.Sprintf("par-%d-%04d", round, i)
			r := taskEv(t, "received", id, "w@h", at, map[string]any{"name": "proj.par"})
			whole.Apply(r, taskEv(t, "started", id, "w@h", at+1, nil), taskEv(t, "succeeded", id, "w@h", at+2, map[string]any{"runtime": 0.5}))
			received.Apply(r)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k, st := range []*state.State{whole, received} {
			c := st.Drain()
			b := history.Batch{FirstSeq: c.FirstSeq, Types: c.Types}
			for _, r := range c.Tasks {
				b.Tasks = append(b.Tasks, history.Task{Seq: r.Seq, Data: r.Data})
			}
			wg.Go(func() { errs[k] = stores[k].Write(t.Context(), b) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var final, all int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE state = 'SUCCESS'), count(*) FROM stamen_tasks`).Scan(&final, &all); err != nil {
		t.Fatal(err)
	}
	if final != 2*n || all != 2*n {
		t.Errorf("%d rows, %d of them SUCCESS; want %d, all SUCCESS", all, final, 2*n)
	}
	q, err := taskstats.NewQuery(time.Now(), 15*time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := totalCounts(t, stores[0], q)
	if c[taskstats.Received] != 2*n || c[taskstats.Started] != 2*n || c[taskstats.Succeeded] != 2*n {
		t.Errorf("activity %v, want %d received, started and succeeded", c, 2*n)
	}
}
