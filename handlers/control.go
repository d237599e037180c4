package handlers

import (
	"context"
	"net/http"
	"strings"

	"github.com/go-openapi/runtime/middleware"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
	"github.com/stamen-dev/stamen/restapi/operations/workers"
)

// knownWorker is Flower's "unknown worker" check, made to work for workers
// seen only through events too (Flower knows only the ones its inspect
// found, so it answers "unknown worker" for a worker that started after
// it): a miss asks the worker directly before answering no.
func (h *Handlers) knownWorker(ctx context.Context, name string) bool {
	if h.Inspector.Known(name) {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, h.ControlTimeout)
	defer cancel()
	_ = h.Inspector.Refresh(ctx, name)
	return h.Inspector.Known(name)
}

// control sends one command to one worker and waits for its reply. It
// returns the worker's ok text, or a responder for the failure: 404 for an
// unknown worker, 503 for a broker failure, 403 with "<failure>: <reason>"
// when the worker refused or did not answer (Flower's convention).
func (h *Handlers) control(ctx context.Context, worker, method string, args map[string]any, failure string) (string, middleware.Responder) {
	if !validName(worker) {
		return "", apiError(http.StatusBadRequest, "invalid worker name")
	}
	if !h.knownWorker(ctx, worker) {
		return "", apiError(http.StatusNotFound, "Unknown worker '%s'", worker)
	}
	cctx, cancel := context.WithTimeout(ctx, h.ControlTimeout)
	defer cancel()
	replies, err := h.Broker.Broadcast(cctx, celery.ControlCommand{
		Method: method, Arguments: args, Destination: []string{worker}, Reply: true, Limit: 1,
	})
	if err != nil {
		return "", h.brokerError(failure, err)
	}
	for _, r := range replies {
		if r.Hostname != worker {
			continue
		}
		if ok, isOK := r.OK(); isOK {
			return ok, nil
		}
		return "", apiError(http.StatusForbidden, "%s: %s", failure, r.ErrorText())
	}
	return "", apiError(http.StatusForbidden, "%s: Unknown reason", failure)
}

func (h *Handlers) shutdownWorker(p workers.ShutdownWorkerParams, _ any) middleware.Responder {
	ctx := p.HTTPRequest.Context()
	if !validName(p.Workername) {
		return apiError(http.StatusBadRequest, "invalid worker name")
	}
	if !h.knownWorker(ctx, p.Workername) {
		return apiError(http.StatusNotFound, "Unknown worker '%s'", p.Workername)
	}
	cctx, cancel := context.WithTimeout(ctx, h.BrokerTimeout)
	defer cancel()
	// A worker exits before it could reply, so none is asked for.
	if _, err := h.Broker.Broadcast(cctx, celery.ControlCommand{
		Method: "shutdown", Arguments: map[string]any{}, Destination: []string{p.Workername},
	}); err != nil {
		return h.brokerError("shutdown", err)
	}
	return encoded(workers.NewShutdownWorkerOK().WithPayload(messageBody("Shutting down!")))
}

func (h *Handlers) restartWorkerPool(p workers.RestartWorkerPoolParams, _ any) middleware.Responder {
	w := p.Workername
	_, fail := h.control(p.HTTPRequest.Context(), w, "pool_restart",
		map[string]any{"reload": false}, "Failed to restart the '"+w+"' pool")
	if fail != nil {
		return fail
	}
	return encoded(workers.NewRestartWorkerPoolOK().WithPayload(messageBody("Restarting '%s' worker's pool", w)))
}

func (h *Handlers) growWorkerPool(p workers.GrowWorkerPoolParams, _ any) middleware.Responder {
	w, n := p.Workername, deref(p.N)
	_, fail := h.control(p.HTTPRequest.Context(), w, "pool_grow",
		map[string]any{"n": n}, "Failed to grow '"+w+"' worker's pool")
	if fail != nil {
		return fail
	}
	return encoded(workers.NewGrowWorkerPoolOK().WithPayload(messageBody("Growing '%s' worker's pool by %d", w, n)))
}

func (h *Handlers) shrinkWorkerPool(p workers.ShrinkWorkerPoolParams, _ any) middleware.Responder {
	w, n := p.Workername, deref(p.N)
	_, fail := h.control(p.HTTPRequest.Context(), w, "pool_shrink",
		map[string]any{"n": n}, "Failed to shrink '"+w+"' worker's pool")
	if fail != nil {
		return fail
	}
	return encoded(workers.NewShrinkWorkerPoolOK().WithPayload(messageBody("Shrinking '%s' worker's pool by %d", w, n)))
}

func (h *Handlers) autoscaleWorkerPool(p workers.AutoscaleWorkerPoolParams, _ any) middleware.Responder {
	w, lo, hi := p.Workername, p.Min, p.Max
	if lo > hi {
		return apiError(http.StatusBadRequest, "min (%d) must not exceed max (%d)", lo, hi)
	}
	_, fail := h.control(p.HTTPRequest.Context(), w, "autoscale",
		map[string]any{"min": lo, "max": hi}, "Failed to autoscale '"+w+"' worker")
	if fail != nil {
		return fail
	}
	return encoded(workers.NewAutoscaleWorkerPoolOK().WithPayload(messageBody("Autoscaling '%s' worker (min=%d, max=%d)", w, lo, hi)))
}

func (h *Handlers) addConsumer(p workers.AddConsumerParams, _ any) middleware.Responder {
	w, q := p.Workername, strings.TrimSpace(p.Queue)
	if !validName(q) {
		return apiError(http.StatusBadRequest, "invalid queue name")
	}
	ok, fail := h.control(p.HTTPRequest.Context(), w, "add_consumer",
		map[string]any{"queue": q}, "Failed to add '"+q+"' consumer to '"+w+"' worker")
	if fail != nil {
		return fail
	}
	return encoded(workers.NewAddConsumerOK().WithPayload(messageBody("%s", ok)))
}

func (h *Handlers) cancelConsumer(p workers.CancelConsumerParams, _ any) middleware.Responder {
	w, q := p.Workername, strings.TrimSpace(p.Queue)
	if !validName(q) {
		return apiError(http.StatusBadRequest, "invalid queue name")
	}
	ok, fail := h.control(p.HTTPRequest.Context(), w, "cancel_consumer",
		map[string]any{"queue": q}, "Failed to cancel '"+q+"' consumer from '"+w+"' worker")
	if fail != nil {
		return fail
	}
	return encoded(workers.NewCancelConsumerOK().WithPayload(messageBody("%s", ok)))
}

func (h *Handlers) setTaskTimeout(p tasks.SetTaskTimeoutParams, _ any) middleware.Responder {
	ctx := p.HTTPRequest.Context()
	if !validName(p.Taskname) {
		return apiError(http.StatusBadRequest, "invalid task name")
	}
	if p.Soft != nil && p.Hard != nil && *p.Soft > *p.Hard {
		return apiError(http.StatusBadRequest, "soft (%g) must not exceed hard (%g)", *p.Soft, *p.Hard)
	}
	if !h.knownTask(ctx, p.Taskname) {
		return apiError(http.StatusNotFound, "Unknown task '%s'", p.Taskname)
	}
	args := map[string]any{"task_name": p.Taskname, "hard": nil, "soft": nil}
	if p.Hard != nil {
		args["hard"] = *p.Hard
	}
	if p.Soft != nil {
		args["soft"] = *p.Soft
	}
	ok, fail := h.control(ctx, p.Workername, "time_limit", args, "Failed to set timeouts")
	if fail != nil {
		return fail
	}
	return encoded(tasks.NewSetTaskTimeoutOK().WithPayload(messageBody("%s", ok)))
}

func (h *Handlers) setTaskRateLimit(p tasks.SetTaskRateLimitParams, _ any) middleware.Responder {
	ctx := p.HTTPRequest.Context()
	if !validName(p.Taskname) {
		return apiError(http.StatusBadRequest, "invalid task name")
	}
	if !h.knownTask(ctx, p.Taskname) {
		return apiError(http.StatusNotFound, "Unknown task '%s'", p.Taskname)
	}
	ok, fail := h.control(ctx, p.Workername, "rate_limit",
		map[string]any{"task_name": p.Taskname, "rate_limit": p.RateLimit}, "Failed to set rate limit")
	if fail != nil {
		return fail
	}
	return encoded(tasks.NewSetTaskRateLimitOK().WithPayload(messageBody("%s", ok)))
}

func (h *Handlers) revokeTask(p tasks.RevokeTaskParams, _ any) middleware.Responder {
	if !validName(p.Taskid) {
		return apiError(http.StatusBadRequest, "invalid task id")
	}
	signal := deref(p.Signal)
	if !strings.HasPrefix(signal, "SIG") {
		signal = "SIG" + signal
	}
	ctx, cancel := context.WithTimeout(p.HTTPRequest.Context(), h.BrokerTimeout)
	defer cancel()
	// Broadcast to every worker, no reply: the task may sit on any of them.
	if _, err := h.Broker.Broadcast(ctx, celery.ControlCommand{
		Method: "revoke",
		Arguments: map[string]any{
			"task_id": p.Taskid, "terminate": deref(p.Terminate), "signal": signal,
		},
	}); err != nil {
		return h.brokerError("revoke", err)
	}
	return encoded(tasks.NewRevokeTaskOK().WithPayload(messageBody("Revoked '%s'", p.Taskid)))
}
