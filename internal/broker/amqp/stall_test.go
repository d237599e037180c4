package amqp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestStalledBrokerBoundsWaitingCalls: while RabbitMQ stops answering
// without an error (a network path that drops packets: the connection
// stays open until the heartbeat gives it up, up to 30 s later), every
// call still answers within the op timeout, and once maxUnanswered calls
// are stuck the next ones are refused at once instead of each leaving a
// goroutine behind, however many arrive. When the broker answers again
// the stuck calls finish and calls work again.
func TestStalledBrokerBoundsWaitingCalls(t *testing.T) {
	needRabbit(t)
	const opTimeout = 100 * time.Millisecond
	proxy := testcluster.StartProxy(t, "127.0.0.1:5672")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := New(ctx, Config{
		BrokerURL: fmt.Sprintf("amqp://guest:guest@%s/%s", proxy.Addr(), url.PathEscape(testVhost)),
		Logger:    testLogger(t), OpTimeout: opTimeout,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	lengths := func() error {
		_, err := b.QueueLengths(t.Context(), []string{"celery"})
		return err
	}
	unanswered := func() int32 {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.sess.unanswered.Load()
	}
	if err := lengths(); err != nil {
		t.Fatalf("before the stall: %v", err)
	}
	before := runtime.NumGoroutine()

	proxy.Stall()
	const calls = 3 * maxUnanswered
	for i := range calls {
		start := time.Now()
		err := lengths()
		if took := time.Since(start); took > 10*opTimeout {
			t.Errorf("call %d took %s with a %s op timeout", i, took, opTimeout)
		}
		if !errors.Is(err, celery.ErrUnavailable) {
			t.Fatalf("call %d to a stalled broker: %v, want ErrUnavailable", i, err)
		}
		if refused := strings.Contains(err.Error(), "has not answered"); refused != (i >= maxUnanswered) {
			t.Errorf("call %d: refused without trying = %v (%v), want %v", i, refused, err, i >= maxUnanswered)
		}
	}
	if n := unanswered(); n != maxUnanswered {
		t.Errorf("%d calls stuck, want %d", n, maxUnanswered)
	}
	if grown := runtime.NumGoroutine() - before; grown > maxUnanswered+maxUnanswered/2 {
		t.Errorf("%d more goroutines after %d calls to a stalled broker, want at most about %d", grown, calls, maxUnanswered)
	}

	proxy.Resume()
	eventually(t, 10*time.Second, "the stuck calls finished", func() bool { return unanswered() == 0 })
	if err := lengths(); err != nil {
		t.Errorf("after the stall: %v", err)
	}
}
