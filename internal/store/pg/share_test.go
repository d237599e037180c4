package pg_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/pg"
)

// clock is a replica's clock, moved on by the tests past the grace period
// instead of waiting for it.
type clock struct{ ahead atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *clock) skip(d time.Duration)    { c.ahead.Add(int64(d)) }
func (c *clock) pastGrace(every float64) { c.skip(time.Duration((2*every + 2) * float64(time.Second))) }

// replica is a Store of a fleet and its clock.
type replica struct {
	*pg.Store
	clock *clock
}

// fleetOf opens n replicas of the database at url, each having seen the
// others stamp their rows, with cfg's settings.
func fleetOf(t *testing.T, url string, n int, cfg pg.Config) []replica {
	t.Helper()
	rs := make([]replica, n)
	for i := range rs {
		c := &clock{}
		cfg := cfg
		cfg.URL, cfg.Now, cfg.ReplicaID = url, c.now, fmt.Sprintf("replica-%d", i)
		s, err := pg.Open(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		rs[i] = replica{s, c}
	}
	// Twice round: the first replica stamps before the others exist.
	for range 2 {
		for _, r := range rs {
			if err := r.Write(t.Context(), history.Batch{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return rs
}

// records are the records of n tasks that went through events, each
// stamped a second after the one before.
func records(t *testing.T, prefix string, n int, events ...string) history.Batch {
	t.Helper()
	st := state.New(state.Config{TrackChanges: true, MaxTasks: n + 1})
	for i := range n {
		id := fmt.Sprintf("%s-%05d", prefix, i)
		ts := 1000 + float64(i)
		for k, kind := range events {
			var extra map[string]any
			switch kind {
			case "received":
				extra = map[string]any{"name": "proj.add", "args": "(1, 2)", "kwargs": "{}"}
			case "succeeded":
				extra = map[string]any{"result": "3", "runtime": 0.5}
			}
			st.Apply(taskEv(t, kind, id, "w@h", ts+float64(k)/10, extra))
		}
	}
	c := st.Drain()
	b := history.Batch{FirstSeq: c.FirstSeq}
	for _, r := range c.Tasks {
		b.Tasks = append(b.Tasks, history.Task{Seq: r.Seq, Data: r.Data})
	}
	return b
}

// rowsIn counts the rows of tasks named prefix-..., and of them those in
// state.
func rowsIn(t *testing.T, url, prefix, state string) (all, in int) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	err = conn.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE state = $2) FROM stamen_tasks WHERE id LIKE $1`,
		prefix+"-%", state).Scan(&all, &in)
	if err != nil {
		t.Fatal(err)
	}
	return all, in
}

// TestReplicasShareTheWriting: two replicas given the same 2,000 task
// records write each record once between them, in shares of about half,
// and every task's row is there; once the grace period has passed each
// finds the records it held written by the other, and writes none of them.
func TestReplicasShareTheWriting(t *testing.T) {
	url := newDB(t)
	rs := fleetOf(t, url, 2, pg.Config{})
	const n = 2000
	b := records(t, "shared", n, "received", "started", "succeeded")
	for _, r := range rs {
		if err := r.Write(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	a, c := rs[0].Written(), rs[1].Written()
	if a+c != n {
		t.Errorf("the replicas wrote %d + %d records, want %d between them", a, c, n)
	}
	for i, w := range []int64{a, c} {
		if w < n*3/10 || w > n*7/10 {
			t.Errorf("replica %d wrote %d of %d records, want about half", i, w, n)
		}
	}
	if held := rs[0].Held() + rs[1].Held(); held != n {
		t.Errorf("the replicas hold %d records, want %d (each the other's share)", held, n)
	}
	if all, done := rowsIn(t, url, "shared", "SUCCESS"); all != n || done != n {
		t.Errorf("%d rows, %d SUCCESS; want %d", all, done, n)
	}
	for _, r := range rs {
		r.clock.pastGrace(1)
		if err := r.Write(t.Context(), history.Batch{}); err != nil {
			t.Fatal(err)
		}
		if r.Held() != 0 || r.TakenOver() != 0 {
			t.Errorf("past the grace period: %d held, %d taken over; want 0 and 0", r.Held(), r.TakenOver())
		}
	}
	if a2, c2 := rs[0].Written(), rs[1].Written(); a2 != a || c2 != c {
		t.Errorf("written after the check: %d and %d, want %d and %d", a2, c2, a, c)
	}
}

// TestHeldRecordsWrittenWhenTheOwnerDidNot: of two replicas, one stops
// before writing its share (SIGKILLed, or cut off from PostgreSQL). The
// other writes its own share at once, holds the rest through the grace
// period, then finds those rows missing and writes them: every task's
// row is there.
func TestHeldRecordsWrittenWhenTheOwnerDidNot(t *testing.T) {
	url := newDB(t)
	rs := fleetOf(t, url, 2, pg.Config{})
	const n = 1000
	b := records(t, "orphan", n, "received", "started", "succeeded")
	survivor := rs[1]
	if err := survivor.Write(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	own := survivor.Written()
	if all, _ := rowsIn(t, url, "orphan", "SUCCESS"); int64(all) != own || own == 0 || own == n {
		t.Fatalf("%d rows after the first write, want the survivor's share (%d of %d)", all, own, n)
	}
	// Within the grace period the held records wait for their owner.
	if err := survivor.Write(t.Context(), history.Batch{}); err != nil {
		t.Fatal(err)
	}
	if all, _ := rowsIn(t, url, "orphan", "SUCCESS"); int64(all) != own {
		t.Fatalf("%d rows within the grace period, want %d", all, own)
	}
	survivor.clock.pastGrace(1)
	if err := survivor.Write(t.Context(), history.Batch{}); err != nil {
		t.Fatal(err)
	}
	if all, done := rowsIn(t, url, "orphan", "SUCCESS"); all != n || done != n {
		t.Errorf("%d rows, %d SUCCESS past the grace period; want %d", all, done, n)
	}
	if got := survivor.TakenOver(); got != n-own {
		t.Errorf("taken over %d records, want %d (the other's share)", got, n-own)
	}
	if survivor.Held() != 0 {
		t.Errorf("%d records still held", survivor.Held())
	}
}

// TestHeldRecordBringingMoreIsWritten: each replica saw part of the
// tasks' events (one missed their completion): a held record the row
// already holds everything of is let go, one bringing more (the
// completion) is written, and every row ends SUCCESS.
func TestHeldRecordBringingMoreIsWritten(t *testing.T) {
	url := newDB(t)
	rs := fleetOf(t, url, 2, pg.Config{})
	const n = 400
	partial := records(t, "part", n, "received", "started")
	whole := records(t, "part", n, "received", "started", "succeeded")
	missed, saw := rs[0], rs[1]
	if err := missed.Write(t.Context(), partial); err != nil {
		t.Fatal(err)
	}
	if err := saw.Write(t.Context(), whole); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		r.clock.pastGrace(1)
		if err := r.Write(t.Context(), history.Batch{}); err != nil {
			t.Fatal(err)
		}
	}
	if all, done := rowsIn(t, url, "part", "SUCCESS"); all != n || done != n {
		t.Errorf("%d rows, %d SUCCESS; want %d", all, done, n)
	}
	if got, want := saw.TakenOver(), missed.Written(); got != want {
		t.Errorf("the replica that saw the completions took over %d records, want %d (the other's share)", got, want)
	}
	if got := missed.TakenOver(); got != 0 {
		t.Errorf("the replica that missed them took over %d records, want 0 (its records add nothing)", got)
	}
}

// TestHeldRecordsBounded: beyond MaxHeld, the oldest held records are
// checked and written at once instead of held longer.
func TestHeldRecordsBounded(t *testing.T) {
	url := newDB(t)
	rs := fleetOf(t, url, 2, pg.Config{MaxHeld: 10})
	const n = 200
	r := rs[1]
	if err := r.Write(t.Context(), records(t, "bound", n, "received")); err != nil {
		t.Fatal(err)
	}
	if r.Held() != 10 {
		t.Errorf("%d records held, want 10", r.Held())
	}
	if all, _ := rowsIn(t, url, "bound", "RECEIVED"); all != n-10 {
		t.Errorf("%d rows, want %d (all but the 10 held)", all, n-10)
	}
}

// TestLeaveWritesHeldRecords: a replica leaving the fleet (stopped, after
// its last flush) writes the records it held whose rows lack them at
// once, without waiting out the grace period, and deletes its row, so
// that the others own every task from their next write.
func TestLeaveWritesHeldRecords(t *testing.T) {
	url := newDB(t)
	rs := fleetOf(t, url, 2, pg.Config{})
	const n = 500
	leaving, staying := rs[1], rs[0]
	if err := leaving.Write(t.Context(), records(t, "leave", n, "received", "started", "succeeded")); err != nil {
		t.Fatal(err)
	}
	if all, _ := rowsIn(t, url, "leave", "SUCCESS"); all == n {
		t.Fatalf("all %d rows written before leaving: nothing was held", n)
	}
	if err := leaving.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	if all, done := rowsIn(t, url, "leave", "SUCCESS"); all != n || done != n {
		t.Errorf("%d rows, %d SUCCESS after leaving; want %d", all, done, n)
	}
	if err := staying.Write(t.Context(), history.Batch{}); err != nil {
		t.Fatal(err)
	}
	if got := staying.Replicas(); got != 1 {
		t.Errorf("the staying replica sees %d live, want 1 (itself)", got)
	}
}

// TestHeldRecordsOfATaskSeenAgain: a replica holds two records of each
// task, neither covering the other (the task evicted from its state after
// its reception, and seen again at its completion: the second record
// lacks the name). Their owner wrote neither; past the grace period the
// holder writes both, and each row has the name and the final state.
func TestHeldRecordsOfATaskSeenAgain(t *testing.T) {
	url := newDB(t)
	rs := fleetOf(t, url, 2, pg.Config{})
	const n = 200
	received := records(t, "again", n, "received")
	completed := records(t, "again", n, "succeeded")
	b := history.Batch{Tasks: append(received.Tasks, completed.Tasks...)}
	holder := rs[1]
	if err := holder.Write(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	holder.clock.pastGrace(1)
	if err := holder.Write(t.Context(), history.Batch{}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var all, whole int
	err = conn.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE state = 'SUCCESS' AND name = 'proj.add')
		FROM stamen_tasks WHERE id LIKE 'again-%'`).Scan(&all, &whole)
	if err != nil {
		t.Fatal(err)
	}
	if all != n || whole != n {
		t.Errorf("%d rows, %d SUCCESS with their name; want %d", all, whole, n)
	}
}
