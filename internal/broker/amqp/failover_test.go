package amqp

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

func TestNormalizeURLs(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		dial     []string
		redacted string
		wantErr  string
	}{
		{name: "one", in: "amqp://u:p@h//", dial: []string{"amqp://u:p@h//"}, redacted: "amqp://u:********@h//"},
		{
			name: "failover list", in: " amqp://u:p1@h1:5672/v ; pyamqp://u:p2@h2/v;",
			dial:     []string{"amqp://u:p1@h1:5672/v", "amqp://u:p2@h2/v"},
			redacted: "amqp://u:********@h1:5672/v;amqp://u:********@h2/v",
		},
		{name: "empty", in: " ; ", wantErr: "empty"},
		{name: "one bad", in: "amqp://u:p@h//;redis://:p2@h/0", wantErr: "scheme must be amqp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dial, shown, err := normalizeURLs(tt.in, false)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), ":p2@") {
					t.Errorf("error leaks a password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(dial, " ") != strings.Join(tt.dial, " ") || strings.Join(shown, ";") != tt.redacted {
				t.Errorf("got %q, %q; want %q, %q", dial, shown, tt.dial, tt.redacted)
			}
		})
	}
}

// remotePort is the port the Broker's current connection goes to; 0 when
// it has none.
func remotePort(b *Broker) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess == nil || !b.sess.alive() {
		return 0
	}
	if a, ok := b.sess.conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// TestFailoverURLs: a ';'-separated list of broker URLs fails over in
// order, as Celery's does: a dead first URL is skipped at start, and
// losing the URL in use moves to the next live one.
func TestFailoverURLs(t *testing.T) {
	needRabbit(t)
	vhost := url.PathEscape(testVhost)
	proxyURL := func(p *testcluster.Proxy) string {
		return fmt.Sprintf("amqp://guest:guest@%s/%s", p.Addr(), vhost)
	}
	newBroker := func(t *testing.T, urls string) *Broker {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		b, err := New(ctx, Config{BrokerURL: urls, Logger: testLogger(t), OpTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		if strings.Contains(b.RedactedURL(), "guest:guest") || strings.Count(b.RedactedURL(), "********") != 2 {
			t.Errorf("RedactedURL %q", b.RedactedURL())
		}
		return b
	}
	works := func(t *testing.T, b *Broker) {
		t.Helper()
		if _, err := b.QueueLengths(t.Context(), []string{"celery"}); err != nil {
			t.Errorf("a broker call: %v", err)
		}
	}

	t.Run("dead first", func(t *testing.T) {
		live := testcluster.StartProxy(t, "127.0.0.1:5672")
		dead := fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/%s", testcluster.FreePort(t), vhost)
		b := newBroker(t, dead+";"+proxyURL(live))
		if !b.Connected() || remotePort(b) != live.Port {
			t.Fatalf("after New: connected %v to port %d, want the live URL's %d", b.Connected(), remotePort(b), live.Port)
		}
		works(t, b)
	})

	t.Run("losing the first of two live URLs", func(t *testing.T) {
		first := testcluster.StartProxy(t, "127.0.0.1:5672")
		second := testcluster.StartProxy(t, "127.0.0.1:5672")
		b := newBroker(t, proxyURL(first)+";"+proxyURL(second))
		if remotePort(b) != first.Port {
			t.Fatalf("connected to port %d, want the first URL's %d", remotePort(b), first.Port)
		}
		works(t, b)
		first.Cut()
		eventually(t, 15*time.Second, "the Broker on the second URL", func() bool { return remotePort(b) == second.Port })
		if b.Reconnects() < 1 {
			t.Errorf("Reconnects() = %d after failing over", b.Reconnects())
		}
		works(t, b)
	})
}
