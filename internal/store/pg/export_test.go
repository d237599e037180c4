package pg

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/taskstats"
)

// ExplainTaskStats is EXPLAIN (ANALYZE, BUFFERS) of the statement
// TaskStats runs for q now.
func (s *Store) ExplainTaskStats(ctx context.Context, q taskstats.Query) (string, error) {
	query, args := statsQuery(q, time.Now())
	rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+query, args...)
	if err != nil {
		return "", err
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(plan, "\n"), err
}

// OpenAtVersion is Open migrating only up to version, as an older stamen
// leaves the database.
func OpenAtVersion(ctx context.Context, cfg Config, version int) (*Store, error) {
	return open(ctx, cfg, version)
}

// Setting is a setting of the store's connections.
func (s *Store) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// LatestVersion is the schema version Open migrates to.
func LatestVersion() int { return len(migrations) }

// SQLSpaces is the state.Spaces of the failures' index expression.
const SQLSpaces = sqlSpaces

// ExplainFailures is the plan of the statement Failures runs for q, a
// FAILURE query over the whole history (not a narrow window).
func (s *Store) ExplainFailures(ctx context.Context, q state.Query) (string, error) {
	q.State = ""
	b := &builder{}
	where, _, err := b.filters(q)
	if err != nil {
		return "", err
	}
	var plan []string
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "EXPLAIN "+indexedSQL(where), b.args...)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return strings.Join(plan, "\n"), err
}

// CheckHeld is the check a replica makes of the records of b once it has
// held them for another replica: it returns how many it would write.
func (s *Store) CheckHeld(ctx context.Context, b history.Batch) (int, error) {
	recs := make([]heldRecord, 0, len(b.Tasks))
	for _, r := range b.Tasks {
		t, err := taskrec.DecodeRecord(r.Data)
		if err != nil {
			return 0, err
		}
		recs = append(recs, heldRecord{tasks: []taskrec.Task{t}})
	}
	out, err := s.uncovered(ctx, recs)
	return len(out), err
}

// ExplainList is the plan of the statement List runs for q.
func (s *Store) ExplainList(ctx context.Context, q state.Query) (string, error) {
	sel, err := buildList(q)
	if err != nil {
		return "", err
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN "+sel.sql, sel.args...)
	if err != nil {
		return "", err
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(plan, "\n"), err
}

// IDGrams is the id_grams value the write path sends for id, "NULL" for
// none.
func IDGrams(id string) string {
	g, ok := idGrams(nil, id)
	if !ok {
		return "NULL"
	}
	return string(g)
}

// TermGrams are the grams an id fragment is looked for by.
func TermGrams(term string) [][]int32 { return termGrams(term) }
