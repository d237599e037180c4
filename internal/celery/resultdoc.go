package celery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Task states that appear in result documents.
const (
	StatePending = "PENDING"
	StateStarted = "STARTED"
	StateSuccess = "SUCCESS"
	StateFailure = "FAILURE"
	StateRetry   = "RETRY"
	StateRevoked = "REVOKED"
	StateAborted = "ABORTED"
)

// ResultKeyPrefix prefixes the Redis key (and pub/sub channel) of a task's
// result document.
const ResultKeyPrefix = "celery-task-meta-"

// ResultKey is the Redis key and channel of taskID's result document.
func ResultKey(taskID string) string {
	return ResultKeyPrefix + taskID
}

// DecodeResult parses a result document as the Redis backend stores it (or
// the rpc:// backend sends it). kombu ≥5.3's typed values
// ({"__type__", "__value__"}) are shown as kombu 5.2 wrote them (PlainJSON),
// in the result and so in an exception's arguments, so that a result reads
// the same whatever the workers' release. A typed date_done or traceback is
// unwrapped to its value (date_done stays as the worker wrote it: Celery 5.6
// writes it as a plain "+00:00" string).
func DecodeResult(data []byte) (*Result, error) {
	var doc struct {
		TaskID    string          `json:"task_id"`
		Status    *string         `json:"status"`
		Result    json.RawMessage `json:"result"`
		Traceback json.RawMessage `json:"traceback"`
		DateDone  json.RawMessage `json:"date_done"`
		Children  json.RawMessage `json:"children"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decode result document: %w", err)
	}
	if doc.Status == nil || *doc.Status == "" {
		return nil, errors.New("decode result document: no status")
	}
	tb, err := optionalString(doc.Traceback)
	if err != nil {
		return nil, fmt.Errorf("decode result document: traceback: %w", err)
	}
	done, err := optionalString(doc.DateDone)
	if err != nil {
		return nil, fmt.Errorf("decode result document: date_done: %w", err)
	}
	r := &Result{
		TaskID:    doc.TaskID,
		Status:    *doc.Status,
		Result:    doc.Result,
		Traceback: tb,
		DateDone:  done,
		Children:  doc.Children,
	}
	if len(r.Result) == 0 {
		r.Result = json.RawMessage("null")
	} else if bytes.Contains(r.Result, typedMarker) {
		plain, err := PlainJSON(r.Result)
		if err != nil {
			return nil, fmt.Errorf("decode result document: result: %w", err)
		}
		r.Result = plain
	}
	return r, nil
}

// optionalString reads a JSON string or null, also in kombu's typed form
// {"__type__": "datetime", "__value__": "..."}.
func optionalString(raw json.RawMessage) (*string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return &s, nil
	}
	var typed struct {
		Type  *string `json:"__type__"`
		Value *string `json:"__value__"`
	}
	if err := json.Unmarshal(raw, &typed); err != nil || typed.Type == nil || typed.Value == nil {
		return nil, fmt.Errorf("want a string or null, got %.40s", raw)
	}
	return typed.Value, nil
}

// Ready reports whether the task has finished for good (Celery's
// READY_STATES); a nil Result is not ready.
func (r *Result) Ready() bool {
	if r == nil {
		return false
	}
	switch r.Status {
	case StateSuccess, StateFailure, StateRevoked:
		return true
	}
	return false
}

// PendingResult is the result of a task the backend knows nothing about:
// Celery never stores PENDING, a missing document means it.
func PendingResult(id string) *Result {
	return &Result{TaskID: id, Status: StatePending, Result: json.RawMessage("null")}
}

// AbortedDocument is the document AbortableAsyncResult.abort() stores: an
// AbortableTask polls its own result and stops when it reads ABORTED.
func AbortedDocument(taskID string) []byte {
	id, _ := json.Marshal(taskID) // marshalling a string cannot fail
	var b bytes.Buffer
	b.WriteString(`{"status": "ABORTED", "result": null, "traceback": null, "children": null, "date_done": null, "task_id": `)
	b.Write(id)
	b.WriteByte('}')
	return b.Bytes()
}
