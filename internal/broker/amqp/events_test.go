package amqp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// eventsRun is ConsumeEvents running in the background.
type eventsRun struct {
	batches chan []celery.Event
	done    chan error
	cancel  context.CancelFunc
}

func consume(t *testing.T, b *Broker) *eventsRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &eventsRun{batches: make(chan []celery.Event, 100), done: make(chan error, 1), cancel: cancel}
	go func() {
		r.done <- b.ConsumeEvents(ctx, func(evs []celery.Event) { r.batches <- evs })
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// publishEvent sends a captured event message the way a worker does.
func publishEvent(a *admin, capture wire) {
	a.t.Helper()
	if err := a.channel().ExchangeDeclare(eventExchange, amqp091.ExchangeTopic, true, false, false, false, nil); err != nil {
		a.t.Fatal(err)
	}
	a.publish(eventExchange, capture.RoutingKeys[0], amqp091.Publishing{
		Headers:         amqp091.Table{"hostname": "a1@vm"},
		ContentType:     "application/json",
		ContentEncoding: "utf-8",
		DeliveryMode:    amqp091.Transient,
		Body:            []byte(capture.BodyRaw),
	})
}

// publishUntil publishes capture until a batch arrives (the consumer may
// not be up yet) and returns that batch, after draining extra copies.
func (r *eventsRun) publishUntil(t *testing.T, a *admin, capture wire) []celery.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		publishEvent(a, capture)
		select {
		case evs := <-r.batches:
			for {
				select {
				case <-r.batches:
				case <-time.After(200 * time.Millisecond):
					return evs
				}
			}
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no events for %s", capture.RoutingKeys[0])
		}
	}
}

func TestConsumeEvents(t *testing.T) {
	b := newTestBroker(t, "")
	b.enableEvery = 200 * time.Millisecond
	w := &fakeWorker{name: "w1@stamen-test"}
	startWorker(t, w)
	a := newAdmin(t)
	run := consume(t, b)

	// Starting wakes the workers up, and task events are asked for again
	// and again.
	for _, method := range []string{"heartbeat", "enable_events", "enable_events", "enable_events"} {
		req := w.nextRequest(t, method, 3*time.Second)
		if req.ReplyTo != nil {
			t.Errorf("%s asked for replies", method)
		}
	}

	tests := []struct {
		file     string
		wantType string
		wantN    int
	}{
		{"event-task-received-amqp.json", "task-received", 1},
		{"event-worker-heartbeat-amqp.json", "worker-heartbeat", 1},
		{"event-task-sent-amqp.json", "task-sent", 1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			before := float64(time.Now().UnixNano()) / 1e9
			evs := run.publishUntil(t, a, readWire(t, tt.file))
			after := float64(time.Now().UnixNano()) / 1e9
			if len(evs) != tt.wantN {
				t.Fatalf("got %d events, want %d", len(evs), tt.wantN)
			}
			e := evs[0]
			if e.Type != tt.wantType || e.Hostname == "" || e.Timestamp == 0 {
				t.Errorf("event = %+v", e)
			}
			if e.LocalReceived < before || e.LocalReceived > after {
				t.Errorf("LocalReceived %f not within [%f, %f]", e.LocalReceived, before, after)
			}
		})
	}

	// Our queue has Celery's event queue arguments.
	out, err := rabbitmqctlOutput(t, "list_queues", "-p", testVhost, "-q", "--no-table-headers", "name", "auto_delete", "arguments")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "celeryev.stamen-") {
			found = true
			for _, want := range []string{"true", "x-message-ttl", "5000", "x-expires", "60000"} {
				if !strings.Contains(line, want) {
					t.Errorf("event queue %q lacks %q", strings.TrimSpace(line), want)
				}
			}
		}
	}
	if !found {
		t.Errorf("no celeryev.stamen-* queue in\n%s", out)
	}

	run.cancel()
	select {
	case err := <-run.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ConsumeEvents returned %v, want context.Canceled", err)
		}
		run.done <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("ConsumeEvents did not return after cancel")
	}
}

// TestConsumeEventsDropsGarbage: an undecodable message does not stop the
// stream.
func TestConsumeEventsDropsGarbage(t *testing.T) {
	b := newTestBroker(t, "")
	a := newAdmin(t)
	run := consume(t, b)
	garbage := wire{RoutingKeys: []string{"task.multi"}, BodyRaw: "not json"}
	good := readWire(t, "event-task-started-amqp.json")
	deadline := time.After(10 * time.Second)
	for {
		publishEvent(a, garbage)
		publishEvent(a, good)
		select {
		case evs := <-run.batches:
			if len(evs) != 1 || evs[0].Type != "task-started" {
				t.Fatalf("got %+v", evs)
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no events")
		}
	}
}

func rabbitmqctlOutput(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	return rabbitmqctlCombined(ctx, args...)
}
