package amqp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// The tests use the real RabbitMQ on 127.0.0.1:5672, in the vhost of their
// test process (testcluster.Vhost), so that nothing else on the server is
// touched (the reconnect test closes every connection of the vhost) and
// two runs of the package do not meet.
const wireDir = "../../../testdata/celery-wire"

var (
	testVhost = testcluster.Vhost
	testURL   = testcluster.AMQPURL(testVhost)
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func rabbitmqctl(ctx context.Context, args ...string) error {
	_, err := rabbitmqctlCombined(ctx, args...)
	return err
}

func rabbitmqctlCombined(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("rabbitmqctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// needRabbit creates the test vhost, once. Like every test that needs a
// server, it skips under -short and when RabbitMQ is missing, except with
// CI=true or STAMEN_INTEGRATION=1 where a missing RabbitMQ fails the test.
func needRabbit(t *testing.T) {
	t.Helper()
	testcluster.RequireRabbitMQ(t)
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newTestBroker connects a Broker to the test vhost and closes it after the
// test.
func newTestBroker(t *testing.T, backend string) *Broker {
	t.Helper()
	needRabbit(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := New(ctx, Config{BrokerURL: testURL, ResultBackend: backend, Logger: testLogger(t), OpTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if !b.Connected() {
		t.Fatal("not connected after New")
	}
	return b
}

// admin is a plain amqp091 connection for arranging and checking state the
// way a worker or an operator would.
type admin struct {
	t    *testing.T
	conn *amqp091.Connection
}

func newAdmin(t *testing.T) *admin {
	t.Helper()
	conn, err := amqp091.DialConfig(testURL, amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("admin dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &admin{t: t, conn: conn}
}

// channel opens a channel that is closed after the test.
func (a *admin) channel() *amqp091.Channel {
	a.t.Helper()
	ch, err := a.conn.Channel()
	if err != nil {
		a.t.Fatalf("admin channel: %v", err)
	}
	a.t.Cleanup(func() { _ = ch.Close() })
	return ch
}

func (a *admin) publish(exchange, key string, p amqp091.Publishing) {
	a.t.Helper()
	ch := a.channel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ch.PublishWithContext(ctx, exchange, key, false, false, p); err != nil {
		a.t.Fatalf("admin publish to %q/%q: %v", exchange, key, err)
	}
}

// deleteQueue removes a queue now and after the test.
func (a *admin) deleteQueue(name string) {
	a.t.Helper()
	del := func() {
		ch, err := a.conn.Channel()
		if err != nil {
			return
		}
		defer ch.Close()
		_, _ = ch.QueueDelete(name, false, false, false)
	}
	del()
	a.t.Cleanup(del)
}

// freshQueue names a queue of the test's own, removed now and after the
// test with the direct exchange of the same name that Celery's
// declaration (and so stamen's) makes for it.
func (a *admin) freshQueue() string {
	a.t.Helper()
	queue := "stamen-test-" + uuid.NewString()
	a.deleteQueue(queue)
	a.t.Cleanup(func() {
		if ch, err := a.conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(queue, false, false)
			_ = ch.Close()
		}
	})
	return queue
}

// get fetches one message from queue, waiting up to 5 s for it.
func (a *admin) get(queue string) amqp091.Delivery {
	a.t.Helper()
	ch := a.channel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			a.t.Fatalf("get from %s: %v", queue, err)
		}
		if ok {
			return d
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("no message in %s", queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wire is one firehose record of testdata/celery-wire/*-amqp.json.
type wire struct {
	Exchange    string          `json:"exchange"`
	RoutingKeys []string        `json:"routing_keys"`
	Properties  map[string]any  `json:"properties"`
	Body        json.RawMessage `json:"body"`
	BodyRaw     string          `json:"body_raw"`
}

func readWire(t testing.TB, name string) wire {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(wireDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return w
}

// generic round-trips v through JSON, so that values decoded from AMQP
// (int32, int64, amqp091.Table) compare with values decoded from JSON.
func generic(t testing.TB, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// eventually is testcluster.Eventually.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testcluster.Eventually(t, d, what, cond)
}

func TestNormalizeURL(t *testing.T) {
	tests := []struct {
		name, in, dial, redacted, wantErr string
	}{
		{name: "amqp", in: "amqp://guest:secret@h:5672/vh", dial: "amqp://guest:secret@h:5672/vh", redacted: "amqp://guest:********@h:5672/vh"},
		{name: "celery default vhost", in: "amqp://u:p@h//", dial: "amqp://u:p@h//", redacted: "amqp://u:********@h//"},
		{name: "amqps", in: "amqps://u:p@h/", dial: "amqps://u:p@h/", redacted: "amqps://u:********@h/"},
		{name: "pyamqp alias", in: "pyamqp://u:p@h//", dial: "amqp://u:p@h//", redacted: "amqp://u:********@h//"},
		{name: "no password", in: "amqp://h", dial: "amqp://h", redacted: "amqp://h"},
		{name: "redis", in: "redis://:p@h/0", wantErr: "scheme must be amqp"},
		{name: "no host", in: "amqp:///vh", dial: "amqp:///vh", redacted: "amqp:///vh"},
		{name: "unparsable", in: "amqp://u:p@h:port/", wantErr: "invalid broker URL"},
		// An unescaped '/' in the password ends the host early: url.Parse
		// then quotes the password's start as the port.
		{name: "slash in the password", in: "amqp://u:s3cret/x@h/", wantErr: "invalid broker URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dial, redacted, err := normalizeURL(tt.in, false)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), ":p@") || strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if dial != tt.dial || redacted != tt.redacted {
				t.Errorf("got %q, %q; want %q, %q", dial, redacted, tt.dial, tt.redacted)
			}
		})
	}
}

func TestIsRPCBackend(t *testing.T) {
	tests := []struct {
		in      string
		rpc     bool
		wantErr bool
	}{
		{"", false, false},
		{"rpc://", true, false},
		{"rpc", true, false},
		{"redis://:secret@h:6379/1", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			rpc, err := isRPCBackend(tt.in)
			if rpc != tt.rpc || (err != nil) != tt.wantErr {
				t.Fatalf("got %v, %v", rpc, err)
			}
			if err != nil {
				if !errors.Is(err, celery.ErrUnsupported) {
					t.Errorf("err %v does not wrap ErrUnsupported", err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("error leaks the password: %v", err)
				}
			}
		})
	}
}

func TestNewRefused(t *testing.T) {
	needRabbit(t)
	tests := []struct {
		name, url string
	}{
		{"bad password", "amqp://guest:wrong@127.0.0.1:5672/" + testVhost},
		{"missing vhost", "amqp://guest:guest@127.0.0.1:5672/stamen-no-such-vhost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			b, err := New(ctx, Config{BrokerURL: tt.url, Logger: testLogger(t)})
			if err == nil {
				_ = b.Close()
				t.Fatal("New succeeded")
			}
			if strings.Contains(err.Error(), "wrong") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

// TestUnreachable: a broker that is down is not an error for New, and every
// call fails fast with ErrUnavailable.
func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Port 1 on loopback refuses at once.
	b, err := New(ctx, Config{BrokerURL: "amqp://guest:guest@127.0.0.1:1/", ResultBackend: "rpc://", Logger: testLogger(t), OpTimeout: time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if b.Connected() {
		t.Fatal("connected to nothing")
	}
	if got := b.RedactedURL(); got != "amqp://guest:********@127.0.0.1:1/" {
		t.Errorf("RedactedURL = %q", got)
	}
	checkUnavailable(t, b)
}

// checkUnavailable asserts that every call fails at once with
// ErrUnavailable.
func checkUnavailable(t *testing.T, b *Broker) {
	t.Helper()
	ctx := t.Context()
	calls := []struct {
		name string
		call func() error
	}{
		{"Publish", func() error {
			return b.Publish(ctx, &celery.TaskMessage{ID: "x", Name: "tasks.add", Queue: "stamen-never"})
		}},
		{"Broadcast", func() error {
			_, err := b.Broadcast(ctx, celery.ControlCommand{Method: "ping", Reply: true})
			return err
		}},
		{"Broadcast without reply", func() error {
			_, err := b.Broadcast(ctx, celery.ControlCommand{Method: "enable_events"})
			return err
		}},
		{"QueueLengths", func() error {
			_, err := b.QueueLengths(ctx, []string{"celery"})
			return err
		}},
		{"Result", func() error {
			_, err := b.Result(ctx, "some-task")
			return err
		}},
		{"WaitResult", func() error {
			_, err := b.WaitResult(ctx, "some-task")
			return err
		}},
	}
	for _, c := range calls {
		start := time.Now()
		err := c.call()
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("%s took %s while disconnected", c.name, took)
		}
		if !errors.Is(err, celery.ErrUnavailable) {
			t.Errorf("%s: err = %v, want ErrUnavailable", c.name, err)
		}
	}
}

func TestClosedBroker(t *testing.T) {
	b := newTestBroker(t, "rpc://")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if b.Connected() {
		t.Error("connected after Close")
	}
	checkUnavailable(t, b)
	err := b.ConsumeEvents(t.Context(), func([]celery.Event) {})
	if !errors.Is(err, celery.ErrUnavailable) {
		t.Errorf("ConsumeEvents after Close: %v", err)
	}
}
