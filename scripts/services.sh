#!/usr/bin/env bash
# Makes sure what stamen's integration tests need is installed and running:
# Redis on 127.0.0.1:6379, RabbitMQ on 127.0.0.1:5672 (guest/guest, vhost
# "stamen-test"), PostgreSQL on 127.0.0.1:5432 with a role stamen_test, Debian's Celery for /usr/bin/python3, Celery 5.5 and 5.6
# unpacked beside it (scripts/celery-versions.sh, cached under
# /var/cache/stamen-celery), and Debian's Chromium (/usr/bin/chromium) for the
# test that drives Swagger UI in a headless browser, and Debian's redis-sentinel
# (the Sentinel tests start their own, testcluster.StartSentinel), and runc
# and umoci, which run the container image deploy/image builds
# (deploy/image's test).
#
# Idempotent: installs only missing packages (no apt-get at all when nothing
# is missing), starts only what does not already answer, and is quick (~2 s)
# when everything is up. Installing and starting services needs root.
#
# Env knobs:
#   STAMEN_SERVICES_DIR     pid/log files of what this script starts
#                           (default /tmp/stamen-services)
#   STAMEN_RABBIT_TIMEOUT   seconds to wait for RabbitMQ (default 120)
#   STAMEN_SKIP_RABBITMQ=1  Redis and the system's Celery only (what make bench
#                           needs): no RabbitMQ, no Celery 5.5/5.6
set -euo pipefail

RUN_DIR=${STAMEN_SERVICES_DIR:-/tmp/stamen-services}
RABBIT_TIMEOUT=${STAMEN_RABBIT_TIMEOUT:-120}
PY=/usr/bin/python3 # Debian's interpreter: the apt python3-* packages are for it
REDIS_PORT=6379
AMQP_PORT=5672
PG_PORT=5432
VHOST=stamen-test

PKGS=(redis-server redis-sentinel redis-tools rabbitmq-server postgresql python3-celery python3-redis python3-amqp python3-kombu chromium runc umoci ca-certificates)

log() { printf '[services %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() {
  printf '[services %s] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2
  exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }
trap 'die "failed at line $LINENO: $BASH_COMMAND"' ERR

mkdir -p "$RUN_DIR"
is_root() { [ "$(id -u)" = 0 ]; }

# ---- 1. packages --------------------------------------------------------------
pkgs=("${PKGS[@]}")
[ "${STAMEN_SKIP_RABBITMQ:-0}" = 1 ] && pkgs=(redis-server redis-sentinel redis-tools postgresql python3-celery python3-redis python3-kombu runc umoci ca-certificates)
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  is_root || die "missing packages (${missing[*]}); run as root or install them: apt-get install -y --no-install-recommends ${missing[*]}"
  command -v apt-get >/dev/null || die "missing packages (${missing[*]}) and no apt-get: install them by hand"
  t=$(now)
  log "installing: ${missing[*]} (log: $RUN_DIR/apt.log)"
  export DEBIAN_FRONTEND=noninteractive
  {
    apt-get update -q &&
      apt-get install -y -q --no-install-recommends "${missing[@]}"
  } >"$RUN_DIR/apt.log" 2>&1 || {
    tail -n 30 "$RUN_DIR/apt.log" >&2
    die "apt-get failed (full log: $RUN_DIR/apt.log)"
  }
  log "installed in $(since "$t")s"
else
  log "packages already installed: ${pkgs[*]}"
fi

"$PY" -c 'import celery, redis, kombu' 2>/dev/null ||
  die "$PY cannot import celery/redis/kombu although the packages are installed"
[ "${STAMEN_SKIP_RABBITMQ:-0}" = 1 ] || [ -x /usr/bin/chromium ] ||
  die "/usr/bin/chromium missing although the chromium package is installed"

# ---- 1a. Node.js for the dashboard's checks (make check-generated, check-ui) --
# Vite needs Node.js 20.19 or later; Debian 12's nodejs is 18, so an older
# one is not replaced here but named, with what to install.
if [ "${STAMEN_SKIP_UI:-0}" != 1 ]; then
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    is_root && command -v apt-get >/dev/null || die "node and npm are missing: install Node.js 20.19 or later (the dashboard's build checks need it)"
    log "installing nodejs and npm (log: $RUN_DIR/apt.log)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >>"$RUN_DIR/apt.log" 2>&1 ||
      { apt-get update -q >>"$RUN_DIR/apt.log" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >>"$RUN_DIR/apt.log" 2>&1; } ||
      die "apt-get could not install nodejs and npm (log: $RUN_DIR/apt.log)"
  fi
  node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)' ||
    die "Node.js $(node --version) is too old for the dashboard's build (vite needs 20.19 or later): install a newer one, or set STAMEN_SKIP_UI=1 to skip its checks"
  log "node $(node --version), npm $(npm --version)"
fi

# ---- 1b. Celery 5.5 and 5.6 for the version matrix (cached after the first run) --
if [ "${STAMEN_SKIP_RABBITMQ:-0}" != 1 ]; then
  t=$(now)
  bash "$(dirname "${BASH_SOURCE[0]}")/celery-versions.sh" 5.5 5.6 ||
    die "Celery 5.5/5.6 for the tests are missing (scripts/celery-versions.sh failed)"
  log "celery 5.5 and 5.6 ready after $(since "$t")s"
fi

# ---- 2. Redis, no persistence ----------------------------------------------------
t=$(now)
if redis_up; then
  log "redis already answering on 127.0.0.1:$REDIS_PORT"
else
  command -v redis-server >/dev/null || die "redis-server not found"
  log "starting redis on 127.0.0.1:$REDIS_PORT (log: $RUN_DIR/redis.log)"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --pidfile "$RUN_DIR/redis.pid" --logfile "$RUN_DIR/redis.log" --dir "$RUN_DIR"
  for _ in $(seq 200); do
    redis_up && break
    sleep 0.05
  done
  redis_up || {
    tail -n 20 "$RUN_DIR/redis.log" >&2 || true
    die "redis did not answer PING within 10s"
  }
  log "redis ready after $(since "$t")s (pid $(cat "$RUN_DIR/redis.pid" 2>/dev/null || echo '?'))"
fi

# ---- 2b. PostgreSQL, and the role the tests log in as -------------------------------
# The tests create a database each (testcluster.PostgresDB) as stamen_test, a
# role with a password that may create databases: that works over TCP with
# Debian's default pg_hba.conf (scram on 127.0.0.1) and with trust alike.
t=$(now)
pg_up() { pg_isready -q -h 127.0.0.1 -p "$PG_PORT" 2>/dev/null; }
if pg_up; then
  log "postgresql already answering on 127.0.0.1:$PG_PORT"
else
  is_root || die "PostgreSQL is not running and starting it needs root"
  ver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  [ -n "$ver" ] || die "no PostgreSQL cluster under /etc/postgresql (package postgresql)"
  log "starting postgresql $ver main on 127.0.0.1:$PG_PORT"
  pg_ctlcluster --skip-systemctl-redirect "$ver" main start
  for _ in $(seq 300); do
    pg_up && break
    sleep 0.1
  done
  pg_up || die "postgresql did not answer within 30s; see /var/log/postgresql/"
fi
# As the postgres superuser: over TCP where it is trusted, else by peer
# authentication on the socket.
pg_super() {
  if psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc 'select 1' >/dev/null 2>&1; then
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"
  else
    is_root || die "cannot act as PostgreSQL's superuser to create role stamen_test"
    runuser -u postgres -- psql -p "$PG_PORT" -d postgres -v ON_ERROR_STOP=1 -qtA "$@"
  fi
}
if PGPASSWORD=stamen_test psql -h 127.0.0.1 -p "$PG_PORT" -U stamen_test -d postgres -tAc 'select 1' >/dev/null 2>&1; then
  log "postgresql role stamen_test can log in"
else
  pg_super -c "DO \$\$ BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stamen_test') THEN
        CREATE ROLE stamen_test LOGIN CREATEDB PASSWORD 'stamen_test';
      ELSE
        ALTER ROLE stamen_test LOGIN CREATEDB PASSWORD 'stamen_test';
      END IF; END \$\$;" || die "could not create PostgreSQL role stamen_test"
  PGPASSWORD=stamen_test psql -h 127.0.0.1 -p "$PG_PORT" -U stamen_test -d postgres -tAc 'select 1' >/dev/null ||
    die "PostgreSQL role stamen_test cannot log in over TCP (check pg_hba.conf)"
  log "postgresql role stamen_test created"
fi
log "postgresql ready after $(since "$t")s"

# ---- 3. RabbitMQ ----------------------------------------------------------------
if [ "${STAMEN_SKIP_RABBITMQ:-0}" = 1 ]; then
  log "skipping RabbitMQ (STAMEN_SKIP_RABBITMQ=1)"
  exit 0
fi
t=$(now)
if port_open "$AMQP_PORT"; then
  log "something already listens on 127.0.0.1:$AMQP_PORT"
else
  is_root || die "RabbitMQ is not running and starting it needs root"
  log "starting rabbitmq on 127.0.0.1:$AMQP_PORT (logs: /var/log/rabbitmq/)"
  # Loopback only: the AMQP listener, epmd and the Erlang distribution port.
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  export ERL_EPMD_ADDRESS=127.0.0.1
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  if id rabbitmq >/dev/null 2>&1; then
    install -d -o rabbitmq -g rabbitmq /var/lib/rabbitmq/mnesia /var/log/rabbitmq
  fi
  # Debian's wrapper re-runs itself as user rabbitmq; the variables above pass through.
  rabbitmq-server -detached
  deadline=$(($(date +%s) + RABBIT_TIMEOUT))
  until port_open "$AMQP_PORT"; do
    [ "$(date +%s)" -lt "$deadline" ] || die "RabbitMQ did not open port $AMQP_PORT within ${RABBIT_TIMEOUT}s; see /var/log/rabbitmq/"
    sleep 0.2
  done
  log "rabbitmq port $AMQP_PORT open after $(since "$t")s"
fi
# An open port is not enough: wait until the rabbit application has booted.
rabbitmqctl -q await_startup --timeout "$RABBIT_TIMEOUT" ||
  die "rabbitmqctl await_startup failed; see /var/log/rabbitmq/"

# The vhost the tests use, with full permissions for guest (both idempotent).
if rabbitmqctl -q list_vhosts name 2>/dev/null | grep -qx "$VHOST"; then
  log "rabbitmq vhost $VHOST exists"
else
  rabbitmqctl -q add_vhost "$VHOST" || die "rabbitmqctl add_vhost $VHOST failed"
  log "rabbitmq vhost $VHOST created"
fi
rabbitmqctl -q set_permissions -p "$VHOST" guest '.*' '.*' '.*' ||
  die "rabbitmqctl set_permissions -p $VHOST guest failed"

# Prove an AMQP login as guest into the test vhost (guest is loopback-only).
"$PY" - "$VHOST" <<'PYEOF' || die "AMQP login as guest to vhost $VHOST failed"
import sys
import amqp
c = amqp.Connection("127.0.0.1:5672", userid="guest", password="guest",
                    virtual_host=sys.argv[1], connect_timeout=5)
c.connect()
c.close()
PYEOF
log "rabbitmq ready (await_startup, vhost $VHOST, guest login) after $(since "$t")s"
