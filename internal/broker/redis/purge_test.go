package redis

import (
	"fmt"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestPurge empties a queue's list and its priority lists, under
// global_keyprefix too, and leaves other queues alone.
func TestPurge(t *testing.T) {
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
