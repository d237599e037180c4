package amqp

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestPublishDelayedRoute: a task with an eta for a queue the workers
// report as a quorum queue behind a topic exchange goes to the entry of the
// delayed-delivery cascade with kombu's routing key once the workers'
// exchanges exist, and straight to its queue while they do not, or when the
// queue's exchange is direct. The cascade itself is the workers' (and
// RabbitMQ's); here a queue bound to its entry catches what arrives.
func TestPublishDelayedRoute(t *testing.T) {
	needRabbit(t)
	a := newAdmin(t)
	suffix := uuid.NewString()[:8]
	quorum, direct := "dq-"+suffix, "dd-"+suffix
	for _, q := range []string{quorum, direct} {
		a.deleteQueue(q)
		if _, err := a.channel().QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	// What the workers' active_queues say about them.
	lookup := func(name string) (*celery.QueueDeclaration, bool) {
		q := &celery.QueueDeclaration{Name: name, Exchange: name, RoutingKey: name,
			Arguments: map[string]any{"x-queue-type": "quorum"}}
		switch name {
		case quorum:
			q.ExchangeType = "topic"
		case direct:
			q.ExchangeType = "direct"
		default:
			return nil, false
		}
		return q, true
	}
	publish := func(b *Broker, queue string) string {
		t.Helper()
		eta := time.Now().Add(10*time.Second + 500*time.Millisecond)
		msg := &celery.TaskMessage{ID: uuid.NewString(), Name: "stamen.add", Args: []any{1, 2}, Queue: queue, ETA: &eta}
		if err := b.Publish(t.Context(), msg); err != nil {
			t.Fatalf("Publish to %s: %v", queue, err)
		}
		return msg.ID
	}
	arrived := func(queue, id string) amqp091.Delivery {
		t.Helper()
		d := a.get(queue)
		if d.CorrelationId != id {
			t.Fatalf("%s: got task %s, want %s", queue, d.CorrelationId, id)
		}
		return d
	}

	// No workers declared the cascade: as before, straight to the queue.
	b := newTestBroker(t, "")
	b.SetQueueLookup(lookup)
	arrived(quorum, publish(b, quorum))

	ch := a.channel()
	catch := "catch-" + suffix
	a.deleteQueue(catch)
	for _, ex := range []string{celery.DelayedEntryExchange, celery.DelayedDeliveryExchange} {
		if err := ch.ExchangeDeclare(ex, amqp091.ExchangeTopic, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if c, err := a.conn.Channel(); err == nil {
				_ = c.ExchangeDelete(ex, false, false)
				_ = c.Close()
			}
		})
	}
	if _, err := ch.QueueDeclare(catch, false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(catch, "#", celery.DelayedEntryExchange, false, nil); err != nil {
		t.Fatal(err)
	}

	// A new Broker: the first one remembers the cascade missing for a while.
	b = newTestBroker(t, "")
	b.SetQueueLookup(lookup)
	d := arrived(catch, publish(b, quorum))
	if want := strings.Repeat("0.", 24) + "1.0.1.0." + quorum; d.Exchange != celery.DelayedEntryExchange || d.RoutingKey != want {
		t.Errorf("delayed task went to %q with key %q; want %q with %q", d.Exchange, d.RoutingKey, celery.DelayedEntryExchange, want)
	}
	if eta, _ := d.Headers["eta"].(string); eta == "" {
		t.Error("the delayed task lost its eta header: the worker would run it at once")
	}
	// The cascade takes a message whatever becomes of its queue: a queue
	// deleted since it was last seen (and cached) is looked at again, and
	// refused when no worker declares it.
	a.deleteQueue(quorum)
	eta := time.Now().Add(10*time.Second + 500*time.Millisecond)
	if err := b.Publish(t.Context(), &celery.TaskMessage{ID: uuid.NewString(), Name: "stamen.add", Queue: quorum, ETA: &eta}); !errors.Is(err, celery.ErrNoQueue) {
		t.Errorf("delayed task for a deleted queue: err %v, want ErrNoQueue", err)
	}
	if _, err := a.channel().QueueDeclare(quorum, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// A direct exchange is not bound to the cascade by the workers.
	arrived(direct, publish(b, direct))
	// A queue no worker reports, and a task without eta, go as before.
	unknown := "du-" + suffix
	a.deleteQueue(unknown)
	if _, err := ch.QueueDeclare(unknown, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	arrived(unknown, publish(b, unknown))
	now := &celery.TaskMessage{ID: uuid.NewString(), Name: "stamen.add", Queue: quorum}
	if err := b.Publish(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	arrived(quorum, now.ID)
}
