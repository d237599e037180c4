package celery

import (
	"encoding/json"
	"testing"
	"time"
)

// The want column was computed with kombu 5.6.2's own calculate_routing_key
// (the Celery 5.6 release testcluster installs):
//
//	PYTHONPATH=<CeleryCache>/5.6/root/usr/lib/python3/dist-packages python3 -c \
//	  'from kombu.transport.native_delayed_delivery import calculate_routing_key as c; print(c(10, "celery"))'
func TestDelayedRoutingKeyMatchesKombu(t *testing.T) {
	for _, tc := range []struct {
		countdown int64
		key, want string
	}{
		{1, "celery", "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.celery"},
		{10, "celery", "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.1.0.celery"},
		{5, "a.b", "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.1.a.b"},
		{3600, "#.x", "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.1.1.0.0.0.0.1.0.0.0.0.#.x"},
		{268435455, "q", "1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.q"},
		{604800, "tasks.default", "0.0.0.0.0.0.0.0.1.0.0.1.0.0.1.1.1.0.1.0.1.0.0.0.0.0.0.0.tasks.default"},
	} {
		got, ok := DelayedRoutingKey(tc.countdown, tc.key)
		if !ok || got != tc.want {
			t.Errorf("DelayedRoutingKey(%d, %q) = %q, %v; want %q", tc.countdown, tc.key, got, ok, tc.want)
		}
	}
}

func TestDelayedRoutingKeyOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		countdown int64
		key       string
	}{
		{0, "celery"}, {-5, "celery"}, {1 << 28, "celery"}, {10, ""},
	} {
		if got, ok := DelayedRoutingKey(tc.countdown, tc.key); ok {
			t.Errorf("DelayedRoutingKey(%d, %q) = %q, want not ok", tc.countdown, tc.key, got)
		}
	}
}

func TestDelayedRoute(t *testing.T) {
	// An active_queues entry as a Celery 5.6 worker with
	// task_default_queue_type="quorum" and a topic exchange reports it.
	const quorumTopic = `{"name": "celery", "exchange": {"name": "celery", "type": "topic", "durable": true},
		"routing_key": "celery", "queue_arguments": {"x-queue-type": "quorum"}, "durable": true}`
	decode := func(s string) *QueueDeclaration {
		q, ok := QueueDeclarations(json.RawMessage("[" + s + "]"))["celery"]
		if !ok {
			t.Fatalf("no queue celery in %s", s)
		}
		return q
	}
	q := decode(quorumTopic)
	const ten, eleven = "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.1.0.celery",
		"0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.1.1.celery"
	for _, tc := range []struct {
		countdown time.Duration
		want      string
	}{
		// A countdown of 10 s a few milliseconds after the request.
		{10*time.Second - 3*time.Millisecond, ten},
		{10 * time.Second, ten},
		// The worker holds the rest, as it does Celery's.
		{10*time.Second + 700*time.Millisecond, ten},
		{10*time.Second + 800*time.Millisecond, eleven},
	} {
		ex, key, ok := DelayedRoute(q, tc.countdown)
		if !ok || ex != "celery_delayed_27" || key != tc.want {
			t.Errorf("DelayedRoute(quorum topic, %s) = %q, %q, %v; want %q", tc.countdown, ex, key, ok, tc.want)
		}
	}
	for name, tc := range map[string]struct {
		q         *QueueDeclaration
		countdown time.Duration
	}{
		"classic queue":   {decode(`{"name": "celery", "exchange": {"name": "celery", "type": "topic"}, "routing_key": "celery", "queue_arguments": null}`), 10 * time.Second},
		"direct exchange": {decode(`{"name": "celery", "exchange": {"name": "celery", "type": "direct"}, "routing_key": "celery", "queue_arguments": {"x-queue-type": "quorum"}}`), 10 * time.Second},
		"under a second":  {q, 700 * time.Millisecond},
		"past eta":        {q, -time.Hour},
		"beyond 2^28 s":   {q, (1 << 28) * time.Second},
	} {
		if ex, key, ok := DelayedRoute(tc.q, tc.countdown); ok {
			t.Errorf("%s: DelayedRoute = %q, %q; want a direct publish", name, ex, key)
		}
	}
}
