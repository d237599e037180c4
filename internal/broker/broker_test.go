package broker

import (
	"context"
	"strings"
	"testing"
)

// Open refuses what no broker can do before it connects to anything: the
// addresses below are never dialled.
func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown scheme", Config{BrokerURL: "sqs://queue"},
			`unsupported broker scheme "sqs": use redis://, rediss://, sentinel://, amqp:// or amqps://`},
		{"unparsable URL", Config{BrokerURL: "redis://user:s3cret@[::1"}, "invalid broker URL"},
		{"event queue on Redis", Config{BrokerURL: "redis://127.0.0.1:1/0", EventQueue: "stamen"},
			"event_queue: only RabbitMQ brokers have event queues (Redis pub/sub keeps nothing)"},
		{"transport options on AMQP", Config{BrokerURL: "amqp://127.0.0.1:1/", BrokerTransportOptions: `{"global_keyprefix": "x"}`},
			"broker_transport_options: only Redis brokers take transport options"},
		{"broker options not JSON", Config{BrokerURL: "redis://127.0.0.1:1/0", BrokerTransportOptions: "{"},
			"broker_transport_options: "},
		{"result options not JSON", Config{BrokerURL: "redis://127.0.0.1:1/0", ResultBackendTransportOptions: "{"},
			"result_backend_transport_options: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, results, err := Open(context.Background(), tc.cfg)
			if err == nil {
				_ = conn.Close()
				t.Fatal("opened")
			}
			if conn != nil || results != nil {
				t.Errorf("refused, yet returned %v and %v", conn, results)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q, want it to begin %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}
