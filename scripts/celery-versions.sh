#!/usr/bin/env bash
# Newer Celery releases for the integration tests, next to the system's.
#
#   bash scripts/celery-versions.sh [5.5] [5.6]      (default: both)
#
# Debian bookworm's /usr/bin/python3 has Celery 5.2.6 / kombu 5.2.4 (from
# scripts/services.sh). Celery and its dependencies are pure Python, so the
# newer Debian releases' packages run on bookworm's interpreter too:
#
#   5.5   trixie: Celery 5.5.x / kombu 5.5.x
#   5.6   sid:    Celery 5.6.x / kombu 5.6.x (python3-tzlocal from trixie)
#
# For each version this downloads the packages with apt-get against a private
# sources list (the machine's own Debian mirror, read from its apt
# configuration; the system's apt state and configuration are not touched),
# unpacks them with dpkg -x into
#
#   $STAMEN_CELERY_CACHE/<version>/root        (default /var/cache/stamen-celery)
#
# and checks that /usr/bin/python3 with
# PYTHONPATH=<root>/usr/lib/python3/dist-packages imports that Celery
# version. internal/testcluster (WorkerOptions.Celery) runs workers that way.
#
# Cached: a version whose directory is complete costs nothing and makes no
# network call. Anything that fails stops the script with a message naming
# the step (exit 1). Concurrent runs wait for each other (flock).
set -euo pipefail

CACHE=${STAMEN_CELERY_CACHE:-/var/cache/stamen-celery}
PY=/usr/bin/python3
PKGS=(python3-celery python3-kombu python3-billiard python3-vine python3-amqp python3-click
  python3-click-didyoumean python3-click-repl python3-click-plugins python3-dateutil python3-redis)

log() { printf '[celery-versions %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() {
  printf '[celery-versions %s] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2
  exit 1
}

# site prints the dist-packages directory of a cached version.
site() { echo "$CACHE/$1/root/usr/lib/python3/dist-packages"; }

# installed_version prints the Celery and kombu versions /usr/bin/python3
# imports from a root, or fails.
installed_version() {
  PYTHONPATH="$1/usr/lib/python3/dist-packages" PYTHONDONTWRITEBYTECODE=1 "$PY" -c '
import celery, kombu, billiard, vine, redis, amqp, click, dateutil
import celery.bin.celery, celery.worker, kombu.transport.redis
print(celery.__version__, kombu.__version__)'
}

# mirror prints the URI of the machine's Debian archive (the apt source that
# serves a bookworm suite other than bookworm-security), from deb822 .sources
# files or one-line .list files.
mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk '
      BEGIN { RS = ""; FS = "\n" }
      {
        u = ""; s = ""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, a, /[ \t]+/); u = a[1] }
          if ($i ~ /^Suites:/) { s = " " $i " " }
        }
        if (u != "" && s ~ /[ \t]bookworm[ \t]/) { print u; exit }
      }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI suite components...
    uri=$(awk '$1 == "deb" {
      i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
      if ($(i+1) == "bookworm") { print $i; exit } }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  return 1
}

# fetch VERSION: download and unpack one version into $CACHE/VERSION.
fetch() {
  local v=$1 suites pkgs=("${PKGS[@]}") tmp uri got
  case $v in
  5.5) suites=(trixie) ;;
  5.6)
    suites=(sid trixie)
    pkgs+=(python3-tzlocal/trixie)
    ;;
  *) die "unknown Celery version $v (known: 5.5, 5.6)" ;;
  esac
  command -v apt-get >/dev/null || die "apt-get not found: cannot fetch Celery $v"
  [ -r /usr/share/keyrings/debian-archive-keyring.gpg ] ||
    die "/usr/share/keyrings/debian-archive-keyring.gpg missing (package debian-archive-keyring)"
  uri=$(mirror) || die "no Debian bookworm source in /etc/apt/sources.list{,.d/}: cannot tell which mirror to use"

  tmp=$(mktemp -d "$CACHE/.fetch-$v.XXXXXX")
  TMP_DIRS+=("$tmp")
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/debs" "$tmp/root"
  local s
  for s in "${suites[@]}"; do
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $s main"
  done >"$tmp/sources.list"
  local apt=(apt-get -q -o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o APT::Sandbox::User=root)

  log "Celery $v: apt-get update (${suites[*]})"
  "${apt[@]}" update >"$tmp/apt.log" 2>&1 || {
    tail -n 20 "$tmp/apt.log" >&2
    die "Celery $v: apt-get update of ${suites[*]} failed"
  }
  log "Celery $v: apt-get download ${pkgs[*]}"
  (cd "$tmp/debs" && "${apt[@]}" download "${pkgs[@]}") >>"$tmp/apt.log" 2>&1 || {
    tail -n 20 "$tmp/apt.log" >&2
    die "Celery $v: apt-get download failed"
  }
  local deb
  for deb in "$tmp"/debs/*.deb; do
    dpkg -x "$deb" "$tmp/root" || die "Celery $v: dpkg -x $deb failed"
  done
  got=$(installed_version "$tmp/root" 2>"$tmp/import.log") || {
    cat "$tmp/import.log" >&2
    die "Celery $v: $PY cannot import the unpacked Celery"
  }
  case $got in
  "$v".*) ;;
  *) die "Celery $v: the ${suites[0]} packages hold Celery/kombu $got, not $v.x" ;;
  esac
  ls "$tmp/debs" >"$tmp/root/PACKAGES"
  rm -rf "${CACHE:?}/$v"
  mkdir "$CACHE/$v"
  mv "$tmp/root" "$CACHE/$v/root"
  echo "$got" >"$CACHE/$v/VERSION" # written last: marks the version complete
  log "Celery $v: Celery/kombu $got in $(site "$v")"
}

TMP_DIRS=()
trap 'rm -rf "${TMP_DIRS[@]}"' EXIT
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(5.5 5.6)
mkdir -p "$CACHE" || die "cannot create $CACHE (set STAMEN_CELERY_CACHE to a writable directory)"
exec 9>"$CACHE/.lock"
flock 9
for v in "${versions[@]}"; do
  if [ -s "$CACHE/$v/VERSION" ] && got=$(installed_version "$CACHE/$v/root" 2>/dev/null) &&
    [ "$got" = "$(cat "$CACHE/$v/VERSION")" ]; then
    log "Celery $v: cached, Celery/kombu $got in $(site "$v")"
    continue
  fi
  fetch "$v"
done
