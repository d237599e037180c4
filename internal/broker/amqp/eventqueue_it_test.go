package amqp

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestNamedEventQueue: a named event queue is durable, not auto-deleted,
// with its bounds; an event published while no broker consumes it waits
// there and reaches the next consumer of that name; the subscribe hook
// runs each time consuming starts.
func TestNamedEventQueue(t *testing.T) {
	needRabbit(t)
	queue := fmt.Sprintf("stamen-test-named-%d", time.Now().UnixNano())
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, testVhost, queue) })
	open := func() (*Broker, *atomic.Int32) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		b, err := New(ctx, Config{BrokerURL: testURL, Logger: testLogger(t), OpTimeout: 3 * time.Second,
			EventQueue: queue, EventQueueTTL: 10 * time.Minute, EventQueueMaxLength: 500})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		var subscribed atomic.Int32
		b.SetOnSubscribe(func() { subscribed.Add(1) })
		return b, &subscribed
	}
	a := newAdmin(t)
	capture := readWire(t, "event-task-received-amqp.json")

	first, subs := open()
	run := consume(t, first)
	run.publishUntil(t, a, capture)
	if n := subs.Load(); n != 1 {
		t.Errorf("subscribe hook ran %d times, want 1", n)
	}
	out, err := rabbitmqctlOutput(t, "list_queues", "-p", testVhost, "-q", "--no-table-headers", "name", "durable", "auto_delete", "arguments")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 3 && f[0] == queue {
			found = true
			if f[1] != "true" || f[2] != "false" || !strings.Contains(line, "x-message-ttl") || !strings.Contains(line, "600000") ||
				!strings.Contains(line, "x-max-length") || !strings.Contains(line, "500") || strings.Contains(line, "x-expires") {
				t.Errorf("event queue declared as %q", strings.TrimSpace(line))
			}
		}
	}
	if !found {
		t.Fatalf("no queue %s in\n%s", queue, out)
	}
	run.cancel()
	<-run.done
	run.done <- nil // for the cleanup
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// Nobody consumes: the event waits in the queue.
	publishEvent(a, capture)
	ch := a.channel()
	eventually(t, 10*time.Second, "the published event waiting in the queue", func() bool {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("the queue went with its consumer: %v", err)
		}
		return q.Messages == 1
	})

	second, subs2 := open()
	run2 := consume(t, second)
	select {
	case evs := <-run2.batches:
		if len(evs) != 1 || evs[0].Type != "task-received" {
			t.Errorf("the waiting event: %+v", evs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event that waited in the queue never arrived")
	}
	if n := subs2.Load(); n != 1 {
		t.Errorf("subscribe hook ran %d times, want 1", n)
	}
}
