package amqp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestPublishToQueueDeletedSinceSeen: a queue stamen saw within the last
// minute (kombu-like declare cache) and that was deleted since
// (rabbitmqctl delete_queue) is looked for again instead of trusted: the
// message is not confirmed into nowhere. Without the workers' declaration
// the publish is refused with ErrNoQueue and nothing is created; with it,
// the queue is declared again and holds the message.
func TestPublishToQueueDeletedSinceSeen(t *testing.T) {
	b := newTestBroker(t, "")
	tests := []struct {
		name     string
		declared bool // the message carries the workers' declaration
	}{
		{"no worker declares it", false},
		{"a worker declares it", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdmin(t)
			queue := a.freshQueue()
			if _, err := a.channel().QueueDeclare(queue, true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			msg := func() *celery.TaskMessage {
				m := &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Queue: queue}
				if tt.declared {
					m.Declare = workerDecl(t, queue, 0)
				}
				return m
			}
			first := msg()
			if err := b.Publish(t.Context(), first); err != nil {
				t.Fatalf("publish to the existing queue: %v", err)
			}
			if d := a.get(queue); d.CorrelationId != first.ID {
				t.Fatalf("got %s, want %s", d.CorrelationId, first.ID)
			}

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := rabbitmqctl(ctx, "delete_queue", queue, "-p", testVhost); err != nil {
				t.Fatal(err)
			}

			second := msg()
			err := b.Publish(t.Context(), second)
			if !tt.declared {
				if !errors.Is(err, celery.ErrNoQueue) || errors.Is(err, celery.ErrUnavailable) {
					t.Fatalf("publish to the deleted queue: err %v, want ErrNoQueue (the message would be dropped)", err)
				}
				if _, err := a.channel().QueueDeclarePassive(queue, false, false, false, false, nil); err == nil {
					t.Errorf("Publish created %s without the workers' declaration", queue)
				}
				return
			}
			if err != nil {
				t.Fatalf("publish with the workers' declaration: %v", err)
			}
			if d := a.get(queue); d.CorrelationId != second.ID {
				t.Errorf("got %s, want %s", d.CorrelationId, second.ID)
			}
		})
	}
	if !b.Connected() {
		t.Error("the returns cost the connection")
	}
}

// TestPublishUnroutableIsRefused: through an existing exchange, a routing
// key no queue is bound with is refused with ErrNoRoute saying nothing was
// delivered, where RabbitMQ would confirm and drop the message; returns
// are matched to their own publishes when routable and unroutable ones
// are sent at once.
func TestPublishUnroutableIsRefused(t *testing.T) {
	b := newTestBroker(t, "")
	a := newAdmin(t)
	queue := "stamen-test-" + uuid.NewString()
	direct, fanout := "stamen-test-x-"+uuid.NewString(), "stamen-test-f-"+uuid.NewString()
	a.deleteQueue(queue)
	ch := a.channel()
	for _, ex := range []struct{ name, kind string }{{direct, amqp091.ExchangeDirect}, {fanout, amqp091.ExchangeFanout}} {
		if err := ch.ExchangeDeclare(ex.name, ex.kind, false, true, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(queue, "video", direct, false, nil); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name          string
		exchange, key string
	}{
		{"direct exchange, key bound to no queue", direct, "nothing-bound"},
		{"fanout exchange with no queue", fanout, "video"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.Publish(t.Context(), &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Exchange: tt.exchange, RoutingKey: tt.key})
			if !errors.Is(err, celery.ErrNoRoute) || errors.Is(err, celery.ErrUnavailable) {
				t.Fatalf("err %v, want ErrNoRoute only", err)
			}
			for _, want := range []string{tt.exchange, tt.key, "nothing was delivered"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}

	t.Run("concurrent", func(t *testing.T) {
		a := newAdmin(t)
		const n = 40
		ids := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			ids[i] = uuid.NewString()
			key := "video"
			if i%2 == 1 {
				key = "nothing-bound"
			}
			wg.Go(func() {
				errs[i] = b.Publish(t.Context(), &celery.TaskMessage{ID: ids[i], Name: "t", Exchange: direct, RoutingKey: key})
			})
		}
		wg.Wait()
		want := map[string]bool{}
		for i, err := range errs {
			switch {
			case i%2 == 0 && err != nil:
				t.Errorf("routable publish %d: %v", i, err)
			case i%2 == 0:
				want[ids[i]] = true
			case !errors.Is(err, celery.ErrNoRoute):
				t.Errorf("unroutable publish %d: err %v, want ErrNoRoute", i, err)
			}
		}
		got := map[string]bool{}
		for range len(want) {
			got[a.get(queue).CorrelationId] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("queue holds %v, want %v", got, want)
		}
	})
	if !b.Connected() {
		t.Error("the returns cost the connection")
	}
}
