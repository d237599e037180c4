package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-openapi/runtime"
	"github.com/go-openapi/runtime/middleware"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/tasksearch"
	"github.com/stamen-dev/stamen/restapi/operations/queues"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
	"github.com/stamen-dev/stamen/restapi/operations/workers"
)

const receivedLayout = "2006-01-02 15:04"

// receivedRange reads the received_start and received_end parameters of
// GET /api/tasks and of the operations that take its filters (server
// local time, as Flower reads them); nil for an absent one.
func receivedRange(start, end *string) (from, to *time.Time, err error) {
	if from, err = receivedTime("received_start", start); err != nil {
		return nil, nil, err
	}
	if to, err = receivedTime("received_end", end); err != nil {
		return nil, nil, err
	}
	return from, to, nil
}

func receivedTime(name string, s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := time.ParseInLocation(receivedLayout, *s, time.Local)
	if err != nil {
		return nil, fmt.Errorf("%s must be YYYY-MM-DD HH:MM", name)
	}
	return &t, nil
}

func (h *Handlers) listTasks(p tasks.ListTasksParams, _ any) middleware.Responder {
	q := state.Query{Limit: -1, Offset: int(deref(p.Offset))}
	if p.Limit != nil {
		q.Limit = int(*p.Limit)
	}
	q.Worker = deref(p.Workername)
	q.TaskName = deref(p.Taskname)
	q.State = deref(p.State)
	q.SortBy = deref(p.SortBy)
	q.Search = deref(p.Search)
	var err error
	if q.ReceivedStart, q.ReceivedEnd, err = receivedRange(p.ReceivedStart, p.ReceivedEnd); err != nil {
		return apiError(http.StatusBadRequest, "%v", err)
	}
	list, err := h.Tasks.ListTasks(p.HTTPRequest.Context(), q)
	if err != nil {
		return h.readError("tasks", err)
	}
	if f := deref(p.Format); f == "csv" || f == "jsonl" {
		return taskExportBody{list: list, ctx: p.HTTPRequest.Context(), failed: h.readError, csv: f == "csv"}
	}
	return taskListBody{list: list, ctx: p.HTTPRequest.Context(), failed: h.readError}
}

// readError answers a failed selection of tasks: 503 when the task store
// is unavailable, else 400 (a bad search, sort or filter).
func (h *Handlers) readError(op string, err error) middleware.Responder {
	var se *tasksearch.Error
	switch {
	case errors.As(err, &se):
		return apiError(http.StatusBadRequest, "%s", se.Error())
	case errors.Is(err, history.ErrUnavailable):
		return h.storeError(op, err)
	}
	return apiError(http.StatusBadRequest, "%v", err)
}

// taskListChunk is how many tasks are written per read lock of the state:
// about 200 KiB of body, a fraction of a millisecond of the lock.
const taskListChunk = 256

// taskListBody writes GET /api/tasks as {"<id>": <task>, ...} in the list's
// order, chunk by chunk. The body is raw bytes streamed from the state, not
// a generated model: Flower lists every task when no limit is given, and a
// model (or any whole body) of a million tasks takes gigabytes, where a
// chunk takes a few hundred kilobytes whatever the count. Each task's
// object is Flower's own bytes (key order, separators, Python's escapes,
// from the state's Flower-exact encoder), which encoding a model would not
// give. The ids that key them are written as encoding/json writes a string
// (appendJSONString): the same bytes as Python's json.dumps for an id of
// printable ASCII without <, > or &, as Celery's UUIDs are; another id
// differs in its escapes (Python writes non-ASCII as \uXXXX and leaves
// <, >, & alone). The work stops when the client goes away.
//
// A list that a store's error ends early is not passed off as whole: before
// the status is sent it is answered as the error (503, or 400 for a search
// too broad to check in time), after it the body is cut short of its
// closing brace, so that no client takes it for the complete list.
type taskListBody struct {
	list   TaskCursor
	ctx    context.Context
	failed func(op string, err error) middleware.Responder
}

// listBufs are the task lists' write buffers, 64 KiB each: made per
// request they were a large part of the reads' garbage, which at a small
// state sets how often the collector runs (bench/RESULTS.md, the reads
// under concurrent clients).
var listBufs = sync.Pool{New: func() any { b := make([]byte, 0, listBufSize); return &b }}

const listBufSize = 64 << 10

func (b taskListBody) WriteResponse(rw http.ResponseWriter, producer runtime.Producer) {
	defer b.list.Close()
	rw.Header().Set("Content-Type", "application/json")
	pooled := listBufs.Get().(*[]byte)
	buf := (*pooled)[:0]
	defer func() {
		// A buffer a huge task outgrew is left to the collector.
		if cap(buf) <= 4*listBufSize {
			*pooled = buf
			listBufs.Put(pooled)
		}
	}()
	buf = append(buf, '{')
	first := true
	write := func(t *taskrec.Task) {
		if !first {
			buf = append(buf, ", "...)
		}
		first = false
		buf = appendJSONString(buf, t.UUID)
		buf = append(buf, ": "...)
		buf = t.AppendListJSON(buf)
	}
	for more, sent := true, false; more; {
		more = b.list.Next(taskListChunk, write)
		if b.ctx.Err() != nil {
			return
		}
		if !more {
			if err := b.list.Err(); err != nil {
				if !sent {
					b.failed("tasks", err).WriteResponse(rw, producer)
					return
				}
				if len(buf) > 0 {
					_, _ = rw.Write(buf)
				}
				return
			}
			buf = append(buf, '}')
		}
		if !sent {
			if !more {
				// The whole body is in hand (a page, or any list of one
				// chunk): with its length net/http sends it in one piece
				// instead of chunked, a write fewer, and clients read it
				// without decoding chunks.
				rw.Header().Set("Content-Length", strconv.Itoa(len(buf)))
			}
			rw.WriteHeader(http.StatusOK)
			sent = true
		}
		if len(buf) == 0 {
			continue // a chunk that the search left empty
		}
		if _, err := rw.Write(buf); err != nil {
			return
		}
		buf = buf[:0]
	}
}

func (h *Handlers) listTaskTypes(p tasks.ListTaskTypesParams, _ any) middleware.Responder {
	types, err := h.Tasks.TaskTypes(p.HTTPRequest.Context())
	if err != nil {
		return h.storeError("task types", err)
	}
	if types == nil {
		types = []string{} // Flower's sorted(set()) is [], never null
	}
	return tasks.NewListTaskTypesOK().WithPayload(&models.TaskTypes{TaskTypes: types})
}

func (h *Handlers) getTaskInfo(p tasks.GetTaskInfoParams, _ any) middleware.Responder {
	t, ok, err := h.Tasks.Task(p.HTTPRequest.Context(), p.Taskid)
	if err != nil {
		return h.storeError("task info", err)
	}
	if !ok {
		return apiError(http.StatusNotFound, "Unknown task '%s'", p.Taskid)
	}
	b, err := t.MarshalJSON()
	if err != nil {
		return apiError(http.StatusInternalServerError, "cannot encode the task")
	}
	return rawJSON{status: http.StatusOK, body: b}
}

func (h *Handlers) getQueueLengths(p queues.GetQueueLengthsParams, _ any) middleware.Responder {
	if len(h.Inspector.QueueNames()) == 0 {
		// Nobody inspected yet: ask once.
		_ = h.Inspector.Refresh(p.HTTPRequest.Context(), "")
	}
	names := h.queueNames(p.HTTPRequest.Context())
	if len(names) == 0 {
		names = []string{celery.DefaultQueue}
	}
	ctx, cancel := context.WithTimeout(p.HTTPRequest.Context(), h.BrokerTimeout)
	defer cancel()
	lengths, err := h.Broker.QueueLengths(ctx, names)
	if err != nil {
		return h.brokerError("queue lengths", err)
	}
	out := &models.QueueLengths{ActiveQueues: make([]*models.QueueLength, 0, len(names))}
	for _, n := range names {
		name, messages := n, lengths[n]
		out.ActiveQueues = append(out.ActiveQueues, &models.QueueLength{Name: &name, Messages: &messages})
	}
	return queues.NewGetQueueLengthsOK().WithPayload(out)
}

func (h *Handlers) listWorkers(p workers.ListWorkersParams, _ any) middleware.Responder {
	name := deref(p.Workername)
	var timedOut []string
	if deref(p.Refresh) {
		var err error
		if timedOut, err = h.Inspector.RefreshReport(p.HTTPRequest.Context(), name); err != nil {
			return h.brokerError("Failed to update workers", err)
		}
	}
	// The body stays Flower's map of workers; who did not answer goes in
	// a header.
	header := timedOutHeader(timedOut)
	if deref(p.Status) {
		// Liveness comes from event heartbeats, as in Flower.
		ws, err := h.Tasks.Workers(p.HTTPRequest.Context())
		if err != nil {
			return h.storeError("workers", err)
		}
		buf := []byte{'{'}
		for i, w := range ws {
			if i > 0 {
				buf = append(buf, ", "...)
			}
			buf = appendJSONString(buf, w.Hostname)
			buf = append(buf, ": "...)
			buf = strconv.AppendBool(buf, w.Alive)
		}
		buf = append(buf, '}')
		return rawJSON{status: http.StatusOK, body: buf}
	}
	if name != "" {
		info, ok := h.Inspector.WorkerJSON(name)
		if !ok {
			return apiError(http.StatusNotFound, "Unknown worker '%s'", name)
		}
		return rawJSON{status: http.StatusOK, body: objectOf([]string{name}, [][]byte{info}), header: header}
	}
	names := h.Inspector.Names()
	infos := make([][]byte, 0, len(names))
	for _, n := range names {
		info, _ := h.Inspector.WorkerJSON(n)
		infos = append(infos, info)
	}
	return rawJSON{status: http.StatusOK, body: objectOf(names, infos), header: header}
}

// TimedOutHeader names the workers a refresh waited for in vain.
const TimedOutHeader = "X-Stamen-Timed-Out"

// maxTimedOutNames bounds the header: worker names come from events.
const maxTimedOutNames = 100

// timedOutHeader is the X-Stamen-Timed-Out header for these workers, or
// nil when there are none.
func timedOutHeader(workers []string) http.Header {
	if len(workers) == 0 {
		return nil
	}
	return http.Header{TimedOutHeader: {strings.Join(workers[:min(len(workers), maxTimedOutNames)], ",")}}
}

// objectOf writes {"k0": v0, ...} keeping the order of keys.
func objectOf(keys []string, values [][]byte) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.Write(appendJSONString(nil, k))
		b.WriteString(": ")
		b.Write(values[i])
	}
	b.WriteByte('}')
	return b.Bytes()
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// validName rejects names that cannot be Celery task or node names before
// they reach a broker: control characters, white space, and bytes that are
// not UTF-8 (a %FF in the path would otherwise reach the broker, and the
// answer, as U+FFFD: another name than the client gave).
func validName(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' })
}

// appendJSONString appends s as a JSON string as encoding/json writes it
// (strconv.Quote's Go escapes are not all valid JSON). A string of
// printable ASCII that JSON leaves alone, as task ids are, is copied
// without an allocation.
func appendJSONString(dst []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// storeError answers a failed read of the task store: 503, at once, with
// the reason (redacted) so that a load balancer can try another replica.
func (h *Handlers) storeError(op string, err error) middleware.Responder {
	h.log.Warn("task store read failed", slog.String("op", op), slog.Any("err", err))
	return apiError(http.StatusServiceUnavailable, "%s: %v", op, err)
}
