#!/usr/bin/env bash
# Starts or stops a private PostgreSQL server on loopback with its own data directory, for tests, benchmarks
# and trying the worker with `--store postgres://...`. It never touches a system-wide cluster.
#
#   scripts/postgres-local.sh start     # installs postgresql with apt if missing, initialises, starts, waits
#   scripts/postgres-local.sh stop      # stops the server this script started (by its pid; fast shutdown)
#   scripts/postgres-local.sh restart   # stop then start, keeping the data
#   scripts/postgres-local.sh status
#   scripts/postgres-local.sh url       # prints the store URL: postgres://wallet:wallet@127.0.0.1:PORT/wallet
#   scripts/postgres-local.sh psql ARGS # psql against the server's `wallet` database, as its superuser
#
# Environment: POSTGRES_PORT (default 5432), POSTGRES_DATA_DIR (default /tmp/wallet-postgres-$POSTGRES_PORT).
# The superuser `wallet` (password `wallet`, SCRAM over TCP) owns the database `wallet` and may create others:
# the tests make a schema each. PostgreSQL refuses to run as root, so as root the server runs as the `postgres`
# user, which then owns the data directory. WALLET_OWNER_PID: a process the server must not outlive; when it ends, the
# server is stopped (scripts/lib/stop-with-owner.sh; scripts/test.sh and the tests set it).
set -euo pipefail
source "$(dirname "$0")/lib/stop-with-owner.sh"

port="${POSTGRES_PORT:-5432}"
data_dir="${POSTGRES_DATA_DIR:-/tmp/wallet-postgres-$port}"
cluster="$data_dir/cluster"
user=wallet
password=wallet

find_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$dir" ] && [ -x "$dir/pg_ctl" ] && echo "$dir"
}

ensure_installed() {
    if [ -z "$(find_bin)" ]; then
        echo "postgres-local: installing postgresql with apt" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    bin=$(find_bin)
}

# Runs a server program as the data directory's owner: `postgres` when we are root, else ourselves.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

server_pid() {
    [ -f "$cluster/postmaster.pid" ] && head -n 1 "$cluster/postmaster.pid"
}

is_running() {
    local pid
    pid=$(server_pid) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

initialise() {
    [ -f "$cluster/PG_VERSION" ] && return 0
    mkdir -p "$data_dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$data_dir"
    local pwfile="$data_dir/pwfile"
    echo "$password" > "$pwfile"
    [ "$(id -u)" = 0 ] && chown postgres: "$pwfile"
    as_owner "$bin/initdb" -D "$cluster" -U "$user" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 > "$data_dir/initdb.log" 2>&1 || {
        echo "postgres-local: initdb failed:" >&2
        cat "$data_dir/initdb.log" >&2
        return 1
    }
    rm -f "$pwfile"
    # Loopback only, its own port and socket directory; room for the tests' parallel pools.
    cat >> "$cluster/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$data_dir'
max_connections = 200
log_min_messages = warning
log_min_error_statement = panic
CONF
}

start() {
    ensure_installed
    initialise
    if is_running; then
        echo "postgres-local: already running (pid $(server_pid), port $port)"
        return 0
    fi
    if ! as_owner "$bin/pg_ctl" -D "$cluster" -l "$data_dir/server.log" -w -t 60 start >/dev/null; then
        echo "postgres-local: the server did not start; last log lines:" >&2
        tail -n 30 "$data_dir/server.log" >&2 || true
        return 1
    fi
    if ! run_psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'wallet'" | grep -q 1; then
        run_psql -d postgres -qc "CREATE DATABASE wallet OWNER $user"
    fi
    # A fast shutdown (SIGINT) when WALLET_OWNER_PID ends, as `stop` does.
    stop_with_owner "$(server_pid)" "$cluster" INT
    echo "postgres-local: running on 127.0.0.1:$port (pid $(server_pid), data $data_dir)"
}

stop() {
    if ! is_running; then
        echo "postgres-local: not running"
        return 0
    fi
    local pid
    pid=$(server_pid)
    # SIGINT is PostgreSQL's fast shutdown: open transactions roll back, clients are disconnected.
    kill -INT "$pid"
    for _ in $(seq 1 60); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "postgres-local: server did not stop in 30 s; immediate shutdown" >&2
        kill -QUIT "$pid" || true
    fi
    echo "postgres-local: stopped"
}

run_psql() {
    "$(find_bin)/psql" -h "$data_dir" -p "$port" -U "$user" -X "$@"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    restart) stop; start ;;
    status) if is_running; then echo "running (pid $(server_pid), port $port)"; else echo "stopped"; exit 1; fi ;;
    url) echo "postgres://$user:$password@127.0.0.1:$port/wallet" ;;
    psql) shift; run_psql -d wallet "$@" ;;
    *) echo "usage: $0 start|stop|restart|status|url|psql ARGS" >&2; exit 2 ;;
esac
