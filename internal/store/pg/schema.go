package pg

// The schema, as numbered migrations. Open applies the ones a database
// lacks, in order, each in its own transaction, under a session advisory
// lock so that replicas starting together apply each exactly once; the
// version reached is the row of stamen_schema_version.
//
// stamen_tasks holds one row per task, a column per field of Flower's task
// record (NULL when the field is not set). Ids, names, states and workers
// are COLLATE "C" so that ORDER BY compares them byte for byte, as the
// in-memory state does, and lower() folds ASCII as its fold does.
// seq is the order rows were first written, which lists a task's children
// in the order they came.
//
// Indexes, one per access path of GET /api/tasks:
//   - the default order (newest first: coalesce(ts, 0) DESC, id DESC), alone
//     and behind an exact state, task name or worker filter;
//   - sort_by name, state, received, started (NULLS FIRST ascending, ties
//     by id), the received ones also serving received_start/received_end;
//     the received index holds ts too (migration 3), for a narrow window's
//     page in the default order. That read is an index-only scan only on
//     the table's pages the visibility map marks all-visible, which
//     autovacuum does: by default once a fifth of the table has changed
//     since its last pass, so an operator's newest tasks (the ones still
//     being updated) are mostly read from the table, and an older window
//     from the index alone;
//   - parent_id, for each task's children;
//   - a pg_trgm GIN index over the fields an unqualified search term reads
//     but the id (name, state, worker, args, kwargs, result), separated by
//     \x1f so that no term of the search language spans two (a term
//     holding \x1f is refused). Every substring term goes through it, a
//     qualified one then rechecked on its own column (migration 10; the
//     id was in it before);
//   - a GIN index over id_grams, the id's aligned 3-grams (grams.go), and
//     a pg_trgm one over the ids of the rows without them (written before
//     migration 10), for an unqualified term in the id;
//   - the non-terminal tasks by timestamp, for StaleTasks;
//   - the failures by name, exception type and failure time (migration 4),
//     for GET /api/failures.
var migrations = []string{
	// 1
	`CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE TABLE stamen_tasks (
	id          text COLLATE "C" PRIMARY KEY,
	seq         bigint GENERATED ALWAYS AS IDENTITY,
	state       text COLLATE "C" NOT NULL,
	name        text COLLATE "C",
	received    double precision,
	sent        double precision,
	started     double precision,
	rejected    double precision,
	succeeded   double precision,
	failed      double precision,
	retried     double precision,
	revoked     double precision,
	args        text COLLATE "C",
	kwargs      text COLLATE "C",
	eta         text,
	expires     text,
	retries     bigint,
	worker      text COLLATE "C",
	result      text COLLATE "C",
	exception   text,
	ts          double precision,
	runtime     double precision,
	traceback   text,
	exchange    text,
	routing_key text,
	clock       bigint NOT NULL DEFAULT 0,
	client      text,
	root_id     text,
	parent_id   text COLLATE "C"
);
CREATE FUNCTION stamen_precedence(s text) RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE s WHEN 'SUCCESS' THEN 0 WHEN 'FAILURE' THEN 1 WHEN 'REVOKED' THEN 3 WHEN 'STARTED' THEN 4
		WHEN 'RECEIVED' THEN 5 WHEN 'REJECTED' THEN 6 WHEN 'RETRY' THEN 7 WHEN 'PENDING' THEN 8 ELSE 2 END
$$;
CREATE INDEX stamen_tasks_order ON stamen_tasks ((coalesce(ts, 0)), id);
CREATE INDEX stamen_tasks_state ON stamen_tasks (lower(state), (coalesce(ts, 0)), id);
CREATE INDEX stamen_tasks_name ON stamen_tasks (lower(name), (coalesce(ts, 0)), id);
CREATE INDEX stamen_tasks_worker ON stamen_tasks (lower(worker), (coalesce(ts, 0)), id);
CREATE INDEX stamen_tasks_by_name ON stamen_tasks ((name IS NOT NULL), lower(name), id);
CREATE INDEX stamen_tasks_by_state ON stamen_tasks (lower(state), id);
CREATE INDEX stamen_tasks_received ON stamen_tasks (received NULLS FIRST, id);
CREATE INDEX stamen_tasks_started ON stamen_tasks (started NULLS FIRST, id);
CREATE INDEX stamen_tasks_parent ON stamen_tasks (parent_id, seq) WHERE parent_id IS NOT NULL;
CREATE INDEX stamen_tasks_stale ON stamen_tasks (ts) WHERE state IN ('PENDING', 'RECEIVED', 'STARTED', 'RETRY');
CREATE INDEX stamen_tasks_search ON stamen_tasks USING gin ((` + searchTextWithID + `) gin_trgm_ops);
CREATE TABLE stamen_workers (
	hostname text COLLATE "C" PRIMARY KEY,
	seq      bigint GENERATED ALWAYS AS IDENTITY,
	event    bytea NOT NULL
);
CREATE TABLE stamen_task_types (name text COLLATE "C" PRIMARY KEY);`,
	// 2: the audit log and the log of sent tasks (Audit, Sent).
	`CREATE TABLE stamen_audit (
	id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at        timestamptz NOT NULL,
	operation text NOT NULL,
	username  text NOT NULL,
	record    jsonb NOT NULL
);
CREATE INDEX stamen_audit_at ON stamen_audit (at, id);
CREATE TABLE stamen_sent (
	id   text COLLATE "C" PRIMARY KEY,
	at   timestamptz NOT NULL,
	data bytea NOT NULL
);
CREATE INDEX stamen_sent_at ON stamen_sent (at);`,
	// 3: the received index also holds ts, so that a narrow received
	// window chooses its page of the default order from the index alone
	// (see buildList) instead of reading every row of the window (460 ms
	// for a 10-minute window of 100,000 tasks at 10M). It replaces
	// migration 1's received index, whose keys it has, so it serves
	// sort_by=received as well. The build holds a SHARE lock: the other
	// replicas' writes wait for it (reads do not); it took 6.5 s at 10M
	// tasks on the bench machine with the table cached (733 MB, the old
	// index 642 MB), minutes on a larger or colder table. The old index is
	// dropped once the new one is built, which holds the table's lock only
	// from the drop to the commit.
	`CREATE INDEX stamen_tasks_received_ts ON stamen_tasks (received NULLS FIRST, id) INCLUDE (ts);
DROP INDEX stamen_tasks_received;`,
	// 4: the failures, grouped as Failures groups them (failureKey), for
	// GET /api/failures: the groups' counts and times from an index-only
	// scan in the index's order, and each group's newest examples from a
	// backward read of its entries. PostgreSQL answers from the index
	// alone only when it holds every column the query names, expressions
	// over them aside, so it includes name, exception, failed and ts. A
	// b-tree entry is at most 2704 bytes and a longer one fails the write
	// that makes it, so the failures with an exception repr longer than
	// maxIndexedException (which the entry holds twice, as its type may
	// be all of it) are kept out of it, in a second index by name and time
	// that Failures reads for them, checking each one's type on its row.
	// Without statistics of the repr's length PostgreSQL guesses a third
	// of the failures are long, and at 10M tasks, parallel workers
	// allowed, chose a scan of the whole table over that index (1.6 s of
	// 2.2); the ANALYZE gathers them at once rather than at autovacuum's
	// next pass (it samples 30,000 rows: 1.1 s at 10M). The builds hold a
	// SHARE lock until the migration commits: the other replicas' writes
	// wait for it (reads do not). At 10M tasks, a million of them failures,
	// it took 8.4 s on the bench machine (8.7 s without the statistics in
	// an earlier run; the index 151 MB, the long one empty), longer on a
	// larger or colder table.
	`CREATE INDEX stamen_tasks_failures ON stamen_tasks (` + failureKey + `, id)
	INCLUDE (name, exception, failed, ts) WHERE ` + failedState + ` AND ` + shortException + `;
CREATE INDEX stamen_tasks_failures_long ON stamen_tasks ((` + failureName + `), (` + failureAt + `), (` + failureTs + `), id)
	WHERE ` + failedState + ` AND ` + longException + `;
CREATE STATISTICS stamen_tasks_exception_length ON (octet_length(exception)) FROM stamen_tasks;
ANALYZE stamen_tasks;`,
	// 5: the queues the fleet published to (Queues), so that every replica
	// lists and purges a queue without consumers that another one sent to.
	`CREATE TABLE stamen_queues (
	name text COLLATE "C" PRIMARY KEY,
	at   timestamptz NOT NULL
);`,
	// 6: the task activity over time (TaskStats), kept as it changes so
	// that a read costs what its window's minutes hold, not the tasks.
	// A trigger turns each change of a row's times of state (or of its
	// name, worker or routing key) into delta rows: -1 in the old time's
	// minute and key, +1 in the new one's, and for a success with a
	// runtime the same in its runtime bin. Replicas writing the same
	// record change nothing the second time (the upsert's merge leaves
	// the row as it is, and the UPDATE trigger fires only when one of
	// those columns changed), so nothing counts twice. The deltas are
	// appended, never updated, so writers never wait for each other on
	// them; one replica at a time (CompactStats) folds them into
	// stamen_task_stats, one row per minute and key whose data is the
	// cell's counts and runtime histogram (taskstats.AppendCell): a read
	// of 24 hours of a dozen keys reads some 17,000 rows, where a row per
	// kind and bin made it some 800,000. The deltas are deleted as they
	// are folded, so autovacuum is told to clean them often. Task rows
	// deleted by retention keep their counts: the activity is kept 7 days
	// whatever --db_max_tasks keeps. The migration counts the tasks of the
	// last 7 days already there, as deltas (aggregated by minute and key)
	// that the replicas then fold, after the trigger is created: its lock
	// keeps writers out until the migration commits.
	`CREATE TABLE stamen_task_stats (
	minute bigint NOT NULL,
	name   text COLLATE "C" NOT NULL,
	worker text COLLATE "C" NOT NULL,
	queue  text COLLATE "C" NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (minute, name, worker, queue)
);
CREATE TABLE stamen_task_stats_delta (
	minute bigint NOT NULL,
	name   text COLLATE "C" NOT NULL,
	worker text COLLATE "C" NOT NULL,
	queue  text COLLATE "C" NOT NULL,
	kind   smallint NOT NULL,
	bin    smallint NOT NULL,
	n      integer NOT NULL
);
ALTER TABLE stamen_task_stats_delta SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 20000,
	autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 20000);
CREATE INDEX stamen_task_stats_delta_minute ON stamen_task_stats_delta (minute);
CREATE FUNCTION stamen_task_stats_rows(t stamen_tasks, sign int)
	RETURNS TABLE (minute bigint, name text, worker text, queue text, kind smallint, bin smallint, n int)
	LANGUAGE sql IMMUTABLE AS $$
	SELECT floor(e.v / 60)::bigint, coalesce(t.name, ''), coalesce(t.worker, ''),
		CASE WHEN octet_length(t.routing_key) <= ` + maxKeyBytesSQL + ` THEN t.routing_key ELSE '' END,
		e.k::smallint, e.b::smallint, sign
	FROM (VALUES (0, t.received, -1), (1, t.started, -1), (2, t.succeeded, -1), (3, t.failed, -1),
		(4, t.retried, -1), (5, t.revoked, -1), (2, t.succeeded, ` + runtimeBin + `)) AS e(k, v, b)
	WHERE e.v BETWEEN -1e12 AND 1e12 AND e.b IS NOT NULL
$$;
CREATE FUNCTION stamen_task_stats_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' THEN
		INSERT INTO stamen_task_stats_delta
		SELECT d.minute, d.name, d.worker, d.queue, d.kind, d.bin, sum(d.n)
		FROM (SELECT * FROM stamen_task_stats_rows(OLD, -1) UNION ALL SELECT * FROM stamen_task_stats_rows(NEW, 1)) d
		GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(d.n) <> 0;
	ELSE
		INSERT INTO stamen_task_stats_delta SELECT * FROM stamen_task_stats_rows(NEW, 1);
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER stamen_task_stats_insert AFTER INSERT ON stamen_tasks
	FOR EACH ROW EXECUTE FUNCTION stamen_task_stats_delta();
CREATE TRIGGER stamen_task_stats_update AFTER UPDATE ON stamen_tasks FOR EACH ROW
	WHEN ((OLD.received, OLD.started, OLD.succeeded, OLD.failed, OLD.retried, OLD.revoked, OLD.runtime, OLD.name, OLD.worker, OLD.routing_key)
		IS DISTINCT FROM (NEW.received, NEW.started, NEW.succeeded, NEW.failed, NEW.retried, NEW.revoked, NEW.runtime, NEW.name, NEW.worker, NEW.routing_key))
	EXECUTE FUNCTION stamen_task_stats_delta();
INSERT INTO stamen_task_stats_delta
SELECT r.minute, r.name, r.worker, r.queue, r.kind, r.bin, sum(r.n)
FROM stamen_tasks t, stamen_task_stats_rows(t, 1) r
WHERE coalesce(t.ts, 0) >= extract(epoch FROM now()) - 7 * 86400
GROUP BY 1, 2, 3, 4, 5, 6;`,
	// 7: the activity's rollups, so that a read's rows follow its buckets,
	// not its minutes times the keys: the cells by hour and key
	// (stamen_task_stats_hour), and all keys' sums by minute and by hour
	// (stamen_task_stats_total, _total_hour), which a read without a
	// filter takes. Each row's minute is its first; the fold keeps every
	// level in the transaction that folds the deltas. A filter's read
	// takes the keyed levels by the index on its lower()ed column and the
	// minute. The minute cells already folded go back to being deltas
	// (stamen_task_stats_cell_rows decodes taskstats.AppendCell's
	// encoding), so that the fold adds them to every level, counted once;
	// in key order, so that a batch of the fold holds whole cells.
	`CREATE TABLE stamen_task_stats_hour (LIKE stamen_task_stats INCLUDING ALL);
CREATE TABLE stamen_task_stats_total (
	minute bigint PRIMARY KEY,
	data   bytea NOT NULL
);
CREATE TABLE stamen_task_stats_total_hour (LIKE stamen_task_stats_total INCLUDING ALL);
CREATE INDEX stamen_task_stats_name ON stamen_task_stats (lower(name), minute);
CREATE INDEX stamen_task_stats_worker ON stamen_task_stats (lower(worker), minute);
CREATE INDEX stamen_task_stats_queue ON stamen_task_stats (lower(queue), minute);
CREATE INDEX stamen_task_stats_hour_name ON stamen_task_stats_hour (lower(name), minute);
CREATE INDEX stamen_task_stats_hour_worker ON stamen_task_stats_hour (lower(worker), minute);
CREATE INDEX stamen_task_stats_hour_queue ON stamen_task_stats_hour (lower(queue), minute);
CREATE FUNCTION stamen_task_stats_cell_rows(b bytea) RETURNS TABLE (kind smallint, bin smallint, n int)
	LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	v bigint[] := '{}';
	u bigint := 0;
	shift int := 0;
	c int;
	i int;
BEGIN
	-- The signed varints (zigzag) of encoding/binary.AppendVarint.
	FOR i IN 0 .. length(b) - 1 LOOP
		c := get_byte(b, i);
		u := u | ((c & 127)::bigint << shift);
		IF c < 128 THEN
			v := v || ((u >> 1) # -(u & 1));
			u := 0;
			shift := 0;
		ELSE
			shift := shift + 7;
		END IF;
	END LOOP;
	FOR i IN 1 .. 6 LOOP
		IF v[i] <> 0 THEN
			kind := i - 1; bin := -1; n := v[i];
			RETURN NEXT;
		END IF;
	END LOOP;
	kind := 2; bin := -1; i := 7;
	WHILE i < coalesce(array_length(v, 1), 0) LOOP
		bin := bin + v[i]; n := v[i + 1];
		RETURN NEXT;
		i := i + 2;
	END LOOP;
END
$$;
INSERT INTO stamen_task_stats_delta
SELECT s.minute, s.name, s.worker, s.queue, r.kind, r.bin, r.n
FROM stamen_task_stats s, stamen_task_stats_cell_rows(s.data) r ORDER BY 1, 2, 3, 4;
TRUNCATE stamen_task_stats;
DROP FUNCTION stamen_task_stats_cell_rows(bytea);`,
	// 8: the activity's triggers once a statement instead of once a row.
	// A flush writes its task records in one statement, so a row trigger
	// made a PL/pgSQL call and a delta insert a row (about a quarter of a
	// new task's write time, bench/RESULTS.md); a statement trigger reads
	// the statement's rows from its transition tables and appends their
	// deltas in one insert, summed by minute, key, kind and bin. An update
	// subtracts the old rows' deltas from the new ones' and keeps the sums
	// that are not zero: a row whose counted columns did not change adds
	// nothing, as the row trigger's WHEN clause made it. The upsert of an
	// existing task fires the update trigger with the rows it changed
	// only, a new one the insert trigger. The triggers are replaced in the
	// migration's transaction, whose lock on stamen_tasks keeps writes out
	// until it commits, so no write is counted twice or missed.
	`DROP TRIGGER stamen_task_stats_insert ON stamen_tasks;
DROP TRIGGER stamen_task_stats_update ON stamen_tasks;
DROP FUNCTION stamen_task_stats_delta();
CREATE FUNCTION stamen_task_stats_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO stamen_task_stats_delta
	SELECT d.minute, d.name, d.worker, d.queue, d.kind, d.bin, sum(d.n)
	FROM stamen_new_rows t, stamen_task_stats_rows(t, 1) d
	GROUP BY 1, 2, 3, 4, 5, 6;
	RETURN NULL;
END
$$;
CREATE FUNCTION stamen_task_stats_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO stamen_task_stats_delta
	SELECT d.minute, d.name, d.worker, d.queue, d.kind, d.bin, sum(d.n)
	FROM (SELECT d.* FROM stamen_old_rows t, stamen_task_stats_rows(t, -1) d
		UNION ALL SELECT d.* FROM stamen_new_rows t, stamen_task_stats_rows(t, 1) d) d
	GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(d.n) <> 0;
	RETURN NULL;
END
$$;
CREATE TRIGGER stamen_task_stats_insert AFTER INSERT ON stamen_tasks
	REFERENCING NEW TABLE AS stamen_new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION stamen_task_stats_inserted();
CREATE TRIGGER stamen_task_stats_update AFTER UPDATE ON stamen_tasks
	REFERENCING OLD TABLE AS stamen_old_rows NEW TABLE AS stamen_new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION stamen_task_stats_updated();`,
	// 9: the fleet's replicas, for sharing the writes (share.go): each
	// replica stamps its row at every flush with the server's clock, and
	// the rows stamped recently are the live replicas the task records
	// are divided among.
	`CREATE TABLE stamen_replicas (
	id   text COLLATE "C" PRIMARY KEY,
	seen timestamptz NOT NULL
);`,
	// 10: the id out of the trigram index, found through its aligned
	// grams instead (grams.go): the id's 37 trigrams were most of what the
	// index cost a new task. The rows already there keep a NULL id_grams
	// and their ids in a trigram index of their own, which no row written
	// since enters: filling the column would rewrite the table and every
	// index, where building the two indexes reads it. A replica of an
	// older stamen still running writes its new rows without grams, so
	// they too are found, through that index. The builds hold a SHARE
	// lock: the other replicas' writes wait for them (reads do not).
	idGramsSQL + `
ALTER TABLE stamen_tasks ADD COLUMN id_grams int4[];
DROP INDEX stamen_tasks_search;
CREATE INDEX stamen_tasks_search ON stamen_tasks USING gin ((` + searchText + `) gin_trgm_ops);
CREATE INDEX stamen_tasks_id ON stamen_tasks USING gin ((lower(id)) gin_trgm_ops) WHERE id_grams IS NULL;
CREATE INDEX stamen_tasks_id_grams ON stamen_tasks USING gin (id_grams) WHERE id_grams IS NOT NULL;`,
}

// runtimeBin is taskstats.Bin in SQL: the runtime histogram's bin of a
// success's runtime, NULL without one (or for NaN).
const runtimeBin = `CASE WHEN t.runtime IS NULL OR t.runtime = 'NaN' THEN NULL WHEN t.runtime <= 1e-3 THEN 0
		ELSE least(127, floor(ln(t.runtime / 1e-3) / (ln(1e8::float8) / 128))) END`

// maxKeyBytesSQL is maxKeyBytes as SQL: a longer routing key counts as
// no queue, so that the statistics' key stays within a b-tree entry.
const maxKeyBytesSQL = "256"

// searchText is the text an unqualified search term is looked for in
// besides the id (grams.go), the expression of the trigram index; queries
// must spell it the same.
const searchText = `lower(coalesce(name, '') || E'\x1f' || state || E'\x1f' || coalesce(worker, '') || E'\x1f' || coalesce(args, '') || E'\x1f' || coalesce(kwargs, '') || E'\x1f' || coalesce(result, ''))`

// searchTextWithID is the trigram index's expression before migration 10,
// the id first.
const searchTextWithID = `lower(id || E'\x1f' || coalesce(name, '') || E'\x1f' || state || E'\x1f' || coalesce(worker, '') || E'\x1f' || coalesce(args, '') || E'\x1f' || coalesce(kwargs, '') || E'\x1f' || coalesce(result, ''))`

// The failures index (migration 4) and Failures' queries spell these the
// same: PostgreSQL uses a partial index only for a query whose conditions
// imply its WHERE, and an expression index only for the same expression.
// Columns are unqualified, so that both can use them.
const (
	// failedState is the state filter state=FAILURE folded, as a
	// constant: a bound parameter would not prove the index's WHERE in a
	// generic plan.
	failedState = `lower(state) = 'failure'`
	// failureName is the group's task name.
	failureName = `coalesce(name, '')`
	// failureType is state.ExceptionType in SQL: the repr up to its first
	// "(", trimmed of state.Spaces, "unknown" when nothing is left.
	failureType = `coalesce(nullif(btrim(split_part(coalesce(exception, ''), '(', 1), '` + sqlSpaces + `'), ''), 'unknown')`
	// failureAt is state.FailedAt: the failure time, else the timestamp.
	failureAt = `coalesce(failed, ts, 0)`
	// failureTs is the list's order key, the examples' ties.
	failureTs = `coalesce(ts, 0)`
	// failureKey is the index's columns before id: the group, then its
	// failures in the examples' order (exampleOrder, read backwards).
	failureKey = `(` + failureName + `), (` + failureType + `), (` + failureAt + `), (` + failureTs + `)`
	// shortException and longException divide the failures between the
	// two indexes of migration 4 (a NULL exception is short).
	shortException = `coalesce(octet_length(exception), 0) <= ` + maxIndexedException
	longException  = `octet_length(exception) > ` + maxIndexedException
	// maxIndexedException is the longest exception repr, in bytes, of a
	// failure in stamen_tasks_failures. Its entry holds the repr and its
	// type (up to all of it), the name twice, the id and 32 bytes of
	// times: within b-tree's 2704 bytes while twice the name plus the id
	// stay under about 1,000 bytes (stamen_tasks_name bounds a name at
	// 2704).
	maxIndexedException = `800`
)

// maxKeyBytes and maxWorkerBytes bound the indexed keys of what Write
// writes (writable): a b-tree entry is at most 2704 bytes, and one over it
// fails its statement. The widest entry is stamen_tasks_failures': the
// name twice, the exception repr twice (maxIndexedException), the id and
// four times, 2×256 + 2×800 + 256 + 32 bytes with their headers, within
// the limit; the others hold one key, the id and a time. A worker name
// (celery@ and a host name of up to 253 bytes) takes the wider bound: it
// is in no entry with the name. Celery's own names, ids and states are
// far shorter; longer ones come from careless or hostile publishers.
const (
	maxKeyBytes    = 256
	maxWorkerBytes = 512
)

// sqlSpaces is state.Spaces, as a constant (a test checks they agree).
const sqlSpaces = "\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
