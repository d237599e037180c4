// Package taskrec is a task record as celery.events.state keeps it and
// Flower shows it (Task, its nullable fields and Flower's JSON of it), and
// the compact form the in-memory state holds records in: pointer-free
// slots, interned strings, an arena of packed records, the id table and
// the sorted indexes. What goes in, and when, is the state's to decide.
package taskrec

import (
	"strconv"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// Task states as Celery names them.
const (
	Pending  = "PENDING"
	Received = "RECEIVED"
	Started  = "STARTED"
	Success  = "SUCCESS"
	Failure  = "FAILURE"
	Retry    = "RETRY"
	Revoked  = "REVOKED"
	Rejected = "REJECTED"
)

// Field names a nullable field of a Task, for Task.Set.
type Field uint32

// The nullable fields of a task record.
const (
	FieldName Field = 1 << iota
	FieldReceived
	FieldSent
	FieldStarted
	FieldRejected
	FieldSucceeded
	FieldFailed
	FieldRetried
	FieldRevoked
	FieldArgs
	FieldKwargs
	FieldETA
	FieldExpires
	FieldRetries
	FieldWorker
	FieldResult
	FieldException
	FieldTimestamp
	FieldRuntime
	FieldTraceback
	FieldExchange
	FieldRoutingKey
	FieldClient
	FieldRootID
	FieldParentID
)

// Task is a task record as celery.events.state keeps it and Flower shows
// it. Times are epoch seconds; args, kwargs and result are the worker's
// repr strings. A field not in Set is null (None in Python) whatever its
// Go value.
type Task struct {
	UUID       string
	Name       string
	State      string
	Received   float64
	Sent       float64
	Started    float64
	Rejected   float64
	Succeeded  float64
	Failed     float64
	Retried    float64
	Revoked    float64
	Args       string
	Kwargs     string
	ETA        string
	Expires    string
	Retries    int
	Worker     string // hostname of the worker of the latest worker-sent event
	Result     string
	Exception  string
	Timestamp  float64 // time of the latest event that was not out of order
	Runtime    float64
	Traceback  string
	Exchange   string
	RoutingKey string
	Clock      int64
	Client     string // hostname of the client that sent task-sent
	RootID     string
	ParentID   string
	Children   []string // ids of the known tasks whose parent this is
	Set        Field
}

// Has reports whether the field has a value (is not null).
func (t *Task) Has(f Field) bool { return t.Set&f != 0 }

// MarshalJSON writes the record as GET /api/task/info does: Celery's field
// order with worker in place (null when no worker event was seen), in
// Flower's exact bytes.
func (t Task) MarshalJSON() ([]byte, error) {
	return t.AppendInfoJSON(make([]byte, 0, 768)), nil
}

// AppendInfoJSON appends the MarshalJSON form of t to dst.
func (t Task) AppendInfoJSON(dst []byte) []byte { return t.appendJSON(dst, true) }

// AppendListJSON appends the form GET /api/tasks uses for each value: the
// worker key is dropped from its place and, when known, written last.
func (t Task) AppendListJSON(dst []byte) []byte { return t.appendJSON(dst, false) }

func (t *Task) appendJSON(b []byte, info bool) []byte {
	b = append(b, `{"uuid": `...)
	b = pyfmt.AppendJSONString(b, t.UUID)
	b = t.appendString(b, `, "name": `, FieldName, t.Name)
	b = append(b, `, "state": `...)
	b = pyfmt.AppendJSONString(b, t.State)
	b = t.appendFloat(b, `, "received": `, FieldReceived, t.Received)
	b = t.appendFloat(b, `, "sent": `, FieldSent, t.Sent)
	b = t.appendFloat(b, `, "started": `, FieldStarted, t.Started)
	b = t.appendFloat(b, `, "rejected": `, FieldRejected, t.Rejected)
	b = t.appendFloat(b, `, "succeeded": `, FieldSucceeded, t.Succeeded)
	b = t.appendFloat(b, `, "failed": `, FieldFailed, t.Failed)
	b = t.appendFloat(b, `, "retried": `, FieldRetried, t.Retried)
	b = t.appendFloat(b, `, "revoked": `, FieldRevoked, t.Revoked)
	b = t.appendString(b, `, "args": `, FieldArgs, t.Args)
	b = t.appendString(b, `, "kwargs": `, FieldKwargs, t.Kwargs)
	b = t.appendString(b, `, "eta": `, FieldETA, t.ETA)
	b = t.appendString(b, `, "expires": `, FieldExpires, t.Expires)
	b = append(b, `, "retries": `...)
	if t.Has(FieldRetries) {
		b = strconv.AppendInt(b, int64(t.Retries), 10)
	} else {
		b = append(b, "null"...)
	}
	if info {
		b = t.appendString(b, `, "worker": `, FieldWorker, t.Worker)
	}
	b = t.appendString(b, `, "result": `, FieldResult, t.Result)
	b = t.appendString(b, `, "exception": `, FieldException, t.Exception)
	b = t.appendFloat(b, `, "timestamp": `, FieldTimestamp, t.Timestamp)
	b = t.appendFloat(b, `, "runtime": `, FieldRuntime, t.Runtime)
	b = t.appendString(b, `, "traceback": `, FieldTraceback, t.Traceback)
	b = t.appendString(b, `, "exchange": `, FieldExchange, t.Exchange)
	b = t.appendString(b, `, "routing_key": `, FieldRoutingKey, t.RoutingKey)
	b = append(b, `, "clock": `...)
	b = strconv.AppendInt(b, t.Clock, 10)
	b = t.appendString(b, `, "client": `, FieldClient, t.Client)
	// Celery serialises root and parent as their ids.
	b = t.appendString(b, `, "root": `, FieldRootID, t.RootID)
	b = t.appendString(b, `, "root_id": `, FieldRootID, t.RootID)
	b = t.appendString(b, `, "parent": `, FieldParentID, t.ParentID)
	b = t.appendString(b, `, "parent_id": `, FieldParentID, t.ParentID)
	b = append(b, `, "children": [`...)
	for i, c := range t.Children {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = pyfmt.AppendJSONString(b, c)
	}
	b = append(b, ']')
	if !info && t.Has(FieldWorker) {
		b = append(b, `, "worker": `...)
		b = pyfmt.AppendJSONString(b, t.Worker)
	}
	return append(b, '}')
}

func (t *Task) appendString(b []byte, key string, f Field, v string) []byte {
	b = append(b, key...)
	if !t.Has(f) {
		return append(b, "null"...)
	}
	return pyfmt.AppendJSONString(b, v)
}

func (t *Task) appendFloat(b []byte, key string, f Field, v float64) []byte {
	b = append(b, key...)
	if !t.Has(f) {
		return append(b, "null"...)
	}
	return pyfmt.AppendJSONFloat(b, v)
}
