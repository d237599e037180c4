package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestBrokerAccessRefused is TestBrokerACLRefusal on RabbitMQ: stamen logs
// in as a user whose vhost permissions do not cover the default exchange
// (write) or a queue (configure, read). The operations that touch them
// answer 502 JSON quoting RabbitMQ's ACCESS_REFUSED reason, not the 503
// "Broker or result backend unavailable" of an outage, with no password
// in the body; each refusal is logged once in three requests.
func TestBrokerAccessRefused(t *testing.T) {
	testcluster.RequireRabbitMQ(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Named for this test process: users are not per vhost.
	user := fmt.Sprintf("%s-refused", testcluster.Vhost)
	const password = "amqp-pw-7d1e"
	rabbitmqctl := func(args ...string) error {
		out, err := exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("rabbitmqctl %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := rabbitmqctl("add_user", user, password); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		out, err := exec.Command("rabbitmqctl", "-q", "delete_user", user).CombinedOutput()
		if err != nil {
			t.Errorf("delete user %s: %v: %s", user, err, out)
		}
	})
	// Everything in the vhost but queues named forbidden-* (configure,
	// read) and publishing to the default exchange (write).
	if err := rabbitmqctl("set_permissions", "-p", testcluster.Vhost, user,
		`^(?!forbidden-).*`, `^(?!amq\.default$|forbidden-).*`, `^(?!forbidden-).*`); err != nil {
		t.Fatal(err)
	}

	// Queues of the test's own, made by guest: one stamen may not read
	// (purge), one it may use but reaches through the default exchange.
	forbidden := "forbidden-" + uuid.NewString()
	open := "open-" + uuid.NewString()
	testcluster.DeleteAMQPQueues(t, testcluster.Vhost, forbidden, open)
	t.Cleanup(func() { testcluster.DeleteAMQPQueues(t, testcluster.Vhost, forbidden, open) })
	guest, err := amqp091.Dial(testcluster.AMQPURL(testcluster.Vhost))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := guest.Channel()
	if err == nil {
		for _, q := range []string{forbidden, open} {
			if _, err = ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
				break
			}
		}
	}
	_ = guest.Close()
	if err != nil {
		t.Fatal(err)
	}

	brokerURL := fmt.Sprintf("amqp://%s:%s@127.0.0.1:5672/%s", url.PathEscape(user), password, url.PathEscape(testcluster.Vhost))
	var logs lockedBuffer
	a, err := New(ctx, Config{BrokerURL: brokerURL, ResultBackend: "rpc://", InspectTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })
	conn, ok := a.broker.(interface{ Reconnects() int64 })
	if !ok {
		t.Fatalf("%T does not count reconnections", a.broker)
	}

	for _, tc := range []struct {
		name, path, body string
		// resource is what RabbitMQ names in its reason.
		resource string
	}{
		{"publish to the default exchange", "/api/task/send-task/tasks.add", `{"args": [1, 2], "queue": "` + open + `"}`, "exchange 'amq.default'"},
		{"purge a queue it may not read", "/api/queues/purge/" + forbidden + "?force=true", "", "queue '" + forbidden + "'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusal := regexp.MustCompile(`: the broker refused: ACCESS_REFUSED - access to ` + regexp.QuoteMeta(tc.resource) +
				` in vhost '` + regexp.QuoteMeta(testcluster.Vhost) + `' refused for user '` + regexp.QuoteMeta(user) + `'$`)
			for range 3 {
				code, body := post(t, srv.URL+tc.path, tc.body)
				var e struct {
					Error string `json:"error"`
				}
				if code != 502 || json.Unmarshal([]byte(body), &e) != nil || !refusal.MatchString(e.Error) {
					t.Fatalf("POST %s: %d %s; want 502 {\"error\": %q}\n%s", tc.path, code, body, refusal, logs.String())
				}
				if strings.Contains(body, password) {
					t.Errorf("the body shows the password: %s", body)
				}
			}
			// The inspector logs its own failed broadcasts (a refused
			// publish too) when it runs; what must appear once is the
			// refusal the requests met.
			if n := countLines(logs.String(), "access to "+tc.resource, `msg="inspect failed"`); n != 1 {
				t.Errorf("the refusal of %s logged %d times in 3 requests, want once:\n%s", tc.resource, n, logs.String())
			}
		})
	}
	// RabbitMQ closes the channel of a refused publish: stamen opens
	// another, and keeps the connection, its consumers and its rpc://
	// results queue.
	if n := conn.Reconnects(); n != 0 {
		t.Errorf("the refusals cost %d reconnections", n)
	}
	if strings.Contains(logs.String(), password) {
		t.Errorf("the log shows the password")
	}
}

// countLines counts the lines of text that hold want and not skip.
func countLines(text, want, skip string) int {
	n := 0
	for line := range strings.Lines(text) {
		if strings.Contains(line, want) && !strings.Contains(line, skip) {
			n++
		}
	}
	return n
}
