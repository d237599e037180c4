package inspect

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// queuesWorker answers active_queues with a fixed reply, everything else
// with {}.
type queuesWorker struct{ activeQueues string }

func (w queuesWorker) Broadcast(_ context.Context, cmd celery.ControlCommand) ([]celery.ControlReply, error) {
	v := json.RawMessage(`{}`)
	if cmd.Method == "active_queues" {
		v = json.RawMessage(w.activeQueues)
	}
	return []celery.ControlReply{{Hostname: "w@h", Value: v}}, nil
}

func TestQueueFromActiveQueues(t *testing.T) {
	// As a Celery 5.6 worker with task_default_queue_type="quorum" answers.
	w := queuesWorker{activeQueues: `[{"name": "celery", "exchange": {"name": "celery", "type": "topic",
		"arguments": null, "durable": true}, "routing_key": "celery", "queue_arguments": {"x-queue-type": "quorum"},
		"durable": true, "no_declare": null}, {"name": "other", "exchange": {"name": "other", "type": "direct"},
		"routing_key": "other", "queue_arguments": null}]`}
	in := New(w, time.Second, 0, slog.New(slog.DiscardHandler))
	if _, ok := in.QueueDeclaration("celery"); ok {
		t.Fatal("a queue is known before any worker answered")
	}
	if err := in.Refresh(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	q, ok := in.QueueDeclaration("celery")
	if !ok || !q.Quorum() || q.Exchange != "celery" || q.ExchangeType != "topic" || q.RoutingKey != "celery" {
		t.Errorf("QueueDeclaration(celery) = %+v, %v", q, ok)
	}
	if q, ok := in.QueueDeclaration("other"); !ok || q.Quorum() || q.ExchangeType != "direct" {
		t.Errorf("QueueDeclaration(other) = %+v, %v", q, ok)
	}
	if got := in.QueueNames(); len(got) != 2 || got[0] != "celery" || got[1] != "other" {
		t.Errorf("QueueNames() = %v", got)
	}
	if _, ok := in.QueueDeclaration("nobody"); ok {
		t.Error("a queue no worker consumes is known")
	}
}

// TestQueueDeclarationByAliveWorkers: only the workers alive says are
// asked how they declare a queue; a cached reply of a gone worker is not
// used.
func TestQueueDeclarationByAliveWorkers(t *testing.T) {
	w := queuesWorker{activeQueues: `[{"name": "q", "exchange": {"name": "q", "type": "direct"}, "routing_key": "q"}]`}
	in := New(w, time.Second, 0, slog.New(slog.DiscardHandler))
	if err := in.Refresh(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		alive func(string) bool
		want  bool
	}{
		{"any cached worker", nil, true},
		{"its worker alive", func(n string) bool { return n == "w@h" }, true},
		{"its worker gone", func(string) bool { return false }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, ok := in.QueueDeclarationBy("q", tt.alive)
			if ok != tt.want || ok && q.Name != "q" {
				t.Errorf("QueueDeclarationBy(q) = %+v, %v, want found %v", q, ok, tt.want)
			}
		})
	}
}
