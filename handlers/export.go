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

	"github.com/stamen-dev/stamen/internal/state"
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
	write := func(t *state.Task) {
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
func appendCSVRecord(rec []string, t *state.Task) []string {
	str := func(f state.Field, v string) string {
		if !t.Has(f) {
			return ""
		}
		return csvText(v)
	}
	num := func(f state.Field, v float64) string {
		if !t.Has(f) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	retries := ""
	if t.Has(state.FieldRetries) {
		retries = strconv.Itoa(t.Retries)
	}
	return append(rec,
		csvText(t.UUID), str(state.FieldName, t.Name), csvText(t.State),
		num(state.FieldReceived, t.Received), num(state.FieldSent, t.Sent), num(state.FieldStarted, t.Started),
		num(state.FieldRejected, t.Rejected), num(state.FieldSucceeded, t.Succeeded), num(state.FieldFailed, t.Failed),
		num(state.FieldRetried, t.Retried), num(state.FieldRevoked, t.Revoked),
		str(state.FieldArgs, t.Args), str(state.FieldKwargs, t.Kwargs), str(state.FieldETA, t.ETA), str(state.FieldExpires, t.Expires),
		retries, str(state.FieldWorker, t.Worker), str(state.FieldResult, t.Result), str(state.FieldException, t.Exception),
		num(state.FieldTimestamp, t.Timestamp), num(state.FieldRuntime, t.Runtime), str(state.FieldTraceback, t.Traceback),
		str(state.FieldExchange, t.Exchange), str(state.FieldRoutingKey, t.RoutingKey), strconv.FormatInt(t.Clock, 10),
		str(state.FieldClient, t.Client), str(state.FieldRootID, t.RootID), str(state.FieldParentID, t.ParentID),
		csvText(strings.Join(t.Children, " ")),
	)
}
