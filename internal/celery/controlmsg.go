package celery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Pidbox names (control_exchange "celery").
const (
	// ControlExchange is the fanout exchange remote-control requests go to.
	ControlExchange = "celery.pidbox"
	// ReplyExchange is the direct exchange workers send replies through;
	// the routing key is the client's oid.
	ReplyExchange = "reply.celery.pidbox"
)

// ReplyQueueName is the queue a client with the given oid collects replies
// from: "<oid>.reply.celery.pidbox".
func ReplyQueueName(oid string) string {
	return oid + "." + ReplyExchange
}

// controlRequest is a pidbox request body. Field order follows kombu's.
type controlRequest struct {
	Method      string         `json:"method"`
	Arguments   map[string]any `json:"arguments"`
	Destination []string       `json:"destination"`
	Pattern     *string        `json:"pattern"`
	Matcher     *string        `json:"matcher"`
	Ticket      string         `json:"ticket,omitempty"`
	ReplyTo     *replyTo       `json:"reply_to,omitempty"`
}

type replyTo struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
}

// ControlRequestBody serializes cmd as a pidbox request body. ticket and
// replyRoutingKey (the client's oid) are only sent when cmd.Reply is set:
// without reply_to a worker runs the command and answers nothing.
func ControlRequestBody(cmd ControlCommand, ticket, replyRoutingKey string) ([]byte, error) {
	if cmd.Method == "" {
		return nil, errors.New("control request needs a method")
	}
	req := controlRequest{
		Method:      cmd.Method,
		Arguments:   cmd.Arguments,
		Destination: cmd.Destination,
	}
	if req.Arguments == nil {
		req.Arguments = map[string]any{}
	}
	if len(req.Destination) == 0 {
		// An empty list would match no worker; null means all of them.
		req.Destination = nil
	}
	if cmd.Reply {
		if ticket == "" || replyRoutingKey == "" {
			return nil, errors.New("control request wanting a reply needs a ticket and a reply routing key")
		}
		req.Ticket = ticket
		req.ReplyTo = &replyTo{Exchange: ReplyExchange, RoutingKey: replyRoutingKey}
	}
	body, err := marshalJSON(req)
	if err != nil {
		return nil, fmt.Errorf("encode control request %s: %w", cmd.Method, err)
	}
	return body, nil
}

// EncodeControlRequest returns the Redis envelope of a pidbox request, ready
// to PUBLISH on the pidbox channel. clock is the sender's Lamport clock.
func EncodeControlRequest(cmd ControlCommand, ticket, replyRoutingKey string, clock int64) ([]byte, error) {
	body, err := ControlRequestBody(cmd, ticket, replyRoutingKey)
	if err != nil {
		return nil, err
	}
	env := NewEnvelope(body,
		// Workers ignore expires; 0 is kombu's "no timeout".
		map[string]any{"clock": clock, "expires": 0},
		Properties{
			// kombu falls back to persistent because the exchange is named
			// by a string; the lab saw 2 on both transports.
			DeliveryMode: 2,
			DeliveryInfo: DeliveryInfo{Exchange: ControlExchange, RoutingKey: ""},
			DeliveryTag:  uuid.NewString(),
		})
	data, err := marshalJSON(env)
	if err != nil {
		return nil, fmt.Errorf("encode control envelope %s: %w", cmd.Method, err)
	}
	return data, nil
}

// DecodeControlReply parses a pidbox reply body {"<hostname>": value}, in
// the order the document lists the hosts (a worker sends exactly one).
func DecodeControlReply(body []byte) ([]ControlReply, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("decode control reply: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("decode control reply: want an object, got %v", tok)
	}
	var replies []ControlReply
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("decode control reply: %w", err)
		}
		host, _ := k.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("decode control reply from %s: %w", host, err)
		}
		replies = append(replies, ControlReply{Hostname: host, Value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("decode control reply: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("decode control reply: trailing data")
	}
	return replies, nil
}

// OK returns the text of a successful reply {"ok": ...}: the string itself,
// or the JSON of a non-string value. The bool is false for anything else,
// including {"error": ...} and a null reply.
func (r ControlReply) OK() (string, bool) {
	v, ok := r.field("ok")
	if !ok {
		return "", false
	}
	return v, true
}

// ErrorText is the worker's reason for refusing ({"error": ...}), or
// "Unknown reason" when it gave none (Flower's wording).
func (r ControlReply) ErrorText() string {
	if v, ok := r.field("error"); ok && v != "" {
		return v
	}
	return "Unknown reason"
}

// field returns the text of key in an object reply.
func (r ControlReply) field(key string) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(r.Value, &obj) != nil {
		return "", false
	}
	raw, ok := obj[key]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(raw), true
}
