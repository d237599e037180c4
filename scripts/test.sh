#!/usr/bin/env bash
# The test command (`make test`, and CI through .ci/run):
#
#   1. scripts/services.sh   install (apt, as root) and start what is missing:
#                            Redis, RabbitMQ, Debian's python3-celery and
#                            chromium; Celery 5.5 and 5.6 beside it
#                            (scripts/celery-versions.sh, cached)
#   2. go vet ./...
#   3. gofmt                 every .go file outside the generated restapi/ and gen/
#   4. make check-generated  regenerate the go-swagger code and the
#                            dashboard's TypeScript types; fail on any diff
#   4b. make check-ui        rebuild the dashboard (npm ci, vite build) into
#                            internal/ui/dist; fail on any diff
#   5. make check-docs       regenerate docs/configuration.md from the flags;
#                            fail on any diff
#   5b. deploy tools         build helm and promtool (Go modules the deploy
#                            tests run) into the Go build cache, untimed
#   6. go test -race -count=1 ./...   with STAMEN_INTEGRATION=1, so the
#                            integration tests run (and fail, never skip,
#                            when Celery or a broker is missing); the step
#                            also fails when any test was skipped (see
#                            ALLOWED_SKIPS)
#   7. fuzz                  each Go fuzz target for STAMEN_FUZZ_TIME (20000 runs)
#
# Every step runs even when an earlier one failed (except 1: without the
# services the tests cannot run), then a summary is printed; the exit status
# is non-zero when any step failed.
#
# Arguments are package patterns for step 5 (default ./...), e.g.
#   bash scripts/test.sh ./internal/testcluster/
# Env knobs:
#   GO_TEST_FLAGS               default "-race -count=1"
#   STAMEN_TEST_TIMEOUT         go test -timeout, default 20m (internal/e2e alone
#                               takes about 10 min: its suite runs on Celery 5.2,
#                               5.5 and 5.6)
#   STAMEN_TEST_VERBOSE=1       go test -v
#   STAMEN_SKIP_SERVICES=1      skip step 1 (services managed elsewhere)
#   STAMEN_SKIP_GENERATED=1     skip step 4 (it runs go mod tidy and compares
#                               with git: uncommitted changes to restapi/,
#                               gen/, go.mod or go.sum make it fail)
#   STAMEN_SKIP_UI=1            skip step 4b (needs Node and the npm registry)
#   STAMEN_TEST_LOG_DIR         keep the Celery workers' logs there
#   STAMEN_TEST_OUT             where go-test.log goes (default a new
#                               /tmp/stamen-test.XXXXXX)
set -uo pipefail

cd "$(dirname "$0")/.."
export STAMEN_INTEGRATION=1

LOG_DIR=${STAMEN_TEST_OUT:-$(mktemp -d /tmp/stamen-test.XXXXXX)}
mkdir -p "$LOG_DIR"
declare -a SUMMARY=()
FAILED=0

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
banner() { printf '\n==> %s\n' "$*"; }
record() { # record NAME STATUS SECONDS
  SUMMARY+=("$(printf '%-18s %-5s %6ss' "$1" "$2" "$3")")
  [ "$2" = ok ] || [ "$2" = skip ] || FAILED=1
}
# step NAME CMD...: runs CMD, records the outcome and its duration.
step() {
  local name=$1 t rc
  shift
  banner "$name: $*"
  t=$(now)
  "$@" 2>&1 # one stream, so that CI logs keep the order
  rc=$?
  if [ $rc -eq 0 ]; then
    record "$name" ok "$(since "$t")"
  else
    record "$name" FAIL "$(since "$t")"
    echo "--- $name failed (exit $rc)"
  fi
  return $rc
}
finish() {
  banner "summary"
  printf '  %s\n' "${SUMMARY[@]}"
  if [ "$FAILED" -ne 0 ]; then
    echo "FAIL (go test output: $LOG_DIR/go-test.log)"
    exit 1
  fi
  echo "PASS"
  exit 0
}

# deploy_tools builds the tools the deploy tests run as Go modules (helm,
# promtool; their pinned versions are the constants in deploy/tools_test.go)
# into the Go build cache, outside go test's time limits. Prometheus and Helm
# are large modules: a cold build on two busy cores took longer than the
# test's own 15 minutes, and once cached the tests only link them.
deploy_tools() {
  local mods m bin rc=0
  mods=$(sed -n 's/^[[:space:]]*[a-zA-Z]*Module[[:space:]]*=[[:space:]]*"\(.*\)"$/\1/p' deploy/tools_test.go)
  [ -n "$mods" ] || { echo "no tool modules found in deploy/tools_test.go"; return 1; }
  bin=$(mktemp -d)
  for m in $mods; do
    echo "go install $m"
    (cd "$bin" && GOFLAGS=-mod=mod GOWORK=off GOBIN="$bin" go install "$m") || rc=1
  done
  rm -rf "$bin"
  return $rc
}

gofmt_check() {
  local files out
  files=$(find . -name '*.go' -not -path './restapi/*' -not -path './gen/*' \
    -not -path './.git/*' -not -path './vendor/*' -not -path '*/testdata/*')
  # shellcheck disable=SC2086
  out=$(gofmt -l $files) || return 1
  if [ -n "$out" ]; then
    echo "not gofmt'ed (run: gofmt -w <file>, or make fmt):"
    printf '  %s\n' $out
    return 1
  fi
  echo "all files gofmt'ed"
}

# fuzz_targets runs every fuzz target for a bounded time (STAMEN_FUZZ_TIME,
# default 20000 runs each; a count, not a duration, because a deadline that
# ends during input minimisation fails the run) on top of its seed corpus,
# which go test already ran. The targets are found in the test files of
# every package, so that a new one runs without being listed here.
fuzz_targets() {
  local file pkg target rc=0
  for file in $(grep -rl --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git '^func Fuzz' . | sort); do
    pkg=$(dirname "$file")
    for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
      echo "fuzz $pkg $target"
      go test -run '^$' -fuzz "^${target}\$" -fuzztime "${STAMEN_FUZZ_TIME:-20000x}" "$pkg" || rc=1
    done
  done
  return $rc
}

# ALLOWED_SKIPS are regexps on "<package> <test>" of tests that may skip
# under STAMEN_INTEGRATION=1, each with its reason. None: every test that
# needs a server or a tool fails when it is missing, and any other skip fails
# the step.
ALLOWED_SKIPS=()

# go_test runs go test -json through scripts/testreport, which prints what
# a plain go test prints (package results, failed tests' output), keeps the
# whole output in go-test.log and fails when a test was skipped.
go_test() {
  local flags=(${GO_TEST_FLAGS:--race -count=1} -timeout "${STAMEN_TEST_TIMEOUT:-20m}" -json)
  local report=(-log "$LOG_DIR/go-test.log" -fail-on-skip)
  [ "${STAMEN_TEST_VERBOSE:-0}" = 1 ] && report+=(-v)
  local re
  for re in "${ALLOWED_SKIPS[@]}"; do report+=(-allow-skip "$re"); done
  local pkgs=("$@")
  # The longest packages first: go test starts packages in the order they
  # are named (./... adds the rest, each once), and internal/e2e alone takes
  # more than a third of the step; started last, it ran alone on one core
  # for its last ten minutes.
  [ ${#pkgs[@]} -gt 0 ] || pkgs=(./internal/e2e ./internal/app ./cmd/stamen ./...)
  go build -o "$LOG_DIR/testreport" ./scripts/testreport || return 1
  echo "go test ${flags[*]} ${pkgs[*]}  (log: $LOG_DIR/go-test.log)"
  go test "${flags[@]}" "${pkgs[@]}" 2>&1 | "$LOG_DIR/testreport" "${report[@]}"
  local rc=${PIPESTATUS[0]} rrc=${PIPESTATUS[1]}
  if [ "$rc" -ne 0 ]; then
    # The failing tests, together, at the end of a long CI log.
    banner "failed tests"
    grep -E '^\s*--- FAIL|^FAIL|^panic:|\[build failed\]|^# ' "$LOG_DIR/go-test.log" || true
  fi
  [ "$rc" -eq 0 ] && [ "$rrc" -eq 0 ]
}

T0=$(now)
echo "stamen tests: $(go version), $(nproc) CPUs, CI=${CI:-false}"

if [ "${STAMEN_SKIP_SERVICES:-0}" = 1 ]; then
  record services skip 0
else
  step services bash scripts/services.sh || finish
fi
step "go vet" go vet ./...
step gofmt gofmt_check
if [ "${STAMEN_SKIP_GENERATED:-0}" = 1 ]; then
  record check-generated skip 0
else
  step check-generated make --no-print-directory check-generated
fi
if [ "${STAMEN_SKIP_UI:-0}" = 1 ]; then
  record check-ui skip 0
else
  step check-ui make --no-print-directory check-ui
fi
step check-docs make --no-print-directory check-docs
case " $* " in
  "  " | *" ./... "* | *deploy*) step "deploy tools" deploy_tools ;;
esac
step "go test" go_test "$@"
step fuzz fuzz_targets
record total "$([ "$FAILED" = 0 ] && echo ok || echo FAIL)" "$(since "$T0")"
finish
