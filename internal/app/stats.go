package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/stamen-dev/stamen/handlers"
	"github.com/stamen-dev/stamen/internal/taskstats"
)

// newStats makes the in-memory activity aggregate GET /api/stats/tasks
// reads, except with PostgreSQL, where every replica reads the shared
// history instead.
func (a *App) newStats() {
	if a.Postgres != nil {
		return
	}
	a.Stats = taskstats.New(taskstats.Config{Now: a.cfg.Now})
}

// statsReader is what GET /api/stats/tasks reads.
func (a *App) statsReader() handlers.TaskStats {
	if a.Postgres != nil {
		return a.Postgres
	}
	return handlers.AggregateStats{Aggregate: a.Stats}
}

// restoreStats reads the aggregate back from the bbolt store.
func (a *App) restoreStats() error {
	if a.Stats == nil || a.store == nil {
		return nil
	}
	start, bad := time.Now(), 0
	since, ok, err := a.store.LoadStats(func(m int64, rec []byte) error {
		if a.Stats.Restore(m, rec) != nil {
			bad++ // a record this version cannot read is skipped, not fatal
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore the task statistics: %w", err)
	}
	if ok {
		a.Stats.SetSince(since)
	}
	a.log.Info("task statistics restored", slog.Int("unreadable_minutes", bad),
		slog.Int64("bytes", a.Stats.Size()), slog.Duration("took", time.Since(start)))
	return nil
}

// flushStats writes the aggregate's changed minutes to the bbolt store;
// after a failed write they are written with the next flush.
func (a *App) flushStats() error {
	if a.Stats == nil || a.store == nil {
		return nil
	}
	put, del := a.Stats.Drain()
	if len(put) == 0 && len(del) == 0 {
		return nil
	}
	if err := a.store.WriteStats(put, del, a.Stats.Since()); err != nil {
		ms := del
		for m := range put {
			ms = append(ms, m)
		}
		a.Stats.Redirty(ms)
		return fmt.Errorf("write the task statistics: %w", err)
	}
	return nil
}

// compactStatsEvery is how often a replica folds the fleet's activity
// deltas (pg.CompactStats): reads sum what is not folded yet, so it
// bounds their cost, not their freshness.
const compactStatsEvery = 2 * time.Second

// compactStatsLoop folds the fleet's activity deltas until ctx ends.
func (a *App) compactStatsLoop(ctx context.Context) {
	tick(ctx, compactStatsEvery, func(now time.Time) {
		if _, err := a.Postgres.CompactStats(ctx, now); err != nil && ctx.Err() == nil {
			a.log.Warn("folding the task statistics in PostgreSQL failed; retrying later", slog.Any("err", err))
		}
	})
}
