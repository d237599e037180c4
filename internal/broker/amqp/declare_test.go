package amqp

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// workerDecl is how a Celery worker of the sample app declares queue, read
// from an active_queues reply as the inspector gets it; maxPriority 0 is
// a worker without task_queue_max_priority.
func workerDecl(t *testing.T, queue string, maxPriority int) *celery.QueueDeclaration {
	t.Helper()
	args := "null"
	if maxPriority > 0 {
		args = fmt.Sprintf(`{"x-max-priority": %d}`, maxPriority)
	}
	reply := fmt.Sprintf(`[{"name": %q, "exchange": {"name": %[1]q, "type": "direct", "arguments": null,
		"durable": true, "passive": false, "auto_delete": false, "delivery_mode": null, "no_declare": false},
		"routing_key": %[1]q, "queue_arguments": %s, "binding_arguments": null, "consumer_arguments": null,
		"durable": true, "exclusive": false, "auto_delete": false, "no_ack": false, "alias": null, "bindings": [],
		"no_declare": null, "expires": null, "message_ttl": null, "max_length": null, "max_length_bytes": null,
		"max_priority": null}]`, queue, args)
	d := celery.QueueDeclarations([]byte(reply))[queue]
	if d == nil {
		t.Fatalf("cannot parse %s", reply)
	}
	return d
}

// TestPublishNeverDeclaresUnlikeWorkers: a message for a missing queue
// that no worker declares is refused with ErrNoQueue and creates nothing
// (a worker's later declaration with x-max-priority would fail with 406
// and kill it); with the workers' declaration, the queue is created as
// they declare it.
func TestPublishNeverDeclaresUnlikeWorkers(t *testing.T) {
	b := newTestBroker(t, "")
	a := newAdmin(t)
	queue := a.freshQueue()

	err := b.Publish(t.Context(), &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Queue: queue})
	if !errors.Is(err, celery.ErrNoQueue) || errors.Is(err, celery.ErrUnavailable) {
		t.Fatalf("unknown queue: err %v, want ErrNoQueue only", err)
	}
	if _, err := a.channel().QueueDeclarePassive(queue, false, false, false, false, nil); err == nil {
		t.Fatalf("Publish created %s without the workers' arguments", queue)
	}
	if !b.Connected() {
		t.Error("the 404 cost the connection")
	}

	id := uuid.NewString()
	if err := b.Publish(t.Context(), &celery.TaskMessage{ID: id, Name: "t", Queue: queue, Declare: workerDecl(t, queue, 10)}); err != nil {
		t.Fatalf("publish with the workers' declaration: %v", err)
	}
	// What a worker with task_queue_max_priority=10 declares: accepted.
	if _, err := a.channel().QueueDeclare(queue, true, false, false, false, amqp091.Table{"x-max-priority": int32(10)}); err != nil {
		t.Errorf("a worker's declaration is refused: %v", err)
	}
	if d := a.get(queue); d.CorrelationId != id {
		t.Errorf("got %s, want %s", d.CorrelationId, id)
	}
}
