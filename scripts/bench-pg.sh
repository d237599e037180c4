#!/usr/bin/env bash
# The PostgreSQL fleet run of make bench: bench/loadgen -pg against
# the local PostgreSQL (scripts/services.sh's, as its stamen_test role) and
# Redis, writing the "PostgreSQL fleet" section of bench/RESULTS.md (it
# replaces the section when there is one, else it is appended).
#
# Env knobs:
#   STAMEN_BENCH_PG_TASKS   tasks in Postgres for the reads (default 10000000;
#                           the fleet's targets are set at ten million tasks,
#                           so they are judged only at 10,000,000)
#   STAMEN_BENCH_PG_INGEST  tasks published per ingestion phase (default 100000)
#   STAMEN_BENCH_LOCK       the lock the measured phases hold (default
#                           /tmp/stamen-it.lock, the integration tests' lock)
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=${STAMEN_BENCH_PG_TASKS:-10000000}
ingest=${STAMEN_BENCH_PG_INGEST:-100000}
lock=${STAMEN_BENCH_LOCK:-/tmp/stamen-it.lock}
admin="postgres://stamen_test:stamen_test@127.0.0.1:${STAMEN_TEST_PG_PORT:-5432}/postgres?sslmode=disable"
load=$(mktemp)
section=$(mktemp)
trap 'rm -f "$load" "$section"' EXIT
make -s build
cmd="go run ./bench/loadgen -stamen bin/stamen -pg postgres://stamen_test:…@127.0.0.1:5432/postgres -pg-tasks $tasks -pg-ingest $ingest -lock $lock"
go run ./bench/loadgen -stamen bin/stamen -pg "$admin" -pg-tasks "$tasks" -pg-ingest "$ingest" -lock "$lock" | tee "$load"

fig() { awk -v k="$1" '$1==k{print $2}' "$load"; }
http() { awk -v l="$1" -v f="$2" '$1=="http" && $2==l{print $f}' "$load"; }
yes_if() { awk "BEGIN{print ($1)?\"yes\":\"no\"}"; }
rows=$(awk '$1=="pg_tasks"{print $2}' "$load")
at10m=$([ "$rows" -ge 10000000 ] && echo 1 || echo 0)
judged() { if [ "$at10m" = 1 ]; then yes_if "$1"; else echo "no: ran at $rows tasks"; fi; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
mem=$(free -g | awk '/Mem:/{print $2" GiB"}')
pgver=$(psql --version 2>/dev/null | awk '{print $3}')
# The server settings the write rate depends on most (docs/replicas.md).
pgset=$(psql "$admin" -Atc "SELECT string_agg(name || ' ' || current_setting(name), ', ' ORDER BY name) FROM pg_settings WHERE name IN ('shared_buffers', 'max_wal_size', 'checkpoint_timeout', 'wal_compression', 'synchronous_commit')" 2>/dev/null || echo "not read")
{
  echo "## PostgreSQL fleet (issue 16)"
  echo
  echo "Produced by \`make bench\` (or \`BENCH_PG=only make bench\`; scripts/bench-pg.sh). Do not edit by hand."
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- machine: $(nproc) cores ($cpu), $mem, $(go version | cut -d' ' -f3), PostgreSQL $pgver (Debian's; $pgset)"
  echo "- command: \`make -s build\`, then \`$cmd\`"
  echo
  echo "The run creates the database \`stamen_bench\` and drops it at the end. A replica (bin/stamen as"
  echo "an operator runs it: \`--db postgres://…/stamen_bench --broker redis://127.0.0.1:6379/6\`) starts"
  echo "and migrates the schema, and is stopped. The table is then **bulk-loaded by SQL**"
  echo "(\`INSERT … SELECT … FROM generate_series\`, 1,000,000 rows a statement) with all but the"
  echo "$((2 * ingest)) tasks ingested next, the same tasks the driver would have published (3 names, 4"
  echo "workers, a tenth failed, received times spread over 1,000 minutes; ids shaped as Celery's uuid4,"
  echo "random hex drawn from md5 of the task's number so that the SQL and the driver agree), rather than ingesting ten"
  echo "million tasks' events: the secondary indexes are dropped first and recreated from their own"
  echo "definitions (\`pg_indexes\`), then \`VACUUM (ANALYZE)\`. On that table one replica, then two,"
  echo "ingest $ingest tasks' events each (received, started, succeeded or failed, one kombu envelope a"
  echo "task) published on Redis pub/sub at most 4,000 tasks ahead of the slowest replica's ingestion"
  echo "and at most half the replicas' \`--max_tasks\` (100,000) ahead of the rows in Postgres (before"
  echo "2026-11-28 at most 4,000 ahead of the rows: with the flush every second that bounded the rate"
  echo "near 2,100 tasks/s whatever Postgres took); both replicas ingest every task. The rate is tasks"
  echo "whose row is in Postgres in its final state, per second, from the first publish to the last row."
  echo "Rows written a task are \`stamen_tasks\`' inserts and updates (\`pg_stat_user_tables\`), WAL"
  echo "bytes a task the server's WAL over the phase (\`pg_current_wal_lsn\`; the bench's database is"
  echo "the only one writing while the lock is held), both read once the statistics settle. The same two replicas then serve"
  echo "the reads: each a closed-loop read (until 2026-11-24 vegeta) of 5 s at max rate with 2 concurrent requests on replica 1 (one"
  echo "on replica 2), and each replica's VmRSS is read after them. Ingestion and reads hold"
  echo "\`$lock\` (the integration tests' lock); the bulk load does not. stamen's connections plan no"
  echo "parallel workers (internal/store/pg sets \`max_parallel_workers_per_gather = 0\` on them)."
  echo
  echo '```'
  cat "$load"
  echo '```'
  echo
  echo "| read | tasks in Postgres | req/s | p50 ms | p99 ms | max ms | tasks returned (groups, for /api/failures) |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  awk '$1=="http"{printf "| `GET %s` | %s | %s | %s | %s | %s | %s |\n", $9, $3, $4, $5, $6, $7, $8}' "$load"
  echo
  failed=$(awk '$1=="http_failed"{$1=""; printf "%s;", $0}' "$load")
  if [ -n "$failed" ]; then
    echo "Reads that did not always answer 200 (503 past \`--db_timeout\`; -1 tasks returned above):$failed"
    echo
  fi
  echo "| target | measured | met |"
  echo "| --- | --- | --- |"
  echo "| 10,000,000 tasks in Postgres | $rows tasks ($(fig pg_db_mb) MB database: table $(fig pg_table_mb) MB, indexes $(fig pg_indexes_mb) MB; $(fig pg_bytes_per_task) bytes/task, of which table $(fig pg_table_bytes_per_task), indexes $(fig pg_index_bytes_per_task)); bulk load and index build $(fig pg_load_s) s | $(yes_if "$rows >= 10000000") |"
  echo "| ingestion into Postgres, one replica, >= 20,000 tasks/s (issue 37) | $(fig pg_ingest_rows_per_s_1) tasks/s ($(fig pg_ingest_events_per_s_1) events/s) | $(judged "$(fig pg_ingest_rows_per_s_1) >= 20000") |"
  echo "| ingestion into Postgres, two replicas, at least as fast as one (issue 37) | $(fig pg_ingest_rows_per_s_2) tasks/s ($(fig pg_ingest_events_per_s_2) events/s) | $(judged "$(fig pg_ingest_rows_per_s_2) >= $(fig pg_ingest_rows_per_s_1)") |"
  echo "| two replicas write at most 1.2x the rows and WAL of one, per task (issue 37) | rows $(fig pg_row_writes_per_task_2) against $(fig pg_row_writes_per_task_1); WAL $(fig pg_wal_bytes_per_task_2) against $(fig pg_wal_bytes_per_task_1) bytes | $(judged "$(fig pg_row_writes_per_task_2) <= 1.2 * $(fig pg_row_writes_per_task_1) && $(fig pg_wal_bytes_per_task_2) <= 1.2 * $(fig pg_wal_bytes_per_task_1)") |"
  for f in state taskname workername received none sort_name sort_received deep_offset; do
    p50=$(http "pg_$f" 5)
    p99=$(http "pg_$f" 6)
    echo "| \`GET $(http "pg_$f" 9)\` p99 < 50 ms (indexed) | p50 $p50 ms, p99 $p99 ms at $rows tasks | $(judged "$p99 < 50") |"
  done
  for f in search search_id; do
    echo "| \`GET $(http "pg_$f" 9)\` (search; id fragment by the id's grams) p99 < 50 ms | p50 $(http "pg_$f" 5) ms, p99 $(http "pg_$f" 6) ms at $rows tasks | $(judged "$(http "pg_$f" 6) < 50") |"
  done
  for f in info info_ingested info_replica2; do
    echo "| \`GET $(http "pg_$f" 9)\` p99 < 5 ms | p50 $(http "pg_$f" 5) ms, p99 $(http "pg_$f" 6) ms at $rows tasks | $(judged "$(http "pg_$f" 6) < 5") |"
  done
  for f in failures failures_taskname; do
    echo "| \`GET $(http "pg_$f" 9)\` (failures grouped over the whole history) p99 < 2000 ms (\`--db_timeout\`) | p50 $(http "pg_$f" 5) ms, p99 $(http "pg_$f" 6) ms at $rows tasks | $(judged "$(http "pg_$f" 6) < 2000") |"
  done
  for r in 1 2; do
    echo "| replica $r VmRSS < 300 MB while Postgres holds the tasks | $(fig pg_rss_mb_replica$r) MB after the reads (peak VmHWM $(fig pg_hwm_mb_replica$r) MB); $(fig pg_rss_mb_ingest_replica$r) MB after the ingestion phases | $(judged "$(fig pg_rss_mb_replica$r) < 300 && $(fig pg_hwm_mb_replica$r) < 300") |"
  done
} > "$section"
# Replace the section (from its heading to the next "## " heading) or append it.
awk -v f="$section" '
  /^## PostgreSQL fleet/ { while ((getline l < f) > 0) print l; print ""; skip = 1; done = 1; next }
  skip && /^## / { skip = 0 }
  !skip { print }
  END { if (!done) { print ""; while ((getline l < f) > 0) print l } }
' bench/RESULTS.md > bench/RESULTS.md.new
mv bench/RESULTS.md.new bench/RESULTS.md
echo "wrote the PostgreSQL fleet section of bench/RESULTS.md"
