package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stamen-dev/stamen/internal/state"
)

// TestMergeBatches: records of the same task keep the newer; records of
// tasks evicted since go; workers and types are the union, but for what
// the newer batch forgot, and what either forgot is still forgotten unless
// the newer batch keeps it.
func TestMergeBatches(t *testing.T) {
	older := Batch{FirstSeq: 1, Tasks: []Task{{Seq: 1, Data: []byte("old1")}, {Seq: 3, Data: []byte("old3")}, {Seq: 5, Data: []byte("old5")}},
		Workers: map[string][]byte{"a": []byte("a-old"), "b": []byte("b-old"), "c": []byte("c-old")}, ForgottenWorkers: []string{"d", "e"},
		Types: []string{"t1", "t3"}, ForgottenTypes: []string{"t4", "t5"}}
	newer := Batch{FirstSeq: 2, Tasks: []Task{{Seq: 3, Data: []byte("new3")}, {Seq: 4, Data: []byte("new4")}},
		Workers: map[string][]byte{"b": []byte("b-new"), "d": []byte("d-new")}, ForgottenWorkers: []string{"c", "e"},
		Types: []string{"t2", "t4"}, ForgottenTypes: []string{"t3"}}
	got := mergeBatches(older, newer)
	var seqs []string
	for _, r := range got.Tasks {
		seqs = append(seqs, fmt.Sprintf("%d=%s", r.Seq, r.Data))
	}
	if want := "[3=new3 4=new4 5=old5]"; fmt.Sprint(seqs) != want {
		t.Errorf("tasks %v, want %s", seqs, want)
	}
	workers := map[string]string{}
	for w, e := range got.Workers {
		workers[w] = string(e)
	}
	for _, c := range []struct{ what, got, want string }{
		{"first seq", fmt.Sprint(got.FirstSeq), "2"},
		{"workers", fmt.Sprint(workers), "map[a:a-old b:b-new d:d-new]"},
		{"forgotten workers", fmt.Sprint(got.ForgottenWorkers), "[d e c]"},
		{"types", fmt.Sprint(got.Types), "[t2 t4 t1]"},
		{"forgotten types", fmt.Sprint(got.ForgottenTypes), "[t5 t3]"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
		}
	}
}

// TestMergeKeep: for PostgreSQL the buffer keeps the records of tasks
// evicted from the hot set (they are history) and newer records win; a
// buffer kept after a failed write is trimmed to max records, the oldest
// dropped and counted.
func TestMergeKeep(t *testing.T) {
	older := Batch{FirstSeq: 1, Tasks: []Task{{Seq: 1, Data: []byte("old1")}, {Seq: 3, Data: []byte("old3")}, {Seq: 5, Data: []byte("old5")}},
		ForgottenWorkers: []string{"gone"}}
	newer := Batch{FirstSeq: 4, Tasks: []Task{{Seq: 3, Data: []byte("new3")}, {Seq: 6, Data: []byte("new6")}}}
	merged := mergeKeep(older, newer)
	if merged.FirstSeq != 4 || fmt.Sprint(merged.ForgottenWorkers) != "[gone]" {
		t.Errorf("merged %+v", merged)
	}
	for _, c := range []struct {
		max  int
		want string
		lost int
	}{
		{10, "[1=old1 3=new3 5=old5 6=new6]", 0},
		{3, "[3=new3 5=old5 6=new6]", 1},
		{1, "[6=new6]", 3},
	} {
		got, lost := trimOldest(merged, c.max)
		var seqs []string
		for _, r := range got.Tasks {
			seqs = append(seqs, fmt.Sprintf("%d=%s", r.Seq, r.Data))
		}
		if fmt.Sprint(seqs) != c.want || lost != c.lost {
			t.Errorf("max %d: %v lost %d, want %s lost %d", c.max, seqs, lost, c.want, c.lost)
		}
	}
}

// fakeSource hands out the changes queued in next, one set a drain.
type fakeSource struct {
	next    []state.Changes
	workers []string
}

func (f *fakeSource) DrainInto([]byte) state.Changes {
	if len(f.next) == 0 {
		return state.Changes{}
	}
	c := f.next[0]
	f.next = f.next[1:]
	return c
}

func (f *fakeSource) KnowsWorker(h string) bool { return slices.Contains(f.workers, h) }
func (f *fakeSource) WorkerNames() []string     { return f.workers }
func (f *fakeSource) TaskTypes() []string       { return nil }

func records(seqs ...uint64) []state.Record {
	var out []state.Record
	for _, s := range seqs {
		out = append(out, state.Record{Seq: s, Data: fmt.Appendf(nil, "r%d", s)})
	}
	return out
}

// TestBufferKeepsAFailedBatch: a failed write's records are written with
// the next flush; with a Shared store the kept batch is bounded by
// MaxTasks, the oldest records dropped and counted; each failed write is
// counted.
func TestBufferKeepsAFailedBatch(t *testing.T) {
	for _, c := range []struct {
		shared bool
		want   string
		lost   int64
	}{
		{false, "[3 4 5]", 0}, // records below the next FirstSeq go
		{true, "[2 3 4 5]", 1},
	} {
		src := &fakeSource{workers: []string{"w@h"}, next: []state.Changes{
			{FirstSeq: 1, Tasks: records(1, 2, 3, 4)},
			{FirstSeq: 3, Tasks: records(5)},
		}}
		fail := true
		var written []Batch
		b := NewBuffer(BufferConfig{Source: src, Shared: c.shared, MaxTasks: 3,
			Write: func(_ context.Context, b Batch) error {
				if fail {
					return errors.New("down")
				}
				written = append(written, b)
				return nil
			}})
		b.NoteWorker("w@h", []byte("hb"))
		b.NoteWorker("gone@h", []byte("hb"))
		if err := b.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), "task records kept for the next flush") {
			t.Fatalf("shared %v: failed flush: %v", c.shared, err)
		}
		if p, ok := b.Pending(); !ok || len(p.Workers) != 1 {
			t.Fatalf("shared %v: pending %+v %v, want w@h's event kept", c.shared, p, ok)
		}
		fail = false
		if err := b.Flush(context.Background()); err != nil {
			t.Fatalf("shared %v: %v", c.shared, err)
		}
		var seqs []uint64
		for _, r := range written[0].Tasks {
			seqs = append(seqs, r.Seq)
		}
		if fmt.Sprint(seqs) != c.want || b.Lost() != c.lost || b.FailedFlushes() != 1 || string(written[0].Workers["w@h"]) != "hb" {
			t.Errorf("shared %v: wrote %v with workers %v, lost %d, failed %d; want %s, lost %d, failed 1",
				c.shared, seqs, written[0].Workers, b.Lost(), b.FailedFlushes(), c.want, c.lost)
		}
		if _, ok := b.Pending(); ok {
			t.Errorf("shared %v: a batch still pending after a write", c.shared)
		}
	}
}
