package celery

import "encoding/json"

// Result is a result document as stored by the Redis backend or sent by the
// rpc:// backend.
type Result struct {
	TaskID    string          `json:"task_id"`
	Status    string          `json:"status"`
	Result    json.RawMessage `json:"result"`
	Traceback *string         `json:"traceback"`
	DateDone  *string         `json:"date_done"`
	Children  json.RawMessage `json:"children"`

	// Unreadable is set, and the rest empty, when a result arrived in a
	// serialization stamen cannot read (see UnreadableResultError): the
	// rpc:// backend keeps it so that a waiter learns of it at once.
	Unreadable *UnreadableResultError `json:"-"`
}
