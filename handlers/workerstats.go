package handlers

import (
	"github.com/go-openapi/runtime/middleware"
	"github.com/go-openapi/strfmt"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/workercount"
	"github.com/stamen-dev/stamen/restapi/operations/workers"
)

// getWorkerStats answers GET /api/stats/workers from the per-worker
// counts of the task events this process applied.
func (h *Handlers) getWorkerStats(_ workers.GetWorkerStatsParams, _ any) middleware.Responder {
	return workers.NewGetWorkerStatsOK().WithPayload(workerStatsModel(h.WorkerCounts.Snapshot()))
}

func workerStatsModel(s workercount.Snapshot) *models.WorkerStats {
	since := strfmt.DateTime(s.Since.UTC())
	seq := int64(s.Seq)
	out := &models.WorkerStats{
		Instance: &s.Instance, Since: &since, Seq: &seq,
		DroppedWorkers: &s.DroppedWorkers, DroppedEvents: &s.DroppedEvents,
		Workers: make(map[string]models.WorkerEventCounts, len(s.Workers)),
	}
	for name, c := range s.Workers {
		out.Workers[name] = models.WorkerEventCounts{
			Received: &c[workercount.Received], Started: &c[workercount.Started], Succeeded: &c[workercount.Succeeded],
			Failed: &c[workercount.Failed], Retried: &c[workercount.Retried], Revoked: &c[workercount.Revoked],
			Rejected: &c[workercount.Rejected],
		}
	}
	return out
}
