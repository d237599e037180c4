package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-openapi/runtime/middleware"
	"github.com/google/uuid"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/inspect"
	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
)

// flowerTimeLayout is the only date format Flower's async-apply accepts for
// eta and expires (microseconds required). stamen also accepts RFC 3339.
const flowerTimeLayout = "2006-01-02 15:04:05.000000"

// isoNaive is ISO 8601 without an offset, as Python's isoformat() writes a
// naive datetime (fraction optional).
const isoNaive = "2006-01-02T15:04:05.999999999"

// parseTime reads an absolute time given as Flower's "%Y-%m-%d %H:%M:%S.%f"
// (naive: taken as the server's local time, as Flower does), RFC 3339, or
// ISO 8601 without an offset, which Celery takes as UTC.
func parseTime(name, s string) (time.Time, error) {
	if t, err := time.ParseInLocation(flowerTimeLayout, s, time.Local); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(isoNaive, s, time.UTC); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("invalid %s %q: want YYYY-MM-DD HH:MM:SS.ffffff or ISO 8601", name, s)
}

// maxDelay bounds countdown and expires: beyond it a time.Duration
// overflows, and no real task waits that long.
const maxDelay = 10 * 365 * 24 * time.Hour

// seconds reads a number of seconds given as a JSON number or a string
// holding one (Flower clients send both for countdown).
func seconds(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, false
		}
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.Abs(f) > maxDelay.Seconds() {
		return 0, false
	}
	return f, true
}

// taskMessage turns the request body into a task message, validating every
// option before anything is sent.
func (h *Handlers) taskMessage(name string, body *models.TaskApplyRequest) (*celery.TaskMessage, error) {
	if !validName(name) {
		return nil, fmt.Errorf("invalid task name")
	}
	if body == nil {
		body = &models.TaskApplyRequest{}
	}
	now := h.Now()
	msg := &celery.TaskMessage{
		ID:            body.TaskID,
		Name:          name,
		Args:          body.Args,
		Kwargs:        body.Kwargs,
		Queue:         body.Queue,
		Exchange:      body.Exchange,
		RoutingKey:    body.RoutingKey,
		Shadow:        body.Shadow,
		IgnoreResult:  body.IgnoreResult,
		Headers:       body.Headers,
		Origin:        h.Origin,
		TimeLimit:     body.TimeLimit,
		SoftTimeLimit: body.SoftTimeLimit,
	}
	if msg.ID == "" {
		msg.ID = uuid.NewString()
	} else if !validName(msg.ID) {
		return nil, fmt.Errorf("invalid task_id")
	}
	if msg.Queue != "" && !validName(msg.Queue) {
		return nil, fmt.Errorf("invalid queue")
	}
	if body.Priority != nil {
		msg.Priority = int(*body.Priority)
	}
	if body.Countdown != nil {
		secs, ok := seconds(body.Countdown)
		if !ok {
			return nil, fmt.Errorf("invalid countdown: want a number of seconds")
		}
		eta := now.Add(time.Duration(secs * float64(time.Second)))
		msg.ETA = &eta
	}
	if body.Eta != "" {
		if body.Countdown != nil {
			return nil, fmt.Errorf("give either eta or countdown, not both")
		}
		eta, err := parseTime("eta", body.Eta)
		if err != nil {
			return nil, err
		}
		msg.ETA = &eta
	}
	if body.Expires != nil {
		if secs, ok := seconds(body.Expires); ok {
			exp := now.Add(time.Duration(secs * float64(time.Second)))
			msg.Expires = &exp
		} else if s, ok := body.Expires.(string); ok {
			exp, err := parseTime("expires", s)
			if err != nil {
				return nil, err
			}
			msg.Expires = &exp
		} else {
			return nil, fmt.Errorf("invalid expires: want seconds or a date")
		}
	}
	return msg, nil
}

// knownTask is Flower's "unknown task" check made useful: a task is known
// when a live worker registers it (Flower checks its own imported app).
// A miss refreshes the inspection once before answering no.
func (h *Handlers) knownTask(ctx context.Context, name string) bool {
	if h.Inspector.Registers(name) {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, h.ControlTimeout)
	defer cancel()
	_ = h.Inspector.Refresh(ctx, "")
	return h.Inspector.Registers(name)
}

func (h *Handlers) publish(ctx context.Context, name string, body *models.TaskApplyRequest, checkKnown bool) (*celery.TaskMessage, middleware.Responder) {
	msg, err := h.taskMessage(name, body)
	if err != nil {
		return nil, apiError(http.StatusBadRequest, "%v", err)
	}
	if checkKnown && !h.knownTask(ctx, name) {
		return nil, apiError(http.StatusNotFound, "Unknown task '%s'", name)
	}
	routed := msg.Queue == "" && msg.Exchange == "" && msg.RoutingKey == ""
	if routed {
		h.route(msg)
	}
	queue := celery.QueueName(msg)
	// A missing queue is declared only as a worker alive by heartbeat
	// declares it: one that stopped consumes nothing any more, and a queue
	// declared from its last reply would hold the task for nobody.
	msg.Declare, _ = h.Inspector.QueueDeclarationBy(queue, h.State.WorkerAlive)
	send := func() error {
		pctx, cancel := context.WithTimeout(ctx, h.BrokerTimeout)
		defer cancel()
		return h.Broker.Publish(pctx, msg)
	}
	err = send()
	if errors.Is(err, celery.ErrNoQueue) && msg.Declare == nil {
		// A worker may consume the queue since the last inspection, or
		// route the task elsewhere.
		ictx, cancel := context.WithTimeout(ctx, h.ControlTimeout)
		_ = h.Inspector.Refresh(ictx, "")
		cancel()
		if routed {
			h.route(msg)
			queue = celery.QueueName(msg)
		}
		if d, ok := h.Inspector.QueueDeclarationBy(queue, h.State.WorkerAlive); ok {
			msg.Declare = d
			err = send()
		}
	}
	if err != nil {
		return nil, h.brokerError("publish", err)
	}
	h.rememberQueue(ctx, cmp.Or(msg.Queue, celery.DefaultQueue))
	h.rememberSent(ctx, msg)
	return msg, nil
}

// route sends a task given no queue, exchange or routing key where the
// workers' own app would send it (Flower sends it with its app, which is
// the workers'): by their task_routes, else to their task_default_queue
// (inspect.Inspector.TaskRoute); to Celery's default queue when no
// inspected worker sets either.
func (h *Handlers) route(msg *celery.TaskMessage) {
	r, _ := h.Inspector.TaskRoute(msg.Name)
	for _, v := range []string{r.Queue, r.Exchange, r.RoutingKey} {
		// Held to what the request body may give.
		if v != "" && (len(v) > 255 || !validName(v)) {
			r = inspect.Route{}
		}
	}
	msg.Queue, msg.Exchange, msg.RoutingKey = r.Queue, r.Exchange, r.RoutingKey
}

// taskIDBody is {"task-id": id, "state": ...}; state only with a result
// backend, as in Flower.
func (h *Handlers) taskIDBody(ctx context.Context, id string) *models.TaskID {
	out := &models.TaskID{TaskID: &id}
	if h.Results != nil {
		rctx, cancel := context.WithTimeout(ctx, h.BrokerTimeout)
		defer cancel()
		if r, err := h.Results.Result(rctx, id); err == nil {
			out.State = r.Status
		} else {
			out.State = "PENDING"
		}
	}
	return out
}

func (h *Handlers) asyncApplyTask(p tasks.AsyncApplyTaskParams, _ any) middleware.Responder {
	ctx := p.HTTPRequest.Context()
	msg, fail := h.publish(ctx, p.Taskname, p.Args, true)
	if fail != nil {
		return fail
	}
	return encoded(tasks.NewAsyncApplyTaskOK().WithPayload(h.taskIDBody(ctx, msg.ID)))
}

func (h *Handlers) sendTask(p tasks.SendTaskParams, _ any) middleware.Responder {
	ctx := p.HTTPRequest.Context()
	msg, fail := h.publish(ctx, p.Taskname, p.Args, false)
	if fail != nil {
		return fail
	}
	return encoded(tasks.NewSendTaskOK().WithPayload(h.taskIDBody(ctx, msg.ID)))
}

func (h *Handlers) applyTask(p tasks.ApplyTaskParams, _ any) middleware.Responder {
	if h.Results == nil {
		return apiError(http.StatusServiceUnavailable, "apply: no result backend configured")
	}
	wait := h.ApplyTimeout
	if p.Timeout != nil {
		if math.IsNaN(*p.Timeout) {
			return apiError(http.StatusBadRequest, "invalid timeout: want a number of seconds")
		}
		wait = time.Duration(*p.Timeout * float64(time.Second))
	}
	ctx := p.HTTPRequest.Context()
	msg, fail := h.publish(ctx, p.Taskname, p.Args, true)
	if fail != nil {
		return fail
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	r, err := h.Results.WaitResult(wctx, msg.ID)
	if err != nil {
		if u := unreadable(err); u != nil {
			// The backend cannot say when the task is done: the events can.
			return encoded(tasks.NewApplyTaskUnprocessableEntity().WithPayload(unreadableResult(msg.ID, u, h.awaitEventState(wctx, msg.ID))))
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return apiError(http.StatusGatewayTimeout, "task %s did not finish within %s", msg.ID, wait)
		}
		return h.brokerError("apply", err)
	}
	return jsonResponse{status: http.StatusOK, body: resultBody(msg.ID, r, true)}
}

// unreadable returns the error saying a result is stored in a form stamen
// cannot decode, or nil.
func unreadable(err error) *celery.UnreadableResultError {
	var u *celery.UnreadableResultError
	if errors.As(err, &u) {
		return u
	}
	return nil
}

// unreadableResult is the body of the 422 that answers a result stamen
// cannot decode: the task ran and its result exists, so neither "pending"
// nor an outage (503) would be true. The state is the events' (empty when stamen has none).
func unreadableResult(id string, u *celery.UnreadableResultError, state string) *models.ResultUnreadable {
	msg := fmt.Sprintf("result of task %s is stored with serializer '%s', which stamen cannot read (it reads JSON results only; set result_serializer='json' on the workers)", id, u.Serializer)
	if state != "" {
		msg += "; state " + state
	}
	return &models.ResultUnreadable{Error: &msg, TaskID: &id, Serializer: &u.Serializer, State: state}
}

// eventPoll is how often awaitEventState looks at the events state.
const eventPoll = 50 * time.Millisecond

// awaitEventState waits until the events show the task finished (a ready
// state) or ctx ends, and returns its latest state ("" when unknown).
// Polling costs one map lookup in memory, one primary-key read with
// PostgreSQL; neither has a per-task notification to wait on.
func (h *Handlers) awaitEventState(ctx context.Context, id string) string {
	tick := time.NewTicker(eventPoll)
	defer tick.Stop()
	for {
		// With PostgreSQL the fleet's history: another replica may have
		// ingested the task's events. A failed read is a state not known
		// yet.
		t, _, _ := h.Tasks.Task(ctx, id)
		if celery.ReadyState(t.State) {
			return t.State
		}
		select {
		case <-ctx.Done():
			return t.State
		case <-tick.C:
		}
	}
}

// resultBody builds Flower's result shape. The key order follows Flower's:
// task-id, state, result, traceback for /result; apply puts the same keys.
func resultBody(id string, r *celery.Result, ready bool) any {
	type body struct {
		TaskID    string          `json:"task-id"`
		State     string          `json:"state"`
		Result    json.RawMessage `json:"result,omitempty"`
		Traceback *string         `json:"traceback,omitempty"`
	}
	out := body{TaskID: id, State: r.Status}
	if !ready {
		return out
	}
	switch r.Status {
	case "FAILURE", "REVOKED", "RETRY":
		// Flower shows an exception as its Python repr.
		repr, _ := json.Marshal(pyfmt.ExceptionRepr(r.Result))
		out.Result = repr
	default:
		out.Result = r.Result
		if len(out.Result) == 0 {
			out.Result = json.RawMessage("null")
		}
	}
	if r.Status == "FAILURE" {
		out.Traceback = r.Traceback
	}
	return out
}

func (h *Handlers) getTaskResult(p tasks.GetTaskResultParams, _ any) middleware.Responder {
	if h.Results == nil {
		return apiError(http.StatusServiceUnavailable, "result: no result backend configured")
	}
	if !validName(p.Taskid) {
		return apiError(http.StatusBadRequest, "invalid task id")
	}
	if p.Timeout != nil && math.IsNaN(*p.Timeout) {
		// The spec's bounds let NaN through: it compares false to both.
		return apiError(http.StatusBadRequest, "invalid timeout: want a number of seconds")
	}
	ctx := p.HTTPRequest.Context()
	var (
		r   *celery.Result
		err error
	)
	if p.Timeout != nil && *p.Timeout > 0 {
		wait := time.Duration(*p.Timeout * float64(time.Second))
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		r, err = h.Results.WaitResult(wctx, p.Taskid)
		if errors.Is(err, context.DeadlineExceeded) {
			return apiError(http.StatusGatewayTimeout, "task %s did not finish within %s", p.Taskid, wait)
		}
	} else {
		rctx, cancel := context.WithTimeout(ctx, h.BrokerTimeout)
		defer cancel()
		r, err = h.Results.Result(rctx, p.Taskid)
	}
	if u := unreadable(err); u != nil {
		// The state is extra information: a failed read leaves it out.
		st, _, _ := h.Tasks.Task(ctx, p.Taskid)
		return encoded(tasks.NewGetTaskResultUnprocessableEntity().WithPayload(unreadableResult(p.Taskid, u, st.State)))
	}
	if err != nil {
		return h.brokerError("result", err)
	}
	return jsonResponse{status: http.StatusOK, body: resultBody(p.Taskid, r, r.Ready())}
}

func (h *Handlers) abortTask(p tasks.AbortTaskParams, _ any) middleware.Responder {
	if h.Results == nil {
		return apiError(http.StatusServiceUnavailable, "abort: no result backend configured")
	}
	if !validName(p.Taskid) {
		return apiError(http.StatusBadRequest, "invalid task id")
	}
	ctx, cancel := context.WithTimeout(p.HTTPRequest.Context(), h.BrokerTimeout)
	defer cancel()
	if err := h.Results.Abort(ctx, p.Taskid); err != nil {
		return h.brokerError("abort", err)
	}
	return encoded(tasks.NewAbortTaskOK().WithPayload(messageBody("Aborted '%s'", p.Taskid)))
}

// messageBody is Flower's {"message": "..."}.
func messageBody(format string, args ...any) *models.Message {
	m := fmt.Sprintf(format, args...)
	return &models.Message{Message: &m}
}
