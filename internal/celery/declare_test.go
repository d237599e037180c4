package celery

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQueueDeclarations(t *testing.T) {
	tests := []struct {
		name  string
		reply string
		want  map[string]*QueueDeclaration
	}{
		{
			name: "default queue of a worker without priority",
			reply: `[{"name": "celery", "exchange": {"name": "celery", "type": "direct", "arguments": null,
				"durable": true, "auto_delete": false}, "routing_key": "celery", "queue_arguments": null,
				"binding_arguments": null, "durable": true, "exclusive": false, "auto_delete": false,
				"expires": null, "message_ttl": null, "max_length": null, "max_length_bytes": null, "max_priority": null}]`,
			want: map[string]*QueueDeclaration{"celery": {
				Name: "celery", Durable: true, Exchange: "celery", ExchangeType: "direct",
				ExchangeDurable: true, RoutingKey: "celery",
			}},
		},
		{
			name: "task_queue_max_priority and a quorum queue",
			reply: `[{"name": "a", "exchange": {"name": "a", "type": "direct", "durable": true},
				"routing_key": "a", "queue_arguments": {"x-max-priority": 10}, "durable": true},
				{"name": "q", "exchange": {"name": "", "type": "direct"}, "routing_key": "q",
				"queue_arguments": {"x-queue-type": "quorum"}, "durable": true}]`,
			want: map[string]*QueueDeclaration{
				"a": {Name: "a", Durable: true, Arguments: map[string]any{"x-max-priority": int64(10)},
					Exchange: "a", ExchangeType: "direct", ExchangeDurable: true, RoutingKey: "a"},
				"q": {Name: "q", Durable: true, Arguments: map[string]any{"x-queue-type": "quorum"}, RoutingKey: "q"},
			},
		},
		{
			// kombu's to_rabbitmq_queue_arguments: seconds to ms, and the
			// shorthand wins over queue_arguments.
			name: "kombu shorthands",
			reply: `[{"name": "s", "queue_arguments": {"x-max-priority": 3}, "durable": false, "auto_delete": true,
				"expires": 1.5, "message_ttl": 60, "max_length": 100, "max_length_bytes": 4096, "max_priority": 5}]`,
			want: map[string]*QueueDeclaration{"s": {Name: "s", AutoDelete: true, Arguments: map[string]any{
				"x-max-priority": int64(5), "x-expires": int64(1500), "x-message-ttl": int64(60000),
				"x-max-length": int64(100), "x-max-length-bytes": int64(4096),
			}}},
		},
		{name: "not a list", reply: `{"error": "x"}`, want: nil},
		{name: "nameless entry", reply: `[{"name": ""}]`, want: map[string]*QueueDeclaration{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, QueueDeclarations([]byte(tt.reply))); diff != "" {
				t.Errorf("declarations (-want +got):\n%s", diff)
			}
		})
	}
}
