package redis

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

func TestParseTransportOptions(t *testing.T) {
	sep := ":"
	for _, tt := range []struct {
		name, raw string
		want      TransportOptions
		err       string // substring of the error; "" means none
	}{
		{name: "empty", raw: ""},
		{name: "all", raw: `{"global_keyprefix": "pfx:", "master_name": "mymaster", "sentinel_kwargs": {"password": "s3cret"}, "sep": ":", "priority_steps": [0, 5, 9]}`,
			want: TransportOptions{GlobalKeyPrefix: "pfx:", MasterName: "mymaster", SentinelKwargs: &SentinelKwargs{Password: "s3cret"}, Sep: &sep, PrioritySteps: []int{0, 5, 9}}},
		{name: "a Celery configuration's options", raw: `{"global_keyprefix": "pfx:", "visibility_timeout": 43200, "fanout_prefix": true, "fanout_patterns": true, "socket_timeout": 5.0, "health_check_interval": 10, "retry_policy": {"max_retries": 3}, "unacked_key": "s3cret"}`,
			want: TransportOptions{GlobalKeyPrefix: "pfx:", Ignored: []string{"fanout_patterns", "fanout_prefix", "health_check_interval", "retry_policy", "socket_timeout", "unacked_key", "visibility_timeout"}}},
		{name: "unknown key", raw: `{"visibilty_timeout": 3600}`, err: `unknown option "visibilty_timeout"`},
		{name: "another transport's key", raw: `{"confirm_publish": true}`, err: `unknown option "confirm_publish"`},
		{name: "fanout_prefix off", raw: `{"fanout_prefix": false}`, err: "fanout_prefix: only true"},
		{name: "fanout_prefix as a string", raw: `{"fanout_prefix": "s3cret"}`, err: "fanout_prefix: only true"},
		{name: "fanout_patterns off", raw: `{"fanout_patterns": 0}`, err: "fanout_patterns: only true"},
		{name: "unknown sentinel kwarg", raw: `{"sentinel_kwargs": {"socket_timeout": 1}}`, err: `unknown option "socket_timeout"`},
		{name: "ill-typed prefix", raw: `{"global_keyprefix": 12}`, err: "global_keyprefix: want a string, not a JSON number"},
		{name: "ill-typed password", raw: `{"sentinel_kwargs": {"password": ["s3cret"]}}`, err: "sentinel_kwargs.password: want a string"},
		{name: "ill-typed steps", raw: `{"priority_steps": ["s3cret"]}`, err: "priority_steps"},
		{name: "unsorted steps", raw: `{"priority_steps": [0, 9, 5]}`, err: "ascending"},
		{name: "empty steps", raw: `{"priority_steps": []}`, err: "must not be empty"},
		{name: "empty sep", raw: `{"sep": ""}`, err: "sep must not be empty"},
		{name: "not an object", raw: `["s3cret"]`, err: "want a JSON object"},
		{name: "syntax", raw: `{"sentinel_kwargs": {"password": s3cret}}`, err: "not valid JSON"},
		{name: "cut short", raw: `{"master_name": "s3cret"`, err: "not valid JSON"},
		{name: "trailing", raw: `{} {"master_name": "s3cret"}`, err: "single JSON object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTransportOptions(tt.raw)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v, want one saying %q", err, tt.err)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "s3") {
				t.Errorf("error %q shows a value", err)
			}
		})
	}
}

// TestFailoverOptions checks how sentinel:// URLs are read: every URL is a
// sentinel, the first one's password and db are the master's, the
// sentinels' credentials come from sentinel_kwargs.
func TestFailoverOptions(t *testing.T) {
	topts := TransportOptions{MasterName: "mymaster", SentinelKwargs: &SentinelKwargs{Password: "sentpw"}}
	f, err := failoverOptions("sentinel://:masterpw@h1:26380/3;sentinel://h2;sentinel://:other@h3:1/5", topts, nil, DefaultOpTimeout, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"h1:26380", "h2:26379", "h3:1"}, f.SentinelAddrs); diff != "" {
		t.Errorf("sentinels (-want +got):\n%s", diff)
	}
	if f.MasterName != "mymaster" || f.Password != "masterpw" || f.DB != 3 || f.SentinelPassword != "sentpw" {
		t.Errorf("master %q password %q db %d sentinel password %q", f.MasterName, f.Password, f.DB, f.SentinelPassword)
	}
	if f.ReadTimeout != DefaultOpTimeout || f.MaxRetries != -1 {
		t.Errorf("read timeout %v, max retries %d: not tuned like a plain client", f.ReadTimeout, f.MaxRetries)
	}
	for _, bad := range []struct{ raw, err string }{
		{"sentinel://:pw@h1", "master_name"},
		{"sentinel://:pw@h1;redis://:pw@h2", "invalid sentinel URL"},
	} {
		o := topts
		if bad.err == "master_name" {
			o.MasterName = ""
		}
		_, err := failoverOptions(bad.raw, o, nil, DefaultOpTimeout, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), bad.err) || strings.Contains(err.Error(), ":pw@") {
			t.Errorf("%s: error %v, want one saying %q without the password", bad.raw, err, bad.err)
		}
	}
}

// TestURLListUsesFirstLiveServer: started on "redis://<dead>;redis://<live>"
// (Celery's failover list), the broker publishes to the live server.
func TestURLListUsesFirstLiveServer(t *testing.T) {
	needRedis(t)
	c := flushBroker(t)
	dead := fmt.Sprintf("redis://127.0.0.1:%d/%d", testcluster.FreePort(t), brokerDB)
	b, err := New(t.Context(), Config{BrokerURL: dead + ";" + brokerURL(), OpTimeout: 2 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Publish(t.Context(), &celery.TaskMessage{ID: "list-1", Name: "stamen.add", Queue: "listq"}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.LLen(t.Context(), "listq").Result(); err != nil || n != 1 {
		t.Errorf("LLEN listq on the live server = %d, %v; want 1", n, err)
	}
}

// TestURLListFailsOverWhileRunning: on "redis://A;redis://B" stamen works
// on A; when A goes away, publishing and the event subscription move to B
// without a restart, as Celery's failover list does.
func TestURLListFailsOverWhileRunning(t *testing.T) {
	needRedis(t)
	a, b := testcluster.StartRedis(t), testcluster.StartRedis(t)
	br, err := New(t.Context(), Config{BrokerURL: a.URL(0) + ";" + b.URL(0), OpTimeout: 2 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	ca, cb := rawClient(t, a.URL(0)), rawClient(t, b.URL(0))
	events := consume(t, br)
	const channel = "/0.celeryev/task.multi"
	events.publishUntil(t, ca, channel, testcluster.TaskEnvelope("fo-a", "stamen.add", "w@h", 1, 1.7e9, false))
	publishTo := func(id string) error {
		return br.Publish(t.Context(), &celery.TaskMessage{ID: id, Name: "stamen.add", Queue: "foq"})
	}
	if err := publishTo("fo-1"); err != nil {
		t.Fatal(err)
	}
	if n := ca.LLen(t.Context(), "foq").Val(); n != 1 {
		t.Fatalf("LLEN foq on the first server = %d, want 1", n)
	}

	a.Stop()
	// The first calls after the loss may fail on connections to A; each
	// new connection goes to B.
	testcluster.Eventually(t, 10*time.Second, "publishing moving to the second server", func() bool {
		return publishTo("fo-2") == nil
	})
	if n := cb.LLen(t.Context(), "foq").Val(); n != 1 {
		t.Errorf("LLEN foq on the second server = %d, want 1", n)
	}
	evs := events.publishUntil(t, cb, channel, testcluster.TaskEnvelope("fo-b", "stamen.add", "w@h", 2, 1.7e9, false))
	if evs[0].UUID != "fo-b" {
		t.Errorf("event from the second server: %+v", evs[0])
	}
}

func TestURLListMustShareCredentials(t *testing.T) {
	_, err := New(t.Context(), Config{BrokerURL: "redis://:Pw1x@127.0.0.1:1/0;redis://:Pw2x@127.0.0.1:2/0", OpTimeout: time.Second, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "failover list") || strings.Contains(err.Error(), "Pw1x") || strings.Contains(err.Error(), "Pw2x") {
		t.Fatalf("want a refusal that names the list and shows no password, got %v", err)
	}
}

func rawClient(t *testing.T, url string) *goredis.Client {
	t.Helper()
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
