package amqp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TestAccessRefused: stamen logs in as a user whose vhost permissions
// leave out the default exchange (write) and queues named forbidden-*
// (configure, read). Each call that needs one of them fails with a
// celery.RefusedError quoting RabbitMQ's ACCESS_REFUSED reason, not
// celery.ErrUnavailable; a refused publish costs the publish channel
// only: the connection stays, and publishing where the user may write
// works right after.
func TestAccessRefused(t *testing.T) {
	needRabbit(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Users are server-wide: named for the test process's vhost.
	user := testVhost + "-refused-broker"
	const password = "amqp-pw-4b2a"
	if err := rabbitmqctl(ctx, "-q", "add_user", user, password); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rabbitmqctl(context.Background(), "-q", "delete_user", user); err != nil {
			t.Error(err)
		}
	})
	if err := rabbitmqctl(ctx, "-q", "set_permissions", "-p", testVhost, user,
		`^(?!forbidden-).*`, `^(?!amq\.default$|forbidden-).*`, `^(?!forbidden-).*`); err != nil {
		t.Fatal(err)
	}
	a := newAdmin(t)
	open := a.freshQueue()
	forbidden := "forbidden-" + uuid.NewString()
	a.deleteQueue(forbidden)
	if _, err := a.channel().QueueDeclare(forbidden, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	missing := "forbidden-" + uuid.NewString()
	a.deleteQueue(missing)

	b, err := New(ctx, Config{
		BrokerURL:     fmt.Sprintf("amqp://%s:%s@127.0.0.1:5672/%s", url.PathEscape(user), password, url.PathEscape(testVhost)),
		ResultBackend: "rpc://", Logger: testLogger(t), OpTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	// Through the queue's own exchange, which the user may write.
	viaExchange := func() error {
		return b.Publish(ctx, &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Queue: open, Exchange: open, RoutingKey: open, Declare: workerDecl(t, open, 0)})
	}
	if err := viaExchange(); err != nil {
		t.Fatalf("publish through an exchange the user may write: %v", err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		// resource is what RabbitMQ names in its reason.
		resource string
	}{
		{"publish to the default exchange", func() error {
			return b.Publish(ctx, &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Queue: open})
		}, "exchange 'amq.default'"},
		{"purge a queue the user may not read", func() error {
			_, err := b.Purge(ctx, forbidden)
			return err
		}, "queue '" + forbidden + "'"},
		{"declare a queue the user may not configure", func() error {
			return b.Publish(ctx, &celery.TaskMessage{ID: uuid.NewString(), Name: "t", Queue: missing, Declare: workerDecl(t, missing, 0)})
		}, "queue '" + missing + "'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var refused *celery.RefusedError
			want := fmt.Sprintf("ACCESS_REFUSED - access to %s in vhost '%s' refused for user '%s'", tc.resource, testVhost, user)
			if !errors.As(err, &refused) || refused.Reply != want || errors.Is(err, celery.ErrUnavailable) {
				t.Fatalf("err %v; want a RefusedError %q, not unavailable", err, want)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("the error shows the password: %v", err)
			}
			// Right after, on the same connection.
			if err := viaExchange(); err != nil {
				t.Errorf("publish after the refusal: %v", err)
			}
		})
	}
	if n := b.Reconnects(); n != 0 || !b.Connected() {
		t.Errorf("the refusals cost the connection: %d reconnections, connected %v", n, b.Connected())
	}
	// Every publish through the exchange arrived.
	info, err := a.channel().QueueDeclarePassive(open, true, false, false, false, amqp091.Table{})
	if err != nil || info.Messages != 4 {
		t.Errorf("%s holds %+v, %v; want the 4 messages published through its exchange", open, info, err)
	}
}
