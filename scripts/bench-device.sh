#!/usr/bin/env bash
# The readers-and-writer figures on a machine of many cores that has no Go,
# no Redis and no network (bench/RESULTS.md, "Readers and the writer on 16
# cores"). Two steps:
#
#   bash scripts/bench-device.sh prepare   # here: builds bin/dev (gzipped
#                                          # binaries, redis-server with its
#                                          # libraries), about 50 MB
#   bash scripts/bench-device.sh run       # there, from the repository root
#                                          # with bin/dev beside it; figures
#                                          # go to $OUT/results.tar
#
# run: loadgen at a million tasks under 1, 4 and 16 readers, then five pairs
# of BenchmarkRawPubSub and BenchmarkIngest, then BenchmarkApplyUnderReaders.
set -euo pipefail
dev=bin/dev
case "${1:-}" in
prepare)
  rm -rf "$dev"
  mkdir -p "$dev/redis"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dev/stamen" ./cmd/stamen
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dev/loadgen" ./bench/loadgen
  go test -c -ldflags "-s -w" -o "$dev/state.test" ./internal/state
  go test -c -ldflags "-s -w" -o "$dev/app.test" ./internal/app
  server=$(command -v redis-server)
  cp "$server" "$dev/redis/"
  for lib in $(ldd "$server" | awk '/=>/{print $3} /ld-linux/{print $1}'); do
    cp -L "$lib" "$dev/redis/"
  done
  tar -C "$dev" -czf "$dev/redis.tar.gz" redis
  rm -rf "$dev/redis"
  gzip -9 "$dev/stamen" "$dev/loadgen" "$dev"/*.test
  du -sh "$dev"
  ;;
run)
  d=$PWD/$dev
  w=$(mktemp -d)
  save() { tar -C "$w" -cf "$OUT/results.tar" .; }
  (cd "$d" && gunzip -f ./*.gz 2>/dev/null; tar -xf redis.tar && chmod +x stamen loadgen ./*.test) || true
  # redis-server as the test binaries start it: by name, from PATH.
  mkdir -p "$d/path"
  printf '#!/bin/sh\nexec "%s/redis/ld-linux-x86-64.so.2" --library-path "%s/redis" "%s/redis/redis-server" "$@"\n' "$d" "$d" "$d" > "$d/path/redis-server"
  chmod +x "$d/path/redis-server"
  export PATH=$d/path:$PATH
  { nproc; lscpu | grep -i 'model name\|^CPU(s)'; date -u; } > "$w/machine.txt" 2>&1
  redis-server --port 6397 --save '' --appendonly no --daemonize yes --client-output-buffer-limit "pubsub 0 0 0" --logfile "$w/redis.log"
  until (exec 3<>/dev/tcp/127.0.0.1/6397) 2>/dev/null; do sleep 0.1; done
  timeout 170 "$d/loadgen" -stamen "$d/stamen" -redis 127.0.0.1:6397 -redis-db 0 -tasks 1000000 -small 1000 -mid 2000 \
    -duration 2s -read-duration 1s -mixed 300000 -mixed-rate 0 -mixed-readers 1,4,16 -no-restart > "$w/loadgen.txt" 2> "$w/loadgen.err" || true
  save
  (cd internal/app && for _ in 1 2 3 4 5; do for bm in BenchmarkRawPubSub BenchmarkIngest; do
    timeout 60 "$d/app.test" -test.run '^$' -test.bench "^$bm\$" -test.benchtime 200000x 2>&1 | grep '^Benchmark' || true
  done; done) > "$w/ingest-pairs.txt"
  save
  (cd internal/state && timeout 100 "$d/state.test" -test.run '^$' -test.bench ApplyUnderReaders -test.benchtime 1s) > "$w/state-readers.txt" 2>&1 || true
  save
  ;;
*)
  echo "usage: $0 prepare|run" >&2
  exit 2
  ;;
esac
