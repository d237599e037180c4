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

	// Request is what the worker stored of the task's request when it runs
	// with result_extended=True; nil otherwise.
	Request *ResultRequest `json:"-"`

	// Unreadable is set, and the rest empty, when a result arrived in a
	// serialization stamen cannot read (see UnreadableResultError): the
	// rpc:// backend keeps it so that a waiter learns of it at once.
	Unreadable *UnreadableResultError `json:"-"`
}

// ResultRequest is the request part of an extended result (Celery's
// result_extended): enough to send the task again.
type ResultRequest struct {
	Name string
	// Args and Kwargs are as the message carried them (JSON, numbers as
	// json.Number, kombu's typed values left as they are).
	Args   []any
	Kwargs map[string]any
	// Queue is the routing key the task was delivered with, which Celery
	// stores as "queue".
	Queue string
}
