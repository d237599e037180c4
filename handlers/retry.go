package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/go-openapi/runtime/middleware"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
)

// Where a retry found the original arguments (TaskRetry.source).
const (
	sourceSent    = "sent"
	sourceResults = "result_backend"
	sourceEvents  = "events"
)

// errNoOriginal is why a task cannot be sent again; notFound when nothing
// knows the task at all.
type errNoOriginal struct {
	msg      string
	notFound bool
}

func (e *errNoOriginal) Error() string { return e.msg }

// original finds how task id was sent, from the first source that has it
// whole: stamen's own sent log, the result backend's extended meta, then
// the events' args/kwargs reprs when both are complete literals. A broker
// error of the result backend, or the task store's, is returned as it is
// (the answer is then 503); the other misses give an *errNoOriginal.
func (h *Handlers) original(ctx context.Context, id string) (*sentTask, string, error) {
	if h.Sent != nil {
		data, ok, err := h.Sent.Sent(ctx, id)
		if err != nil {
			h.log.Warn("cannot read the sent-task log", "task_id", id, "err", err)
		} else if ok {
			var t sentTask
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			if err := dec.Decode(&t); err == nil {
				return &t, sourceSent, nil
			}
		}
	}
	known := false
	var missing []string
	missing = append(missing, "stamen did not send it (or no longer keeps it)")
	if h.Results != nil {
		rctx, cancel := context.WithTimeout(ctx, h.BrokerTimeout)
		r, err := h.Results.Result(rctx, id)
		cancel()
		switch {
		case unreadable(err) != nil:
			known = true
			missing = append(missing, "the result backend holds it in a serialization stamen cannot read")
		case err != nil:
			return nil, "", err
		case r.Request != nil:
			return &sentTask{Name: r.Request.Name, Args: r.Request.Args, Kwargs: r.Request.Kwargs, Queue: r.Request.Queue}, sourceResults, nil
		default:
			known = r.Status != "PENDING"
			missing = append(missing, "the result backend keeps no arguments (run the workers with result_extended=True)")
		}
	} else {
		missing = append(missing, "no result backend is configured (with one, run the workers with result_extended=True)")
	}
	// Any replica of a fleet finds the events another one stored.
	t, ok, err := h.Tasks.Task(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if !ok {
		if !known {
			return nil, "", &errNoOriginal{msg: fmt.Sprintf("Unknown task '%s'", id), notFound: true}
		}
		missing = append(missing, "stamen has no events of it")
		return nil, "", &errNoOriginal{msg: noOriginal(id, missing)}
	}
	orig, why := fromEvents(&t)
	if orig == nil {
		missing = append(missing, why)
		return nil, "", &errNoOriginal{msg: noOriginal(id, missing)}
	}
	return orig, sourceEvents, nil
}

func noOriginal(id string, missing []string) string {
	return fmt.Sprintf("cannot send task %s again: its arguments are not known: %s", id, strings.Join(missing, "; "))
}

// fromEvents rebuilds a task from its events: the name, the args and
// kwargs reprs when each is a complete literal (pyfmt.ParseArgs says when a
// repr may have been cut), and the route of its task-sent event. Without
// a route it answers nil: sent to the default queue, the task could run on
// workers it was never meant for, or on none.
func fromEvents(t *taskrec.Task) (*sentTask, string) {
	if !t.Has(taskrec.FieldName) || t.Name == "" {
		return nil, "the events do not name the task"
	}
	if !t.Has(taskrec.FieldArgs) || !t.Has(taskrec.FieldKwargs) {
		return nil, "the events carry no args/kwargs"
	}
	args, err := pyfmt.ParseArgs(t.Args)
	if err != nil {
		return nil, "the events' args repr is not a complete literal (Celery cuts reprs at 1024 characters)"
	}
	kwargs, err := pyfmt.ParseKwargs(t.Kwargs)
	if err != nil {
		return nil, "the events' kwargs repr is not a complete literal (Celery cuts reprs at 1024 characters)"
	}
	if !t.Has(taskrec.FieldRoutingKey) || t.RoutingKey == "" {
		return nil, "the events do not say which queue it went to (no task-sent event: set task_send_sent_event=True on the client, or give queue)"
	}
	out := &sentTask{Name: t.Name, Args: args, Kwargs: kwargs}
	if t.Exchange == "" || t.Exchange == t.RoutingKey {
		// The default exchange, or the one Celery creates for a queue and
		// binds with its name: the routing key is the queue.
		out.Queue = t.RoutingKey
	} else {
		out.Exchange, out.RoutingKey = t.Exchange, t.RoutingKey
	}
	return out, ""
}

// retryBody is the task body of a retry: the original, with the options
// that o overrides. A new route replaces the whole original route.
func retryBody(orig *sentTask, o *models.TaskApplyRequest) (*models.TaskApplyRequest, error) {
	body := &models.TaskApplyRequest{
		Args: orig.Args, Kwargs: orig.Kwargs,
		Queue: orig.Queue, Exchange: orig.Exchange, RoutingKey: orig.RoutingKey,
	}
	if body.Args == nil {
		body.Args = []any{}
	}
	if orig.Priority != 0 {
		p := int32(orig.Priority)
		body.Priority = &p
	}
	if o == nil {
		return body, nil
	}
	if o.Args != nil || o.Kwargs != nil || o.TaskID != "" {
		return nil, errors.New("a retry sends the original args and kwargs under a new id: args, kwargs and task_id cannot be given")
	}
	if o.Queue != "" || o.Exchange != "" || o.RoutingKey != "" {
		body.Queue, body.Exchange, body.RoutingKey = o.Queue, o.Exchange, o.RoutingKey
	}
	if o.Priority != nil {
		body.Priority = o.Priority
	}
	body.Countdown, body.Eta, body.Expires = o.Countdown, o.Eta, o.Expires
	body.Headers, body.Shadow, body.IgnoreResult = o.Headers, o.Shadow, o.IgnoreResult
	body.TimeLimit, body.SoftTimeLimit = o.TimeLimit, o.SoftTimeLimit
	return body, nil
}

// resend sends task id again; the responder is set on failure.
func (h *Handlers) resend(ctx context.Context, id string, opts *models.TaskApplyRequest) (newID, source string, fail middleware.Responder) {
	orig, source, err := h.original(ctx, id)
	if err != nil {
		var no *errNoOriginal
		switch {
		case errors.As(err, &no) && no.notFound:
			return "", "", apiError(http.StatusNotFound, "%s", no.msg)
		case errors.As(err, &no):
			return "", "", apiError(http.StatusConflict, "%s", no.msg)
		case errors.Is(err, history.ErrUnavailable):
			return "", "", h.storeError("retry", err)
		}
		return "", "", h.brokerError("retry", err)
	}
	body, err := retryBody(orig, opts)
	if err != nil {
		return "", "", apiError(http.StatusBadRequest, "%v", err)
	}
	msg, fail := h.publish(ctx, orig.Name, body, false)
	if fail != nil {
		return "", "", fail
	}
	return msg.ID, source, nil
}

func (h *Handlers) retryTask(p tasks.RetryTaskParams, _ any) middleware.Responder {
	if !validName(p.Taskid) {
		return apiError(http.StatusBadRequest, "invalid task id")
	}
	newID, source, fail := h.resend(p.HTTPRequest.Context(), p.Taskid, p.Options)
	if fail != nil {
		return fail
	}
	old := p.Taskid
	return tasks.NewRetryTaskOK().WithPayload(&models.TaskRetry{TaskID: &newID, RetryOf: &old, Source: source})
}

// bulkFilter is the GET /api/tasks filter of a bulk operation.
type bulkFilter struct {
	workername, taskname, state, search, start, end *string
	// ids, when not nil, keeps only these tasks (ANDed with the rest).
	ids []string
}

// bulkIDs checks the ids parameter of a bulk operation: each a valid task
// id, duplicates dropped (the spec bounds the list at 500 ids). nil when
// the parameter is absent. max bounds the matches, not the list: a listed
// task evicted between a dry run and the call it confirms does not make
// that call fail, and the matches cannot outnumber the ids.
func bulkIDs(ids []string) ([]string, middleware.Responder) {
	if ids == nil {
		return nil, nil
	}
	seen := make(map[string]struct{}, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !validName(id) {
			return nil, apiError(http.StatusBadRequest, "ids: invalid task id %q", id)
		}
		if _, ok := seen[id]; ok {
			continue
		}
		seen[id] = struct{}{}
		out = append(out, id)
	}
	return out, nil
}

// query compiles f as GET /api/tasks does, with no limit (the reader
// bounds the selection).
func (f bulkFilter) query() (state.Query, error) {
	q := state.Query{
		Limit: state.NoLimit, Worker: deref(f.workername), TaskName: deref(f.taskname),
		State: deref(f.state), Search: deref(f.search), IDs: f.ids,
	}
	var err error
	q.ReceivedStart, q.ReceivedEnd, err = receivedRange(f.start, f.end)
	return q, err
}

// matching returns the ids of the tasks f selects (newest first); with
// more than limit matches it answers 400 and no ids, so that the caller
// acts on none. The selection reads at most limit+1 matches from the
// history (the fleet's, with PostgreSQL), whatever their number.
func (h *Handlers) matching(ctx context.Context, f bulkFilter, limit int32) (ids []string, fail middleware.Responder) {
	q, err := f.query()
	if err != nil {
		return nil, apiError(http.StatusBadRequest, "%v", err)
	}
	ids, more, err := h.Tasks.MatchTasks(ctx, q, int(limit))
	if err != nil {
		return nil, h.readError("tasks", err)
	}
	if more {
		return nil, apiError(http.StatusBadRequest, "more than max=%d tasks match: nothing was done (narrow the filters or raise max)", limit)
	}
	return ids, nil
}

func (h *Handlers) revokeTasks(p tasks.RevokeTasksParams, _ any) middleware.Responder {
	only, fail := bulkIDs(p.Ids)
	if fail != nil {
		return fail
	}
	f := bulkFilter{p.Workername, p.Taskname, p.State, p.Search, p.ReceivedStart, p.ReceivedEnd, only}
	ids, fail := h.matching(p.HTTPRequest.Context(), f, p.Max)
	if fail != nil {
		return fail
	}
	dry := deref(p.DryRun)
	n := int64(len(ids))
	out := &models.BulkRevoke{Matched: &n, DryRun: &dry, Revoked: []string{}}
	if dry || len(ids) == 0 {
		return tasks.NewRevokeTasksOK().WithPayload(out)
	}
	signal := deref(p.Signal)
	if !strings.HasPrefix(signal, "SIG") {
		signal = "SIG" + signal
	}
	ctx, cancel := context.WithTimeout(p.HTTPRequest.Context(), h.BrokerTimeout)
	defer cancel()
	// One broadcast for all: Celery's revoke takes a list of ids, and every
	// worker adds them to its revoked set at once.
	if _, err := h.Broker.Broadcast(ctx, celery.ControlCommand{
		Method: "revoke",
		Arguments: map[string]any{
			"task_id": ids, "terminate": deref(p.Terminate), "signal": signal,
		},
	}); err != nil {
		return h.brokerError("revoke", err)
	}
	out.Revoked = ids
	audit.SetCount(p.HTTPRequest.Context(), int64(len(ids)))
	return tasks.NewRevokeTasksOK().WithPayload(out)
}

func (h *Handlers) retryTasks(p tasks.RetryTasksParams, _ any) middleware.Responder {
	only, fail := bulkIDs(p.Ids)
	if fail != nil {
		return fail
	}
	f := bulkFilter{p.Workername, p.Taskname, p.State, p.Search, p.ReceivedStart, p.ReceivedEnd, only}
	ids, fail := h.matching(p.HTTPRequest.Context(), f, p.Max)
	if fail != nil {
		return fail
	}
	dry := deref(p.DryRun)
	n := int64(len(ids))
	// skipped is always there, {} when empty, as retried is: a client
	// reads r["skipped"] without first asking whether it is there.
	out := &models.BulkRetry{Matched: &n, DryRun: &dry, Retried: map[string]string{}, Skipped: map[string]string{}}
	if dry {
		return tasks.NewRetryTasksOK().WithPayload(out)
	}
	ctx := p.HTTPRequest.Context()
	for _, id := range ids {
		newID, _, fail := h.resend(ctx, id, nil)
		if fail == nil {
			out.Retried[id] = newID
			continue
		}
		if e, ok := fail.(errorResponse); ok && (e.status == http.StatusConflict || e.status == http.StatusNotFound || e.status == http.StatusBadRequest) {
			out.Skipped[id] = e.text()
			continue
		}
		// The broker failed: stop rather than hammer it, and say what was
		// already sent.
		if e, ok := fail.(errorResponse); ok {
			return apiError(e.status, "%s (sent %d of %d before stopping: %s)", e.text(), len(out.Retried), len(ids), retriedList(out.Retried))
		}
		return fail
	}
	audit.SetCount(ctx, int64(len(out.Retried)))
	return tasks.NewRetryTasksOK().WithPayload(out)
}

func retriedList(m map[string]string) string {
	pairs := make([]string, 0, len(m))
	for old, id := range m {
		pairs = append(pairs, old+"->"+id)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ", ")
}

func (h *Handlers) listFailures(p tasks.ListFailuresParams, _ any) middleware.Responder {
	failed := "FAILURE"
	f := bulkFilter{taskname: p.Taskname, state: &failed, start: p.ReceivedStart, end: p.ReceivedEnd}
	q, err := f.query()
	if err != nil {
		return apiError(http.StatusBadRequest, "%v", err)
	}
	// With PostgreSQL, the fleet's history: one replica's memory holds
	// only its hot set.
	groups, err := h.Tasks.Failures(p.HTTPRequest.Context(), q)
	if err != nil {
		return h.readError("failures", err)
	}
	sort.Slice(groups, func(i, j int) bool {
		a, b := &groups[i], &groups[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ExceptionType < b.ExceptionType
	})
	out := &models.Failures{Groups: make([]*models.FailureGroup, 0, len(groups))}
	for i := range groups {
		g := &groups[i]
		out.Groups = append(out.Groups, &models.FailureGroup{
			Taskname: &g.Name, ExceptionType: &g.ExceptionType, Count: &g.Count,
			First: &g.First, Last: &g.Last, Examples: g.Examples, Traceback: g.Traceback,
		})
	}
	return tasks.NewListFailuresOK().WithPayload(out)
}
