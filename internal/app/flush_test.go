package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/history"
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
	a := openApp(t, cfg)
	payloads := eventPayloads(200)
	ingest := func(from, to int) {
		t.Helper()
		publishUntil(t, a, payloads[from:to], func() bool { return a.State.Len() >= to })
	}

	ingest(0, 50)
	if err := a.flush(context.Background()); err != nil {
		t.Fatalf("first flush: %v", err)
	}
	ingest(50, 100)
	failures := 0
	write := a.writeBatch
	a.writeBatch = func(ctx context.Context, b history.Batch) error {
		failures++
		return errors.New("disk full")
	}
	if err := a.flush(context.Background()); err == nil {
		t.Fatal("the failing write reported success")
	}
	a.writeBatch = write
	ingest(100, 200)
	if err := a.flush(context.Background()); err != nil {
		t.Fatalf("flush after the failure: %v", err)
	}
	if failures != 1 {
		t.Fatalf("%d failed writes, want 1", failures)
	}
	b := restart(t, a, cfg)
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

// TestFailedFlushKeepsForgetting: a worker whose event was noted while
// writes failed, then forgotten (purged) before they worked again, is not
// written back by the write that succeeds, and a restart does not bring
// it back: the batch kept for that write had dropped what the state
// forgot and kept the worker's event.
func TestFailedFlushKeepsForgetting(t *testing.T) {
	cfg := Config{
		EmbeddedAddr: fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t)),
		DBPath:       filepath.Join(t.TempDir(), "stamen.db"),
		SaveInterval: time.Hour, // the test flushes by hand
	}
	a := openApp(t, cfg)
	const gone, kept = "gone@h", "kept@h"
	// gone beats every millisecond: it is not alive a few milliseconds
	// after its last heartbeat, and the purge below forgets it. (A
	// heartbeat, unlike a worker-offline, makes a worker again when
	// restored.)
	worker := func(host, typ string, clock int, freq float64) map[string]any {
		return map[string]any{"type": typ, "hostname": host, "timestamp": float64(time.Now().UnixMicro()) / 1e6,
			"clock": clock, "pid": 1, "utcoffset": 0, "freq": freq, "sw_ident": "py-celery", "sw_ver": "5.5.3", "sw_sys": "Linux"}
	}
	write := a.writeBatch
	a.writeBatch = func(context.Context, history.Batch) error { return errors.New("disk full") }
	publishUntil(t, a, [][]byte{
		testcluster.EventsEnvelope(gone, "1", worker(gone, "worker-online", 1, 0.001), worker(gone, "worker-heartbeat", 2, 0.001)),
		testcluster.EventsEnvelope(kept, "2", worker(kept, "worker-online", 3, 60)),
	}, func() bool { return a.State.KnowsWorker(gone) && a.State.KnowsWorker(kept) })
	if err := a.flush(context.Background()); err == nil {
		t.Fatal("the failing write reported success")
	}
	testcluster.Eventually(t, 10*time.Second, gone+" purged", func() bool {
		return fmt.Sprint(a.State.PurgeWorkers(time.Now().Add(time.Hour))) == "["+gone+"]"
	})
	a.writeBatch = write
	if err := a.flush(context.Background()); err != nil {
		t.Fatalf("flush after the failure: %v", err)
	}
	b := restart(t, a, cfg)
	if !b.State.KnowsWorker(kept) || b.State.KnowsWorker(gone) {
		t.Errorf("after the restart: %s known %v, %s known %v; want true, false",
			kept, b.State.KnowsWorker(kept), gone, b.State.KnowsWorker(gone))
	}
}

// openApp opens an App on cfg, closed at the test's or benchmark's end
// (Close does nothing the second time).
func openApp(tb testing.TB, cfg Config) *App {
	tb.Helper()
	a, err := New(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(a.Close)
	return a
}

// restart closes a and opens an App again on cfg's store (on another
// embedded broker port).
func restart(t *testing.T, a *App, cfg Config) *App {
	t.Helper()
	a.Close()
	cfg.EmbeddedAddr = fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
	return openApp(t, cfg)
}
