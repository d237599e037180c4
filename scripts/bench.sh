#!/usr/bin/env bash
# make bench: runs the Go benchmarks against a real Redis, then the load
# driver (bench/loadgen: closed-loop readers against the built binary), then the control-plane
# benchmarks (scripts/bench-control.sh: bench/control), and writes the
# figures to bench/RESULTS.md (machine, date, commands, figures, targets).
#
# Env knobs:
#   BENCH_N      iterations of the internal/app benchmarks (default 200000)
#   BENCH_TASKS  tasks of the load driver's large phase (default 1000000;
#                the targets set at a million tasks are judged only at
#                1,000,000)
#   BENCH_PG     1 (default): also the PostgreSQL fleet run, whose
#                section of bench/RESULTS.md replaces the one there, and
#                GET /api/stats/tasks's read at ten million tasks
#                (scripts/bench-stats-pg.sh); "only": just those; 0: not them
#   STAMEN_BENCH_PG_TASKS   tasks in Postgres for its reads (default 10000000)
#   STAMEN_BENCH_PG_INGEST  tasks published per ingestion phase (default 100000)
#   BENCH_UI     1 (default): also the dashboard's benchmark in Chromium
#                (scripts/bench-ui.sh, its own section of bench/RESULTS.md); 0: not it
set -euo pipefail
cd "$(dirname "$0")/.."
# RabbitMQ too: the control-plane benchmarks (scripts/bench-control.sh) run on it.
bash scripts/services.sh >/dev/null
if [ "${BENCH_PG:-1}" = only ]; then
  bash scripts/bench-stats-pg.sh
  exec bash scripts/bench-pg.sh
fi
export STAMEN_INTEGRATION=1
out=$(mktemp)
load=$(mktemp)
results=$(mktemp)
tasks=${BENCH_TASKS:-1000000}
n=${BENCH_N:-200000}
pairs=${BENCH_PAIRS:-5}
# Ingestion and its raw ceiling run as pairs, one right after the other,
# and each pair's ratio counts: both move with whatever else the machine's
# cores run, and a pair sees the same load more nearly than runs minutes
# apart do.
bin="$(mktemp -d)/app.test"
trap 'rm -f "$out" "$load" "$bin"; rmdir "$(dirname "$bin")"' EXIT
cmd_pair="(cd internal/app && app.test -test.run ^\$ -test.bench ^BenchmarkRawPubSub\$ -test.benchtime ${n}x), then the same with ^BenchmarkIngest\$, $pairs times, app.test built by go test -c ./internal/app/"
cmd_app="go test -run ^\$ -bench ^(BenchmarkConsume|BenchmarkHTTP)\$ -benchtime ${n}x ./internal/app/"
cmd_state="go test -run ^\$ -bench . -benchmem ./internal/state/ ./internal/celery/"
cmd_stats="go test -run ^\$ -bench ^BenchmarkStats24hMillion\$ -benchtime 200x ./internal/taskstats/"
cmd_build="make -s build"
cmd_load="go run ./bench/loadgen -stamen bin/stamen -tasks $tasks -mixed-readers 1,4,16 -mixed-rate 100000"
go test -c -o "$bin" ./internal/app/
{
  for _ in $(seq "$pairs"); do
    for bm in BenchmarkRawPubSub BenchmarkIngest; do
      (cd internal/app && "$bin" -test.run '^$' -test.bench "^$bm\$" -test.benchtime "${n}x") | grep -Ev '^(goos|goarch|pkg|cpu|PASS)'
    done
  done
  $cmd_app
  $cmd_state
  $cmd_stats
} 2>&1 | grep -v '^redis:' | tee "$out"
$cmd_build
$cmd_load | tee "$load"

# fig NAME: a loadgen figure. http LABEL TASKS FIELD: a field of an attack's
# line (4 req/s, 5 p50 ms, 6 p99 ms, 7 max ms, 8 tasks returned, 9 path).
fig() { awk -v k="$1" '$1==k{print $2}' "$load"; }
http() { awk -v l="$1" -v n="$2" -v f="$3" '$1=="http" && $2==l && $3==n{print $f}' "$load"; }
yes_if() { awk "BEGIN{print ($1)?\"yes\":\"no\"}"; }

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
mem=$(free -g | awk '/Mem:/{print $2" GiB"}')
small=$(fig tasks_small)
{
  echo "# Benchmark results"
  echo
  echo "Produced by \`make bench\` (scripts/bench.sh). Do not edit by hand."
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- machine: $(nproc) cores ($cpu), $mem, $(go version | cut -d' ' -f3)"
  echo "- commands: \`$cmd_pair\`, \`$cmd_app\`, \`$cmd_state\`, \`$cmd_stats\`, then \`$cmd_build\` and \`$cmd_load\`"
  echo
  echo "## Go benchmarks"
  echo
  echo '```'
  cat "$out"
  echo '```'
  echo
  echo "BenchmarkHTTP runs the read operations at 10,000 tasks through the whole HTTP stack"
  echo "(httptest server, 2 parallel clients); ns/op is per request."
  echo
  echo "BenchmarkRawPubSub and BenchmarkIngest publish the same messages (a task's received, started"
  echo "and succeeded events in one kombu envelope, as a worker batches them) from the benchmark"
  echo "process to Redis pub/sub, in pipelines of 500, at most 4,000 messages ahead of the consumer:"
  echo "Redis disconnects a subscriber whose backlog outgrows its pub/sub buffer limit, so an"
  echo "unthrottled publisher would measure that limit. The raw consumer is a plain go-redis"
  echo "subscriber that only counts messages; BenchmarkIngest's is stamen's App (events into the"
  echo "state, metrics), done when the state holds every task. Publisher, Redis and consumer share"
  echo "the machine's cores in both, so the rates move with whatever else the machine runs; the two"
  echo "run as $pairs pairs, one right after the other, and the target is judged on the median of the"
  echo "pairs' ratios. cpu-ns/msg is the benchmark process's CPU time (user and system) per message"
  echo "while timed: the publisher's share is the same in both, so the difference is what stamen's"
  echo "consumer costs beyond a subscriber that only counts. BenchmarkConsume is that consumer's work"
  echo "on one goroutine without Redis (unwrap, decode, state, metrics), per message."
  echo
  echo "## The binary under load (bench/loadgen)"
  echo
  echo "bin/stamen runs as an operator runs it: \`--broker redis://127.0.0.1:6379/6 --persistent"
  echo "--db <temp file> --max_tasks $tasks\`, state saved every second. The driver publishes each"
  echo "task's received, started and succeeded (10% failed instead) events as one kombu envelope"
  echo "on Redis pub/sub, pipelined, at most 4,000 tasks ahead of what stamen reports ingested"
  echo "(\`stamen_events_ingested_total\`); tasks cycle over 3 names and 4 workers, their timestamps"
  echo "spread over 1,000 minutes. Of the tasks, the filters match: taskname a third, workername a"
  echo "quarter, state=FAILURE a tenth, search=mul a third, the received window 1% half-way back,"
  echo "search_id one task by a fragment of its id. Cold start is exec to the first 200 of"
  echo "\`/healthcheck\`; memory is the process's VmRSS from /proc (MB = 10^6 bytes), per task against"
  echo "the RSS before any event. Once every event is ingested stamen gets SIGTERM, commits what it"
  echo "has not written yet and exits: ingestion into the store ends there (killed after 2 minutes"
  echo "if it has not). It is then restarted from the store, given again any task the store lacked,"
  echo "and the reads at $tasks tasks run on that process. Each read is the driver's closed-loop reader (until 2026-11-24 vegeta) for 5 s at"
  echo "max rate with 2 concurrent requests, driver and binary sharing the machine's cores."
  echo "Issue 18's reads (labels ending _r4) run 10 s each under 4 concurrent readers, closed loop,"
  echo "at $small tasks, at $(fig tasks_mid) tasks (a middle phase before the large one) and at $tasks"
  echo "tasks while events are ingested: stamen at $tasks tasks is fed $(fig mixed_tasks) new tasks"
  echo "(evicting as many of the oldest) with no reads, then as many again with the 4 readers of"
  echo "/api/tasks?limit=100 running until that ingestion is done (none_r4_ingesting); both rates"
  echo "are reported. This runs twice: with events published as fast as stamen takes them (the"
  echo "driver's publisher, Redis and stamen's ingestion then hold both cores, and the readers get"
  echo "what is left), then paced at $(fig mixed_rate) events a second (issue 6's sustained rate), ten"
  echo "seconds alone and ten under the readers (none_r4_ingesting_$(fig mixed_rate)). gc_per_s is stamen's collections a second during each attack (its"
  echo "go_gc_duration_seconds_count), and driver_cpus the CPUs the driver itself used meanwhile"
  echo "(paced events are published every 2 ms, what has fallen due). The numbers are from a 2-core machine shared with other"
  echo "work: driver, Redis and stamen compete for the same 2 cores."
  echo
  echo '```'
  cat "$load"
  echo '```'
  echo
  echo "| read | tasks stored | req/s | p50 ms | p99 ms | max ms | tasks returned |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  awk '$1=="http"{printf "| `GET %s` | %s | %s | %s | %s | %s | %s |\n", $9, $3, $4, $5, $6, $7, $8}' "$load"
  echo
  echo "## Against the targets"
  echo
  # field NAME UNIT: a benchmark's figures in UNIT, one a line, in order.
  field() { awk -v n="^$1-" -v u="$2" '$0 ~ n {for(i=1;i<=NF;i++) if($(i+1)==u) print $i}' "$out"; }
  median() { sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
  raw=$(field BenchmarkRawPubSub events/s | median)
  ing=$(field BenchmarkIngest events/s | median)
  ratios=$(paste <(field BenchmarkRawPubSub events/s) <(field BenchmarkIngest events/s) | awk '{printf "%.0f\n", 100*$2/$1}')
  pct=$(echo "$ratios" | median)
  lo=$(echo "$ratios" | sort -n | head -1)
  hi=$(echo "$ratios" | sort -n | tail -1)
  rawcpu=$(field BenchmarkRawPubSub cpu-ns/msg | median)
  ingcpu=$(field BenchmarkIngest cpu-ns/msg | median)
  heap=$(awk '/^BenchmarkApplyMillion/{for(i=1;i<=NF;i++) if($(i+1)=="heapMiB@1M") print $i}' "$out")
  store=$(fig store_events_per_s)
  rss=$(fig rss_mb_large)
  restored=$(fig rss_mb_restored)
  at1m=$([ "$tasks" -ge 1000000 ] && echo 1 || echo 0)
  # judged: a verdict that only counts when the large phase reached 1,000,000 tasks.
  judged() { if [ "$at1m" = 1 ]; then yes_if "$1"; else echo "no: ran at $tasks tasks"; fi; }
  echo "| target | measured | met |"
  echo "| --- | --- | --- |"
  echo "| end-to-end ingestion >= 50% of raw Redis pub/sub delivery (issue 8) | median of $pairs pairs ${pct}% (pairs: $(echo $ratios | sed 's/ /%, /g')%; range ${lo}-${hi}%); medians $ing events/s ingested, $raw events/s raw (BenchmarkIngest vs BenchmarkRawPubSub, in process); process CPU per message $ingcpu ns vs $rawcpu ns, publisher included in both | $(yes_if "\"$pct\"+0 >= 50") |"
  if [ "$(fig store_complete)" = true ]; then
    echo "| ingestion >= 50,000 events/s sustained into the store, --persistent (issue 6) | $store events/s committed to the store over $((tasks - small)) tasks (stamen exited $(fig store_commit_s) s after the last event); $(fig ingest_events_per_s) events/s into the state; in process without a store $ing events/s | $(yes_if "$store >= 50000") |"
  else
    echo "| ingestion >= 50,000 events/s sustained into the store, --persistent (issue 6) | under $store events/s: $(fig store_commit_s) s after the last of $((tasks - small)) tasks' events stamen was still committing to the store and was killed; $(fig ingest_events_per_s) events/s into the state; in process without a store $ing events/s | no |"
  fi
  for f in state taskname workername received none search search_id; do
    p50=$(http "$f" "$tasks" 5)
    p99=$(http "$f" "$tasks" 6)
    what="\`$(http "$f" "$tasks" 9)\`"
    case $f in none | search*) what="$what (issue 6 asks to report it)" ;; esac
    echo "| GET /api/tasks?limit=100 at 1,000,000 tasks: p50 <= 2 ms, p99 <= 10 ms: $what | p50 $p50 ms, p99 $p99 ms at $tasks tasks | $(judged "$p50 <= 2 && $p99 <= 10") |"
  done
  echo "| resident memory at 1,000,000 tasks <= 300 MB (issue 6) | VmRSS $rss MB right after ingestion of $tasks tasks (peak VmHWM $(fig hwm_mb_large) MB), $restored MB after a restart restoring $(fig restored_tasks) of them from the store${heap:+; Go heap in BenchmarkApplyMillion $heap MiB} | $(judged "$rss <= 300 && $restored <= 300") |"
  flood=$(field BenchmarkIngestIDs/colliding ns/id)
  spread=$(field BenchmarkIngestIDs/random ns/id)
  echo "| ids chosen to collide ingest at the speed of random ids: ratio <= 1.5 (issue 14) | $flood ns/id colliding, $spread ns/id random (BenchmarkIngestIDs, 80,000 ids each): ratio $(awk "BEGIN{printf \"%.2f\", $flood/$spread}") | $(yes_if "$flood <= 1.5 * $spread") |"
  # GET /api/stats/tasks in memory: the slowest p99 of
  # BenchmarkStats24hMillion's reads, wall and the read's own CPU time.
  statsmax() { awk -v u="$1" '/^BenchmarkStats24hMillion\//{for(i=1;i<=NF;i++) if($(i+1)==u && $i+0>m) m=$i+0} END{print m+0}' "$out"; }
  sp99=$(statsmax p99-ms)
  echo "| GET /api/stats/tasks in memory, 1,000,000 tasks over 24 h: p99 < 20 ms (issue 35) | slowest p99 of $(grep -c '^BenchmarkStats24hMillion/' "$out") reads (3 and 100 names, by minute and hour, filters, a writer beside) $sp99 ms wall, $(statsmax cpu-p99-ms) ms of the read's own CPU; slowest p50 $(statsmax p50-ms) ms | $(yes_if "$sp99 < 20") |"
  echo "| store size on disk per task reported (issue 6) | $(fig store_bytes_per_task) bytes/task ($(fig store_mb) MB holding $(fig restored_tasks) tasks) | reported |"
  for f in info none; do
    echo "| \`GET $(http "$f" "$small" 9)\` at $small tasks reported (issue 8) | $(http "$f" "$small" 4) req/s, p50 $(http "$f" "$small" 5) ms, p99 $(http "$f" "$small" 6) ms, max $(http "$f" "$small" 7) ms | reported |"
  done
  echo "| memory per tracked task reported (issue 8) | $(fig rss_bytes_per_task_small) bytes/task at $small tasks, $(fig rss_bytes_per_task_large) at $tasks (VmRSS) | reported |"
  # today_bpt is rss_bytes_per_task_large measured with this same driver at
  # commit 67cadd8 (GOGC=20), before the tuning for concurrent readers (GC
  # headroom, pooled write buffers), which may cost at most 10% more memory
  # a task.
  today_bpt=270.8
  bpt=$(fig rss_bytes_per_task_large)
  mid=$(fig tasks_mid)
  rate=$(fig mixed_rate)
  for sfx in "" ${rate:+"_$rate"}; do
    alone=$(fig "mixed_ingest_alone_events_per_s$sfx")
    during=$(fig "mixed_ingest_read_events_per_s$sfx")
    p99=$(http "none_r4_ingesting$sfx" "$tasks" 6)
    if [ -z "$sfx" ]; then how="events published as fast as stamen takes them"; else how="events published at $rate a second"; fi
    echo "| GET /api/tasks?limit=100 at 1,000,000 tasks, 4 readers, $how: p99 <= 5 ms, ingestion >= 80% of the rate without reads (issue 18) | p99 $p99 ms (p50 $(http "none_r4_ingesting$sfx" "$tasks" 5) ms, $(http "none_r4_ingesting$sfx" "$tasks" 4) req/s); ingestion $during events/s under the reads, $alone events/s without: $(awk "BEGIN{printf \"%.0f\", 100*$during/$alone}")% | $(judged "$p99 <= 5 && $during >= 0.8 * $alone") |"
  done
  # Issue 39: ingestion under 1, 4 and 16 readers as a share of alone
  # (reported here; its 80% target is for a machine of 16 cores, whose
  # figures bench/RESULTS.md keeps below the marker), and under 4 readers
  # at the paced rate, which on this machine must hold.
  shares=""
  for r in 1 4 16; do
    shares="$shares${shares:+; }$r: $(fig "mixed_ingest_r${r}_share_pct")% (list p99 $(http "none_r${r}_ingesting" "$tasks" 6) ms)"
  done
  echo "| ingestion at full rate under 1, 4 and 16 closed-loop readers of /api/tasks?limit=100, share of alone, reported (issue 39) | $shares | reported |"
  if [ -n "$rate" ]; then
    pshare=$(fig "mixed_ingest_r4_share_pct_$rate")
    echo "| ingestion paced at $rate events/s holds 100% under 4 readers (issue 39; >= 99% of the paced rate alone) | ${pshare}% ($(fig "mixed_ingest_r4_events_per_s_$rate") events/s under the readers, $(fig "mixed_ingest_alone_events_per_s_$rate") alone) | $(judged "$pshare >= 99") |"
  fi
  sid=$(http search_id "$tasks" 6)
  echo "| \`search=<12 hex characters of an id>\` at $tasks tasks: p99 <= 20 ms (issue 39) | p99 $sid ms, p50 $(http search_id "$tasks" 5) ms | $(judged "$sid <= 20") |"
  echo "| end-to-end ingestion >= 80% of raw Redis pub/sub delivery, median of $pairs pairs (issue 39) | ${pct}% | $(yes_if "\"$pct\"+0 >= 80") |"
  for n in "$small" "$mid"; do
    p99=$(http info_r4 "$n" 6)
    echo "| GET /api/task/info/{id} at $n tasks, 4 readers: p99 <= 2 ms (issue 18) | p99 $p99 ms (p50 $(http info_r4 "$n" 5) ms, $(http info_r4 "$n" 4) req/s, $(awk -v n="$n" '$1=="gc_per_s" && $2=="info_r4" && $3==n{print $4}' "$load") GC/s) | $(yes_if "$p99 <= 2") |"
  done
  rs=$(http none_r4 "$small" 4)
  rm=$(http none_r4 "$mid" 4)
  echo "| GET /api/tasks?limit=100 throughput, 4 readers: at $small tasks >= at $mid (issue 18) | $rs req/s at $small tasks, $rm req/s at $mid (p99 $(http none_r4 "$small" 6) and $(http none_r4 "$mid" 6) ms) | $(yes_if "$rs >= $rm") |"
  echo "| memory per task at 1,000,000 tasks within 10% of before issue 18 ($today_bpt bytes/task) | $bpt bytes/task (VmRSS): $(awk "BEGIN{printf \"%+.1f\", 100*($bpt/$today_bpt-1)}")% | $(judged "$bpt <= 1.1 * $today_bpt") |"
  echo "| cold start to first 200 reported (issue 8) | $(fig cold_start_ms) ms with an empty store; $(fig restart_ms) ms restoring $(fig restored_tasks) of $tasks tasks from it | reported |"
} > "$results"
bash scripts/bench-control.sh >> "$results"
# The sections below the marker are measured by their own commands (named in
# each) and kept as they are.
marker='<!-- kept by make bench'
if grep -q "^$marker" bench/RESULTS.md 2>/dev/null; then
  printf '\n' >> "$results"
  sed -n "/^$marker/,\$p" bench/RESULTS.md >> "$results"
fi
mv "$results" bench/RESULTS.md
echo "wrote bench/RESULTS.md"
if [ "${BENCH_PG:-1}" = 1 ]; then
  bash scripts/bench-stats-pg.sh
  bash scripts/bench-pg.sh
fi
if [ "${BENCH_UI:-1}" = 1 ]; then
  bash scripts/bench-ui.sh
fi
