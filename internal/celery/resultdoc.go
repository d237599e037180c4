package celery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// ResultKeyPrefixFor is the result key prefix under a result backend's
// global_keyprefix (result_backend_transport_options), as Celery 5.3+
// builds it: the global prefix, with "_" appended unless it already ends in
// one of ":_-.", then ResultKeyPrefix. Celery 5.2 ignores the option.
func ResultKeyPrefixFor(globalPrefix string) string {
	if globalPrefix != "" && !strings.ContainsAny(globalPrefix[len(globalPrefix)-1:], ":_-.") {
		globalPrefix += "_"
	}
	return globalPrefix + ResultKeyPrefix
}

// DecodeResult parses a result document as the Redis backend stores it (or
// the rpc:// backend sends it). kombu ≥5.3's typed values
// ({"__type__", "__value__"}) are shown as kombu 5.2 wrote them (PlainJSON),
// in the result and so in an exception's arguments, so that a result reads
// the same whatever the workers' release. A typed date_done or traceback is
// unwrapped to its value (date_done stays as the worker wrote it: Celery 5.6
// writes it as a plain "+00:00" string).
func DecodeResult(data []byte) (*Result, error) {
	return DecodeResultContent(data, "")
}

// DecodeResultContent is DecodeResult for a payload whose content type is
// known (an rpc:// result message carries it). A payload that is not JSON
// gives an *UnreadableResultError naming its serializer, so that callers
// can tell "stored in a form stamen cannot read" from "no result" and from
// an outage.
func DecodeResultContent(data []byte, contentType string) (*Result, error) {
	if s := foreignSerializer(data, contentType); s != "" {
		return nil, fmt.Errorf("decode result document: %w", &UnreadableResultError{Serializer: s})
	}
	var doc struct {
		TaskID    string          `json:"task_id"`
		Status    *string         `json:"status"`
		Result    json.RawMessage `json:"result"`
		Traceback json.RawMessage `json:"traceback"`
		DateDone  json.RawMessage `json:"date_done"`
		Children  json.RawMessage `json:"children"`
		Name      *string         `json:"name"`
		Args      json.RawMessage `json:"args"`
		Kwargs    json.RawMessage `json:"kwargs"`
		Queue     *string         `json:"queue"`
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
		Request:   resultRequest(doc.Name, doc.Args, doc.Kwargs, doc.Queue),
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

// contentTypes are kombu's registered content types other than JSON.
var contentTypes = map[string]string{
	"application/x-python-serialize": "pickle",
	"application/x-msgpack":          "msgpack",
	"application/x-yaml":             "yaml",
	"application/data":               "raw bytes",
	"application/text":               "raw text",
}

// foreignSerializer names the serializer of a payload that is not JSON,
// or returns "" for JSON (or what may be JSON: the decoder then reports
// what is wrong with it). The Redis backend stores the bare payload, so
// the format is told by its first bytes.
func foreignSerializer(data []byte, contentType string) string {
	if s, ok := contentTypes[contentType]; ok {
		return s
	}
	b := bytes.TrimLeft(data, " \t\r\n")
	if len(b) == 0 || b[0] == '{' {
		return ""
	}
	switch {
	case len(b) >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5:
		// PROTO opcode and protocol 2-5 (Python 3 writes 3 to 5).
		return "pickle"
	case b[0] >= 0x81 && b[0] <= 0x8f, b[0] == 0xde, b[0] == 0xdf:
		// A msgpack map (fixmap, map16, map32): a result meta dict.
		return "msgpack"
	case len(b) >= 2 && b[0] == 0x78 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0:
		// zlib header: CMF 0x78 (deflate, 32K window), FCHECK makes it a multiple of 31.
		return "zlib"
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		return "gzip"
	case bytes.HasPrefix(b, []byte("BZh")):
		return "bzip2"
	case bytes.HasPrefix(b, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "xz"
	case bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "zstd"
	}
	if json.Valid(b) {
		// Other JSON: not a result document, which the decoder says.
		return ""
	}
	if line, _, _ := bytes.Cut(b, []byte("\n")); bytes.Contains(line, []byte(": ")) || bytes.HasSuffix(line, []byte(":")) {
		// yaml.safe_dump of the meta dict: "children: []", "date_done: ...".
		return "yaml"
	}
	return "unknown"
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
	return r != nil && ReadyState(r.Status)
}

// ReadyState reports whether state is one of Celery's READY_STATES.
func ReadyState(state string) bool {
	switch state {
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

// resultRequest reads the request fields of an extended result; nil when
// the document has no task name or its args or kwargs are not a list and
// an object (a worker without result_extended stores none of them).
func resultRequest(name *string, args, kwargs json.RawMessage, queue *string) *ResultRequest {
	if name == nil || *name == "" {
		return nil
	}
	r := &ResultRequest{Name: *name}
	if queue != nil {
		r.Queue = *queue
	}
	decode := func(raw json.RawMessage, v any) bool {
		if len(raw) == 0 || string(raw) == "null" {
			return true
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		return dec.Decode(v) == nil
	}
	if !decode(args, &r.Args) || !decode(kwargs, &r.Kwargs) {
		return nil
	}
	return r
}
