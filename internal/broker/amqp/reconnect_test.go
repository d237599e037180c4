package amqp

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestReconnect drops the Broker's connection from the server side and
// keeps it from coming back for a while (guest loses access to the vhost):
// meanwhile every call fails fast with ErrUnavailable; afterwards the
// Broker is back on its own and the event stream resumes.
func TestReconnect(t *testing.T) {
	b := newTestBroker(t, "rpc://")
	run := consume(t, b)
	capture := readWire(t, "event-task-received-amqp.json")
	if evs := run.publishUntil(t, newAdmin(t), capture); len(evs) != 1 {
		t.Fatalf("before the outage: %+v", evs)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	restored := false
	restore := func() {
		if !restored {
			if err := rabbitmqctl(ctx, "set_permissions", "-p", testVhost, "guest", ".*", ".*", ".*"); err != nil {
				t.Fatal(err)
			}
			restored = true
		}
	}
	t.Cleanup(restore)
	if err := rabbitmqctl(ctx, "clear_permissions", "-p", testVhost, "guest"); err != nil {
		t.Fatal(err)
	}
	if err := rabbitmqctl(ctx, "close_all_connections", "-p", testVhost, "stamen reconnect test"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the connection to drop", func() bool { return !b.Connected() })
	checkUnavailable(t, b)
	// Reconnect attempts are refused while the outage lasts.
	time.Sleep(500 * time.Millisecond)
	if b.Connected() {
		t.Fatal("reconnected without access to the vhost")
	}
	checkUnavailable(t, b)

	restore()
	eventually(t, 15*time.Second, "the Broker to reconnect", b.Connected)
	if n := b.Reconnects(); n < 1 {
		t.Errorf("Reconnects() = %d after a reconnect", n)
	}

	a := newAdmin(t)
	queue := "stamen-test-" + uuid.NewString()
	a.deleteQueue(queue)
	if err := b.Publish(t.Context(), &celery.TaskMessage{ID: uuid.NewString(), Name: "tasks.add", Queue: queue, Declare: workerDecl(t, queue, 0)}); err != nil {
		t.Fatalf("Publish after reconnect: %v", err)
	}
	lengths, err := b.QueueLengths(t.Context(), []string{queue})
	if err != nil || lengths[queue] != 1 {
		t.Errorf("QueueLengths after reconnect: %v, %v", lengths, err)
	}
	w := &fakeWorker{name: "w1@stamen-test"}
	startWorker(t, w)
	bctx, bcancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer bcancel()
	replies, err := b.Broadcast(bctx, celery.ControlCommand{Method: "ping", Reply: true, Limit: 1})
	if err != nil || len(replies) != 1 {
		t.Errorf("Broadcast after reconnect: %v, %v", replies, err)
	}
	if r, err := b.Result(t.Context(), uuid.NewString()); err != nil || r.Status != celery.StatePending {
		t.Errorf("Result after reconnect: %+v, %v", r, err)
	}

	if evs := run.publishUntil(t, a, capture); len(evs) != 1 || evs[0].Type != "task-received" {
		t.Errorf("after the outage: %+v", evs)
	}
}
