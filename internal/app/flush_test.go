package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/store"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestFailedFlushLosesNothing: a store write that fails once keeps its
// batch, and the next flush writes it with what changed since. After a
// restart every task and worker is there. The embedded broker carries the
// events: no shared server is needed. A successful flush comes first, so
// that the failing one encodes into a reused buffer (State.DrainInto), and
// the flush after it must not encode into the buffer its kept records are
// in.
func TestFailedFlushLosesNothing(t *testing.T) {
	cfg := Config{
		EmbeddedAddr: fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t)),
		DBPath:       filepath.Join(t.TempDir(), "stamen.db"),
		// The test flushes by hand.
		SaveInterval: time.Hour,
	}
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if a != nil {
			a.Close()
		}
	}()
	rdb := brokerClient(t, a)
	defer rdb.Close()
	payloads := eventPayloads(200)
	// Publish until ingested: the subscription starts in the background.
	ingest := func(from, to int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for a.State.Len() < to {
			if time.Now().After(deadline) {
				t.Fatalf("ingested %d of %d tasks", a.State.Len(), to)
			}
			for _, p := range payloads[from:to] {
				if err := rdb.Publish(context.Background(), "/0.celeryev/task.multi", p).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for end := time.Now().Add(time.Second); a.State.Len() < to && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}

	ingest(0, 50)
	if err := a.flush(); err != nil {
		t.Fatalf("first flush: %v", err)
	}
	ingest(50, 100)
	failures := 0
	write := a.writeBatch
	a.writeBatch = func(b store.Batch) error {
		failures++
		return errors.New("disk full")
	}
	if err := a.flush(); err == nil {
		t.Fatal("the failing write reported success")
	}
	a.writeBatch = write
	ingest(100, 200)
	if err := a.flush(); err != nil {
		t.Fatalf("flush after the failure: %v", err)
	}
	if failures != 1 {
		t.Fatalf("%d failed writes, want 1", failures)
	}
	a.Close()
	a = nil

	cfg.EmbeddedAddr = fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
	b, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n := b.State.Len(); n != 200 {
		t.Errorf("restored %d of 200 tasks", n)
	}
	for i := range 200 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		if task, ok := b.State.Task(id); !ok || task.State != "SUCCESS" {
			t.Errorf("task %s after the restart: %v %q", id, ok, task.State)
		}
	}
}

// TestMergeBatches: records of the same task keep the newer; records of
// tasks evicted since go; workers and types are the union.
func TestMergeBatches(t *testing.T) {
	older := store.Batch{FirstSeq: 1, Tasks: []store.Task{{Seq: 1, Data: []byte("old1")}, {Seq: 3, Data: []byte("old3")}, {Seq: 5, Data: []byte("old5")}},
		Workers: map[string][]byte{"a": []byte("a-old"), "b": []byte("b-old")}, Types: []string{"t1"}}
	newer := store.Batch{FirstSeq: 2, Tasks: []store.Task{{Seq: 3, Data: []byte("new3")}, {Seq: 4, Data: []byte("new4")}},
		Workers: map[string][]byte{"b": []byte("b-new")}, Types: []string{"t2"}}
	got := mergeBatches(older, newer)
	var seqs []string
	for _, r := range got.Tasks {
		seqs = append(seqs, fmt.Sprintf("%d=%s", r.Seq, r.Data))
	}
	if want := "[3=new3 4=new4 5=old5]"; fmt.Sprint(seqs) != want {
		t.Errorf("tasks %v, want %s", seqs, want)
	}
	if got.FirstSeq != 2 || string(got.Workers["a"]) != "a-old" || string(got.Workers["b"]) != "b-new" || fmt.Sprint(got.Types) != "[t2 t1]" {
		t.Errorf("merged %+v", got)
	}
}

// TestApplyBatchSurvivesAPanic: a batch whose handling panics is logged
// and dropped; the ingest goroutine, which calls applyBatch, goes on.
func TestApplyBatchSurvivesAPanic(t *testing.T) {
	var logs strings.Builder
	a := &App{log: slog.New(slog.NewTextHandler(&logs, nil))} // no State: Apply panics
	a.applyBatch(context.Background(), []celery.Event{{Type: "task-sent", UUID: "x"}})
	if !strings.Contains(logs.String(), "event batch abandoned after a panic") {
		t.Errorf("the panic was not logged: %q", logs.String())
	}
}
