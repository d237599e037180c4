package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// readyDB is the Redis database of TestReadyzFollowsTheBroker.
const readyDB = 15

// readyz is one /readyz answer: its status and what it says is missing.
func readyz(t *testing.T, base string) (int, map[string]string) {
	t.Helper()
	code, body, _ := get(t, base+"/readyz")
	var v struct {
		Status   string            `json:"status"`
		Error    string            `json:"error"`
		NotReady map[string]string `json:"not_ready"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/readyz answered %d %q: not JSON: %v", code, body, err)
	}
	if code == 503 && (v.Error == "" || len(v.NotReady) == 0) {
		t.Fatalf("/readyz's 503 names nothing: %s", body)
	}
	return code, v.NotReady
}

// TestReadyzFollowsTheBroker: with the real Redis behind the project's
// TCP proxy and a bbolt store, /readyz answers 200 once the event
// subscription is up, 503 naming the broker (and not the store) while the
// proxy is cut, for longer than the reconnect backoff grows to, and 200
// again within 5 s of the broker coming back. /healthcheck answers 200
// throughout: it is liveness, not readiness.
func TestReadyzFollowsTheBroker(t *testing.T) {
	testcluster.RequireRedis(t)
	proxy := testcluster.StartProxy(t, testcluster.RedisAddr())
	a, err := New(context.Background(), Config{
		BrokerURL: fmt.Sprintf("redis://%s/%d", proxy.Addr(), readyDB),
		DBPath:    filepath.Join(t.TempDir(), "stamen.db"),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })

	testcluster.Eventually(t, 10*time.Second, "/readyz answers 200 once subscribed", func() bool {
		code, _ := readyz(t, srv.URL)
		return code == 200
	})

	proxy.Cut()
	var missing map[string]string
	testcluster.Eventually(t, 5*time.Second, "/readyz answers 503 while the broker is cut", func() bool {
		var code int
		code, missing = readyz(t, srv.URL)
		return code == 503
	})
	if _, ok := missing["broker"]; !ok {
		t.Fatalf("/readyz's 503 does not name the broker: %v", missing)
	}
	if _, ok := missing["store"]; ok {
		t.Fatalf("/readyz names the store, which answers: %v", missing)
	}
	if code, body, _ := get(t, srv.URL+"/healthcheck"); code != 200 || body != "OK" {
		t.Fatalf("/healthcheck answered %d %q while the broker is cut: it is liveness", code, body)
	}
	// Long enough for the reconnect backoff to reach its longest wait.
	outage := time.Now().Add(5 * time.Second)
	for time.Now().Before(outage) {
		if code, _ := readyz(t, srv.URL); code != 503 {
			t.Fatalf("/readyz answered %d while the broker is cut", code)
		}
		time.Sleep(250 * time.Millisecond)
	}

	proxy.Start()
	back := time.Now()
	testcluster.Eventually(t, 5*time.Second, "/readyz answers 200 within 5 s of the broker coming back", func() bool {
		code, _ := readyz(t, srv.URL)
		return code == 200
	})
	t.Logf("ready again %s after the broker came back", time.Since(back).Round(time.Millisecond))
}

// TestReadyzNamesTheStore: a store whose file is gone (a volume
// unmounted from under the process) answers /readyz 503 naming the store.
func TestReadyzNamesTheStore(t *testing.T) {
	dir := t.TempDir()
	srv := newEmbeddedWith(t, Config{DBPath: filepath.Join(dir, "stamen.db")})
	testcluster.Eventually(t, 10*time.Second, "/readyz answers 200 on the embedded broker", func() bool {
		code, _ := readyz(t, srv.URL)
		return code == 200
	})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	code, missing := readyz(t, srv.URL)
	if _, ok := missing["store"]; code != 503 || !ok {
		t.Fatalf("/readyz answered %d %v with the store's file gone, want 503 naming the store", code, missing)
	}
}

// TestReadyzFollowsPostgres: a replica whose PostgreSQL (the fleet's
// shared history) is cut by the project's TCP proxy answers /readyz 503
// naming the store, and not the broker, and 200 again once the database
// answers: a load balancer sends it no traffic meanwhile.
func TestReadyzFollowsPostgres(t *testing.T) {
	proxy := testcluster.StartProxy(t, testcluster.PostgresAddr)
	db := testcluster.PostgresDB(t)
	srv := newEmbeddedWith(t, Config{DBPath: testcluster.PostgresURL(proxy.Addr(), db), DBTimeout: 500 * time.Millisecond})
	testcluster.Eventually(t, 10*time.Second, "/readyz answers 200 with PostgreSQL", func() bool {
		code, _ := readyz(t, srv.URL)
		return code == 200
	})
	proxy.Cut()
	var missing map[string]string
	testcluster.Eventually(t, 5*time.Second, "/readyz answers 503 while PostgreSQL is cut", func() bool {
		var code int
		code, missing = readyz(t, srv.URL)
		return code == 503
	})
	if _, ok := missing["store"]; !ok {
		t.Fatalf("/readyz's 503 does not name the store: %v", missing)
	}
	if strings.Contains(missing["store"], db) || strings.Contains(missing["store"], proxy.Addr()) {
		t.Fatalf("/readyz, which answers anyone, names the database or its address: %v", missing)
	}
	if _, ok := missing["broker"]; ok {
		t.Fatalf("/readyz names the broker, which is up: %v", missing)
	}
	proxy.Start()
	testcluster.Eventually(t, 5*time.Second, "/readyz answers 200 once PostgreSQL answers again", func() bool {
		code, _ := readyz(t, srv.URL)
		return code == 200
	})
}

// TestReadyzFollowsRabbitMQ: /readyz follows the event consumer on
// RabbitMQ as on Redis: 503 naming the broker while the project's TCP
// proxy cuts it, 200 again within 5 s of it coming back after an outage
// of a few seconds (the reconnect backoff, up to 5 s on RabbitMQ, adds
// to a longer one).
func TestReadyzFollowsRabbitMQ(t *testing.T) {
	testcluster.RequireRabbitMQ(t)
	proxy := testcluster.StartProxy(t, "127.0.0.1:5672")
	srv := newEmbeddedWith(t, Config{
		BrokerURL: fmt.Sprintf("amqp://guest:guest@%s/%s", proxy.Addr(), url.PathEscape(testcluster.Vhost)),
	})
	testcluster.Eventually(t, 10*time.Second, "/readyz answers 200 once consuming events", func() bool {
		code, _ := readyz(t, srv.URL)
		return code == 200
	})
	proxy.Cut()
	testcluster.Eventually(t, 10*time.Second, "/readyz answers 503 naming the broker while RabbitMQ is cut", func() bool {
		code, missing := readyz(t, srv.URL)
		_, broker := missing["broker"]
		return code == 503 && broker
	})
	// An outage, not a blip: the reconnect backoff grows meanwhile.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if code, _ := readyz(t, srv.URL); code != 503 {
			t.Fatalf("/readyz answered %d while RabbitMQ is cut", code)
		}
	}
	proxy.Start()
	testcluster.Eventually(t, 5*time.Second, "/readyz answers 200 within 5 s of RabbitMQ coming back", func() bool {
		code, _ := readyz(t, srv.URL)
		return code == 200
	})
}
