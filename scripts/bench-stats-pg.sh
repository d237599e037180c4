#!/usr/bin/env bash
# GET /api/stats/tasks's read from PostgreSQL at ten million tasks (make
# bench runs it with the PostgreSQL fleet run): BenchmarkTaskStats loads
# the tasks by set-based SQL into a database of its own (the full schema,
# the activity counted and folded as the trigger and the fold do; the
# loading backend reniced to 19), reads each window 200 times, prints the
# p50 and p99 of each and drops the database. The figures are kept in
# bench/RESULTS.md's "Task activity over time" section, by hand.
#
# Env knobs:
#   STAMEN_BENCH_PG_TASKS   tasks loaded (default 10000000; the target,
#                           p99 < 200 ms, is judged only at 10,000,000)
#   STAMEN_BENCH_STATS_DB   a database to load once and keep (drop it by hand)
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=${STAMEN_BENCH_PG_TASKS:-10000000}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
STAMEN_INTEGRATION=1 STAMEN_BENCH_STATS_TASKS=$tasks go test -run '^$' -bench '^BenchmarkTaskStats$' \
  -benchtime 200x -timeout 3h -v ./internal/store/pg/ | tee "$out"
echo
echo "GET /api/stats/tasks from PostgreSQL at $tasks tasks (target p99 < 200 ms at 10,000,000):"
awk '/^BenchmarkTaskStats\//{p50="";p99="";for(i=1;i<=NF;i++){if($(i+1)=="p50-ms")p50=$i;if($(i+1)=="p99-ms")p99=$i}
  printf "  %-45s p50 %8s ms  p99 %8s ms  %s\n", $1, p50, p99, (p99+0<200)?"met":"NOT met"}' "$out"
