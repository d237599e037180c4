#!/usr/bin/env bash
# The dashboard's benchmark (internal/ui BenchmarkDashboard), writing the
# "Dashboard" section of bench/RESULTS.md (it replaces the section when
# there is one, else it is appended). make bench runs it (BENCH_UI=0 skips).
#
# Env knobs:
#   STAMEN_BENCH_UI_TASKS    tasks in memory (default 1000000; the targets
#                            are judged at 1,000,000)
#   STAMEN_BENCH_UI_SECONDS  how long 1,000 events a second arrive (default
#                            600; the heap target is judged at ten minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
export STAMEN_INTEGRATION=1
tasks=${STAMEN_BENCH_UI_TASKS:-1000000}
seconds=${STAMEN_BENCH_UI_SECONDS:-600}
out=$(mktemp)
section=$(mktemp)
trap 'rm -f "$out" "$section"' EXIT
cmd="STAMEN_BENCH_UI_TASKS=$tasks STAMEN_BENCH_UI_SECONDS=$seconds go test -run '^\$' -bench '^BenchmarkDashboard\$' -benchtime 1x -timeout 0 ./internal/ui/"
STAMEN_BENCH_UI_TASKS=$tasks STAMEN_BENCH_UI_SECONDS=$seconds \
  go test -run '^$' -bench '^BenchmarkDashboard$' -benchtime 1x -timeout 0 ./internal/ui/ | tee "$out"
fig() { awk -v k="$1" '$1==k{print $2}' "$out"; }
yes_if() { awk "BEGIN{print ($1)?\"yes\":\"no\"}"; }
# A target is judged only at the size and duration it names.
judged_tasks() { if [ "$tasks" -ge 1000000 ]; then yes_if "$1"; else echo "not judged ($tasks tasks)"; fi; }
judged() { if [ "$tasks" -ge 1000000 ] && [ "$seconds" -ge 600 ]; then yes_if "$1"; else echo "not judged ($tasks tasks, $seconds s)"; fi; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
chromium=$(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}')
{
  echo "## Dashboard"
  echo
  echo "Measured by \`$cmd\` (scripts/bench-ui.sh) on $(date -u +%FT%TZ): $(nproc) cores ($cpu), $(go env GOVERSION), Chromium $chromium headless,"
  echo "stamen holding $(fig ui_tasks) tasks in memory (ingested in $(fig ui_ingest_s) s), the page and stamen on the same machine."
  echo
  echo "| target | measured | met |"
  echo "|---|---|---|"
  echo "| tasks page: first rows within 500 ms of navigation, p95 of 20 loads, at 1,000,000 tasks | p95 $(fig ui_first_rows_p95_ms) ms (p50 $(fig ui_first_rows_p50_ms), max $(fig ui_first_rows_max_ms)) | $(judged_tasks "$(fig ui_first_rows_p95_ms) < 500") |"
  echo "| 1,000 events/s for $(fig ui_events_s) s on the open tasks page: no main-thread task over 50 ms | longest $(fig ui_long_task_max_ms) ms; $(fig ui_long_tasks_over_50ms) over 50 ms (PerformanceObserver "longtask", which reports every task of 50 ms or more; 0 means none) | $(judged "$(fig ui_long_tasks_over_50ms) == 0") |"
  echo "| the tab's JavaScript heap under 100 MB after ten minutes of it | $(fig ui_heap_end_mb) MB at the end (start $(fig ui_heap_start_mb), max $(fig ui_heap_max_mb)), after a GC | $(judged "$(fig ui_heap_end_mb) < 100") |"
} > "$section"
awk -v f="$section" '
  /^## Dashboard/ { while ((getline l < f) > 0) print l; print ""; skip = 1; done = 1; next }
  skip && /^## / { skip = 0 }
  !skip { print }
  END { if (!done) { print ""; while ((getline l < f) > 0) print l } }
' bench/RESULTS.md > bench/RESULTS.md.new
mv bench/RESULTS.md.new bench/RESULTS.md
echo "wrote the Dashboard section of bench/RESULTS.md"
