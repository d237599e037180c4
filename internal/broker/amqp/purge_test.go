package amqp

import (
	"testing"

	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestPurge empties a queue with queue.purge, answers 0 for a missing one
// without creating it, and keeps the connection.
func TestPurge(t *testing.T) {
	b := newTestBroker(t, "")
	a := newAdmin(t)
	full := "stamen-purge-" + uuid.NewString()
	missing := "stamen-missing-" + uuid.NewString()
	t.Cleanup(func() { a.deleteQueue(full) })
	for range 5 {
		if err := b.Publish(t.Context(), &celery.TaskMessage{ID: uuid.NewString(), Name: "tasks.add", Queue: full, Declare: workerDecl(t, full, 10), Priority: 9}); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	if n, err := b.Purge(t.Context(), missing); err != nil || n != 0 {
		t.Errorf("Purge(missing) = %d, %v; want 0", n, err)
	}
	if n, err := b.Purge(t.Context(), full); err != nil || n != 5 {
		t.Errorf("Purge = %d, %v; want 5", n, err)
	}
	got, err := b.QueueLengths(t.Context(), []string{full})
	if err != nil || got[full] != 0 {
		t.Errorf("after purge: %v, %v", got, err)
	}
	if _, err := a.channel().QueueDeclarePassive(missing, false, false, false, false, nil); err == nil {
		t.Errorf("Purge created %s", missing)
	}
	if !b.Connected() {
		t.Error("a 404 on a throwaway channel cost the connection")
	}
}
