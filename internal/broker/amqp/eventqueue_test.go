package amqp

import (
	"strings"
	"testing"
	"time"
)

// TestNewEventQueue: the private queue by default; a named one durable,
// not auto-deleted, with its bounds (defaults when unset); bad names and
// bounds refused.
func TestNewEventQueue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    eventQueue
		wantErr string
	}{
		{name: "private", cfg: Config{}, want: eventQueue{autoDelete: true, args: eventQueueArgs()}},
		{name: "named, defaults", cfg: Config{EventQueue: "fleet.events"},
			want: eventQueue{name: "fleet.events", durable: true, args: map[string]any{"x-message-ttl": int64(3600000), "x-max-length": int64(1000000)}}},
		{name: "named, bounds", cfg: Config{EventQueue: "a:b-c_d", EventQueueTTL: 90 * time.Second, EventQueueMaxLength: 7},
			want: eventQueue{name: "a:b-c_d", durable: true, args: map[string]any{"x-message-ttl": int64(90000), "x-max-length": int64(7)}}},
		{name: "slash", cfg: Config{EventQueue: "a/b"}, wantErr: "not a letter"},
		{name: "reserved", cfg: Config{EventQueue: "amq.gen"}, wantErr: "reserves"},
		{name: "too long", cfg: Config{EventQueue: strings.Repeat("x", 201)}, wantErr: "1 to 200 bytes"},
		{name: "utf-8", cfg: Config{EventQueue: "événements"}, wantErr: "not a letter"},
		{name: "ttl beyond RabbitMQ's", cfg: Config{EventQueue: "q", EventQueueTTL: 50 * 24 * time.Hour}, wantErr: "TTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newEventQueue(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.name != tc.want.name || got.durable != tc.want.durable || got.autoDelete != tc.want.autoDelete || len(got.args) != len(tc.want.args) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for k, v := range tc.want.args {
				if got.args[k] != v {
					t.Errorf("%s = %#v, want %#v", k, got.args[k], v)
				}
			}
		})
	}
}
