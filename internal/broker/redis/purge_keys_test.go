package redis

import (
	"errors"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestQueuesThatAreNotLists: POST /api/queues/purge/unacked (force=true)
// must not delete kombu's hash of unacknowledged messages, nor a binding
// set or any other key that is not a list, and a task for such a "queue"
// is refused, not answered 503. kombu's own keys are refused even while
// absent: a list made there breaks the workers' next write to them.
func TestQueuesThatAreNotLists(t *testing.T) {
	for _, prefix := range []string{"", "myapp:"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			needRedis(t)
			rdb := flushBroker(t)
			b, err := New(t.Context(), Config{
				BrokerURL: brokerURL(), ResultBackendURL: resultURL(), Logger: testLogger(t), OpTimeout: 2 * time.Second,
				Transport: TransportOptions{GlobalKeyPrefix: prefix},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			ctx := t.Context()
			for _, err := range []error{
				rdb.HSet(ctx, prefix+"unacked", "tag1", `[{"body":"..."},"","celery"]`).Err(),
				rdb.SAdd(ctx, prefix+"_kombu.binding.celery", "celery\x06\x16\x06\x16celery").Err(),
				rdb.Set(ctx, prefix+"somekey", "value", 0).Err(),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, q := range []string{"unacked", "_kombu.binding.celery", "somekey", "unacked_index", "unacked_mutex"} {
				if n, err := b.Purge(ctx, q); !errors.Is(err, celery.ErrNotAQueue) {
					t.Errorf("Purge(%q) = %d, %v; want ErrNotAQueue", q, n, err)
				}
				if err := b.Publish(ctx, &celery.TaskMessage{ID: "t-" + q, Name: "t", Queue: q}); !errors.Is(err, celery.ErrNotAQueue) {
					t.Errorf("Publish to queue %q = %v; want ErrNotAQueue", q, err)
				}
			}
			for key, want := range map[string]string{
				"unacked": "hash", "_kombu.binding.celery": "set", "somekey": "string", "unacked_index": "none", "unacked_mutex": "none",
			} {
				if typ, err := rdb.Type(ctx, prefix+key).Result(); err != nil || typ != want {
					t.Errorf("%s holds a %s (%v), want %s", prefix+key, typ, err, want)
				}
			}
			// A queue is still purged.
			if err := b.Publish(ctx, &celery.TaskMessage{ID: "t2", Name: "t", Queue: "q"}); err != nil {
				t.Fatal(err)
			}
			if n, err := b.Purge(ctx, "q"); err != nil || n != 1 {
				t.Errorf("Purge(q) = %d, %v; want 1", n, err)
			}
		})
	}
}
