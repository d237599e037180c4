package redis

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestPublishLikeCelery publishes the lab's canonical add(2, 3) and reads it
// back with LRANGE: apart from the fresh delivery tag and the body's
// whitespace it is the envelope Celery pushed.
func TestPublishLikeCelery(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	raw := readWire(t, "task-message-redis.json")
	want, err := celery.DecodeEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	msg := &celery.TaskMessage{
		ID:      want.Headers["id"].(string),
		Name:    want.Headers["task"].(string),
		Args:    []any{2.0, 3.0},
		Origin:  want.Headers["origin"].(string),
		ReplyTo: want.Properties.ReplyTo,
	}
	if err := b.Publish(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	items, err := rdb.LRange(t.Context(), "celery", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 {
		t.Fatalf("LRANGE celery: %d items, want 1", len(items))
	}
	got, err := celery.DecodeEnvelope([]byte(items[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uuid.Parse(got.Properties.DeliveryTag); err != nil {
		t.Errorf("delivery_tag %q: %v", got.Properties.DeliveryTag, err)
	}
	strip := func(v any) any {
		m := v.(map[string]any)
		delete(m["properties"].(map[string]any), "delivery_tag")
		delete(m, "body")
		return m
	}
	if diff := cmp.Diff(strip(generic(t, raw)), strip(generic(t, []byte(items[0])))); diff != "" {
		t.Errorf("envelope (-celery +stamen):\n%s", diff)
	}
	wantBody, _ := want.BodyBytes()
	gotBody, err := got.BodyBytes()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(generic(t, wantBody), generic(t, gotBody)); diff != "" {
		t.Errorf("body (-celery +stamen):\n%s", diff)
	}
}

func TestPublishPriorityAndQueues(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	tests := []struct {
		queue    string
		priority int
		key      string
	}{
		{"", 0, "celery"},
		{"", 2, "celery"},
		{"", 5, "celery\x06\x163"},
		{"", 7, "celery\x06\x166"},
		{"", 9, "celery\x06\x169"},
		{"hipri", 0, "hipri"},
		{"hipri", 4, "hipri\x06\x163"},
		// Above kombu's top step: its sub-queue, the property as given.
		{"", 200, "celery\x06\x169"},
	}
	for i, tt := range tests {
		id := fmt.Sprintf("id-%d", i)
		if err := b.Publish(t.Context(), &celery.TaskMessage{ID: id, Name: "t", Queue: tt.queue, Priority: tt.priority}); err != nil {
			t.Fatal(err)
		}
		// The message is the newest on its key (LPUSH puts it at the head).
		item, err := rdb.LIndex(t.Context(), tt.key, 0).Result()
		if err != nil {
			t.Fatalf("%s: LINDEX %q: %v", id, tt.key, err)
		}
		env, err := celery.DecodeEnvelope([]byte(item))
		if err != nil {
			t.Fatal(err)
		}
		if env.Headers["id"] != id || env.Properties.Priority != tt.priority {
			t.Errorf("%q head is %v priority %d, want %s priority %d", tt.key, env.Headers["id"], env.Properties.Priority, id, tt.priority)
		}
		wantRK := tt.queue
		if wantRK == "" {
			wantRK = "celery"
		}
		if env.Properties.DeliveryInfo != (celery.DeliveryInfo{Exchange: "", RoutingKey: wantRK}) {
			t.Errorf("%s: delivery_info %+v", id, env.Properties.DeliveryInfo)
		}
	}

	got, err := b.QueueLengths(t.Context(), []string{"celery", "hipri", "empty", "celery"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"celery": 6, "hipri": 2, "empty": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("QueueLengths (-want +got):\n%s", diff)
	}
	if got, err := b.QueueLengths(t.Context(), nil); err != nil || len(got) != 0 {
		t.Errorf("QueueLengths(nil) = %v, %v", got, err)
	}
}

func TestPublishRejectsIncompleteMessage(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	if err := b.Publish(t.Context(), &celery.TaskMessage{Name: "t"}); err == nil {
		t.Error("Publish without an id succeeded")
	}
	if err := b.Publish(t.Context(), &celery.TaskMessage{ID: "x", Name: "t", Args: []any{func() {}}}); err == nil {
		t.Error("Publish of an unserializable argument succeeded")
	}
	if n, _ := rdb.DBSize(t.Context()).Result(); n != 0 {
		t.Errorf("%d keys after failed publishes", n)
	}
}

// TestPublishThroughExchange: a message given an exchange and routing key
// goes where kombu routes it, to the queues bound with that key in the
// exchange's binding set; a route to no queue is refused, not dropped.
func TestPublishThroughExchange(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	sep := celery.PrioritySep
	// What a worker consuming Queue("hq", Exchange("media"), routing_key="video")
	// (and "archive" bound the same way, "aq" with another key) writes.
	if err := rdb.SAdd(t.Context(), "_kombu.binding.media",
		"video"+sep+sep+"hq", "video"+sep+sep+"archive", "audio"+sep+sep+"aq").Err(); err != nil {
		t.Fatal(err)
	}
	msg := &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Exchange: "media", RoutingKey: "video", Priority: 7}
	if err := b.Publish(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int64{"hq\x06\x166": 1, "archive\x06\x166": 1, "aq": 0, "aq\x06\x166": 0, "celery": 0, "celery\x06\x166": 0} {
		if n := rdb.LLen(t.Context(), key).Val(); n != want {
			t.Errorf("LLEN %q = %d, want %d", key, n, want)
		}
	}
	item, err := rdb.LIndex(t.Context(), "hq\x06\x166", 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	env, err := celery.DecodeEnvelope([]byte(item))
	if err != nil {
		t.Fatal(err)
	}
	if want := (celery.DeliveryInfo{Exchange: "media", RoutingKey: "video"}); env.Properties.DeliveryInfo != want || env.Headers["id"] != msg.ID {
		t.Errorf("hq holds %v with delivery_info %+v, want %s with %+v", env.Headers["id"], env.Properties.DeliveryInfo, msg.ID, want)
	}

	for _, bad := range []*celery.TaskMessage{
		{ID: uuid.NewString(), Name: "t", Exchange: "media", RoutingKey: "nothing-bound"},
		{ID: uuid.NewString(), Name: "t", Exchange: "no-such-exchange", RoutingKey: "video"},
	} {
		if err := b.Publish(t.Context(), bad); !errors.Is(err, celery.ErrNoRoute) {
			t.Errorf("exchange %q key %q: err %v, want ErrNoRoute", bad.Exchange, bad.RoutingKey, err)
		}
	}
	if n := rdb.DBSize(t.Context()).Val(); n != 3 {
		t.Errorf("%d keys after the refused publishes, want 3 (binding set, hq, archive)", n)
	}

	// One bound queue's list is a key of another type: the publish is
	// refused naming that queue, and no other queue gets the message.
	if err := rdb.Del(t.Context(), "archive\x06\x166").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(t.Context(), "archive\x06\x166", "not a list", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err = b.Publish(t.Context(), &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Exchange: "media", RoutingKey: "video", Priority: 7})
	if !errors.Is(err, celery.ErrNotAQueue) || !strings.Contains(err.Error(), `queue "archive"`) {
		t.Errorf("a fan-out to a key that is not a list: %v, want ErrNotAQueue naming archive", err)
	}
	if n := rdb.LLen(t.Context(), "hq\x06\x166").Val(); n != 1 {
		t.Errorf("hq holds %d messages after the refused fan-out, want still 1", n)
	}
}
