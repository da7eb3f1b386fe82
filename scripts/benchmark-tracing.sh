#!/usr/bin/env bash
# Tracing at the worker's full speed (issue 25; Benchmarks/README.md, Benchmarks/JOURNAL.md "Tracing at full speed"):
#
#   scripts/benchmark-tracing.sh                       # 3 rounds of 30,000 notifications, tracing off and on
#   scripts/benchmark-tracing.sh --rounds 5 --messages 50000
#   WORKER_BIN=/path/to/wallet-worker scripts/benchmark-tracing.sh   # another build of the worker
#
# A private broker (scripts/rabbitmq-local.sh, port RABBITMQ_PORT, default 5932) and a real OTLP/HTTP receiver on
# loopback (scripts/lib/otlp-receiver.py: decodes every export, protobuf, and counts spans and the message ids of
# the process spans). Per round, alternated: preload (the end-to-end benchmark's setup phase and N notifications of
# its mix, worker-load) -> the release worker, SQLite store, tracing off, until the queue is drained; preload -> the
# same with tracing on (OTLP/HTTP protobuf to the receiver, the worker's default batch processor) until drained,
# then SIGTERM. For the traced run it prints the process spans the receiver got against the messages the worker
# took (setup phase included), the distinct message ids among them, and wallet_spans_dropped_total. A last run
# against a receiver that never answers (--stall-messages, default 3,000) prints the spans counted as dropped and
# how long SIGTERM took. Medians of the rounds at the end. Exits non-zero only on errors, never on numbers.
set -euo pipefail
# The servers this script starts stop when it ends, even killed (scripts/lib/stop-with-owner.sh).
export WALLET_OWNER_PID=$$

root="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3
messages=30000
stall_messages=3000
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --messages) messages="$2"; shift 2 ;;
        --stall-messages) stall_messages="$2"; shift 2 ;;
        *) echo "usage: $0 [--rounds R] [--messages N] [--stall-messages N]" >&2; exit 64 ;;
    esac
done

# shellcheck source=lib/prerequisites.sh
source "$root/scripts/lib/prerequisites.sh"
ensure_prerequisites curl python3

export RABBITMQ_PORT="${RABBITMQ_PORT:-5932}"
export RABBITMQ_DATA_DIR="${RABBITMQ_DATA_DIR:-/tmp/rmq-bench-tracing-$RABBITMQ_PORT}"
broker() { "$root/scripts/rabbitmq-local.sh" "$@"; }
export AMQP_URL="amqp://guest:guest@127.0.0.1:$RABBITMQ_PORT/%2f"
work="$(mktemp -d /tmp/benchmark-tracing.XXXXXX)"
receiver_pid=""
worker_pid=""

cleanup() {
    local status=$?
    [ -n "$worker_pid" ] && { kill -KILL "$worker_pid" 2>/dev/null || true; wait "$worker_pid" 2>/dev/null || true; }
    [ -n "$receiver_pid" ] && { kill -TERM "$receiver_pid" 2>/dev/null || true; wait "$receiver_pid" 2>/dev/null || true; }
    broker stop >/dev/null 2>&1 || true
    rm -f "$work"/*.sqlite "$work"/*.sqlite-wal "$work"/*.sqlite-shm
    echo "benchmark-tracing: logs in $work" >&2
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building (release) =="
if [ -n "${WORKER_BIN:-}" ]; then
    worker_bin="$WORKER_BIN"
    echo "worker: $worker_bin (WORKER_BIN, not built here)"
else
    (cd "$root" && swift build -c release --product wallet-worker --scratch-path .build-bench-release 2>&1 | tail -n 1)
    worker_bin="$root/.build-bench-release/release/wallet-worker"
fi
(cd "$root/Benchmarks" && swift build -c release --product worker-load --scratch-path .build-bench 2>&1 | tail -n 1)
load_bin="$root/Benchmarks/.build-bench/release/worker-load"

echo "== broker =="
broker start
broker_pid=$(cat "$RABBITMQ_DATA_DIR/rabbitmq.pid")
"$worker_bin" declare --amqp-url "$AMQP_URL" >"$work/declare.log" 2>&1 || { cat "$work/declare.log" >&2; exit 1; }
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"

# A free loopback port (bound, then closed for the receiver to take).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

# start_receiver [--stall]: a fresh receiver; its counts in $work/counts.json.
start_receiver() {
    receiver_port=$(free_port)
    rm -f "$work/counts.json"
    python3 "$root/scripts/lib/otlp-receiver.py" "$receiver_port" "$work/counts.json" "$@" &
    receiver_pid=$!
    for _ in $(seq 50); do [ -f "$work/counts.json" ] && return 0; sleep 0.1; done
    echo "benchmark-tracing: the receiver did not start" >&2
    exit 1
}
stop_receiver() { kill -TERM "$receiver_pid" 2>/dev/null || true; wait "$receiver_pid" 2>/dev/null || true; receiver_pid=""; }
count() { python3 -c "import json,sys; c=json.load(open('$work/counts.json')); print($1)"; }

# The worker's operations port, from its JSON log line "operations endpoint listening".
ops_port() {
    local log="$1"
    for _ in $(seq 200); do
        port=$(sed -n 's/.*operations endpoint listening.*http:\/\/[^"]*:\([0-9]*\)".*/\1/p' "$log" | head -n 1)
        [ -n "$port" ] && { echo "$port"; return 0; }
        sleep 0.05
    done
    echo "benchmark-tracing: no operations port in $log" >&2
    return 1
}
metric() { curl -sf "http://127.0.0.1:$1/metrics" | awk -v name="$2" '$1 ~ "^"name"({|$)" { s += $NF } END { print s + 0 }'; }

# run NAME ROUND [ENV=VALUE...]: preload, start the worker with the environment given, watch the queue drain,
# scrape its metrics, SIGTERM it; appends "NAME ROUND msg/s cpu_us peak_mib total dropped sigterm_s" to
# $work/results.
run() {
    local name="$1" round="$2"
    shift 2
    "$load_bin" prepare >>"$work/prepare.log"
    "$load_bin" preload --messages "$messages" | tee "$work/preload-last.log" | sed 's/^/  /'
    local total
    total=$(sed -n "s/.* holds \([0-9]*\)$/\1/p" "$work/preload-last.log" | tail -n 1)
    rm -f "$work/store.sqlite"*
    env "$@" "$worker_bin" run --amqp-url "$AMQP_URL" --store "sqlite:$work/store.sqlite" --prefetch 200 \
        --http-port 0 --http-host 127.0.0.1 --log-format json >"$work/$name-$round.log" 2>&1 &
    worker_pid=$!
    local port line
    port=$(ops_port "$work/$name-$round.log")
    if ! line=$("$load_bin" watch --pid "$worker_pid" --broker-pid "$broker_pid" --measured "$messages" --interval 0.05); then
        echo "benchmark-tracing: $name did not drain the queue; its log:" >&2
        tail -n 20 "$work/$name-$round.log" >&2
        exit 1
    fi
    local dropped started ended
    dropped=$(metric "$port" wallet_spans_dropped_total)
    started=$(date +%s.%N)
    kill -TERM "$worker_pid"
    wait "$worker_pid" || true
    ended=$(date +%s.%N)
    worker_pid=""
    echo "$line" | awk -v name="$name" -v round="$round" -v total="$total" -v dropped="$dropped" \
        -v sigterm="$(awk -v a="$started" -v b="$ended" 'BEGIN { print b - a }')" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        m = v["messages"]
        printf "%s %s %.0f %.1f %.1f %d %d %.2f\n", name, round, m / v["window_s"], 1e6 * v["cpu_s"] / m,
            v["peak_kib"] / 1024, total, dropped, sigterm }' | tee -a "$work/results" | awk '{
        printf "  %-8s round %s: %6s msg/s  %6s CPU us/msg  %6s MiB peak  dropped %s  SIGTERM %s s\n",
            $1, $2, $3, $4, $5, $7, $8 }'
}

: >"$work/results"
: >"$work/spans"
tracing_env() {
    echo "OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$receiver_port"
}
for round in $(seq 1 "$rounds"); do
    echo "== round $round/$rounds (load $(cut -d' ' -f1-3 /proc/loadavg)) =="
    run off "$round" WALLET_TRACING_BENCHMARK=off
    start_receiver
    # shellcheck disable=SC2046  # two VAR=value words
    run traced "$round" $(tracing_env)
    sleep 1  # the receiver answers the last export before it is asked for its counts
    total=$(awk -v r="$round" '$1 == "traced" && $2 == r { print $6 }' "$work/results")
    process=$(count 'c["by_kind"].get("process", 0)')
    distinct=$(count 'c["process_message_ids"]')
    duplicates=$(count 'c["process_duplicates"]')
    spans=$(count 'c["spans"]')
    requests=$(count 'c["requests"]')
    stop_receiver
    echo "$round $total $process $distinct $duplicates $spans $requests" >>"$work/spans"
    echo "  traced   round $round: $process process spans for $total messages ($distinct message ids, $duplicates" \
        "repeated), $spans spans in $requests exports"
done

echo "== a collector that never answers ($stall_messages messages) =="
messages_saved="$messages"
messages="$stall_messages"
start_receiver --stall
# shellcheck disable=SC2046
run stalled 1 $(tracing_env)
stop_receiver
messages="$messages_saved"

median() { sort -g | awk -v format="${1:-%.1f}" '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf format "\n", m }'; }
column_of() { awk -v name="$1" -v col="$2" '$1 == name { print $col }' "$work/results" | median "$3"; }
echo "== medians of $rounds rounds, $messages measured notifications each (load now $(cut -d' ' -f1-3 /proc/loadavg)) =="
printf '  %-8s %8s %12s %10s %9s\n' "" "msg/s" "CPU us/msg" "peak MiB" "dropped"
for name in off traced; do
    printf '  %-8s %8s %12s %10s %9s\n' "$name" "$(column_of "$name" 3 %.0f)" "$(column_of "$name" 4 %.1f)" \
        "$(column_of "$name" 5 %.1f)" "$(column_of "$name" 7 %.0f)"
done
echo "  process spans received per message taken (every round): $(awk '{ printf "%s%d/%d", separator, $3, $2; separator = ", " }' "$work/spans")"
echo "  rounds with exactly one process span per message, 0 dropped: $(awk '$3 == $2 && $4 == $2 && $5 == 0 { n++ } END { print n + 0 }' "$work/spans") of $rounds"
awk '$1 == "stalled" { printf "  stalled collector: %d spans counted as dropped (wallet_spans_dropped_total), SIGTERM took %s s\n", $7, $8 }' "$work/results"
