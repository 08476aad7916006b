#!/usr/bin/env bash
# A throwaway PostgreSQL server for the store tests (tests/store/postgres_store_test.cpp).
#
#   scripts/postgres-test-server.sh start [DIR]   init + start it, print its URL
#   scripts/postgres-test-server.sh url   [DIR]   print the URL of the running server
#   scripts/postgres-test-server.sh stop  [DIR]   stop it and remove DIR
#   scripts/postgres-test-server.sh pause [DIR]   stop it, keeping DIR (an outage, for the tests)
#   scripts/postgres-test-server.sh resume [DIR]  start it again on the same port
#
# DIR (default $CUBEPLANE_PG_DIR, else /tmp/cubeplane-pg-<checksum of this checkout's path>) holds
# the data directory, the unix socket, the log and the URL. The server
# listens on 127.0.0.1 on a free port, trusts local connections (tests
# only!), and keeps fsync and synchronous_commit on: the tests check
# durability, not speed. As root it runs as the `postgres` user, since
# PostgreSQL refuses to run as root; the packages come from
# scripts/install-deps.sh (Debian 12: postgresql, binaries in
# /usr/lib/postgresql/15/bin).
#
# Use it as:  export CUBEPLANE_TEST_POSTGRES_URL=$(scripts/postgres-test-server.sh start)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
dir=${2:-${CUBEPLANE_PG_DIR:-/tmp/cubeplane-pg-$(printf '%s' "$root" | cksum | cut -d' ' -f1)}}

die() {
  echo "postgres-test-server: $*" >&2
  exit 1
}

# The newest installed server, 15 on Debian 12.
pg_bin() {
  local bin
  for bin in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$bin/initdb" ] && { echo "$bin"; return 0; }
  done
  return 1
}

# Runs a server binary as the user that owns the data directory.
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

ensure_installed() {
  pg_bin >/dev/null && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "postgres-test-server: installing postgresql" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
  fi
  pg_bin >/dev/null || die "no PostgreSQL server found under /usr/lib/postgresql/*/bin; run scripts/install-deps.sh (as root)"
}

running() {
  local bin
  bin=$(pg_bin) || return 1
  [ -f "$dir/data/PG_VERSION" ] && [ -f "$dir/url" ] && as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' && return 0
  fi
  # No python: a random high port; pg_ctl fails on a taken one and start() tries another.
  echo $((20000 + RANDOM % 20000))
}

# pg_start BIN PORT: -w waits until the server accepts connections (or gives up).
pg_start() {
  as_pg "$1/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $2 -c unix_socket_directories='$dir'" \
    -o "-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=300" \
    start >/dev/null 2>&1
}

pause() {
  local bin
  bin=$(pg_bin) || die "no PostgreSQL server installed"
  [ -f "$dir/port" ] || die "no server in $dir"
  as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || die "pg_ctl stop failed"
}

resume() {
  local bin
  bin=$(pg_bin) || die "no PostgreSQL server installed"
  [ -f "$dir/port" ] || die "no server in $dir"
  pg_start "$bin" "$(cat "$dir/port")" || { tail -n 20 "$dir/server.log" >&2 || true; die "pg_ctl start failed"; }
}

start() {
  ensure_installed
  if running; then
    cat "$dir/url"
    return 0
  fi
  local bin port url attempt
  bin=$(pg_bin)
  rm -rf "$dir"
  mkdir -p "$dir"
  chmod 700 "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"

  # The ICU collation makes the suite prove that the store never relies on
  # the server's text ordering (it sorts with COLLATE "C", like SQLite).
  if ! as_pg "$bin/initdb" -D "$dir/data" --username=postgres --auth=trust --encoding=UTF8 \
    --locale=C.UTF-8 --locale-provider=icu --icu-locale=en-US >"$dir/initdb.log" 2>&1; then
    rm -rf "$dir/data"
    as_pg "$bin/initdb" -D "$dir/data" --username=postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  fi

  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if pg_start "$bin" "$port"; then
      break
    fi
    [ "$attempt" -eq 5 ] && { tail -n 20 "$dir/server.log" >&2 || true; die "pg_ctl start failed"; }
  done
  echo "$port" >"$dir/port"

  for _ in $(seq 1 60); do
    "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres && break
    sleep 0.5
  done
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres || die "server on port $port is not ready; see $dir/server.log"

  url="postgresql://postgres@127.0.0.1:$port/postgres"
  echo "$url" >"$dir/url"
  echo "$url"
}

stop() {
  local bin
  if [ -f "$dir/data/PG_VERSION" ] && bin=$(pg_bin); then
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  pause) pause ;;
  resume) resume ;;
  url) running && cat "$dir/url" || die "no server running in $dir (scripts/postgres-test-server.sh start)" ;;
  *) die "usage: $0 start|stop|url|pause|resume [DIR]" ;;
esac
