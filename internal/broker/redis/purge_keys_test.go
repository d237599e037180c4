package redis

import (
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestPurgeLeavesKeysThatAreNotQueues: POST /api/queues/purge/unacked
// (force=true) must not delete kombu's hash of unacknowledged messages, nor
// a binding set or any other key that is not a list; and a task for such a
// "queue" is refused, not answered 503.
func TestPurgeLeavesKeysThatAreNotQueues(t *testing.T) {
	m := miniredis.RunT(t)
	b, err := New(t.Context(), Config{
		BrokerURL: "redis://" + m.Addr() + "/0", ResultBackendURL: "redis://" + m.Addr() + "/1",
		Logger: testLogger(t), OpTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	m.HSet("unacked", "tag1", `[{"body":"..."},"","celery"]`)
	if _, err := m.SAdd("_kombu.binding.celery", "celery\x06\x16\x06\x16celery"); err != nil {
		t.Fatal(err)
	}
	if err := m.Set("somekey", "value"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"unacked", "_kombu.binding.celery", "somekey"} {
		n, err := b.Purge(t.Context(), q)
		if !errors.Is(err, celery.ErrNotAQueue) {
			t.Errorf("Purge(%q) = %d, %v; want ErrNotAQueue", q, n, err)
		}
		if !m.Exists(q) {
			t.Errorf("Purge(%q) deleted the key", q)
		}
	}
	err = b.Publish(t.Context(), &celery.TaskMessage{ID: "t1", Name: "t", Queue: "unacked"})
	if !errors.Is(err, celery.ErrNotAQueue) {
		t.Errorf("Publish to queue unacked = %v; want ErrNotAQueue", err)
	}
	// A real queue is still purged.
	if err := b.Publish(t.Context(), &celery.TaskMessage{ID: "t2", Name: "t", Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Purge(t.Context(), "q"); err != nil || n != 1 {
		t.Errorf("Purge(q) = %d, %v; want 1", n, err)
	}
}
