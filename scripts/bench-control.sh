#!/usr/bin/env bash
# The control-plane benchmarks (bench/control: a remote-control round trip
# through stamen against Celery's own client, and GET /api/workers?refresh=1),
# printed as the markdown section scripts/bench.sh appends to bench/RESULTS.md. Needs Redis,
# RabbitMQ and Debian's Celery (scripts/services.sh).
#
# Env knobs:
#   CONTROL_N   grow+shrink pairs per side (default 200); refresh=1 runs N/4 times
set -euo pipefail
cd "$(dirname "$0")/.."
export STAMEN_INTEGRATION=1
n=${CONTROL_N:-200}
cmd="CONTROL_N=$n go test -run ^\$ -bench . -benchtime 1x ./bench/control/"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
CONTROL_N=$n go test -run '^$' -bench . -benchtime 1x ./bench/control/ 2>&1 | grep -E '^(Benchmark|PASS|FAIL|ok)' | tee "$out" >&2
# metric BENCH UNIT: the figure before UNIT on BENCH's line.
metric() { awk -v b="^$1-" -v u="$2" '$0 ~ b {for(i=1;i<=NF;i++) if($(i+1)==u) print $i}' "$out"; }
yes_if() { awk "BEGIN{print ($1)?\"yes\":\"no\"}"; }
echo
echo "## Control plane against Celery's own client (issue 18)"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')), shared"
echo "- command: \`$cmd\`"
echo
echo "BenchmarkControlRoundTrip: one real worker (prefork -c 1), the stamen binary (built from"
echo "./cmd/stamen, default \`--inspect_timeout\` 1000 ms) and Celery 5.2's client"
echo "(\`app.control.broadcast('pool_grow'|'pool_shrink', arguments={'n': 1}, destination=[w],"
echo "reply=True, limit=1)\`), $n grow+shrink pairs each after 10 pairs of warm-up, in two halves"
echo "alternating client and stamen; a stamen call is \`POST /api/worker/pool/grow/{w}?n=1\` (or"
echo "shrink) over HTTP, a client call one broadcast. Each call is one sample (p50/p99 in ms)."
echo "BenchmarkWorkersRefresh: \`GET /api/workers?refresh=1\` with three live workers on Redis and"
echo "\`--inspect_timeout 10000\`, $((n / 4)) calls."
echo
echo '```'
cat "$out"
echo '```'
echo
echo "Before issue 18's changes (commit 67cadd8, same machine and benchmark, 2026-11-23, CONTROL_N=100):"
echo "on Redis stamen p50 6.66 ms, p99 8.49 ms against the client's 1.98 ms, 3.43 ms (ratio 3.37); on"
echo "RabbitMQ stamen p50 1.28 ms, p99 3.06 ms against 6.11 ms, 162 ms (ratio 0.21); refresh=1 with"
echo "three live workers and a 10 s inspect timeout p50 10,005 ms, p99 10,037 ms (25 calls). Where the"
echo "Redis time went, found by running the same benchmark with \`--inspect_timeout 5000\` (stamen p50"
echo "1.67 ms, ratio 0.85): with the default 1 s timeout every collect ran in its last second, where"
echo "the whole-second BRPOP was replaced by RPOP polling with 5-50 ms pauses, so a reply waited for"
echo "the next poll. Now BRPOP takes fractional timeouts (Redis 6.0+) and returns the moment the"
echo "reply is pushed, and the reply binding and the request share one pipeline (one round trip"
echo "less). refresh=1 waited the whole inspect timeout because a broadcast to all workers has no"
echo "count to stop at; it now stops once every worker alive by heartbeat answered every command."
echo
echo "| target | measured | met |"
echo "| --- | --- | --- |"
for b in redis amqp; do
  s=$(metric "BenchmarkControlRoundTrip/$b" stamen-p50-ms)
  c=$(metric "BenchmarkControlRoundTrip/$b" client-p50-ms)
  echo "| pool grow/shrink on $b: stamen p50 <= 1.2x Celery's client | stamen p50 $s ms, p99 $(metric "BenchmarkControlRoundTrip/$b" stamen-p99-ms) ms; client p50 $c ms, p99 $(metric "BenchmarkControlRoundTrip/$b" client-p99-ms) ms; ratio $(metric "BenchmarkControlRoundTrip/$b" p50-ratio) | $(yes_if "$s <= 1.2 * $c") |"
done
r=$(metric BenchmarkWorkersRefresh p50-ms)
echo "| \`GET /api/workers?refresh=1\` with three live workers: p50 < 50 ms | p50 $r ms, p99 $(metric BenchmarkWorkersRefresh p99-ms) ms (inspect timeout 10 s) | $(yes_if "$r < 50") |"
