package handlers

import (
	"bytes"
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-openapi/runtime"
	"github.com/go-openapi/runtime/middleware"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// exportColumns are the CSV export's columns: the task record's fields,
// Celery's names, in the order of the JSON form.
var exportColumns = []string{
	"uuid", "name", "state", "received", "sent", "started", "rejected", "succeeded", "failed", "retried", "revoked",
	"args", "kwargs", "eta", "expires", "retries", "worker", "result", "exception", "timestamp", "runtime", "traceback",
	"exchange", "routing_key", "clock", "client", "root_id", "parent_id", "children",
}

// taskExportBody writes GET /api/tasks?format=csv|jsonl. Like taskListBody
// it writes raw bytes chunk by chunk from the cursor rather than a model:
// an export of any size then holds one chunk at a time, where a model of
// the whole list would hold every task.
type taskExportBody struct {
	list   TaskCursor
	ctx    context.Context
	failed func(op string, err error) middleware.Responder
	csv    bool
}

func (b taskExportBody) WriteResponse(rw http.ResponseWriter, producer runtime.Producer) {
	defer b.list.Close()
	var buf bytes.Buffer
	var cw *csv.Writer
	var rec []string
	var line []byte
	write := func(t *taskrec.Task) {
		if cw != nil {
			rec = appendCSVRecord(rec[:0], t)
			_ = cw.Write(rec) // a bytes.Buffer does not fail
			return
		}
		line = t.AppendListJSON(line[:0])
		buf.Write(line)
		buf.WriteByte('\n')
	}
	name := "tasks.jsonl"
	ctype := "application/x-ndjson"
	if b.csv {
		name, ctype = "tasks.csv", "text/csv; charset=utf-8"
		cw = csv.NewWriter(&buf)
		_ = cw.Write(exportColumns)
	}
	sent := false
	for more := true; more; {
		more = b.list.Next(taskListChunk, write)
		if b.ctx.Err() != nil {
			return
		}
		if cw != nil {
			cw.Flush()
		}
		if !more {
			if err := b.list.Err(); err != nil {
				if !sent {
					b.failed("tasks", err).WriteResponse(rw, producer)
					return
				}
				// The status is sent: the response is aborted, its
				// chunked body left unterminated, so that the client
				// sees a failed transfer instead of a shorter export.
				panic(http.ErrAbortHandler)
			}
		}
		if !sent {
			rw.Header().Set("Content-Type", ctype)
			rw.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
			rw.WriteHeader(http.StatusOK)
			sent = true
		}
		if buf.Len() == 0 {
			continue
		}
		if _, err := rw.Write(buf.Bytes()); err != nil {
			return
		}
		buf.Reset()
	}
}

// csvText is a text cell of the CSV export. A spreadsheet runs a cell
// that begins with =, +, - or @ as a formula, and some also after a tab or
// a carriage return; every text field of a task comes from a client or a
// worker, so such a cell is written with a single quote before it, as
// OWASP's advice on CSV injection has it: the spreadsheet then shows the
// text. The numbers stamen formats itself are left alone.
func csvText(v string) string {
	if v == "" {
		return v
	}
	switch v[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + v
	}
	return v
}

// appendCSVRecord appends t's fields as exportColumns orders them: null
// fields empty, times and numbers as in the JSON form, text cells escaped
// by csvText.
func appendCSVRecord(rec []string, t *taskrec.Task) []string {
	str := func(f taskrec.Field, v string) string {
		if !t.Has(f) {
			return ""
		}
		return csvText(v)
	}
	num := func(f taskrec.Field, v float64) string {
		if !t.Has(f) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	retries := ""
	if t.Has(taskrec.FieldRetries) {
		retries = strconv.Itoa(t.Retries)
	}
	return append(rec,
		csvText(t.UUID), str(taskrec.FieldName, t.Name), csvText(t.State),
		num(taskrec.FieldReceived, t.Received), num(taskrec.FieldSent, t.Sent), num(taskrec.FieldStarted, t.Started),
		num(taskrec.FieldRejected, t.Rejected), num(taskrec.FieldSucceeded, t.Succeeded), num(taskrec.FieldFailed, t.Failed),
		num(taskrec.FieldRetried, t.Retried), num(taskrec.FieldRevoked, t.Revoked),
		str(taskrec.FieldArgs, t.Args), str(taskrec.FieldKwargs, t.Kwargs), str(taskrec.FieldETA, t.ETA), str(taskrec.FieldExpires, t.Expires),
		retries, str(taskrec.FieldWorker, t.Worker), str(taskrec.FieldResult, t.Result), str(taskrec.FieldException, t.Exception),
		num(taskrec.FieldTimestamp, t.Timestamp), num(taskrec.FieldRuntime, t.Runtime), str(taskrec.FieldTraceback, t.Traceback),
		str(taskrec.FieldExchange, t.Exchange), str(taskrec.FieldRoutingKey, t.RoutingKey), strconv.FormatInt(t.Clock, 10),
		str(taskrec.FieldClient, t.Client), str(taskrec.FieldRootID, t.RootID), str(taskrec.FieldParentID, t.ParentID),
		csvText(strings.Join(t.Children, " ")),
	)
}
