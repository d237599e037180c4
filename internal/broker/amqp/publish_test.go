package amqp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

func TestToTable(t *testing.T) {
	ts := time.Date(2026, 11, 22, 15, 25, 32, 0, time.UTC)
	tests := []struct {
		name    string
		in      map[string]any
		want    amqp091.Table
		wantErr string
	}{
		{
			name: "protocol headers",
			in: map[string]any{
				"task": "tasks.add", "retries": 0, "eta": nil, "ignore_result": false,
				"timelimit": []any{nil, 1.5},
				"stamps":    map[string]any{"k": []any{"v", map[string]any{"n": 1}}},
			},
			want: amqp091.Table{
				"task": "tasks.add", "retries": 0, "eta": nil, "ignore_result": false,
				"timelimit": []any{nil, 1.5},
				"stamps":    amqp091.Table{"k": []any{"v", amqp091.Table{"n": 1}}},
			},
		},
		{
			name: "typed collections",
			in: map[string]any{
				"stamped_headers": []string{"a", "b"},
				"m":               map[string]string{"x": "y"},
				"ints":            []int{1, 2},
			},
			want: amqp091.Table{
				"stamped_headers": []any{"a", "b"},
				"m":               amqp091.Table{"x": "y"},
				"ints":            []any{1, 2},
			},
		},
		{
			name: "numbers",
			in: map[string]any{
				"u": uint(7), "u64": uint64(8), "jn": json.Number("9"), "jf": json.Number("1.25"),
				"raw": json.RawMessage(`{"a":[1,"x",null]}`), "t": ts,
			},
			want: amqp091.Table{
				"u": int64(7), "u64": int64(8), "jn": int64(9), "jf": 1.25,
				"raw": amqp091.Table{"a": []any{int64(1), "x", nil}}, "t": ts,
			},
		},
		{name: "huge uint", in: map[string]any{"u": uint64(1 << 63)}, wantErr: `header "u"`},
		{name: "int keyed map", in: map[string]any{"m": map[int]string{1: "a"}}, wantErr: "keys"},
		{name: "channel", in: map[string]any{"c": make(chan int)}, wantErr: "chan int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toTable(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("amqp091 rejects the table: %v", err)
			}
		})
	}
}

// TestPublishMatchesCelery publishes the task of the lab's capture and reads
// it back: headers, body and properties must be what Celery sent, and the
// missing queue must have been declared the way Celery declares it.
func TestPublishMatchesCelery(t *testing.T) {
	b := newTestBroker(t, "rpc://")
	a := newAdmin(t)
	capture := readWire(t, "task-message-add-amqp.json")
	queue := a.freshQueue()

	headers := capture.Properties["headers"].(map[string]any)
	id := capture.Properties["correlation_id"].(string)
	msg := &celery.TaskMessage{
		ID:     id,
		Name:   headers["task"].(string),
		Args:   []any{2, 3},
		Queue:  queue,
		Origin: headers["origin"].(string),
		// As the sample app's workers declare it.
		Declare: workerDecl(t, queue, 10),
	}
	if err := b.Publish(t.Context(), msg); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	d := a.get(queue)

	if diff := cmp.Diff(generic(t, headers), generic(t, d.Headers)); diff != "" {
		t.Errorf("headers differ from Celery's (-celery +ours):\n%s", diff)
	}
	var want, got any
	if err := json.Unmarshal(capture.Body, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(d.Body, &got); err != nil {
		t.Fatalf("body %q: %v", d.Body, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body differs from Celery's (-celery +ours):\n%s", diff)
	}
	props := map[string]any{
		"content_type":     d.ContentType,
		"content_encoding": d.ContentEncoding,
		"delivery_mode":    float64(d.DeliveryMode),
		"correlation_id":   d.CorrelationId,
		"priority":         float64(d.Priority),
	}
	for k, v := range props {
		if capture.Properties[k] != v {
			t.Errorf("property %s = %v, Celery sent %v", k, v, capture.Properties[k])
		}
	}
	if d.ReplyTo != b.rpcQueue || !strings.HasPrefix(d.ReplyTo, "stamen-rpc-") {
		t.Errorf("reply_to = %q, want our rpc queue %q", d.ReplyTo, b.rpcQueue)
	}
	if d.Expiration != "" {
		t.Errorf("expiration = %q without expires", d.Expiration)
	}
	if d.Exchange != "" || d.RoutingKey != queue {
		t.Errorf("published to %q/%q, want the default exchange and the queue", d.Exchange, d.RoutingKey)
	}

	// The workers' declaration: durable queue with their x-max-priority
	// (a worker declaring it again must not get 406), durable direct
	// exchange of the same name, bound with the queue's name.
	ch := a.channel()
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp091.Table{"x-max-priority": int32(10)}); err != nil {
		t.Errorf("queue not declared like the workers': %v", err)
		ch = a.channel()
	}
	if err := ch.ExchangeDeclare(queue, amqp091.ExchangeDirect, true, false, false, false, nil); err != nil {
		t.Errorf("exchange not declared like Celery's: %v", err)
	}
}

// TestPublishOptions covers expiration, priority, reply_to without rpc://
// and a queue that exists with arguments stamen would not have used.
func TestPublishOptions(t *testing.T) {
	b := newTestBroker(t, "")
	a := newAdmin(t)
	queue := "stamen-test-" + uuid.NewString()
	a.deleteQueue(queue)
	// A worker's queue with x-max-priority: declaring it without the
	// argument would fail with 406.
	if _, err := a.channel().QueueDeclare(queue, true, false, false, false, amqp091.Table{"x-max-priority": int32(10)}); err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(time.Minute)
	tl := 30.0
	msg := &celery.TaskMessage{
		ID: uuid.NewString(), Name: "tasks.slow", Queue: queue, Priority: 12,
		Expires: &expires, TimeLimit: &tl, ReplyTo: "client-oid",
		Kwargs:  map[string]any{"x": []any{1, "y"}},
		Headers: map[string]any{"stamps": map[string]any{"s": []string{"a"}}},
	}
	if err := b.Publish(t.Context(), msg); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	d := a.get(queue)
	if d.Priority != 12 {
		t.Errorf("priority = %d, want 12 as given: Celery sends it so, and the queue's x-max-priority caps it", d.Priority)
	}
	if d.ReplyTo != "client-oid" {
		t.Errorf("reply_to = %q, want the message's own without rpc://", d.ReplyTo)
	}
	ms, err := time.ParseDuration(d.Expiration + "ms")
	if err != nil || ms <= 50*time.Second || ms > time.Minute {
		t.Errorf("expiration = %q, want about 60000 ms", d.Expiration)
	}
	if got := generic(t, d.Headers["timelimit"]); !cmp.Equal(got, []any{30.0, nil}) {
		t.Errorf("timelimit = %v", got)
	}
	if got := generic(t, d.Headers["stamps"]); !cmp.Equal(got, map[string]any{"s": []any{"a"}}) {
		t.Errorf("stamps = %v", got)
	}

	if err := b.Publish(t.Context(), &celery.TaskMessage{Name: "tasks.add"}); err == nil {
		t.Error("published a message without id")
	}
}

// TestPublishPriorityAsGiven: priorities above 9 reach RabbitMQ as given
// and order the queue, as Celery's own client sends them.
func TestPublishPriorityAsGiven(t *testing.T) {
	b := newTestBroker(t, "")
	a := newAdmin(t)
	queue := "stamen-test-" + uuid.NewString()
	a.deleteQueue(queue)
	if _, err := a.channel().QueueDeclare(queue, true, false, false, false, amqp091.Table{"x-max-priority": int32(255)}); err != nil {
		t.Fatal(err)
	}
	ids := map[int]string{}
	for _, prio := range []int{9, 200, 100} {
		ids[prio] = uuid.NewString()
		if err := b.Publish(t.Context(), &celery.TaskMessage{ID: ids[prio], Name: "t", Queue: queue, Priority: prio}); err != nil {
			t.Fatal(err)
		}
	}
	for _, prio := range []int{200, 100, 9} {
		d := a.get(queue)
		if int(d.Priority) != prio || d.CorrelationId != ids[prio] {
			t.Errorf("got %s priority %d, want %s priority %d (highest first)", d.CorrelationId, d.Priority, ids[prio], prio)
		}
	}
}

// TestPublishThroughExchange: exchange and routing_key route the message
// as apply_async's do; an exchange that does not exist is refused.
func TestPublishThroughExchange(t *testing.T) {
	b := newTestBroker(t, "")
	a := newAdmin(t)
	queue, exchange := "stamen-test-"+uuid.NewString(), "stamen-test-x-"+uuid.NewString()
	a.deleteQueue(queue)
	ch := a.channel()
	if err := ch.ExchangeDeclare(exchange, amqp091.ExchangeDirect, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(queue, "video", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	if err := b.Publish(t.Context(), &celery.TaskMessage{ID: id, Name: "t", Exchange: exchange, RoutingKey: "video"}); err != nil {
		t.Fatal(err)
	}
	if d := a.get(queue); d.CorrelationId != id || d.Exchange != exchange || d.RoutingKey != "video" {
		t.Errorf("got %s via %q/%q, want %s via %q/video", d.CorrelationId, d.Exchange, d.RoutingKey, id, exchange)
	}
	err := b.Publish(t.Context(), &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Exchange: "stamen-no-such-exchange", RoutingKey: "video"})
	if !errors.Is(err, celery.ErrNoRoute) || errors.Is(err, celery.ErrUnavailable) {
		t.Errorf("missing exchange: err %v, want ErrNoRoute only", err)
	}
	// The broker is still usable after the refusal.
	if err := b.Publish(t.Context(), &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Queue: queue}); err != nil {
		t.Errorf("publish after the refusal: %v", err)
	}
}

func TestQueueLengths(t *testing.T) {
	b := newTestBroker(t, "")
	a := newAdmin(t)
	full := "stamen-test-" + uuid.NewString()
	missing := "stamen-missing-" + uuid.NewString()
	a.deleteQueue(full)
	const n = 3
	for range n {
		if err := b.Publish(t.Context(), &celery.TaskMessage{ID: uuid.NewString(), Name: "tasks.add", Queue: full, Declare: workerDecl(t, full, 0)}); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	tests := []struct {
		name   string
		queues []string
		want   map[string]int64
	}{
		{"none", nil, map[string]int64{}},
		{"full", []string{full}, map[string]int64{full: n}},
		{"missing", []string{missing}, map[string]int64{missing: 0}},
		// After the 404 closed the channel the next queue still works.
		{"missing first", []string{missing, full, missing}, map[string]int64{missing: 0, full: n}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.QueueLengths(t.Context(), tt.queues)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lengths (-want +got):\n%s", diff)
			}
		})
	}
	// Looking did not create the missing queue.
	if _, err := a.channel().QueueDeclarePassive(missing, false, false, false, false, nil); err == nil {
		t.Errorf("QueueLengths created %s", missing)
	}
	if !b.Connected() {
		t.Error("a 404 on a throwaway channel cost the connection")
	}
}

// TestPublishRespectsCallerDeadline: an expired context is reported as
// such, not as the broker being down.
func TestPublishRespectsCallerDeadline(t *testing.T) {
	b := newTestBroker(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := b.Publish(ctx, &celery.TaskMessage{ID: uuid.NewString(), Name: "tasks.add", Queue: "stamen-never"})
	if !errors.Is(err, ctx.Err()) || errors.Is(err, celery.ErrUnavailable) {
		t.Errorf("err = %v, want the caller's context.Canceled", err)
	}
}
