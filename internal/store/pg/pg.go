// Package pg keeps stamen's task history in PostgreSQL, shared by a
// fleet of replicas (--db postgres://...).
//
// Design: every replica ingests the events it receives into its own
// in-memory state, as a lone stamen does, bounded by --max_tasks (its hot
// set), and writes the task records that changed (state.Drain) here, those
// of the tasks it owns among the live replicas (share.go), with
// idempotent, order-tolerant upserts keyed by task id. A row takes each
// field from the incoming record when the incoming is newer (by timestamp,
// then clock) and set, else keeps the stored one (COALESCE both ways), and
// the state by Celery's precedence (celery.events.state: a weaker state
// never replaces a stronger one; RETRY goes by recency). So duplicates from
// two replicas, any order of writes, and a replica that saw only part of a
// task's events (competing consumers of one queue) converge to one row.
// Evictions from a replica's hot set never delete here: this is the
// history, bounded only by retention (Retain).
//
// Reads (GET /api/tasks and its filters, sorts and search, task info, task
// types, workers, the failures, the bulk operations' selection) are
// answered from here, through indexes (see schema.go), with the in-memory
// state's ordering rules, so every replica answers the same. Each read is bounded by Config.ReadTimeout; a failed one is
// history.ErrUnavailable (503), but for one whose connection failed before
// anything of it was handed out, which is run once more on a new
// connection within the same bound (Store.retry).
package pg

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/redact"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// Defaults of Config.
const (
	DefaultReadTimeout  = 2 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	// DefaultWriteChunk is how many task records one transaction of Write
	// holds at most: 5,000 new tasks took 0.3 to 0.4 s at a million tasks
	// on a 2-core bench machine (bench/RESULTS.md), far within the write
	// timeout even on a slower or busier server.
	DefaultWriteChunk = 5000
	// DeleteBatch is how many rows one retention DELETE removes: short
	// statements, each its own transaction, never one huge DELETE that
	// holds locks and bloats the WAL at once.
	DeleteBatch = 5000
	// DefaultMaxWorkers bounds the workers read back (the state's default
	// bound).
	DefaultMaxWorkers = state.DefaultMaxWorkers
)

// Advisory lock keys, derived from fixed names so that other applications
// sharing the database are unlikely to collide with them.
var (
	migrateLock = lockKey("stamen.migrate")
	retainLock  = lockKey("stamen.retain")
)

func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// Config configures a Store.
type Config struct {
	// URL is a postgres:// or postgresql:// URL (any libpq form pgx takes).
	URL string
	// ReadTimeout bounds each read; WriteTimeout each write of up to
	// WriteChunk task records (0: DefaultWriteChunk).
	ReadTimeout, WriteTimeout time.Duration
	WriteChunk                int
	// WriteConns is how many chunks of a batch are written at once, each
	// on a connection of its own (0: half the pool, at least one).
	WriteConns int
	// MaxConns sizes the pool (0: pgxpool's default, max(4, CPUs)).
	MaxConns int32
	// MaxWorkers bounds the workers a read returns, as the events state
	// bounds those it keeps (0: DefaultMaxWorkers).
	MaxWorkers int
	// ReplicaID names this replica in stamen_replicas (empty: a random
	// name, new at each start; replicas given one name do not see each
	// other, and each writes every task). FlushInterval is how often the fleet's
	// replicas call Write (0: DefaultFlushInterval): it sets how long a
	// record is held for another replica and how long a silent replica
	// counts as live (share.go). MaxHeld bounds the records held (0:
	// DefaultMaxHeld).
	ReplicaID     string
	FlushInterval time.Duration
	MaxHeld       int
	Logger        *slog.Logger
	// Now is the clock of worker liveness; tests replace it.
	Now func() time.Time
}

// Store is the PostgreSQL task history. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
	// deletes counts the retention DELETE statements run (for tests and
	// the metrics).
	deletes atomic.Int64
	// unwritable counts the task records and worker events Write left out
	// because a key of theirs is longer than the indexes take (writable).
	unwritable atomic.Int64
	// size is Size's last reading.
	size sizeReading
	// share divides the writing with the other replicas (share.go);
	// written counts the task records this replica wrote, takenOver
	// those of them another replica owned but had not written in time.
	share              *sharer
	written, takenOver atomic.Int64
	// grams is whether the schema has the ids' grams (grams.go); a
	// schema an older stamen left (a test's) has not.
	grams bool
}

// IsURL reports whether a --db value names PostgreSQL rather than a bbolt
// file.
func IsURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// IsSettings reports whether db is PostgreSQL's other form of connection
// settings, key=value words (host=... dbname=... password=...). stamen
// takes only the URL form, the one whose password it masks wherever the
// URL is shown; the other would otherwise name a store file, and be
// logged whole with its password.
func IsSettings(db string) bool {
	for _, word := range strings.Fields(db) {
		if key, _, ok := strings.Cut(word, "="); ok && slices.Contains(settingKeys, key) {
			return true
		}
	}
	return false
}

// settingKeys are the keys of libpq's connection settings that a store
// file's name would not hold.
var settingKeys = []string{"host", "hostaddr", "port", "dbname", "user", "password", "passfile", "sslmode", "service"}

// Open connects, then creates or migrates the schema under an advisory
// lock. The URL's password never reaches an error.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, len(migrations))
}

// open is Open migrating to version (a test opens an older schema).
func open(ctx context.Context, cfg Config, version int) (*Store, error) {
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = DefaultMaxWorkers
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.WriteChunk <= 0 {
		cfg.WriteChunk = DefaultWriteChunk
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	shown := redact.URL(cfg.URL)
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgx's parse errors quote the URL; say only which one.
		return nil, fmt.Errorf("invalid PostgreSQL URL %s", shown)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	if pc.ConnConfig.ConnectTimeout == 0 || pc.ConnConfig.ConnectTimeout > cfg.ReadTimeout {
		// A connection attempt to a server that is down must not hold a
		// read longer than the read's own bound.
		pc.ConnConfig.ConnectTimeout = cfg.ReadTimeout
	}
	if _, set := pc.ConnConfig.RuntimeParams[parallelParam]; !set {
		// Parallel workers, which PostgreSQL plans for a paged list's
		// sort of a received window (tens of thousands of index entries)
		// or a search's bitmap, cost more than they save for stamen's reads:
		// short, and concurrent, so that the workers compete for the cores
		// the other reads use. Measured with two clients on two cores, a
		// 10-minute window of 100,000 tasks at 10M: 27 ms a read serial,
		// 140 ms parallel. It is SET on each new connection rather than
		// sent as a startup parameter, which PgBouncer refuses unless told
		// to ignore it; a URL that sets it is left alone.
		pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SET "+parallelParam+" = 0")
			return err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL %s: %s", shown, redact.String(err.Error()))
	}
	if cfg.WriteConns <= 0 {
		cfg.WriteConns = max(1, int(pool.Config().MaxConns)/2)
	}
	s := &Store{pool: pool, cfg: cfg, log: cfg.Logger, share: newSharer(cfg, version >= replicasVersion), grams: version >= idGramsVersion}
	mctx, cancel := context.WithTimeout(ctx, MigrateTimeout)
	defer cancel()
	if err := s.migrate(mctx, version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("prepare the PostgreSQL store %s: %s", shown, redact.String(err.Error()))
	}
	return s, nil
}

// parallelParam is the setting Open turns off unless the URL sets it.
const parallelParam = "max_parallel_workers_per_gather"

// MigrateTimeout bounds Open's migrations, with the wait for another
// replica's: a migration that builds an index on a table of tens of
// millions of tasks takes minutes, and a bound shorter than that would
// roll it back, and start it over, at every start.
const MigrateTimeout = 30 * time.Minute

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// migrate applies the migrations the database lacks, up to version to.
// The session lock is taken on one connection and released on it; a
// replica that comes second waits, then finds the schema current.
func (s *Store) migrate(ctx context.Context, to int) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer unlock(ctx, conn, migrateLock, s.cfg.WriteTimeout)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS stamen_schema_version (version int NOT NULL)`); err != nil {
		return err
	}
	var version int
	err = conn.QueryRow(ctx, `SELECT version FROM stamen_schema_version`).Scan(&version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := conn.Exec(ctx, `INSERT INTO stamen_schema_version VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("the database's schema is version %d, newer than this stamen's %d", version, len(migrations))
	}
	for v := version; v < to; v++ {
		s.log.Info("PostgreSQL schema migrating", slog.Int("version", v+1))
		began := time.Now()
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE stamen_schema_version SET version = $1`, v+1)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate the schema to version %d: %w", v+1, err)
		}
		s.log.Info("PostgreSQL schema migrated", slog.Int("version", v+1), slog.Duration("took", time.Since(began)))
	}
	return nil
}

// unlock releases the session advisory lock key taken on conn, within
// timeout even when ctx has ended (the caller's end does not end the
// session, nor its lock). A connection that cannot release it is closed:
// the lock goes with its session, and a pooled connection left holding it
// would keep every replica out.
func unlock(ctx context.Context, conn *pgxpool.Conn, key int64, timeout time.Duration) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		// Close writes its goodbye within uctx and closes the socket
		// whatever happens.
		_ = conn.Conn().Close(uctx)
	}
}

// SchemaVersion returns the schema version the database is at.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.read(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT version FROM stamen_schema_version`).Scan(&v)
	})
	return v, err
}

// read runs fn under the read timeout; a failure is ErrUnavailable. A
// failure of the connection rather than of the statement (see retryable)
// runs fn once more, on a new connection, within the same timeout: fn must
// hand nothing out before it returns, or wrap its error with handedOut once
// it has.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	err := fn(ctx)
	if err != nil && s.retry(ctx, err) {
		err = fn(ctx)
	}
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// retry reports whether a read that failed with err, having handed
// nothing out, is to run again, and if so makes the pool's connections
// new ones. PostgreSQL's restart, a failover, or pg_terminate_backend
// ends every backend of the database: each pooled connection then holds
// the server's goodbye (57P01), or a closed socket, which pgx finds only
// when it next sends a statement on it. pgxpool pings a connection idle
// over a second before handing it out, but those used in the last second
// (every one, on a busy replica) are handed out as they are, so the first
// read on each answered 503, and behind a load balancer every replica did
// once per restart. Reset closes the idle ones (those in use are closed
// as they come back), so that the second run connects anew.
func (s *Store) retry(ctx context.Context, err error) bool {
	if !retryable(ctx, err) {
		return false
	}
	s.log.Debug("a PostgreSQL connection failed; reading again on a new one", slog.String("err", redact.String(err.Error())))
	s.pool.Reset()
	return true
}

// retryable reports whether err is the failure of a connection rather
// than of a statement, so that the same read on a new connection may
// succeed: pgx's own judgement that nothing was sent (SafeToRetry), the
// server ending the session (class 57P: an administrator's or the
// shutdown's termination, a crash, a server still starting), or the
// socket failing (EOF, a reset, another network error but a timeout). A
// read past its deadline, or one that handed rows out (handedOut), is
// not retried.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.As(err, new(*handedOutError)) {
		return false
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03":
			return true
		}
		return false
	}
	if pgconn.Timeout(err) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && !ne.Timeout()
}

// write runs fn, a write, under the write timeout, and once more on a new
// connection when its connection failed (as read does): always when fn is
// idempotent (an upsert, a trim), else only when the statement cannot have
// taken effect (notRun). A failure is returned as it is, for the caller to
// wrap.
func (s *Store) write(ctx context.Context, idempotent bool, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	err := fn(ctx)
	if err != nil && (idempotent || notRun(err)) && s.retry(ctx, err) {
		err = fn(ctx)
	}
	return err
}

// notRun reports whether a statement that failed with err cannot have
// taken effect: pgx sent nothing, or the server ended the session (57P01
// to 57P03), which it does before a statement it has not begun (the case
// of a connection that sat in the pool after PostgreSQL's restart) and by
// rolling back one it was running. Only a session ended between a
// commit and its reply escapes this; a socket that failed (EOF) may have
// carried the statement through, and is not retried.
func notRun(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	pe := (*pgconn.PgError)(nil)
	return errors.As(err, &pe) && (pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03")
}

// handedOutError marks the failure of a read that had already handed rows
// out: running it again would hand them out twice.
type handedOutError struct{ err error }

func (e *handedOutError) Error() string { return e.err.Error() }
func (e *handedOutError) Unwrap() error { return e.err }

// handedOut marks err, if any, as the failure of a read that handed rows
// out.
func handedOut(err error) error {
	if err == nil {
		return nil
	}
	return &handedOutError{err}
}

// unavailable wraps a database error as history.ErrUnavailable, its text
// redacted (a connection error may quote the server's address and user).
func unavailable(err error) error {
	if errors.Is(err, history.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %s", history.ErrUnavailable, redact.String(err.Error()))
}

// Write upserts a batch: the task records (merged as the package comment
// says), each worker's latest event, the task types of the records (the
// batch's Types are not used). Records of tasks
// evicted from the writer's hot set (Batch.FirstSeq) are not deleted, nor
// are forgotten task types: the history outlives a replica's memory.
// Forgotten workers (purged offline, or beyond the workers bound) are.
//
// A batch is written in chunks of at most WriteChunk task records, up to
// WriteConns chunks at once, each one transaction written whole or not at
// all within WriteTimeout: a large batch (the records kept through an
// outage, or a flush behind a burst) gets through however large it is
// instead of timing out whole and growing with the next flush. When a
// chunk fails the batch is not written, and the caller keeps and retries
// it whole: its chunks already written change nothing the second time
// (an upsert that changes nothing writes no row).
//
// Of the task records, only those of the tasks this replica owns are
// written; the others are held for their owners, and written by this
// replica too if a grace period later their rows still lack them
// (share.go).
func (s *Store) Write(ctx context.Context, b history.Batch) error {
	if err := s.stamp(ctx); err != nil {
		return err
	}
	tasks := make([]taskrec.Task, 0, len(b.Tasks))
	var unwritable []string
	for _, rec := range b.Tasks {
		t, err := taskrec.DecodeRecord(rec.Data)
		if err != nil {
			s.log.Warn("skipping an unreadable task record", slog.Any("err", err))
			continue
		}
		if !writable(&t) {
			unwritable = append(unwritable, t.UUID)
			continue
		}
		tasks = append(tasks, t)
	}
	workers := make([]string, 0, len(b.Workers))
	for w := range b.Workers {
		if len(w) > maxWorkerBytes {
			unwritable = append(unwritable, w)
			continue
		}
		workers = append(workers, w)
	}
	if len(unwritable) > 0 {
		s.unwritable.Add(int64(len(unwritable)))
		s.log.Warn("task records or worker events not written to PostgreSQL: a task id, name, state, parent id or worker name longer than its index takes",
			slog.Int("records", len(unwritable)), slog.String("first", cut(unwritable[0], 64)))
	}
	tasks = s.share.split(tasks)
	due, over, err := s.takeOver(ctx)
	if err != nil {
		return err
	}
	tasks = append(tasks, over...)
	if err := s.writeTasks(ctx, tasks, b, workers); err != nil {
		s.share.giveBack(due)
		return err
	}
	s.written.Add(int64(len(tasks)))
	s.takenOver.Add(int64(len(over)))
	return nil
}

// writeTasks writes tasks, and b's workers (those named) and forgotten
// workers, in chunks on up to WriteConns connections at once.
func (s *Store) writeTasks(ctx context.Context, tasks []taskrec.Task, b history.Batch, workers []string) error {
	// Every replica locks the rows in the same order, by id: two batches
	// sharing tasks wait for each other instead of deadlocking.
	sorted := byID(tasks)
	// The chunks go on WriteConns connections at once: one connection
	// writing keeps one of the server's cores busy, however many it has.
	// A batch is spread over them in chunks of at least minWriteChunk.
	// The chunks hold disjoint ranges of ids (a task's records stay in
	// one), each locked in id order, so they do not deadlock with each
	// other or with another replica's.
	chunk := s.cfg.WriteChunk
	if per := (len(sorted) + s.cfg.WriteConns - 1) / s.cfg.WriteConns; per < chunk {
		chunk = max(per, minWriteChunk)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.WriteConns)
	for len(sorted) > chunk {
		end := chunk
		for end < len(sorted) && sorted[end].UUID == sorted[end-1].UUID {
			end++
		}
		part := sorted[:end]
		g.Go(func() error { return s.writeChunk(gctx, part, history.Batch{}, nil) })
		sorted = sorted[end:]
	}
	g.Go(func() error { return s.writeChunk(gctx, sorted, b, workers) })
	return g.Wait()
}

// byID returns pointers to tasks sorted by id, a task's records in the
// order they came. The records stay where they are: they are a few
// hundred bytes each, and sorting and copying them took a tenth of a
// replica's CPU while it wrote 10,000 tasks a second.
func byID(tasks []taskrec.Task) []*taskrec.Task {
	sorted := make([]*taskrec.Task, len(tasks))
	for i := range tasks {
		sorted[i] = &tasks[i]
	}
	slices.SortStableFunc(sorted, func(x, y *taskrec.Task) int { return strings.Compare(x.UUID, y.UUID) })
	return sorted
}

// Written is how many task records this replica wrote, TakenOver how many
// of them it wrote for another replica that had not, and Held how many it
// holds for the others now (share.go).
func (s *Store) Written() int64   { return s.written.Load() }
func (s *Store) TakenOver() int64 { return s.takenOver.Load() }
func (s *Store) Held() int        { return s.share.heldCount() }

// Replicas is how many replicas of the fleet this one saw live at its
// last write, itself included.
func (s *Store) Replicas() int { return s.share.replicas() }

// minWriteChunk is the fewest task records Write gives a connection of
// its own, so that a small flush stays one statement on one connection.
const minWriteChunk = 500

// writeChunk writes tasks (sorted by id) and, from b, the workers named
// and the forgotten ones, as one implicit transaction.
func (s *Store) writeChunk(ctx context.Context, tasks []*taskrec.Task, b history.Batch, workers []string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	var pb pgx.Batch
	// The records go as one statement (upsertSQL), not one a task: a
	// statement a row cost PostgreSQL a bind, an executor start and a
	// result of its own for each task. A statement may not change a row
	// twice (ON CONFLICT DO UPDATE refuses it), so a task with two
	// records in the batch (one of a task evicted and seen again, kept
	// with the other through an outage) has its second in a second
	// statement: the merge is commutative, their order does not matter.
	for round := tasks; len(round) > 0; {
		var rest []*taskrec.Task
		first := round[:0:0]
		for i := range round {
			if i > 0 && round[i].UUID == round[i-1].UUID {
				rest = append(rest, round[i])
				continue
			}
			first = append(first, round[i])
		}
		if s.grams {
			pb.Queue(upsertSQL, upsertArgs(first)...)
		} else {
			pb.Queue(upsertWithoutGramsSQL, recordArgs(first)...)
		}
		round = rest
	}
	// Sorted too: two replicas deleting the same workers in two orders
	// would deadlock, and one write would be lost until the next flush.
	if len(b.ForgottenWorkers) > 0 {
		pb.Queue(`DELETE FROM stamen_workers WHERE hostname IN (SELECT unnest($1::text[]) ORDER BY 1)`,
			slices.Sorted(slices.Values(b.ForgottenWorkers)))
	}
	if len(workers) > 0 {
		slices.Sort(workers)
		events := make([][]byte, len(workers))
		for i, w := range workers {
			events[i] = b.Workers[w]
		}
		// seq takes a new number at every write (PostgreSQL lets an
		// UPDATE set a GENERATED ALWAYS identity to DEFAULT), so that it
		// orders the workers by their last write: the reads keep the
		// MaxWorkers written last (see workersSQL).
		pb.Queue(`INSERT INTO stamen_workers (hostname, event) SELECT * FROM unnest($1::text[], $2::bytea[])
			ON CONFLICT (hostname) DO UPDATE SET event = EXCLUDED.event, seq = DEFAULT`, workers, events)
	}
	// The history's task names are those of the tasks it holds, so they
	// are taken from the records written, not from the batch's Types:
	// those name what the writer's state newly knows, and a name whose
	// tasks came and went during an outage (their records still in the
	// kept batch) is in none, while one of a task left out (writable) or
	// dropped unwritten is. In name order, as the rows are locked.
	names := map[string]bool{}
	for i := range tasks {
		if tasks[i].Name != "" {
			names[tasks[i].Name] = true
		}
	}
	if len(names) > 0 {
		pb.Queue(`INSERT INTO stamen_task_types (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`,
			slices.Sorted(maps.Keys(names)))
	}
	if pb.Len() == 0 {
		return nil
	}
	// A batch sent outside a transaction runs as one implicit
	// transaction: written whole or not at all, in one round trip, where
	// BEGIN and COMMIT took one each.
	err := s.pool.SendBatch(ctx, &pb).Close()
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// A column is one of a task's columns: its name, its SQL type, and how a
// record gives its value, ok false for an unset field (NULL). Exactly
// one of text, num and integer is set, by the type.
type column struct {
	name, typ string
	text      func(*taskrec.Task) (v string, ok bool)
	num       func(*taskrec.Task) (v float64, ok bool)
	integer   func(*taskrec.Task) (v int64, ok bool)
}

// textColumn is a text column set when the record has f; f 0 for one
// every record has (the id, the state).
func textColumn(name string, f taskrec.Field, get func(*taskrec.Task) string) column {
	return column{name: name, typ: "text", text: func(t *taskrec.Task) (string, bool) { return get(t), f == 0 || t.Has(f) }}
}

func numColumn(name string, f taskrec.Field, get func(*taskrec.Task) float64) column {
	return column{name: name, typ: "float8", num: func(t *taskrec.Task) (float64, bool) { return get(t), t.Has(f) }}
}

// columns are a task's columns, in the order of the upsert's arrays.
var columns = []column{
	textColumn("id", 0, func(t *taskrec.Task) string { return t.UUID }),
	textColumn("state", 0, func(t *taskrec.Task) string { return t.State }),
	textColumn("name", taskrec.FieldName, func(t *taskrec.Task) string { return t.Name }),
	numColumn("received", taskrec.FieldReceived, func(t *taskrec.Task) float64 { return t.Received }),
	numColumn("sent", taskrec.FieldSent, func(t *taskrec.Task) float64 { return t.Sent }),
	numColumn("started", taskrec.FieldStarted, func(t *taskrec.Task) float64 { return t.Started }),
	numColumn("rejected", taskrec.FieldRejected, func(t *taskrec.Task) float64 { return t.Rejected }),
	numColumn("succeeded", taskrec.FieldSucceeded, func(t *taskrec.Task) float64 { return t.Succeeded }),
	numColumn("failed", taskrec.FieldFailed, func(t *taskrec.Task) float64 { return t.Failed }),
	numColumn("retried", taskrec.FieldRetried, func(t *taskrec.Task) float64 { return t.Retried }),
	numColumn("revoked", taskrec.FieldRevoked, func(t *taskrec.Task) float64 { return t.Revoked }),
	textColumn("args", taskrec.FieldArgs, func(t *taskrec.Task) string { return t.Args }),
	textColumn("kwargs", taskrec.FieldKwargs, func(t *taskrec.Task) string { return t.Kwargs }),
	textColumn("eta", taskrec.FieldETA, func(t *taskrec.Task) string { return t.ETA }),
	textColumn("expires", taskrec.FieldExpires, func(t *taskrec.Task) string { return t.Expires }),
	{name: "retries", typ: "int8", integer: func(t *taskrec.Task) (int64, bool) {
		return int64(t.Retries), t.Has(taskrec.FieldRetries)
	}},
	textColumn("worker", taskrec.FieldWorker, func(t *taskrec.Task) string { return t.Worker }),
	textColumn("result", taskrec.FieldResult, func(t *taskrec.Task) string { return t.Result }),
	textColumn("exception", taskrec.FieldException, func(t *taskrec.Task) string { return t.Exception }),
	numColumn("ts", taskrec.FieldTimestamp, func(t *taskrec.Task) float64 { return t.Timestamp }),
	numColumn("runtime", taskrec.FieldRuntime, func(t *taskrec.Task) float64 { return t.Runtime }),
	textColumn("traceback", taskrec.FieldTraceback, func(t *taskrec.Task) string { return t.Traceback }),
	textColumn("exchange", taskrec.FieldExchange, func(t *taskrec.Task) string { return t.Exchange }),
	textColumn("routing_key", taskrec.FieldRoutingKey, func(t *taskrec.Task) string { return t.RoutingKey }),
	{name: "clock", typ: "int8", integer: func(t *taskrec.Task) (int64, bool) { return t.Clock, true }},
	textColumn("client", taskrec.FieldClient, func(t *taskrec.Task) string { return t.Client }),
	textColumn("root_id", taskrec.FieldRootID, func(t *taskrec.Task) string { return t.RootID }),
	textColumn("parent_id", taskrec.FieldParentID, func(t *taskrec.Task) string { return t.ParentID }),
}

// taskColumns are columns' names and taskTypes their types.
var taskColumns, taskTypes = func() (names, types []string) {
	for _, c := range columns {
		names, types = append(names, c.name), append(types, c.typ)
	}
	return names, types
}()

// upsertArgs are upsertSQL's arguments for tasks, whose ids are distinct:
// recordArgs' arrays, then the ids' grams (idGrams), cut from one string.
func upsertArgs(tasks []*taskrec.Task) []any {
	grams := make([]pgtype.Text, len(tasks))
	ends := make([]int, len(tasks))
	buf := make([]byte, 0, len(tasks)*100) // a uuid's grams take 98 bytes
	for i, t := range tasks {
		buf, grams[i].Valid = idGrams(buf, t.UUID)
		ends[i] = len(buf)
	}
	all := string(buf)
	from := 0
	for i, end := range ends {
		grams[i].String, from = all[from:end], end
	}
	return append(recordArgs(tasks), pointerArray[pgtype.Text](grams))
}

// recordArgs are tasks' records as arrays, a column each (taskTypes), a
// NULL element for an unset field. The arrays are of pgtype's nullable
// values, which pgx encodes without reflection, and are read through
// pointers (pointerArray): a field costs no allocation.
func recordArgs(tasks []*taskrec.Task) []any {
	args := make([]any, len(columns))
	for c, col := range columns {
		switch {
		case col.num != nil:
			a := make([]pgtype.Float8, len(tasks))
			for i := range tasks {
				a[i].Float64, a[i].Valid = col.num(tasks[i])
			}
			args[c] = pointerArray[pgtype.Float8](a)
		case col.integer != nil:
			a := make([]pgtype.Int8, len(tasks))
			for i := range tasks {
				a[i].Int64, a[i].Valid = col.integer(tasks[i])
			}
			args[c] = pointerArray[pgtype.Int8](a)
		default:
			a := make([]pgtype.Text, len(tasks))
			for i := range tasks {
				a[i].String, a[i].Valid = col.text(tasks[i])
			}
			args[c] = pointerArray[pgtype.Text](a)
		}
	}
	return args
}

// pointerArray is pgtype.FlatArray for encoding only, whose elements pgx
// reads through pointers: FlatArray hands out each element as an
// interface value, which copies it to the heap.
type pointerArray[T any] []T

func (a pointerArray[T]) Dimensions() []pgtype.ArrayDimension {
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

func (a pointerArray[T]) Index(i int) any { return &a[i] }

func (a pointerArray[T]) IndexType() any { return new(T) }

// upsertSQL merges records into their rows, a record an element of each
// array (upsertArgs), in one statement. "newer" orders two records of
// a task by (timestamp, clock); every field comes from the newer record
// when it has one, else from the other, but for the times of the events
// (received, started, ...), which take the latest: a commutative merge,
// so that the row ends the same whichever replica writes first. The state is the
// stronger by Celery's precedence, except that RETRY (which Celery lets
// replace and be replaced out of order) and ties go by recency. The rows
// are inserted, and locked, in the arrays' order. A new row's id_grams
// comes from one more array, of their array literals; a row's grams never
// change, as its id does not.
var upsertSQL = upsert(true)

// upsertWithoutGramsSQL is upsertSQL as a stamen before the id's grams
// (migration 10) wrote, from recordArgs.
var upsertWithoutGramsSQL = upsert(false)

// idGramsVersion is the schema version that has id_grams.
const idGramsVersion = 10

func upsert(grams bool) string {
	var b strings.Builder
	b.WriteString("INSERT INTO stamen_tasks AS t (")
	b.WriteString(strings.Join(taskColumns, ", "))
	if grams {
		b.WriteString(", id_grams) SELECT r.")
		b.WriteString(strings.Join(taskColumns, ", r."))
		fmt.Fprintf(&b, ", r.grams::int4[] FROM %s, $%d::text[]) AS r(%s, grams)",
			strings.TrimSuffix(unnestArgs, ")"), len(taskColumns)+1, strings.Join(taskColumns, ", "))
	} else {
		b.WriteString(") SELECT * FROM ")
		b.WriteString(unnestArgs)
	}
	b.WriteString(" ON CONFLICT (id) DO UPDATE SET ")
	cols, exprs := mergeExprs("EXCLUDED")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = %s", c, exprs[i])
	}
	// A record that changes nothing (the same task written by two
	// replicas, or a replica's older view of it) leaves the row as it is
	// rather than writing a new version of it: an UPDATE, even to the
	// same values, writes a new tuple, and one that finds no room on its
	// page (the table is filled as it is appended to) is not HOT, so it
	// added an entry to every index, the heap's and the indexes' WAL of a
	// task again for each replica. The row is still locked until the
	// batch commits, as for an update.
	b.WriteString(" WHERE ")
	b.WriteString(changes(cols, exprs))
	return b.String()
}

// uncoveredSQL returns the places (from 1) of the records, given as
// upsertSQL's arrays, that upsertSQL would change a row for: those of a
// task without a row, and those the row lacks something of. Two records
// of a task may be among them. It locks nothing and writes nothing: what a
// replica asks of the records it held for another (share.go).
var uncoveredSQL = func() string {
	cols, exprs := mergeExprs("r")
	return "SELECT r.n FROM " + unnestArgs + " WITH ORDINALITY AS r(" + strings.Join(taskColumns, ", ") +
		", n) LEFT JOIN stamen_tasks t ON t.id = r.id WHERE t.id IS NULL OR " + changes(cols, exprs)
}()

// unnestArgs is upsertArgs' arrays as rows, a column a field.
var unnestArgs = func() string {
	parts := make([]string, len(taskColumns))
	for i := range taskColumns {
		parts[i] = fmt.Sprintf("$%d::%s[]", i+1, taskTypes[i])
	}
	return "unnest(" + strings.Join(parts, ", ") + ")"
}()

// changes is the condition that the merged values exprs of the columns
// cols differ from the row t's.
func changes(cols, exprs []string) string {
	return "(" + strings.Join(exprs, ", ") + ") IS DISTINCT FROM (t." + strings.Join(cols, ", t.") + ")"
}

// mergeExprs returns the columns a record sets of a row t, but its id,
// and the value each takes when the record, named in, is merged into it.
func mergeExprs(in string) (cols, exprs []string) {
	newer := fmt.Sprintf(`(coalesce(%[1]s.ts, '-Infinity'), %[1]s.clock) >= (coalesce(t.ts, '-Infinity'), t.clock)`, in)
	for _, c := range taskColumns {
		if c == "id" {
			continue
		}
		var e string
		switch c {
		case "state":
			e = fmt.Sprintf(`CASE
				WHEN %[1]s.state <> 'RETRY' AND t.state <> 'RETRY' AND stamen_precedence(%[1]s.state) < stamen_precedence(t.state) THEN %[1]s.state
				WHEN %[1]s.state <> 'RETRY' AND t.state <> 'RETRY' AND stamen_precedence(%[1]s.state) > stamen_precedence(t.state) THEN t.state
				WHEN %[2]s THEN %[1]s.state ELSE t.state END`, in, newer)
		case "received", "sent", "started", "rejected", "succeeded", "failed", "retried", "revoked":
			// When the latest event of that kind happened: the greatest,
			// whichever record brings it (GREATEST skips NULLs).
			e = fmt.Sprintf(`greatest(%[2]s.%[1]s, t.%[1]s)`, c, in)
		case "clock":
			e = fmt.Sprintf(`CASE WHEN %s THEN %s.clock ELSE t.clock END`, newer, in)
		default:
			e = fmt.Sprintf(`CASE WHEN %[2]s THEN coalesce(%[3]s.%[1]s, t.%[1]s) ELSE coalesce(t.%[1]s, %[3]s.%[1]s) END`, c, newer, in)
		}
		cols, exprs = append(cols, c), append(exprs, e)
	}
	return cols, exprs
}

// selectColumns read a task and its children's ids, oldest first.
var selectColumns = func() string {
	cols := make([]string, len(taskColumns))
	for i, c := range taskColumns {
		cols[i] = "t." + c
	}
	return strings.Join(cols, ", ") +
		`, ARRAY(SELECT c.id FROM stamen_tasks c WHERE c.parent_id = t.id ORDER BY c.seq)`
}()

// row is a scanned task row.
type row struct {
	id, st                                                  string
	name, args, kwargs, eta, expires, worker, result, exc   *string
	traceback, exchange, routingKey, client, rootID, parent *string
	received, sent, started, rejected, succeeded, failed    *float64
	retried, revoked, ts, runtime                           *float64
	retries                                                 *int64
	clock                                                   int64
	children                                                []string
}

func (r *row) dest() []any {
	return []any{
		&r.id, &r.st, &r.name, &r.received, &r.sent, &r.started, &r.rejected, &r.succeeded, &r.failed,
		&r.retried, &r.revoked, &r.args, &r.kwargs, &r.eta, &r.expires, &r.retries, &r.worker, &r.result,
		&r.exc, &r.ts, &r.runtime, &r.traceback, &r.exchange, &r.routingKey, &r.clock, &r.client,
		&r.rootID, &r.parent, &r.children,
	}
}

func (r *row) task() taskrec.Task {
	t := taskrec.Task{UUID: r.id, State: r.st, Clock: r.clock, Children: r.children}
	if t.Children == nil {
		t.Children = []string{}
	}
	str := func(f taskrec.Field, dst *string, v *string) {
		if v != nil {
			*dst = *v
			t.Set |= f
		}
	}
	num := func(f taskrec.Field, dst *float64, v *float64) {
		if v != nil {
			*dst = *v
			t.Set |= f
		}
	}
	str(taskrec.FieldName, &t.Name, r.name)
	num(taskrec.FieldReceived, &t.Received, r.received)
	num(taskrec.FieldSent, &t.Sent, r.sent)
	num(taskrec.FieldStarted, &t.Started, r.started)
	num(taskrec.FieldRejected, &t.Rejected, r.rejected)
	num(taskrec.FieldSucceeded, &t.Succeeded, r.succeeded)
	num(taskrec.FieldFailed, &t.Failed, r.failed)
	num(taskrec.FieldRetried, &t.Retried, r.retried)
	num(taskrec.FieldRevoked, &t.Revoked, r.revoked)
	str(taskrec.FieldArgs, &t.Args, r.args)
	str(taskrec.FieldKwargs, &t.Kwargs, r.kwargs)
	str(taskrec.FieldETA, &t.ETA, r.eta)
	str(taskrec.FieldExpires, &t.Expires, r.expires)
	if r.retries != nil {
		t.Retries = int(*r.retries)
		t.Set |= taskrec.FieldRetries
	}
	str(taskrec.FieldWorker, &t.Worker, r.worker)
	str(taskrec.FieldResult, &t.Result, r.result)
	str(taskrec.FieldException, &t.Exception, r.exc)
	num(taskrec.FieldTimestamp, &t.Timestamp, r.ts)
	num(taskrec.FieldRuntime, &t.Runtime, r.runtime)
	str(taskrec.FieldTraceback, &t.Traceback, r.traceback)
	str(taskrec.FieldExchange, &t.Exchange, r.exchange)
	str(taskrec.FieldRoutingKey, &t.RoutingKey, r.routingKey)
	str(taskrec.FieldClient, &t.Client, r.client)
	str(taskrec.FieldRootID, &t.RootID, r.rootID)
	str(taskrec.FieldParentID, &t.ParentID, r.parent)
	return t
}

// Task returns a task's record, or false when the history has none.
func (s *Store) Task(ctx context.Context, id string) (taskrec.Task, bool, error) {
	var r row
	found := true
	err := s.read(ctx, func(ctx context.Context) error {
		err := s.pool.QueryRow(ctx, `SELECT `+selectColumns+` FROM stamen_tasks t WHERE t.id = $1`, id).Scan(r.dest()...)
		if errors.Is(err, pgx.ErrNoRows) {
			found = false
			return nil
		}
		return err
	})
	if err != nil || !found {
		return taskrec.Task{}, false, err
	}
	return r.task(), true, nil
}

// TaskTypes returns the task names seen, sorted.
func (s *Store) TaskTypes(ctx context.Context) ([]string, error) {
	var names []string
	err := s.read(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT name FROM stamen_task_types ORDER BY name`)
		if err != nil {
			return err
		}
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if names == nil {
		names = []string{}
	}
	return names, err
}

// workersSQL reads the latest events of the MaxWorkers workers written
// last, first written first. The table may hold more (replicas with
// workers of their own, hostnames of autoscaled workers come and gone): as
// the events state drops the worker heard longest ago, the read drops the
// workers written longest ago, long dead ones, rather than the live ones.
// The table is small (each replica deletes the workers it forgets), so
// the top-N sort needs no index on seq.
const workersSQL = `SELECT event FROM (SELECT seq, event FROM stamen_workers ORDER BY seq DESC LIMIT $1) w ORDER BY seq`

// Workers returns the workers as their latest events show them, first
// written first, with liveness computed now: the events are replayed into
// a scratch state as received when the writer received them
// (celery.DecodeStoredEvents), so a worker is what a replica that saw
// that event would show, and one whose heartbeats stopped goes offline.
func (s *Store) Workers(ctx context.Context) ([]state.Worker, error) {
	var events [][]byte
	err := s.read(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, workersSQL, s.cfg.MaxWorkers)
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, pgx.RowTo[[]byte])
		return err
	})
	if err != nil {
		return nil, err
	}
	// Bounded as the read is: with the state's default bound, a
	// MaxWorkers above it would drop workers the read returned.
	st := state.New(state.Config{MaxTasks: 1, MaxWorkers: s.cfg.MaxWorkers, Now: s.cfg.Now})
	for _, raw := range events {
		if evs, err := celery.DecodeStoredEvents(raw); err == nil {
			st.Apply(evs...)
		}
	}
	return st.Workers(), nil
}

// WorkerEvents calls fn with the latest events of the workers Workers
// reads, first written first: a replica replays them at start to know
// every worker at once, and its state, bounded by MaxWorkers too, then
// holds those written last.
func (s *Store) WorkerEvents(ctx context.Context, fn func(raw []byte)) error {
	return s.read(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, workersSQL, s.cfg.MaxWorkers)
		if err != nil {
			return err
		}
		var raw []byte
		handed := false
		_, err = pgx.ForEachRow(rows, []any{&raw}, func() error {
			handed = true
			fn(raw)
			return nil
		})
		if handed {
			return handedOut(err)
		}
		return err
	})
}

// StaleTasks returns the ids of the tasks in a non-terminal state
// (PENDING, RECEIVED, STARTED, RETRY) whose latest event is older than
// before, oldest first, at most limit: the candidates for reconciliation
// from the result backend.
func (s *Store) StaleTasks(ctx context.Context, before time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var ids []string
	err := s.read(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT id FROM stamen_tasks
			WHERE state IN ('PENDING', 'RECEIVED', 'STARTED', 'RETRY') AND ts < $1
			ORDER BY ts, id LIMIT $2`, state.Epoch(before), limit)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return ids, err
}

// Counts returns how many tasks, workers and task types the store holds.
func (s *Store) Counts(ctx context.Context) (tasks, workers, types int, err error) {
	err = s.read(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM stamen_tasks), (SELECT count(*) FROM stamen_workers),
			(SELECT count(*) FROM stamen_task_types)`).Scan(&tasks, &workers, &types)
	})
	return tasks, workers, types, err
}

// tables are the tables of stamen's schema, as Size counts them.
var tables = []string{"stamen_schema_version", "stamen_tasks", "stamen_workers", "stamen_task_types",
	"stamen_audit", "stamen_sent", "stamen_queues", "stamen_task_stats", "stamen_task_stats_delta",
	"stamen_task_stats_hour", "stamen_task_stats_total", "stamen_task_stats_total_hour", "stamen_replicas"}

// sizeEvery is how often Size reads the size of the history: a catalog
// read, cheap, but a scrape every few seconds by every replica need not
// repeat it.
const sizeEvery = 30 * time.Second

// sizeReading is the last size Size read, and when it tried.
type sizeReading struct {
	mu    sync.Mutex
	at    time.Time
	bytes int64
}

// Size is the bytes stamen's tables take in the database, their indexes
// and TOAST included (pg_total_relation_size), as the search path finds
// them (the schema the store reads and writes), for
// stamen_store_size_bytes. It is one catalog read, under the read
// timeout, not a scan of the rows, made at most every sizeEvery: between
// reads it answers the last one. A failed read answers the last value too
// (logged, not returned), and is not tried again before sizeEvery either,
// so that scrapes during an outage do not each wait the timeout.
func (s *Store) Size(ctx context.Context) (int64, error) {
	r := &s.size
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < sizeEvery {
		return r.bytes, nil
	}
	r.at = time.Now()
	var n int64
	err := s.read(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(r)), 0)::bigint
			FROM unnest($1::text[]) AS t(name), to_regclass(t.name) AS r WHERE r IS NOT NULL`, tables).Scan(&n)
	})
	if err != nil {
		s.log.Debug("could not read the PostgreSQL history's size", slog.Any("err", err))
		return r.bytes, nil
	}
	r.bytes = n
	return n, nil
}

// Ping checks, under the read timeout, that the database answers a
// statement (readiness).
func (s *Store) Ping(ctx context.Context) error {
	return s.read(ctx, func(ctx context.Context) error {
		var one int
		return s.pool.QueryRow(ctx, `SELECT 1`).Scan(&one)
	})
}

// Unwritable is how many task records and worker events Write has left
// out because a key of theirs is longer than the indexes take.
func (s *Store) Unwritable() int64 { return s.unwritable.Load() }

// writable reports whether t's indexed keys fit the indexes (maxKeyBytes,
// maxWorkerBytes). A b-tree entry over PostgreSQL's limit fails the
// statement, and with it the whole batch at every retry: a single task
// with a generated name of a few kilobytes (or an unknown event type,
// whose upper-cased name becomes the state, as in Celery) would stop the
// fleet's history. Such a task stays in the replica's memory only.
func writable(t *taskrec.Task) bool {
	return len(t.UUID) <= maxKeyBytes && len(t.Name) <= maxKeyBytes && len(t.State) <= maxKeyBytes &&
		len(t.ParentID) <= maxKeyBytes && len(t.Worker) <= maxWorkerBytes
}

// cut is s cut to at most n bytes, for a log line.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// Deletes is how many retention DELETE statements this store has run.
func (s *Store) Deletes() int64 { return s.deletes.Load() }

var (
	_ history.Backend    = (*Store)(nil)
	_ history.StaleTasks = (*Store)(nil)
)
