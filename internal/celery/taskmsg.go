package celery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// Redis priority sub-queues (kombu's defaults; see RedisKeys).
const (
	// PrioritySep separates a queue name from its priority step.
	PrioritySep = "\x06\x16"
	// MaxPriority is the highest priority step of kombu's Redis transport:
	// a larger priority goes to its sub-queue.
	MaxPriority = 9
)

// isoMicro is ISO 8601 with microseconds and a numeric UTC offset: Celery
// 5.2's parser rejects more than six fractional digits, and 5.3.0's
// fromisoformat rejects "Z".
const isoMicro = "2006-01-02T15:04:05.000000-07:00"

// QueueName is the queue m goes to: m.Queue, or Celery's default queue.
func QueueName(m *TaskMessage) string {
	if m.Queue != "" {
		return m.Queue
	}
	return DefaultQueue
}

// Route is the exchange and routing key m is published with, as Celery's
// send_task_message picks them: with neither given, the default exchange
// "" and the queue's name (straight to the queue); with an exchange, that
// exchange and the routing key given, else the queue's (a queue Celery
// creates is bound with its own name); with only a routing key, the
// queue's own exchange, which Celery names after the queue.
func Route(m *TaskMessage) (exchange, routingKey string) {
	q := QueueName(m)
	switch {
	case m.Exchange == "" && m.RoutingKey == "":
		return "", q
	case m.Exchange == "":
		return q, m.RoutingKey
	case m.RoutingKey == "":
		return m.Exchange, q
	}
	return m.Exchange, m.RoutingKey
}

func clampPriority(p int) int {
	return min(max(p, 0), MaxPriority)
}

// ProtocolHeaders returns the task protocol v2 headers of m (it cannot be
// called Headers: that is the field of extra headers). m.Headers are merged
// underneath, so they can add headers but not override the protocol ones.
func (m *TaskMessage) ProtocolHeaders() map[string]any {
	h := make(map[string]any, len(m.Headers)+17)
	maps.Copy(h, m.Headers)
	// "py" like Celery's own client: the worker ignores lang, and tools
	// that look at it expect a Python client's value.
	h["lang"] = "py"
	h["task"] = m.Name
	h["id"] = m.ID
	h["shadow"] = nilIfEmpty(m.Shadow)
	h["eta"] = isoOrNil(m.ETA)
	h["expires"] = isoOrNil(m.Expires)
	h["group"] = nil
	h["group_index"] = nil
	h["retries"] = 0
	h["timelimit"] = []any{floatOrNil(m.TimeLimit), floatOrNil(m.SoftTimeLimit)}
	// A message nobody sent on our behalf starts its own workflow.
	h["root_id"] = m.ID
	h["parent_id"] = nil
	h["argsrepr"] = pyfmt.Truncate(pyfmt.ArgsRepr(m.Args))
	h["kwargsrepr"] = pyfmt.Truncate(pyfmt.KwargsRepr(m.Kwargs))
	h["origin"] = m.Origin
	h["ignore_result"] = m.IgnoreResult
	return h
}

// Body returns the serialized protocol v2 body [args, kwargs, embed] with
// no callbacks, errbacks, chain or chord.
func (m *TaskMessage) Body() ([]byte, error) {
	args := m.Args
	if args == nil {
		args = []any{}
	}
	kwargs := m.Kwargs
	if kwargs == nil {
		kwargs = map[string]any{}
	}
	embed := map[string]any{"callbacks": nil, "errbacks": nil, "chain": nil, "chord": nil}
	body, err := marshalJSON([]any{args, kwargs, embed})
	if err != nil {
		return nil, fmt.Errorf("encode body of task %s: %w", m.ID, err)
	}
	return body, nil
}

// RedisEnvelope wraps m the way kombu's Redis transport stores it in the
// queue's list.
func (m *TaskMessage) RedisEnvelope() (Envelope, error) {
	return m.redisEnvelopeAt(time.Now())
}

func (m *TaskMessage) redisEnvelopeAt(now time.Time) (Envelope, error) {
	if m.Name == "" || m.ID == "" {
		return Envelope{}, errors.New("task message needs a name and an id")
	}
	body, err := m.Body()
	if err != nil {
		return Envelope{}, err
	}
	exchange, routingKey := Route(m)
	props := Properties{
		CorrelationID: m.ID,
		ReplyTo:       m.ReplyTo,
		DeliveryMode:  2,
		// By default exchange "" with the queue as routing key, as Celery's
		// own publish rewrites it: a worker restoring an unacked message
		// then pushes it back onto this very list instead of looking up
		// exchange bindings. With an exchange given, that exchange and key,
		// as kombu records them.
		DeliveryInfo: DeliveryInfo{Exchange: exchange, RoutingKey: routingKey},
		// As given: kombu keeps the property and only its choice of
		// sub-queue is capped at 9.
		Priority:    m.Priority,
		DeliveryTag: uuid.NewString(),
	}
	if m.Expires != nil {
		// kombu sends the time left as a string of milliseconds; RabbitMQ
		// honours it, the Redis transport carries it along.
		ms := max(m.Expires.Sub(now).Milliseconds(), 0)
		props.Expiration = strconv.FormatInt(ms, 10)
	}
	return NewEnvelope(body, m.ProtocolHeaders(), props), nil
}

// marshalJSON is json.Marshal without HTML escaping: Python reads either,
// but unescaped text is what Celery sends and what people grep for.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func isoOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(isoMicro)
}

func floatOrNil(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}
