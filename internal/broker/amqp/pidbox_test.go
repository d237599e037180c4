package amqp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// pidboxRequest is a pidbox request as a worker reads it.
type pidboxRequest struct {
	Method      string         `json:"method"`
	Arguments   map[string]any `json:"arguments"`
	Destination []string       `json:"destination"`
	Ticket      string         `json:"ticket"`
	ReplyTo     *struct {
		Exchange   string `json:"exchange"`
		RoutingKey string `json:"routing_key"`
	} `json:"reply_to"`

	// What came with it.
	Headers  amqp091.Table
	Delivery amqp091.Delivery
}

// fakeWorker is a Celery worker's pidbox, as kombu runs it: its own queue
// bound to celery.pidbox, and replies to reply_to with the ticket header.
type fakeWorker struct {
	name string
	// seen gets every request, also those for other workers.
	seen chan pidboxRequest
}

// startWorker runs w on its own connection until the test ends.
func startWorker(t *testing.T, w *fakeWorker) {
	t.Helper()
	w.seen = make(chan pidboxRequest, 1000)
	var wg sync.WaitGroup
	// Cleanups run last-in first-out: this one after the connection is
	// closed, which ends the consumer.
	t.Cleanup(wg.Wait)
	a := newAdmin(t)
	ch := a.channel()
	queue := w.name + ".celery.pidbox"
	if err := ch.ExchangeDeclare(celery.ControlExchange, amqp091.ExchangeFanout, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	args := amqp091.Table{"x-message-ttl": int32(300000), "x-expires": int32(10000)}
	if _, err := ch.QueueDeclare(queue, false, true, false, false, args); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(queue, "", celery.ControlExchange, false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		for d := range deliveries {
			var req pidboxRequest
			if err := json.Unmarshal(d.Body, &req); err != nil {
				t.Errorf("%s: undecodable request %q: %v", w.name, d.Body, err)
				continue
			}
			req.Headers, req.Delivery = d.Headers, d
			select {
			case w.seen <- req:
			default:
			}
			if req.Destination != nil && !slices.Contains(req.Destination, w.name) {
				continue
			}
			if req.ReplyTo == nil {
				continue // a cast: nobody listens
			}
			body, _ := json.Marshal(map[string]any{w.name: map[string]any{"ok": "pong", "echo": req.Arguments["n"]}})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := ch.PublishWithContext(ctx, req.ReplyTo.Exchange, req.ReplyTo.RoutingKey, false, false, amqp091.Publishing{
				Headers:         amqp091.Table{"ticket": req.Ticket, "clock": int64(5)},
				ContentType:     "application/json",
				ContentEncoding: "utf-8",
				DeliveryMode:    amqp091.Transient,
				Body:            body,
			})
			cancel()
			if err != nil {
				t.Errorf("%s: reply: %v", w.name, err)
			}
		}
	})
}

// nextRequest returns the next request for method that w saw.
func (w *fakeWorker) nextRequest(t *testing.T, method string, within time.Duration) pidboxRequest {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case req := <-w.seen:
			if req.Method == method {
				return req
			}
		case <-timeout:
			t.Fatalf("%s saw no %s request", w.name, method)
		}
	}
}

func TestBroadcast(t *testing.T) {
	b := newTestBroker(t, "")
	w1, w2 := &fakeWorker{name: "w1@stamen-test"}, &fakeWorker{name: "w2@stamen-test"}
	startWorker(t, w1)
	startWorker(t, w2)

	t.Run("request shape", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := b.Broadcast(ctx, celery.ControlCommand{Method: "ping", Reply: true, Limit: 2}); err != nil {
			t.Fatal(err)
		}
		req := w1.nextRequest(t, "ping", time.Second)
		got := generic(t, map[string]any{
			"exchange": req.Delivery.Exchange, "routing_key": req.Delivery.RoutingKey,
			"content_type": req.Delivery.ContentType, "content_encoding": req.Delivery.ContentEncoding,
			"delivery_mode":  req.Delivery.DeliveryMode,
			"reply_exchange": req.ReplyTo.Exchange, "reply_key": req.ReplyTo.RoutingKey,
		})
		want := generic(t, map[string]any{
			"exchange": "celery.pidbox", "routing_key": "",
			"content_type": "application/json", "content_encoding": "utf-8", "delivery_mode": 2,
			"reply_exchange": "reply.celery.pidbox", "reply_key": b.oid,
		})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("request (-want +got):\n%s", diff)
		}
		if _, ok := req.Headers["clock"].(int64); !ok {
			t.Errorf("clock header = %#v, want an integer", req.Headers["clock"])
		}
		exp, ok := req.Headers["expires"].(float64)
		if now := float64(time.Now().Unix()); !ok || exp < now || exp > now+10 {
			t.Errorf("expires header = %#v, want the collection deadline", req.Headers["expires"])
		}
		if req.Ticket == "" {
			t.Error("no ticket")
		}
	})

	tests := []struct {
		name  string
		cmd   celery.ControlCommand
		want  []string
		quick bool // returns before the deadline
	}{
		{"limit", celery.ControlCommand{Method: "ping", Reply: true, Limit: 2}, []string{"w1@stamen-test", "w2@stamen-test"}, true},
		{"destination", celery.ControlCommand{Method: "ping", Reply: true, Destination: []string{"w2@stamen-test"}}, []string{"w2@stamen-test"}, true},
		{"until deadline", celery.ControlCommand{Method: "ping", Reply: true}, []string{"w1@stamen-test", "w2@stamen-test"}, false},
		{"expected answered", celery.ControlCommand{Method: "ping", Reply: true, Expect: []string{"w1@stamen-test", "w2@stamen-test"}}, []string{"w1@stamen-test", "w2@stamen-test"}, true},
		{"expected one silent", celery.ControlCommand{Method: "ping", Reply: true, Expect: []string{"w1@stamen-test", "silent@stamen-test"}}, []string{"w1@stamen-test", "w2@stamen-test"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const wait = 1500 * time.Millisecond
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			start := time.Now()
			replies, err := b.Broadcast(ctx, tt.cmd)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			var hosts []string
			for _, r := range replies {
				hosts = append(hosts, r.Hostname)
			}
			slices.Sort(hosts)
			if diff := cmp.Diff(tt.want, hosts); diff != "" {
				t.Errorf("replies from (-want +got):\n%s", diff)
			}
			if tt.quick && took > wait/2 {
				t.Errorf("took %s; should stop once the replies are in", took)
			}
			if !tt.quick && took < wait-100*time.Millisecond {
				t.Errorf("took %s; should collect until the deadline", took)
			}
		})
	}

	t.Run("no reply", func(t *testing.T) {
		replies, err := b.Broadcast(t.Context(), celery.ControlCommand{Method: "enable_events"})
		if err != nil || replies != nil {
			t.Fatalf("got %v, %v", replies, err)
		}
		req := w1.nextRequest(t, "enable_events", time.Second)
		if req.ReplyTo != nil || req.Ticket != "" {
			t.Errorf("a cast asked for a reply: %+v", req)
		}
	})

	t.Run("no deadline", func(t *testing.T) {
		start := time.Now()
		replies, err := b.Broadcast(t.Context(), celery.ControlCommand{Method: "ping", Reply: true})
		if err != nil || len(replies) != 2 {
			t.Fatalf("got %v, %v", replies, err)
		}
		if took := time.Since(start); took < defaultCollect-100*time.Millisecond || took > 2*defaultCollect {
			t.Errorf("took %s, want about %s", took, defaultCollect)
		}
	})
}

// TestConcurrentBroadcasts: replies go to the broadcast whose ticket they
// carry, even though all share one reply queue.
func TestConcurrentBroadcasts(t *testing.T) {
	b := newTestBroker(t, "")
	w1, w2 := &fakeWorker{name: "w1@stamen-test"}, &fakeWorker{name: "w2@stamen-test"}
	startWorker(t, w1)
	startWorker(t, w2)

	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			replies, err := b.Broadcast(ctx, celery.ControlCommand{
				Method: "ping", Reply: true, Limit: 2, Arguments: map[string]any{"n": i},
			})
			if err != nil {
				errs <- err
				return
			}
			if len(replies) != 2 {
				errs <- fmt.Errorf("broadcast %d: %d replies, want 2", i, len(replies))
				return
			}
			for _, r := range replies {
				var v struct{ Echo int }
				if err := json.Unmarshal(r.Value, &v); err != nil || v.Echo != i {
					errs <- fmt.Errorf("broadcast %d got a reply to %s: %s", i, r.Hostname, r.Value)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	b.pidbox.mu.Lock()
	left := len(b.pidbox.waiters)
	b.pidbox.mu.Unlock()
	if left != 0 {
		t.Errorf("%d waiters left behind", left)
	}
}
