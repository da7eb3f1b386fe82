#!/usr/bin/env bash
# Where the worker's CPU goes, by thread: the end-to-end benchmark's workload through a release worker under
# `perf record`, then a report per thread (Benchmarks/README.md, "Issue 27").
#
#   scripts/profile-worker.sh [--messages N] [--store sqlite|memory]   # default 50,000 after the setup phase, SQLite
#   scripts/profile-worker.sh --allocations [--messages N] [--store ...] # where the heap allocations come from
#   scripts/profile-worker.sh --tracing [--messages N] [--store ...]     # tracing on, every span exported
#   scripts/profile-worker.sh --store postgres [--messages N]            # PostgreSQL: both sides
#   PROFILE_CALL_GRAPH=dwarf scripts/profile-worker.sh ...                # callers of leaf functions (swift_retain)
#   WORKER_BIN=/path/to/wallet-worker scripts/profile-worker.sh          # another build (release, with symbols)
#
# Starts a private broker (RABBITMQ_PORT, default 5852), preloads the setup phase and N notifications
# (`worker-load preload`), starts the worker under `perf record -e cpu-clock -g` (no hardware counters on this
# VM), waits until the measured notifications are drained (`worker-load watch`), stops it, and prints: CPU per
# message, the samples per thread (each named by its busiest function: the transport's I/O thread polls, the
# store's thread runs SQLite, the cooperative pool routes), then the top functions of each busy thread.
# With --allocations it records every call of glibc's `malloc` instead (a uprobe on libc's `malloc` that reads its
# return address)
# and prints, per thread, the allocations per measured message and the functions of the worker that asked for
# them (scripts/lib/allocation-callers.py: the first frame outside the allocators and Swift's runtime).
# With --tracing the worker exports every span, OTLP/HTTP protobuf, to scripts/lib/otlp-receiver.py on loopback
# (as scripts/benchmark-tracing.sh does), and the report adds the functions of the tracer, its encoders and its
# exporter over all threads.
# With --store postgres the worker runs on a private PostgreSQL (scripts/postgres-local.sh, port POSTGRES_PORT,
# default 5782) with pg_stat_statements loaded: the report adds the server's CPU per message (its processes, from
# worker-load's --server-pid) and the statements by total execution time, per delivery. Planning time is tracked
# too, which makes every planning dearer: a build that plans each statement (no prepared statements) shows 120-127 µs
# of server CPU per message with it and 71-90 without (2026-11-29). To compare the server's CPU across builds, set
# PROFILE_TRACK_PLANNING=off (the planning column then reads 0).
# The recording stays in the printed directory (perf report -i DIR/perf.data).
set -euo pipefail
# The servers this script starts stop when it ends, even killed (scripts/lib/stop-with-owner.sh).
export WALLET_OWNER_PID=$$

root="$(cd "$(dirname "$0")/.." && pwd)"
messages=50000
store=sqlite
allocations=false
tracing=false
while [ $# -gt 0 ]; do
    case "$1" in
        --messages) messages="$2"; shift 2 ;;
        --store) store="$2"; shift 2 ;;
        --allocations) allocations=true; shift ;;
        --tracing) tracing=true; shift ;;
        *) echo "usage: $0 [--messages N] [--store sqlite|memory] [--allocations] [--tracing]" >&2; exit 2 ;;
    esac
done

# shellcheck source=lib/prerequisites.sh
source "$root/scripts/lib/prerequisites.sh"
ensure_prerequisites linux-perf

export RABBITMQ_PORT="${RABBITMQ_PORT:-5852}"
export RABBITMQ_DATA_DIR="${RABBITMQ_DATA_DIR:-/tmp/rmq-profile}"
export AMQP_URL="amqp://guest:guest@127.0.0.1:$RABBITMQ_PORT/%2f"
work="$(mktemp -d /tmp/profile-worker.XXXXXX)"
worker_pid=""
receiver_pid=""
cleanup() {
    local status=$?
    [ -n "$worker_pid" ] && kill -TERM "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null
    [ -n "$receiver_pid" ] && { kill -TERM "$receiver_pid" 2>/dev/null || true; wait "$receiver_pid" 2>/dev/null || true; }
    "$root/scripts/rabbitmq-local.sh" stop >/dev/null 2>&1 || true
    [ "$store" = postgres ] && { "$root/scripts/postgres-local.sh" stop >/dev/null 2>&1 || true; }
    rm -f "$work"/*.sqlite*
    echo "profile-worker: recording and logs in $work" >&2
    exit "$status"
}
trap cleanup EXIT

if [ -z "${WORKER_BIN:-}" ]; then
    (cd "$root" && swift build -c release --product wallet-worker --scratch-path .build-bench-release 2>&1 | tail -n 1)
    WORKER_BIN="$root/.build-bench-release/release/wallet-worker"
fi
(cd "$root/Benchmarks" && swift build -c release --product worker-load --scratch-path .build-bench 2>&1 | tail -n 1)
load="$root/Benchmarks/.build-bench/release/worker-load"

if [ "$store" = postgres ]; then
    export POSTGRES_PORT="${POSTGRES_PORT:-5782}"
    export POSTGRES_DATA_DIR="${POSTGRES_DATA_DIR:-/tmp/profile-postgres-$POSTGRES_PORT}"
    pg() { "$root/scripts/postgres-local.sh" "$@"; }
    pg start >/dev/null
    pg psql -qc "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" >/dev/null
    pg restart >/dev/null
    # Known to the server only once the library is loaded: planning time beside execution time.
    pg psql -qc "ALTER SYSTEM SET pg_stat_statements.track_planning = ${PROFILE_TRACK_PLANNING:-on}" \
        -qc "SELECT pg_reload_conf()" >/dev/null
    pg psql -qc "DROP DATABASE IF EXISTS profile WITH (FORCE)" -qc "CREATE DATABASE profile" >/dev/null
    pg psql -d profile -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
    postgres_pid=$(head -n 1 "$POSTGRES_DATA_DIR/cluster/postmaster.pid")
fi
"$root/scripts/rabbitmq-local.sh" start
"$WORKER_BIN" declare --amqp-url "$AMQP_URL" >"$work/declare.log" 2>&1
"$load" prepare >"$work/prepare.log"
preloaded=$("$load" preload --messages "$messages")
echo "$preloaded"
# Every delivery of the run: the setup phase and the measured notifications ("preloaded S setup + N notifications").
deliveries=$(echo "$preloaded" | awk '{ print $2 + $5 }')
case "$store" in
    sqlite) store_flag="sqlite:$work/profile.sqlite" ;;
    memory) store_flag=memory ;;
    postgres) store_flag="$("$root/scripts/postgres-local.sh" url | sed 's#/wallet$#/profile#')" ;;
    *) echo "profile-worker: --store sqlite, memory or postgres" >&2; exit 2 ;;
esac
if $allocations; then
    libc=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ { print $NF; exit }')
    # With its return address: the frame-pointer chain starts at the caller's caller (allocation-callers.py).
    perf probe -l 2>/dev/null | grep -q 'probe_libc:mallocra' ||
        perf probe -q -x "$libc" -a 'mallocra=malloc caller=+0(%sp):x64'
    events=(-e probe_libc:mallocra)
else
    events=(-e cpu-clock -F 999)
fi
tracing_env=()
if $tracing; then
    receiver_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
    python3 "$root/scripts/lib/otlp-receiver.py" "$receiver_port" "$work/counts.json" &
    receiver_pid=$!
    for _ in $(seq 50); do [ -f "$work/counts.json" ] && break; sleep 0.1; done
    [ -f "$work/counts.json" ] || { echo "profile-worker: the OTLP receiver did not start" >&2; exit 1; }
    tracing_env=(OTEL_TRACES_EXPORTER=otlp "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$receiver_port")
fi
# Frame pointers by default; PROFILE_CALL_GRAPH=dwarf unwinds from a copy of each sample's stack instead (larger
# recordings, slower reports), which keeps the direct callers of leaf functions without a frame of their own, such as
# swift_retain and swift_release: `perf report --no-children -S swift_retain -g caller` then names who retains.
call_graph=(-g)
[ "${PROFILE_CALL_GRAPH:-fp}" = dwarf ] && call_graph=(--call-graph "dwarf,4096")
perf record "${events[@]}" "${call_graph[@]}" -o "$work/perf.data" -- env "${tracing_env[@]}" \
    "$WORKER_BIN" run --amqp-url "$AMQP_URL" --store "$store_flag" --prefetch 200 --http-port off \
    >"$work/worker.log" 2>&1 &
perf_pid=$!
# perf's child is the worker: the watch needs its pid.
for _ in $(seq 1 100); do
    worker_pid=$(pgrep -P "$perf_pid" -f " run --amqp-url" || true)
    [ -n "$worker_pid" ] && break
    sleep 0.1
done
[ -n "$worker_pid" ] || { echo "profile-worker: the worker did not start" >&2; cat "$work/worker.log" >&2; exit 1; }
server_flag=()
[ "$store" = postgres ] && server_flag=(--server-pid "$postgres_pid")
line=$("$load" watch --pid "$worker_pid" "${server_flag[@]}" --measured "$messages" --interval 0.05)
kill -TERM "$worker_pid"
wait "$perf_pid" || true
worker_pid=""
echo "$line" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    printf "worker (%s store): %.1f CPU us/message in the measured window (%d messages, %.1f s)\n", "'"$store"'",
        1e6 * v["cpu_s"] / v["messages"], v["messages"], v["window_s"] }'
if [ "$store" = postgres ]; then
    echo "$line" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "PostgreSQL (server and backends): %.1f CPU us/message in the same window\n",
            1e6 * v["server_cpu_s"] / v["messages"] }'
    echo "== PostgreSQL: statements by total execution time (whole run: $deliveries deliveries) =="
    "$root/scripts/postgres-local.sh" psql -d profile -P pager=off -c "
        SELECT round(total_exec_time::numeric / $deliveries * 1000, 1) AS us_per_delivery,
               round(total_plan_time::numeric / $deliveries * 1000, 1) AS plan_us_per_delivery,
               calls, round((calls::numeric / $deliveries), 3) AS calls_per_delivery,
               round(mean_exec_time::numeric * 1000, 1) AS us_per_call,
               round(rows::numeric / greatest(calls, 1), 1) AS rows_per_call,
               shared_blks_hit + shared_blks_read AS blocks, wal_bytes,
               left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS query
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'profile')
        ORDER BY total_exec_time DESC LIMIT 15"
    "$root/scripts/postgres-local.sh" psql -d profile -P pager=off -c "
        SELECT round(sum(total_exec_time)::numeric / $deliveries * 1000, 1) AS exec_us_per_delivery,
               round(sum(total_plan_time)::numeric / $deliveries * 1000, 1) AS plan_us_per_delivery,
               round(sum(calls)::numeric / $deliveries, 3) AS statements_per_delivery
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'profile')"
fi
# The reports below cut perf's output short (head): its SIGPIPE is not a failure.
set +o pipefail
if $allocations; then
    perf script -i "$work/perf.data" -F tid,comm,ip,sym,dso,trace --show-mmap-events 2>/dev/null |
        python3 "$root/scripts/lib/allocation-callers.py" --deliveries "$deliveries"
    exit 0
fi
echo "== samples per thread (whole run: start-up, the setup phase and the measured window) =="
perf report -i "$work/perf.data" --no-children --sort pid -g none --stdio 2>/dev/null | grep '%' | head -n 12 \
    >"$work/threads.txt"
while read -r share tid_comm; do
    tid=${tid_comm%%:*}
    busiest=$(perf report -i "$work/perf.data" --no-children --tid "$tid" --sort sym -g none --stdio 2>/dev/null |
        grep '%' | head -n 1 | awk '{ $1 = ""; $2 = ""; print }' | cut -c1-90)
    printf '  %7s  thread %-24s busiest: %s\n' "$share" "$tid_comm" "$busiest"
done <"$work/threads.txt"
if $tracing; then
    echo "== tracing: the spans the receiver counted =="
    sleep 1  # the receiver answers the last export before its counts are read
    python3 -c "import json; c=json.load(open('$work/counts.json')); print('  spans', c['spans'], 'by kind', c['by_kind'], 'requests', c['requests'])"
    echo "== tracing: share of all samples by library (the worker, Swift's runtime, the HTTP client, NIO) =="
    perf report -i "$work/perf.data" --no-children --sort dso -g none --stdio 2>/dev/null | grep '%' | head -n 8
    echo "== tracing: the top functions of the tracer, its encoders and exporter, all threads =="
    perf report -i "$work/perf.data" --no-children --sort sym -g none --stdio 2>/dev/null | grep '%' |
        grep -Ei 'otlp|protobuf|span|tracer|tracing|traceparent|sampler|httpclient|http1|instrumentation' | head -n 25 | cut -c1-160
fi
echo "== top functions of the three busiest threads =="
head -n 3 "$work/threads.txt" | while read -r share tid_comm; do
    tid=${tid_comm%%:*}
    echo "-- thread $tid ($share of all samples) --"
    perf report -i "$work/perf.data" --no-children --tid "$tid" --sort dso,sym -g none --stdio 2>/dev/null |
        grep '%' | head -n 12 | cut -c1-140
done
