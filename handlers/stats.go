package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/go-openapi/runtime/middleware"
	"github.com/go-openapi/strfmt"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/taskstats"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
)

// TaskStats answers GET /api/stats/tasks: the in-memory aggregate
// (internal/taskstats), or the fleet's shared history (PostgreSQL).
// Errors that wrap history.ErrUnavailable answer 503.
type TaskStats interface {
	TaskStats(ctx context.Context, q taskstats.Query) (taskstats.Result, error)
}

// AggregateStats serves the statistics from an in-memory aggregate.
type AggregateStats struct{ *taskstats.Aggregate }

// TaskStats implements TaskStats.
func (s AggregateStats) TaskStats(_ context.Context, q taskstats.Query) (taskstats.Result, error) {
	return s.Stats(q), nil
}

func (h *Handlers) getTaskStats(p tasks.GetTaskStatsParams, _ any) middleware.Responder {
	if h.Stats == nil {
		return apiError(http.StatusServiceUnavailable, "task statistics are not kept by this server")
	}
	q, err := taskstats.NewQuery(h.Now(), time.Duration(deref(p.Window))*time.Second, time.Duration(deref(p.Step))*time.Second)
	if err != nil {
		return apiError(http.StatusBadRequest, "%v", err)
	}
	q.TaskName, q.Worker, q.Queue = deref(p.Taskname), deref(p.Workername), deref(p.Queue)
	res, err := h.Stats.TaskStats(p.HTTPRequest.Context(), q)
	if err != nil {
		return h.storeError("task stats", err)
	}
	step := int64(q.Step / time.Second)
	out := &models.TaskStats{Step: &step, Buckets: make([]*models.TaskStatsBucket, len(res.Buckets)), Folded: res.Folded}
	if res.KeptSince != nil {
		t := strfmt.DateTime(*res.KeptSince)
		out.KeptSince = &t
	}
	for i := range res.Buckets {
		b := &res.Buckets[i]
		start := strfmt.DateTime(b.Start)
		c := b.Counts
		out.Buckets[i] = &models.TaskStatsBucket{
			Time:     &start,
			Received: &c[taskstats.Received], Started: &c[taskstats.Started], Succeeded: &c[taskstats.Succeeded],
			Failed: &c[taskstats.Failed], Retried: &c[taskstats.Retried], Revoked: &c[taskstats.Revoked],
			RuntimeP50: b.P50, RuntimeP95: b.P95,
		}
	}
	return tasks.NewGetTaskStatsOK().WithPayload(out)
}
