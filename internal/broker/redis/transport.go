package redis

import (
	"bytes"
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

	// Ignored are the options given that change nothing stamen does
	// (ignoredTransportOptions), sorted, for the log line that says so.
	Ignored []string `json:"-"`
}

// SentinelKwargs are the sentinel_kwargs stamen honours.
type SentinelKwargs struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// transportKeys are the options honoured, for the error that names them.
const transportKeys = "global_keyprefix, master_name, sentinel_kwargs (username, password), sep, priority_steps"

// ignoredTransportOptions are the other options of kombu's Redis transport
// (its Channel's and Transport's from_transport_options in kombu 5.6, and
// the connection retry options kombu's Connection reads) and of Celery's
// Redis result backend. They tune how a worker consumes, redelivers and
// connects, and change no key, channel or message that stamen reads or
// writes, so a Celery configuration's options are taken as they are
// (visibility_timeout is in most of them) instead of stopping stamen.
var ignoredTransportOptions = []string{
	"ack_emulation", "body_encoding", "brpop_timeout", "client_name",
	"connect_retries_timeout", "deadletter_queue", "health_check_interval",
	"interval_max", "interval_start", "interval_step", "max_connections",
	"max_retries", "min_other_sentinels", "polling_interval",
	"queue_order_strategy", "result_chord_ordered", "retry_on_timeout",
	"retry_policy", "socket_connect_timeout", "socket_keepalive",
	"socket_keepalive_options", "socket_timeout", "unacked_index_key",
	"unacked_key", "unacked_mutex_expire", "unacked_mutex_key",
	"unacked_restore_limit", "visibility_timeout",
}

// defaultOnlyTransportOptions are options stamen takes only at kombu's
// default, true: the events and remote control channels it follows are
// kombu's default fanout channels ("/<db>.celeryev/<routing key>").
var defaultOnlyTransportOptions = []string{"fanout_patterns", "fanout_prefix"}

// ParseTransportOptions reads a JSON object of transport options ("" is
// none). An option stamen neither honours nor ignores (a typo, another
// transport's) or a value of the wrong type is an error; errors name the
// key, never a value (sentinel_kwargs holds a password).
func ParseTransportOptions(raw string) (TransportOptions, error) {
	var o TransportOptions
	if strings.TrimSpace(raw) == "" {
		return o, nil
	}
	var all map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&all); err != nil {
		return TransportOptions{}, errors.New(describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return TransportOptions{}, errors.New("want a single JSON object")
	}
	var ignored []string
	for k, v := range all {
		switch {
		case slices.Contains(ignoredTransportOptions, k):
			ignored = append(ignored, k)
			delete(all, k)
		case slices.Contains(defaultOnlyTransportOptions, k):
			if string(bytes.TrimSpace(v)) != "true" {
				return TransportOptions{}, fmt.Errorf("%s: only true (kombu's default) is taken: stamen follows kombu's default fanout channels", k)
			}
			ignored = append(ignored, k)
			delete(all, k)
		}
	}
	slices.Sort(ignored)
	honoured, err := json.Marshal(all)
	if err != nil {
		return TransportOptions{}, errors.New("not a valid JSON object")
	}
	dec = json.NewDecoder(bytes.NewReader(honoured))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return TransportOptions{}, errors.New(describeJSONError(err))
	}
	o.Ignored = ignored
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
		return fmt.Sprintf("unknown option %s (stamen takes %s, and kombu's options that change nothing it does, such as visibility_timeout)", strings.TrimPrefix(err.Error(), "json: unknown field "), transportKeys)
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
