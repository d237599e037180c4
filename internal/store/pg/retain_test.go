package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestRetainBoundedWhenTheServerFreezes: the retention runs from a loop
// whose context never ends; a server that stops answering (the proxy
// stalls, connections stay open) must fail it within the write timeout,
// not hold it, and the connection it took, for ever. (Its first
// statement, or pgxpool's ping of a connection idle over a second, had no
// deadline.)
func TestRetainBoundedWhenTheServerFreezes(t *testing.T) {
	db := testcluster.PostgresDB(t)
	proxy := testcluster.StartProxy(t, testcluster.PostgresAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const timeout = time.Second
	s, err := pg.Open(ctx, pg.Config{URL: testcluster.PostgresURL(proxy.Addr(), db), WriteTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := pg.Retention{MaxTasks: 10}
	if _, err := s.Retain(context.Background(), r, time.Now()); err != nil {
		t.Fatal(err)
	}
	proxy.Stall()
	defer proxy.Resume()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := s.Retain(context.Background(), r, time.Now())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("Retain succeeded against a frozen server")
		}
		if took := time.Since(start); took > 5*timeout {
			t.Errorf("Retain took %s against a frozen server, want about %s", took, timeout)
		}
	case <-time.After(30 * timeout):
		t.Fatalf("Retain still waiting for a frozen server after %s", 30*timeout)
	}
}
