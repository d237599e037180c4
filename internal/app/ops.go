package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/metrics"
	"github.com/stamen-dev/stamen/internal/stream"
)

// Defaults of the audit log's bounds and of the queue-length refresh.
const (
	DefaultAuditMaxAge         = 30 * 24 * time.Hour
	DefaultAuditMaxRecords     = 10000
	DefaultQueueLengthInterval = 15 * time.Second
)

// newAuditLog keeps the audit log in the store when there is one (it then
// survives restarts), in memory otherwise.
func (a *App) newAuditLog() *audit.Log {
	l := &audit.Log{
		MaxAge: a.cfg.AuditMaxAge, MaxRecords: a.cfg.AuditMaxRecords,
		Timeout: a.cfg.BrokerTimeout, Logger: a.log,
	}
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultAuditMaxAge
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = DefaultAuditMaxRecords
	}
	l.Store = a.roles.Audit
	if l.Store == nil {
		l.Store = &audit.Memory{Max: l.MaxRecords}
	}
	return l
}

// auditPruneEvery is how often the audit log's bounds are applied: a
// record outlives --audit_max_age by at most this much.
func (a *App) auditPruneEvery() time.Duration {
	age := a.cfg.AuditMaxAge
	if age <= 0 {
		age = DefaultAuditMaxAge
	}
	return min(max(age/10, time.Second), time.Minute)
}

// queueLengthLoop refreshes stamen_queue_length every QueueLengthInterval,
// off the scrape path: a scrape never waits for the broker, and however
// often Prometheus (or KEDA) scrapes, the broker is asked at this rate.
func (a *App) queueLengthLoop(ctx context.Context) {
	every := a.cfg.QueueLengthInterval
	if every <= 0 {
		every = DefaultQueueLengthInterval
	}
	tick(ctx, every, func(time.Time) { a.refreshQueueLengths(ctx) })
}

func (a *App) refreshQueueLengths(ctx context.Context) {
	names := a.handlers.QueueNames(ctx)
	if len(names) > metrics.MaxQueues {
		names = names[:metrics.MaxQueues]
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.BrokerTimeout)
	defer cancel()
	lengths, err := a.broker.QueueLengths(ctx, names)
	if err != nil {
		// The previous values stay: a gap is worse than a stale value for
		// an alert on a backlog, and the error is logged.
		if ctx.Err() == nil {
			a.log.Warn("queue lengths for the metrics", slog.Any("err", err))
		}
		return
	}
	a.Metrics.SetQueueLengths(lengths)
}

// DefaultMaxEventStreams bounds the /api/events streams served at once
// when Config.MaxEventStreams is 0.
const DefaultMaxEventStreams = stream.DefaultMaxSubscribers
