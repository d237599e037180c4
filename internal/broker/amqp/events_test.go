package amqp

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// TestSlowIngestHoldsAtMostThePrefetch blocks the ingester on its first
// message while a backlog arrives: RabbitMQ must keep all but the prefetch
// in our queue rather than push it into stamen's memory, and once the
// ingester is unblocked every message must be applied and acknowledged.
func TestSlowIngestHoldsAtMostThePrefetch(t *testing.T) {
	b := newTestBroker(t, "")
	a := newAdmin(t)
	prefetch := b.eventPrefetch
	// Not a multiple of the acknowledgement batch: the last messages are
	// acknowledged only because no more arrive.
	total := 4*prefetch + prefetch/8
	var calls atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- b.ConsumeEvents(ctx, func([]celery.Event) {
			if calls.Add(1) == 1 {
				close(started)
				<-release
			}
		})
	}()
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(func() {
		unblock()
		cancel()
		<-done
	})
	queue := eventQueueOfOurConsumer(t)

	// The backlog, confirmed by RabbitMQ as routed to our queue.
	capture := readWire(t, "event-task-started-amqp.json")
	ch := a.channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := make([]*amqp091.DeferredConfirmation, total)
	for i := range confirms {
		var err error
		confirms[i], err = ch.PublishWithDeferredConfirmWithContext(t.Context(), eventExchange, capture.RoutingKeys[0], false, false,
			amqp091.Publishing{ContentType: "application/json", ContentEncoding: "utf-8", Body: []byte(capture.BodyRaw)})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range confirms {
		if ok, err := c.WaitContext(t.Context()); !ok || err != nil {
			t.Fatalf("publish not confirmed: %v", err)
		}
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no event reached the ingester")
	}

	// RabbitMQ holds what it did not hand us: everything but the prefetch.
	// (Its 5 s event TTL would age the backlog out: look at once.)
	want := total - prefetch
	check := a.channel()
	deadline := time.Now().Add(3 * time.Second)
	for {
		q, err := check.QueueDeclarePassive(queue, false, true, false, false, eventQueueArgs())
		if err != nil {
			t.Fatal(err)
		}
		if q.Messages == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages ready in %s with the ingester blocked, want %d (%d sent, prefetch %d): "+
				"the rest were pushed to stamen", q.Messages, queue, want, total, prefetch)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the ingester was called %d times while blocked in its first call", n)
	}

	unblock()
	deadline = time.Now().Add(10 * time.Second)
	for calls.Load() < int64(total) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d event messages applied after the ingester was unblocked", calls.Load(), total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And acknowledged, the last ones too, though no more arrive.
	deadline = time.Now().Add(20 * time.Second)
	for {
		ready, unacked := queueCounts(t, queue)
		if ready == 0 && unacked == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still has %d ready and %d unacknowledged messages after all were applied", queue, ready, unacked)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eventQueueOfOurConsumer waits until the broker's event queue has its
// consumer and returns the queue's name.
func eventQueueOfOurConsumer(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := rabbitmqctlOutput(t, "list_queues", "-p", testVhost, "-q", "--no-table-headers", "name", "consumers")
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) == 2 && strings.HasPrefix(f[0], "celeryev.stamen-") && f[1] == "1" {
				found = append(found, f[0])
			}
		}
		if len(found) > 1 {
			t.Fatalf("more than one consumed event queue: %v", found)
		}
		if len(found) == 1 {
			return found[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no consumed celeryev.stamen-* queue in\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// queueCounts returns a queue's ready and unacknowledged messages.
func queueCounts(t *testing.T, queue string) (ready, unacked int) {
	t.Helper()
	out, err := rabbitmqctlOutput(t, "list_queues", "-p", testVhost, "-q", "--no-table-headers", "name", "messages_ready", "messages_unacknowledged")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == queue {
			ready, _ = strconv.Atoi(f[1])
			unacked, _ = strconv.Atoi(f[2])
			return ready, unacked
		}
	}
	t.Fatalf("no queue %s in\n%s", queue, out)
	return 0, 0
}

// methodsUntil returns the methods of the requests w saw before one for
// marker, failing the test if none comes within 10 s.
func methodsUntil(t *testing.T, w *fakeWorker, marker string) []string {
	t.Helper()
	var methods []string
	deadline := time.After(10 * time.Second)
	for {
		select {
		case req := <-w.seen:
			if req.Method == marker {
				return methods
			}
			methods = append(methods, req.Method)
		case <-deadline:
			t.Fatalf("no %s request after %v", marker, methods)
		}
	}
}

// TestEnableEventsSwitch: with Config.NoEnableEvents ConsumeEvents asks
// the workers for a heartbeat only, and never for task events, neither on
// consuming nor later; without it, it asks for both on consuming and for
// task events every period.
//
// The off case cannot pass while the switch is ignored: the worker's
// requests are read up to a marker the test broadcasts itself once ten
// periods have passed since the consumer started, and every broadcast
// waits for RabbitMQ's confirm, on the one publishing channel, so every
// enable_events sent before the marker (the start's, then about ten of the
// loop's) is queued before it. The window is only how long the loop had
// to misbehave; nothing waits on it for something to happen.
func TestEnableEventsSwitch(t *testing.T) {
	for _, tc := range []struct {
		name           string
		noEnableEvents bool
		check          func(methods []string) bool
		want           string
	}{
		{name: "on", check: func(m []string) bool {
			return len(m) >= 5 && m[0] == "heartbeat" && !slices.ContainsFunc(m[1:], func(s string) bool { return s != "enable_events" })
		}, want: "heartbeat then enable_events, 4 or more times"},
		{name: "off", noEnableEvents: true, check: func(m []string) bool { return slices.Equal(m, []string{"heartbeat"}) },
			want: "heartbeat only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needRabbit(t)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			b, err := New(ctx, Config{BrokerURL: testURL, Logger: testLogger(t), OpTimeout: 3 * time.Second, NoEnableEvents: tc.noEnableEvents})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			const period = 50 * time.Millisecond
			b.enableEvery = period
			w := &fakeWorker{name: "w1@stamen-test"}
			startWorker(t, w)
			a := newAdmin(t)
			run := consume(t, b)
			// An event through the stream: ConsumeEvents has woken the
			// workers (and had the broadcasts confirmed) before it reads
			// any.
			run.publishUntil(t, a, readWire(t, "event-worker-heartbeat-amqp.json"))
			<-time.After(10 * period)
			const marker = "stamen_test_marker"
			if _, err := b.Broadcast(t.Context(), celery.ControlCommand{Method: marker}); err != nil {
				t.Fatal(err)
			}
			if m := methodsUntil(t, w, marker); !tc.check(m) {
				t.Errorf("the worker was sent %v, want %s", m, tc.want)
			}
		})
	}
}
