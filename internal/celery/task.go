package celery

import "time"

// DefaultQueue is Celery's task_default_queue, exchange and routing key.
const DefaultQueue = "celery"

// TaskMessage is a task to publish in task protocol v2.
type TaskMessage struct {
	ID     string
	Name   string
	Args   []any
	Kwargs map[string]any

	// Queue is the queue the message is put on; empty means DefaultQueue.
	Queue string
	// Exchange and RoutingKey are recorded in delivery_info; on Redis the
	// message goes straight to the queue's list, as Celery's own publish does.
	Exchange   string
	RoutingKey string
	// Priority is 0..9 (clamped); its meaning depends on the transport.
	Priority int

	ETA     *time.Time
	Expires *time.Time
	// TimeLimit and SoftTimeLimit override the task's limits for this run
	// (seconds; nil = the task's own).
	TimeLimit     *float64
	SoftTimeLimit *float64

	Shadow       string
	IgnoreResult bool
	// Headers are extra message headers, merged under the protocol headers.
	Headers map[string]any
	// ReplyTo is the client's reply queue (used by the rpc:// backend).
	ReplyTo string
	// Origin is the sender's node name, e.g. "stamen@host".
	Origin string
}
