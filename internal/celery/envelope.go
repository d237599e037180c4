package celery

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// Envelope is kombu's virtual-transport message as the Redis transport stores
// it in lists and publishes it on pub/sub channels. Content type and encoding
// are top-level keys spelled with hyphens; everything else about delivery
// lives in Properties.
type Envelope struct {
	Body            string         `json:"body"`
	ContentEncoding string         `json:"content-encoding"`
	ContentType     string         `json:"content-type"`
	Headers         map[string]any `json:"headers"`
	Properties      Properties     `json:"properties"`
}

// Properties are the message properties of a kombu envelope.
type Properties struct {
	CorrelationID string       `json:"correlation_id,omitempty"`
	ReplyTo       string       `json:"reply_to,omitempty"`
	DeliveryMode  int          `json:"delivery_mode"`
	DeliveryInfo  DeliveryInfo `json:"delivery_info"`
	Priority      int          `json:"priority"`
	BodyEncoding  string       `json:"body_encoding"`
	// DeliveryTag must be unique: workers use it as the field name of the
	// unacked hash, and kombu raises KeyError without it.
	DeliveryTag string `json:"delivery_tag"`
	Expiration  string `json:"expiration,omitempty"`
}

// DeliveryInfo tells a Redis worker where to restore an unacked message.
type DeliveryInfo struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
}

// NewEnvelope wraps an already serialized JSON body the way kombu does:
// base64 body, JSON content type, utf-8 encoding.
func NewEnvelope(body []byte, headers map[string]any, props Properties) Envelope {
	props.BodyEncoding = "base64"
	if headers == nil {
		headers = map[string]any{}
	}
	return Envelope{
		Body:            base64.StdEncoding.EncodeToString(body),
		ContentEncoding: "utf-8",
		ContentType:     "application/json",
		Headers:         headers,
		Properties:      props,
	}
}

// DecodeEnvelope parses a kombu envelope.
func DecodeEnvelope(data []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return Envelope{}, fmt.Errorf("decode envelope: %w", err)
	}
	return env, nil
}

// BodyBytes returns the serialized body, decoding base64 when the envelope
// says so (an absent body_encoding means the body is the raw string).
func (e Envelope) BodyBytes() ([]byte, error) {
	if e.Properties.BodyEncoding != "base64" {
		return []byte(e.Body), nil
	}
	b, err := base64.StdEncoding.DecodeString(e.Body)
	if err != nil {
		return nil, fmt.Errorf("decode envelope body: %w", err)
	}
	return b, nil
}
