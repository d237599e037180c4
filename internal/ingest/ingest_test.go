package ingest

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/metrics"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/stream"
	"github.com/stamen-dev/stamen/internal/taskstats"
	"github.com/stamen-dev/stamen/internal/workercount"
)

// TestApplySurvivesAPanic: a batch whose handling panics is logged and
// dropped; the ingest goroutine, which calls Apply, goes on.
func TestApplySurvivesAPanic(t *testing.T) {
	var logs strings.Builder
	in := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}) // no State: Apply panics
	in.Apply(context.Background(), []celery.Event{{Type: "task-sent", UUID: "x"}})
	if !strings.Contains(logs.String(), "event batch abandoned after a panic") {
		t.Errorf("the panic was not logged: %q", logs.String())
	}
}

// source fails its first subscription, then hands over one batch and
// follows the stream until ctx ends.
type source struct {
	mu    sync.Mutex
	calls int
	batch []celery.Event
}

func (s *source) ConsumeEvents(ctx context.Context, fn func([]celery.Event)) error {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		return errors.New("connection lost")
	}
	fn(s.batch)
	<-ctx.Done()
	return ctx.Err()
}

// TestRunFeedsEverything: Run subscribes again after the stream ends, and
// a batch then reaches the state, the task statistics, the per-worker
// counts, the store's worker log and the live stream, each event numbered.
func TestRunFeedsEverything(t *testing.T) {
	evs, err := celery.DecodeEvents([]byte(`[
		{"type": "task-received", "uuid": "t1", "name": "proj.a", "hostname": "w1@h", "timestamp": 1700000000},
		{"type": "task-succeeded", "uuid": "t1", "hostname": "w1@h", "runtime": 0.5, "timestamp": 1700000001},
		{"type": "worker-offline", "hostname": "w1@h", "timestamp": 1700000002}]`))
	if err != nil || len(evs) != 3 {
		t.Fatal(err, len(evs))
	}
	for i := range evs {
		evs[i].LocalReceived = evs[i].Timestamp
	}
	var logs strings.Builder
	var mu sync.Mutex
	kept := map[string]string{}
	stats := taskstats.New(taskstats.Config{Now: func() time.Time { return time.Unix(1700000010, 0) }})
	counts := workercount.New(0, time.Now())
	hub := stream.NewHub(0)
	sub, err := hub.Subscribe(stream.Filter{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	st := state.New(state.Config{MaxTasks: 10})
	in := New(Config{
		Source: &source{batch: evs}, State: st, Stats: stats, WorkerCounts: counts,
		Metrics: metrics.New(nil), Events: hub,
		KeepWorkerEvent: func(hostname string, raw []byte) {
			mu.Lock()
			kept[hostname] = string(raw)
			mu.Unlock()
		},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		in.Run(ctx)
		close(done)
	}()
	var got []stream.Message
	for len(got) < len(evs) {
		select {
		case m := <-sub.C:
			got = append(got, m)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d events on the stream", len(got), len(evs))
		}
	}
	cancel()
	<-done

	if !strings.Contains(logs.String(), "event stream ended; reconnecting") {
		t.Errorf("the lost stream was not logged: %q", logs.String())
	}
	for i, m := range got {
		want := counts.Instance() + ":" + strconv.Itoa(i+1)
		if m.Type != evs[i].Type || m.ID != want || m.Worker != "w1@h" {
			t.Errorf("message %d: %+v, want %s of w1@h with id %s", i, m, evs[i].Type, want)
		}
		if task := strings.HasPrefix(m.Type, "task-"); task != (m.Task == "proj.a") {
			t.Errorf("message %d: task %q", i, m.Task)
		}
	}
	if name, ok := st.TaskName("t1"); !ok || name != "proj.a" {
		t.Errorf("state: task t1 is %q, %v", name, ok)
	}
	s := counts.Snapshot()
	if _, ok := s.Workers["w1@h"]; s.Seq != 3 || !ok {
		t.Errorf("worker counts: %+v", s)
	}
	if stats.Size() == 0 {
		t.Error("no task statistics counted")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kept) != 1 || !strings.Contains(kept["w1@h"], `"worker-offline"`) {
		t.Errorf("worker events kept: %v", kept)
	}
}
