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
	// Exchange and RoutingKey route the message as apply_async's options
	// do (see Route); empty means the queue's default route.
	Exchange   string
	RoutingKey string
	// Priority is sent as given, as Celery sends it: RabbitMQ caps it at the
	// queue's x-max-priority, kombu's Redis transport picks the priority
	// sub-queue of min(Priority, 9).
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
	// Declare is how the workers declare the message's queue, for a broker
	// that must create it (RabbitMQ); nil when no worker is known to
	// consume it: the broker then never creates the queue, and publishing
	// to a missing one fails with ErrNoQueue.
	Declare *QueueDeclaration
}
