package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/store/pg"
)

// A replica of a fleet (--db postgres://...): it ingests the events it
// receives into its own state, bounded by MaxTasks (its hot set), and
// flushes the changed records to PostgreSQL every SaveInterval, where the
// upserts of internal/store/pg merge them with the other replicas' (see
// its package comment). Every operation reading the task history (what
// handlers.TaskReader serves: the lists, the failures, the bulk
// operations' selection, a retry's events) is answered from PostgreSQL,
// so every replica answers the same within a flush interval of the last
// event. While PostgreSQL is unreachable the reads answer 503, ingestion
// goes on in memory, and the unwritten records wait in the write-behind
// buffer (history.Buffer), one per task up to MaxTasks, to be written on
// the first flush that succeeds; records beyond that bound are dropped and
// counted in stamen_store_lost_records_total. The replicas share the
// writing: each writes the tasks it owns and holds the others' records,
// writing them too if their owner has not a grace period later
// (internal/store/pg's share.go).

// IsPostgresURL reports whether a --db value selects PostgreSQL (a
// postgres:// or postgresql:// URL) rather than a bbolt file.
func IsPostgresURL(db string) bool { return pg.IsURL(db) }

// openPostgres opens the shared history and replays the workers' latest
// events into the state, so that a replica started last knows every
// worker at once. Tasks are not loaded: they are read from PostgreSQL.
func (a *App) openPostgres(ctx context.Context) error {
	st, err := pg.Open(ctx, pg.Config{URL: a.cfg.DBPath, ReadTimeout: a.cfg.DBTimeout,
		MaxWorkers: a.cfg.MaxWorkers, FlushInterval: a.cfg.SaveInterval, MaxHeld: a.cfg.MaxTasks, Logger: a.log})
	if err != nil {
		return err
	}
	a.Postgres, a.db = st, st
	a.newBuffer(st.Write)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n := 0
	err = st.WorkerEvents(rctx, func(raw []byte) {
		if evs, err := celery.DecodeStoredEvents(raw); err == nil {
			a.State.Apply(evs...)
			n++
		}
	})
	if err != nil {
		// Not fatal: workers come back with their next heartbeat.
		a.log.Warn("could not read the workers from PostgreSQL", slog.Any("err", err))
	}
	a.log.Info("PostgreSQL task history open", slog.Int("workers", n))
	return nil
}

// retainEvery is how often one replica applies the history's retention.
const retainEvery = 30 * time.Second

// retainLoop applies --max_task_age and --db_max_tasks to the history.
func (a *App) retainLoop(ctx context.Context) {
	r := pg.Retention{MaxAge: a.cfg.MaxTaskAge, MaxTasks: a.cfg.DBMaxTasks}
	run := func(now time.Time) {
		n, err := a.Postgres.Retain(ctx, r, now)
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Warn("PostgreSQL retention failed; retrying later", slog.Any("err", err))
		case n > 0:
			a.log.Debug("retention removed old tasks from PostgreSQL", slog.Int64("tasks", n))
		}
	}
	run(time.Now())
	tick(ctx, retainEvery, run)
}
