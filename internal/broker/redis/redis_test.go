package redis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// The tests use a real Redis: their test process's own (testcluster), where
// database 12 is the broker's and database 13 the result backend's.
const (
	brokerDB = 12
	resultDB = 13
	wireDir  = "../../../testdata/celery-wire"
)

func brokerURL() string { return testcluster.RedisURL(brokerDB) }
func resultURL() string { return testcluster.RedisURL(resultDB) }

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// needRedis starts the test process's Redis, once. Like every test that
// needs a server, it skips under -short and when Redis is missing, except
// with CI=true or STAMEN_INTEGRATION=1 where a missing Redis fails the test.
func needRedis(t *testing.T) {
	t.Helper()
	testcluster.RequireRedis(t)
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// admin is a plain client on db for arranging and checking state.
func admin(t *testing.T, db int) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: testcluster.RedisAddr(), DB: db, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// flushBroker empties the broker db now and after the test.
func flushBroker(t *testing.T) *goredis.Client {
	t.Helper()
	c := admin(t, brokerDB)
	flush := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.FlushDB(ctx).Err(); err != nil {
			t.Fatalf("FLUSHDB %d: %v", brokerDB, err)
		}
	}
	flush()
	t.Cleanup(flush)
	return c
}

// newTestBroker returns a Broker on the test databases, closed after the
// test.
func newTestBroker(t *testing.T) *Broker {
	t.Helper()
	needRedis(t)
	b, err := New(t.Context(), Config{
		BrokerURL: brokerURL(), ResultBackendURL: resultURL(), Logger: testLogger(t), OpTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func readWire(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(wireDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// generic decodes JSON for comparison, numbers as json.Number.
func generic(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %.80s: %v", data, err)
	}
	return v
}

func TestOptions(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		url      string
		addr     string
		db       int
		user     string
		password string
		tls      bool
		insecure bool
	}{
		{"redis://127.0.0.1:6379/12", "127.0.0.1:6379", 12, "", "", false, false},
		{"redis://localhost", "localhost:6379", 0, "", "", false, false},
		{"redis://:pw@h:1/3", "h:1", 3, "", "pw", false, false},
		{"redis://u:pw@h/4?visibility_timeout=3600", "h:6379", 4, "u", "pw", false, false},
		{"rediss://h:6380/0", "h:6380", 0, "", "", true, false},
		{"rediss://h:6380/0?ssl_cert_reqs=required", "h:6380", 0, "", "", true, false},
		{"rediss://h:6380/0?ssl_cert_reqs=CERT_NONE", "h:6380", 0, "", "", true, true},
	}
	for _, tt := range tests {
		opt, err := options(tt.url, nil, 3*time.Second, log)
		if err != nil {
			t.Errorf("options(%q): %v", tt.url, err)
			continue
		}
		got := []any{opt.Addr, opt.DB, opt.Username, opt.Password, opt.TLSConfig != nil, opt.TLSConfig != nil && opt.TLSConfig.InsecureSkipVerify}
		want := []any{tt.addr, tt.db, tt.user, tt.password, tt.tls, tt.insecure}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("options(%q) (-want +got):\n%s", tt.url, diff)
		}
		if opt.ReadTimeout != 3*time.Second || opt.DialTimeout != 3*time.Second || !opt.ContextTimeoutEnabled || opt.MaxRetries != -1 {
			t.Errorf("options(%q): timeouts not bounded: %+v", tt.url, opt)
		}
	}

	for _, bad := range []string{
		"http://h/0",
		"redis://h/notadb",
		"redis://h/1/2",
		"rediss://h/0?ssl_cert_reqs=maybe",
		"rediss://h/0?ssl_ca_certs=/nonexistent/ca.pem",
		"redis://:s3cret@host:port:bad/0",
		"redis://:s3cret@[::1/0",
		// An unescaped '/', '#' or '?' in the password ends the host
		// early: url.Parse then quotes the password's start as the port.
		"redis://:s3cret/x@h:6379/0",
		"redis://:s3cret#x@h:6379/0",
		"redis://u:s3cret?x@h:6379/0",
	} {
		_, err := options(bad, nil, time.Second, log)
		if err == nil {
			t.Errorf("options(%q) succeeded", bad)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("options(%q) error reveals the password: %v", bad, err)
		}
	}
}

// TestNewRejectsRefusal: a server that answers with an error (here: no
// such database) will not change its mind, so New fails.
func TestNewRejectsRefusal(t *testing.T) {
	needRedis(t)
	_, err := New(t.Context(), Config{BrokerURL: "redis://:s3cret-pw@" + testcluster.RedisAddr() + "/999", OpTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("New with a database the server refuses succeeded")
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("error reveals the password: %v", err)
	}
	_, err = New(t.Context(), Config{BrokerURL: brokerURL(), ResultBackendURL: testcluster.RedisURL(999), OpTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("New with a result backend database the server refuses succeeded")
	}
}

// TestUnavailable points the broker at a port where nothing listens: New
// succeeds (the server may come up later), every call fails fast with
// ErrUnavailable and never shows the password.
func TestUnavailable(t *testing.T) {
	b, err := New(t.Context(), Config{
		BrokerURL: "redis://user:s3cret@127.0.0.1:1/0", ResultBackendURL: "redis://:s3cret@127.0.0.1:1/1",
		Logger: testLogger(t), OpTimeout: time.Second,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer b.Close()
	if got := b.RedactedURL(); got != "redis://user:********@127.0.0.1:1/0" {
		t.Errorf("RedactedURL() = %s", got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	calls := map[string]func() error{
		"Publish": func() error { return b.Publish(ctx, &celery.TaskMessage{ID: "i", Name: "t"}) },
		"QueueLengths": func() error {
			_, err := b.QueueLengths(ctx, []string{"celery"})
			return err
		},
		"Broadcast": func() error {
			_, err := b.Broadcast(ctx, celery.ControlCommand{Method: "ping", Reply: true})
			return err
		},
		"Broadcast without reply": func() error {
			_, err := b.Broadcast(ctx, celery.ControlCommand{Method: "enable_events"})
			return err
		},
		"Result": func() error {
			_, err := b.Result(ctx, "i")
			return err
		},
		"WaitResult": func() error {
			_, err := b.WaitResult(ctx, "i")
			return err
		},
		"Abort": func() error { return b.Abort(ctx, "i") },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		if !errors.Is(err, celery.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: error %v, want ErrUnavailable only", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error reveals the password: %v", name, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s took %v to fail", name, d)
		}
	}

	// ConsumeEvents keeps retrying until its context ends.
	ectx, ecancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer ecancel()
	err = b.ConsumeEvents(ectx, func([]celery.Event) { t.Error("events from nowhere") })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ConsumeEvents: %v, want DeadlineExceeded", err)
	}
}

// TestCallerDeadline checks that an expired caller context is reported as
// such, not as an unavailable broker.
func TestCallerDeadline(t *testing.T) {
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err := b.Result(ctx, "x")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, celery.ErrUnavailable) {
		t.Errorf("Result with an expired context: %v, want DeadlineExceeded", err)
	}
	err = b.Publish(ctx, &celery.TaskMessage{ID: "i", Name: "t"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Publish with an expired context: %v, want DeadlineExceeded", err)
	}
}

func TestClose(t *testing.T) {
	b := newTestBroker(t)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	err := b.Publish(t.Context(), &celery.TaskMessage{ID: "i", Name: "t"})
	if !errors.Is(err, celery.ErrUnavailable) {
		t.Errorf("Publish after Close: %v, want ErrUnavailable", err)
	}
}

func TestNoResultBackend(t *testing.T) {
	needRedis(t)
	b, err := New(t.Context(), Config{BrokerURL: brokerURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err1 := b.Result(t.Context(), "x")
	_, err2 := b.WaitResult(t.Context(), "x")
	err3 := b.Abort(t.Context(), "x")
	for i, err := range []error{err1, err2, err3} {
		if !errors.Is(err, celery.ErrNoResultBackend) {
			t.Errorf("call %d: %v, want ErrNoResultBackend", i, err)
		}
	}
}

func TestLibraryLogger(t *testing.T) {
	var buf bytes.Buffer
	l := LibraryLogger{Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Printf(context.Background(), "failed to dial after %d attempts", 2)
	if got := buf.String(); !strings.Contains(got, "failed to dial after 2 attempts") || !strings.Contains(got, "source=go-redis") {
		t.Errorf("logged %q", got)
	}
}

func TestNewHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := New(ctx, Config{BrokerURL: "redis://127.0.0.1:1/0"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("New with a cancelled context: %v, want Canceled", err)
	}
}
