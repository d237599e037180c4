package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
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
		r.done <- b.ConsumeEvents(ctx, func(evs []celery.Event) { r.batches <- slices.Clone(evs) })
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// publishUntil publishes payload on channel until a batch arrives (the
// subscription may not be up yet) and returns that batch.
func (r *eventsRun) publishUntil(t *testing.T, rdb *goredis.Client, channel string, payload []byte) []celery.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := rdb.Publish(t.Context(), channel, payload).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case evs := <-r.batches:
			// Drain copies published while we waited.
			for {
				select {
				case <-r.batches:
				case <-time.After(100 * time.Millisecond):
					return evs
				}
			}
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no events from %s", channel)
		}
	}
}

// countMethod counts the requests for method that w saw within d.
func countMethod(w *fakeWorker, method string, d time.Duration) int {
	n := 0
	timeout := time.After(d)
	for {
		select {
		case req := <-w.seen:
			if req.Method == method {
				if req.ReplyTo != nil {
					return -1000 // a reply was asked for: count it as a failure
				}
				n++
			}
		case <-timeout:
			return n
		}
	}
}

func TestConsumeEvents(t *testing.T) {
	b := newTestBroker(t)
	b.enableEvery = 200 * time.Millisecond
	rdb := flushBroker(t)
	w := &fakeWorker{name: "w1@h"}
	startWorkers(t, w)
	run := consume(t, b)
	channel := fmt.Sprintf("/%d.celeryev/task.multi", brokerDB)

	before := float64(time.Now().UnixNano()) / 1e9
	evs := run.publishUntil(t, rdb, channel, readWire(t, "event-task-received-redis.json"))
	after := float64(time.Now().UnixNano()) / 1e9
	if len(evs) != 1 {
		t.Fatalf("got %d events, want 1: %+v", len(evs), evs)
	}
	e := evs[0]
	if e.Type != "task-received" || e.UUID != "d7ea2150-f63a-4c62-b5a4-f1fc8d85db5a" || e.Hostname != "w3@vm" {
		t.Errorf("event %+v", e)
	}
	if e.LocalReceived < before || e.LocalReceived > after {
		t.Errorf("LocalReceived %f not within [%f, %f]", e.LocalReceived, before, after)
	}

	// Garbage on our channel and an event of another db are not passed on.
	for _, p := range []struct{ channel, payload string }{
		{channel, "not json"},
		{channel, `{"body": "!!", "properties": {"body_encoding": "base64"}}`},
		{"/3.celeryev/task.multi", string(readWire(t, "event-task-failed-redis.json"))},
	} {
		if err := rdb.Publish(t.Context(), p.channel, p.payload).Err(); err != nil {
			t.Fatal(err)
		}
	}
	batch := run.publishUntil(t, rdb, channel, readWire(t, "event-task-multi-batch-redis.json"))
	if len(batch) != 2 || batch[0].Type != "task-received" || batch[1].Type != "task-succeeded" {
		t.Errorf("batch %+v, want received and succeeded", batch)
	}
	hb := run.publishUntil(t, rdb, fmt.Sprintf("/%d.celeryev/worker.heartbeat", brokerDB), readWire(t, "event-worker-heartbeat-redis.json"))
	if len(hb) != 1 || hb[0].Type != "worker-heartbeat" {
		t.Errorf("heartbeat %+v", hb)
	}

	// Workers were woken up and are kept sending task events.
	if n := countMethod(w, "enable_events", time.Second); n < 3 {
		t.Errorf("%d enable_events casts in a second at a 200ms period", n)
	}

	cancelAt := time.Now()
	run.cancel()
	select {
	case err := <-run.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ConsumeEvents returned %v, want Canceled", err)
		}
		run.done <- err // for the cleanup
	case <-time.After(2 * time.Second):
		t.Fatal("ConsumeEvents did not stop")
	}
	if d := time.Since(cancelAt); d > time.Second {
		t.Errorf("ConsumeEvents took %v to stop", d)
	}
}

// TestConsumeEventsReconnects kills the subscription's connection: the
// stream comes back by itself and wakes the workers again.
func TestConsumeEventsReconnects(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	w := &fakeWorker{name: "w1@h"}
	startWorkers(t, w)
	var subscribed atomic.Int32
	b.SetOnSubscribe(func() { subscribed.Add(1) })
	run := consume(t, b)
	channel := fmt.Sprintf("/%d.celeryev/worker.heartbeat", brokerDB)
	payload := readWire(t, "event-worker-heartbeat-redis.json")
	run.publishUntil(t, rdb, channel, payload)
	if n := countMethod(w, "heartbeat", 200*time.Millisecond); n != 1 {
		t.Fatalf("%d heartbeat casts on subscribing, want 1", n)
	}
	if n := subscribed.Load(); n != 1 {
		t.Errorf("subscribe hook ran %d times on subscribing, want 1", n)
	}

	list, err := rdb.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " name=stamen ") || !strings.Contains(line, fmt.Sprintf(" db=%d ", brokerDB)) ||
			!strings.Contains(line, " psub=1 ") {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
		if err := rdb.Do(t.Context(), "CLIENT", "KILL", "ID", id).Err(); err != nil {
			t.Fatal(err)
		}
		killed++
	}
	if killed != 1 {
		t.Fatalf("killed %d subscriptions, want 1:\n%s", killed, list)
	}

	evs := run.publishUntil(t, rdb, channel, payload)
	if len(evs) != 1 || evs[0].Type != "worker-heartbeat" {
		t.Errorf("after reconnecting: %+v", evs)
	}
	if n := countMethod(w, "heartbeat", 200*time.Millisecond); n < 1 {
		t.Error("no heartbeat cast after reconnecting")
	}
	if n := subscribed.Load(); n < 2 {
		t.Errorf("subscribe hook ran %d times after a reconnection, want 2 or more", n)
	}
}

// TestConsumeEventsQuiet keeps a subscription without traffic alive with
// pings instead of reconnecting.
func TestConsumeEventsQuiet(t *testing.T) {
	b := newTestBroker(t)
	b.eventsIdle = 100 * time.Millisecond
	rdb := flushBroker(t)
	w := &fakeWorker{name: "w1@h"}
	startWorkers(t, w)
	run := consume(t, b)
	channel := fmt.Sprintf("/%d.celeryev/worker.heartbeat", brokerDB)
	payload := readWire(t, "event-worker-heartbeat-redis.json")
	run.publishUntil(t, rdb, channel, payload)
	time.Sleep(time.Second) // ten idle periods
	if err := rdb.Publish(t.Context(), channel, payload).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case evs := <-run.batches:
		if len(evs) != 1 {
			t.Errorf("events %+v", evs)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the quiet subscription lost the next event")
	}
	if n := countMethod(w, "heartbeat", 100*time.Millisecond); n != 1 {
		t.Errorf("%d heartbeat casts: the subscription was re-established", n)
	}
}

// TestConsumeEventsAfterClose: closing the Broker ends the stream instead of
// leaving it retrying.
func TestConsumeEventsAfterClose(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	run := consume(t, b)
	run.publishUntil(t, rdb, fmt.Sprintf("/%d.celeryev/worker.heartbeat", brokerDB), readWire(t, "event-worker-heartbeat-redis.json"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-run.done:
		if !errors.Is(err, celery.ErrUnavailable) {
			t.Errorf("ConsumeEvents after Close: %v, want ErrUnavailable", err)
		}
		run.done <- err // for the cleanup
	case <-time.After(3 * time.Second):
		t.Fatal("ConsumeEvents kept running after Close")
	}
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
// subscribing nor later; without it, it asks for both on subscribing and
// for task events every period.
//
// The off case cannot pass while the switch is ignored: the worker's
// requests are read up to a marker the test broadcasts itself once ten
// periods have passed since the subscription, and pub/sub delivers to the
// worker in the order the server received the publications, so every
// enable_events sent before the marker (the subscription's, then about
// ten of the loop's) is among those read. The window is only how long the
// loop had to misbehave; nothing waits on it for something to happen.
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
			needRedis(t)
			b, err := New(t.Context(), Config{BrokerURL: brokerURL(), Logger: testLogger(t), OpTimeout: 2 * time.Second,
				NoEnableEvents: tc.noEnableEvents})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			const period = 50 * time.Millisecond
			b.enableEvery = period
			rdb := flushBroker(t)
			w := &fakeWorker{name: "w1@h"}
			startWorkers(t, w)
			run := consume(t, b)
			// An event through the stream: ConsumeEvents has subscribed
			// and woken the workers before it reads any.
			run.publishUntil(t, rdb, fmt.Sprintf("/%d.celeryev/worker.heartbeat", brokerDB),
				readWire(t, "event-worker-heartbeat-redis.json"))
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

// TestConsumeEventsInOrder publishes a thousand messages of three events,
// with undecodable ones between them, to four decoding goroutines: fn gets
// every event of the decodable ones, in the order they were published.
func TestConsumeEventsInOrder(t *testing.T) {
	b := newTestBroker(t)
	b.decoders = 4
	rdb := flushBroker(t)
	run := consume(t, b)
	channel := fmt.Sprintf("/%d.celeryev/task.multi", brokerDB)
	id := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
	// The subscription is up once a first message comes through.
	run.publishUntil(t, rdb, channel, testcluster.SucceededTaskEnvelope(id(0), "t.first", "w@h", 0))

	const n = 1000
	pipe := rdb.Pipeline()
	for i := 1; i <= n; i++ {
		pipe.Publish(t.Context(), channel, testcluster.SucceededTaskEnvelope(id(i), "t.add", "w@h", i))
		if i%7 == 0 {
			pipe.Publish(t.Context(), channel, "not json")
		}
	}
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []celery.Event
	deadline := time.After(30 * time.Second)
	for len(got) < 3*n {
		select {
		case evs := <-run.batches:
			got = append(got, evs...)
		case <-deadline:
			t.Fatalf("%d of %d events in 30 s", len(got), 3*n)
		}
	}
	kinds := []string{"task-received", "task-started", "task-succeeded"}
	for j, e := range got {
		if want := id(1 + j/3); e.UUID != want || e.Type != kinds[j%3] {
			t.Fatalf("event %d: %s of %s, want %s of %s", j, e.Type, e.UUID, kinds[j%3], want)
		}
	}
}
