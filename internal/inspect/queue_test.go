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
