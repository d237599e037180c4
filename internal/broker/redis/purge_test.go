package redis

import (
	"errors"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestPurge empties a queue's list and its priority lists, under
// global_keyprefix too, and leaves other queues alone.
func TestPurge(t *testing.T) {
	for _, prefix := range []string{"", "myapp:"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			b, rdb := prefixedBroker(t, prefix)
			for i, prio := range []int{0, 0, 3, 6, 9, 9, 9} {
				for _, q := range []string{"victim", "bystander"} {
					msg := &celery.TaskMessage{ID: fmt.Sprintf("%s-%d", q, i), Name: "t", Queue: q, Priority: prio}
					if err := b.Publish(t.Context(), msg); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The keys kombu would use hold the messages.
			if n, err := rdb.LLen(t.Context(), prefix+"victim\x06\x169").Result(); err != nil || n != 3 {
				t.Fatalf("LLEN %q = %d, %v; want 3", prefix+"victim\x06\x169", n, err)
			}
			n, err := b.Purge(t.Context(), "victim")
			if err != nil || n != 7 {
				t.Fatalf("Purge = %d, %v; want 7", n, err)
			}
			lengths, err := b.QueueLengths(t.Context(), []string{"victim", "bystander"})
			if err != nil {
				t.Fatal(err)
			}
			if lengths["victim"] != 0 || lengths["bystander"] != 7 {
				t.Errorf("after purge: %v, want victim 0 and bystander 7", lengths)
			}
			if n, err := b.Purge(t.Context(), "victim"); err != nil || n != 0 {
				t.Errorf("second Purge = %d, %v; want 0", n, err)
			}
		})
	}
}

// TestQueuesThatAreNotLists: POST /api/queues/purge/unacked (force=true)
// must not delete kombu's hash of unacknowledged messages, nor a binding
// set or any other key that is not a list, and a task for such a "queue"
// is refused, not answered 503. kombu's own keys are refused even while
// absent: a list made there breaks the workers' next write to them.
func TestQueuesThatAreNotLists(t *testing.T) {
	for _, prefix := range []string{"", "myapp:"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			b, rdb := prefixedBroker(t, prefix)
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

// prefixedBroker is a Broker on the test's emptied broker DB, under
// global_keyprefix prefix, and a client of that DB.
func prefixedBroker(t *testing.T, prefix string) (*Broker, *goredis.Client) {
	t.Helper()
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
	return b, rdb
}
