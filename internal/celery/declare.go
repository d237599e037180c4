package celery

import (
	"encoding/json"
	"math"
)

// QueueDeclaration is how a worker declares a queue it consumes, read from
// its inspect active_queues reply (kombu's Queue.as_dict). A broker that
// must create a missing queue declares it exactly so: RabbitMQ refuses a
// second declaration with other arguments, and refuses the worker's if
// ours came first.
type QueueDeclaration struct {
	Name       string
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	// Arguments are the queue's x-arguments as the worker sends them:
	// queue_arguments plus kombu's shorthands (expires, message_ttl,
	// max_length, max_length_bytes, max_priority).
	Arguments map[string]any

	// Exchange is the exchange the worker binds the queue to with
	// RoutingKey; "" for none (the default exchange).
	Exchange           string
	ExchangeType       string
	ExchangeDurable    bool
	ExchangeAutoDelete bool
	ExchangeArguments  map[string]any
	RoutingKey         string
	BindingArguments   map[string]any
}

// activeQueue is one entry of an active_queues reply.
type activeQueue struct {
	Name     string `json:"name"`
	Exchange *struct {
		Name       string         `json:"name"`
		Type       string         `json:"type"`
		Arguments  map[string]any `json:"arguments"`
		Durable    *bool          `json:"durable"`
		AutoDelete bool           `json:"auto_delete"`
	} `json:"exchange"`
	RoutingKey       string         `json:"routing_key"`
	QueueArguments   map[string]any `json:"queue_arguments"`
	BindingArguments map[string]any `json:"binding_arguments"`
	Durable          *bool          `json:"durable"`
	Exclusive        bool           `json:"exclusive"`
	AutoDelete       bool           `json:"auto_delete"`
	Expires          *float64       `json:"expires"`
	MessageTTL       *float64       `json:"message_ttl"`
	MaxLength        *float64       `json:"max_length"`
	MaxLengthBytes   *float64       `json:"max_length_bytes"`
	MaxPriority      *float64       `json:"max_priority"`
}

// Quorum reports whether the queue is a RabbitMQ quorum queue.
func (d *QueueDeclaration) Quorum() bool {
	t, _ := d.Arguments["x-queue-type"].(string)
	return t == "quorum"
}

// QueueDeclarations parses an inspect active_queues reply into the
// declarations of its queues, keyed by name. Entries that do not parse
// are left out.
func QueueDeclarations(reply json.RawMessage) map[string]*QueueDeclaration {
	var qs []activeQueue
	if json.Unmarshal(reply, &qs) != nil {
		return nil
	}
	out := make(map[string]*QueueDeclaration, len(qs))
	for _, q := range qs {
		if q.Name == "" {
			continue
		}
		d := &QueueDeclaration{
			Name: q.Name,
			// kombu's Queue and Exchange are durable unless told otherwise.
			Durable:          q.Durable == nil || *q.Durable,
			Exclusive:        q.Exclusive,
			AutoDelete:       q.AutoDelete,
			Arguments:        queueArguments(q),
			RoutingKey:       q.RoutingKey,
			BindingArguments: q.BindingArguments,
		}
		if e := q.Exchange; e != nil && e.Name != "" {
			d.Exchange = e.Name
			d.ExchangeType = e.Type
			if d.ExchangeType == "" {
				d.ExchangeType = "direct"
			}
			d.ExchangeDurable = e.Durable == nil || *e.Durable
			d.ExchangeAutoDelete = e.AutoDelete
			d.ExchangeArguments = e.Arguments
		}
		out[q.Name] = d
	}
	return out
}

// queueArguments merges queue_arguments with kombu's shorthand attributes
// the way kombu's to_rabbitmq_queue_arguments does: times in seconds
// become milliseconds, and a shorthand overrides the same x-argument.
func queueArguments(q activeQueue) map[string]any {
	args := make(map[string]any, len(q.QueueArguments)+1)
	for k, v := range q.QueueArguments {
		args[k] = integral(v)
	}
	set := func(key string, v *float64, scale float64) {
		if v != nil {
			args[key] = int64(*v * scale)
		}
	}
	set("x-expires", q.Expires, 1000)
	set("x-message-ttl", q.MessageTTL, 1000)
	set("x-max-length", q.MaxLength, 1)
	set("x-max-length-bytes", q.MaxLengthBytes, 1)
	set("x-max-priority", q.MaxPriority, 1)
	if len(args) == 0 {
		return nil
	}
	return args
}

// integral turns a whole JSON number into an int64: RabbitMQ wants integer
// x-arguments (x-max-priority 10, not 10.0).
func integral(v any) any {
	if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return v
}
