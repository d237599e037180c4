package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/go-openapi/runtime/middleware"
	"github.com/go-openapi/strfmt"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/audit"
	auditops "github.com/stamen-dev/stamen/restapi/operations/audit"
	"github.com/stamen-dev/stamen/restapi/operations/queues"
)

// purgeQueue empties a queue. A queue no worker consumes and stamen never
// published to is refused without force: most likely a typo, and purging
// it would answer "0 purged" and hide that.
func (h *Handlers) purgeQueue(p queues.PurgeQueueParams, _ any) middleware.Responder {
	q := strings.TrimSpace(p.Queue)
	if !validName(q) {
		return apiError(http.StatusBadRequest, "invalid queue name")
	}
	ctx := p.HTTPRequest.Context()
	if !deref(p.Force) && !h.knownQueue(ctx, q) {
		return apiError(http.StatusNotFound,
			"no worker consumes queue '%s' and stamen never published to it; pass force=true to purge it anyway", q)
	}
	bctx, cancel := context.WithTimeout(ctx, h.BrokerTimeout)
	defer cancel()
	n, err := h.Broker.Purge(bctx, q)
	if err != nil {
		return h.brokerError("purge "+q, err)
	}
	audit.SetCount(ctx, n)
	return queues.NewPurgeQueueOK().WithPayload(&models.PurgeResult{Queue: &q, Purged: &n})
}

// knownQueue reports whether a worker consumes q (asking the workers once
// when none was inspected yet) or stamen published to it.
func (h *Handlers) knownQueue(ctx context.Context, q string) bool {
	if h.sentQueue(ctx, q) {
		return true
	}
	if _, ok := h.Inspector.QueueDeclaration(q); ok {
		return true
	}
	if len(h.Inspector.QueueNames()) == 0 {
		_ = h.Inspector.Refresh(ctx, "")
		_, ok := h.Inspector.QueueDeclaration(q)
		return ok
	}
	return false
}

func (h *Handlers) listAudit(p auditops.ListAuditParams, _ any) middleware.Responder {
	q := audit.Query{Operation: deref(p.Operation), User: deref(p.User)}
	if p.Limit != nil {
		q.Limit = int(*p.Limit)
	}
	if p.Offset != nil {
		q.Offset = int(*p.Offset)
	}
	for _, bound := range []struct {
		name string
		in   *string
		out  *time.Time
	}{{"since", p.Since, &q.Since}, {"until", p.Until, &q.Until}} {
		if bound.in == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(*bound.in))
		if err != nil {
			return apiError(http.StatusBadRequest, "%s must be an RFC 3339 time (2006-01-02T15:04:05Z)", bound.name)
		}
		*bound.out = t
	}
	if h.Audit == nil {
		return apiError(http.StatusServiceUnavailable, "the audit log is not enabled")
	}
	recs, err := h.Audit.List(p.HTTPRequest.Context(), q)
	if err != nil {
		h.log.Error("audit log read failed", "err", err)
		return apiError(http.StatusServiceUnavailable, "the audit log cannot be read")
	}
	out := &models.AuditLog{Records: make([]*models.AuditRecord, 0, len(recs))}
	for i := range recs {
		r := &recs[i]
		status := int32(r.Status)
		out.Records = append(out.Records, &models.AuditRecord{
			Time:      dateTime(r.Time),
			User:      &r.User,
			Role:      &r.Role,
			Auth:      r.Auth,
			Remote:    &r.Remote,
			Operation: &r.Operation,
			Method:    &r.Method,
			Path:      &r.Path,
			Params:    r.Params,
			ParamsCut: int64(r.ParamsCut),
			Status:    &status,
			Count:     r.Count,
		})
	}
	return auditops.NewListAuditOK().WithPayload(out)
}

func dateTime(t time.Time) *strfmt.DateTime {
	d := strfmt.DateTime(t.UTC())
	return &d
}
