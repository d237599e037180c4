package redis

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/stamen-dev/stamen/internal/celery"
)

// TransportOptions are the Redis transport options stamen honours, as
// Celery's broker_transport_options (and result_backend_transport_options)
// hold them.
type TransportOptions struct {
	// GlobalKeyPrefix is kombu's global_keyprefix: in front of every key
	// and channel on the broker. On the result backend, Celery 5.3+ puts
	// it (with "_" unless it ends in one of ":_-.") in front of result keys.
	GlobalKeyPrefix string `json:"global_keyprefix"`
	// MasterName is the Sentinel service name of a sentinel:// URL.
	MasterName string `json:"master_name"`
	// SentinelKwargs are the credentials of the sentinels themselves
	// (redis-py's sentinel_kwargs); the URL's password is the master's.
	SentinelKwargs *SentinelKwargs `json:"sentinel_kwargs"`
	// Sep is kombu's sep between a queue and its priority step.
	Sep *string `json:"sep"`
	// PrioritySteps is kombu's priority_steps.
	PrioritySteps []int `json:"priority_steps"`
}

// SentinelKwargs are the sentinel_kwargs stamen honours.
type SentinelKwargs struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// transportKeys are the options accepted, for the error that names them.
const transportKeys = "global_keyprefix, master_name, sentinel_kwargs (username, password), sep, priority_steps"

// ParseTransportOptions reads a JSON object of transport options ("" is
// none). An unknown key or a value of the wrong type is an error; errors
// name the key, never a value (sentinel_kwargs holds a password).
func ParseTransportOptions(raw string) (TransportOptions, error) {
	var o TransportOptions
	if strings.TrimSpace(raw) == "" {
		return o, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return TransportOptions{}, errors.New(describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return TransportOptions{}, errors.New("want a single JSON object")
	}
	if o.Sep != nil && *o.Sep == "" {
		return TransportOptions{}, errors.New("sep must not be empty")
	}
	if o.PrioritySteps != nil {
		if len(o.PrioritySteps) == 0 {
			return TransportOptions{}, errors.New("priority_steps must not be empty")
		}
		for i, s := range o.PrioritySteps {
			if s < 0 || (i > 0 && s <= o.PrioritySteps[i-1]) {
				return TransportOptions{}, errors.New("priority_steps must be ascending non-negative integers")
			}
		}
	}
	return o, nil
}

// describeJSONError says what is wrong with the options without quoting
// them: a syntax error's message may hold a character of a password.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("not valid JSON (at byte %d)", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return "want a JSON object"
		}
		return fmt.Sprintf("%s: want %s, not a JSON %s", typ.Field, jsonType(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Sprintf("unknown option %s (stamen takes %s)", strings.TrimPrefix(err.Error(), "json: unknown field "), transportKeys)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON (cut short)"
	}
	return "not a valid JSON object"
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice":
		return "a list of integers"
	case "int":
		return "an integer"
	case "struct":
		return "an object"
	}
	return kind
}

// keys is kombu's key layout under these options, on database db.
func (o TransportOptions) keys(db int) celery.RedisKeys {
	k := celery.RedisKeys{Prefix: o.GlobalKeyPrefix, Steps: slices.Clone(o.PrioritySteps), DB: db}
	if o.Sep != nil {
		k.Sep = *o.Sep
	}
	return k
}
