#!/usr/bin/env bash
# End-to-end benchmark of the worker against a plain librabbitmq consume-publish-ack loop (Benchmarks/JOURNAL.md,
# "End-to-end benchmark"; today's figures in Benchmarks/README.md). One command on a fresh machine:
#
#   scripts/benchmark-worker.sh                  # 3 rounds of 100,000 notifications per contender
#   scripts/benchmark-worker.sh --rounds 5 --messages 50000
#   scripts/benchmark-worker.sh --replicas "1 3" # PostgreSQL with 1 and 3 replicas (default "1 2 3"; "none": skip)
#   scripts/benchmark-worker.sh --rounds 1 --messages 2000 --no-setup   # a quick check of the plumbing only
#   WORKER_BIN=/path/to/wallet-worker scripts/benchmark-worker.sh         # another build of the worker, not built here
#   COMPARE_WORKER_BIN=/path/to/other/wallet-worker scripts/benchmark-worker.sh --replicas none
#       # also that build, as worker-cmp and worker-mem-cmp, alternated with this one's in every round (and, for each
#       # replica count R of --replicas, as pg-R-cmp: R replicas on PostgreSQL, beside pg-R)
#   scripts/benchmark-worker.sh --tracing         # also worker-traced: tracing on, exporting to a local receiver
#   scripts/benchmark-worker.sh --floor-store-us 45 --floor-store-bytes 9400 # the floor's store work per notification
#
# It starts a private broker (scripts/rabbitmq-local.sh, port RABBITMQ_PORT, default 5752) and a private PostgreSQL
# (scripts/postgres-local.sh, port POSTGRES_PORT, default 5762), builds the worker in release, the C baseline and
# the preload tool, then, per round and interleaved: preload -> C baseline until the work queue is drained ->
# preload -> the C baseline publishing as many results per notification as the worker (baseline2) until drained ->
# preload -> worker (SQLite) until drained -> preload -> worker with the memory store (worker-mem) until drained
# -> preload -> the floor: baseline2 doing the SQLite store's measured work too, overlapped as the worker is, until
# drained -> for each replica count R: preload -> R worker processes on one fresh PostgreSQL database until drained. Each preload publishes the setup phase (45,250 card installs, state changes
# and histories) followed by the N measured notifications; the measured window starts when only the N measured
# messages are left ready in the work queue (the setup phase has been delivered) and ends when none is ready.
# CPU time and throughput are of that window (for R replicas, the CPU of all R processes; PostgreSQL's own CPU, the
# server and its backends, in a column of its own), and the broker's (RabbitMQ's Erlang VM) in another: what each
# contender's traffic costs the broker; peak RSS is VmHWM at its end (summed over the replicas).
# Prints a table per round, the medians (CPU, heap allocations and bytes written per message among them) and issue
# 27's targets against them, then issue 38's; exits non-zero only on errors (never on targets).
#
# Issue 38's contenders, each run beside the one it is compared with in every round: after it in odd rounds, before
# it in even ones (the second of a pair may pay for the first's leftovers: a checkpoint, the page cache):
# - pg-R-cmp (COMPARE_WORKER_BIN set): the comparison build as R replicas on a fresh PostgreSQL database, exactly as
#   pg-R is run (with --no-declare, as worker-cmp), for each R of --replicas. Targets: pg-1's worker CPU and
#   PostgreSQL's CPU per message each at most half of pg-1-cmp's (medians of the per-round ratios); for every R the
#   throughput ratio pg-R / pg-R-cmp is printed beside them (issue 38 asks for 1, 2 and 3 replicas before and after).
#   A PostgreSQL round is marked when autovacuum ran in its window (about 15 µs more of PostgreSQL's CPU per message
#   then, whatever the build), and the pg-1 ratios are printed again over the rounds where neither window had it.
# - worker-traced (--tracing; off by default): worker exactly, with tracing on: every span sampled (the default
#   sampler parentbased_always_on, made explicit; the notifications' traceparents are sampled ones) and exported over
#   OTLP/HTTP protobuf to scripts/lib/otlp-receiver.py, one receiver for the whole run on a free loopback port (it
#   answers every export; its CPU is not the worker's but it shares the machine). Target: worker-traced CPU per
#   message at most 1.3 times worker's (median of the per-round ratios); the process spans the receiver counted are
#   printed against the messages the worker took (setup phase included), as scripts/benchmark-tracing.sh does.
set -euo pipefail
# The servers this script starts stop when it ends, even killed (scripts/lib/stop-with-owner.sh).
export WALLET_OWNER_PID=$$

root="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3
messages=100000
setup_flag=""
replica_counts="1 2 3"
# The floor contender's store work per notification (Benchmarks/JOURNAL.md, "Issue 14: the floor of the throughput target"):
# the CPU of routing and the SQLite store (store-benchmark) less what the C loop's own writes of the same bytes cost,
# and the bytes the SQLite worker writes (WAL frames and checkpoints).
floor_store_us=45
floor_store_bytes=9400
tracing=false
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --messages) messages="$2"; shift 2 ;;
        --replicas) replica_counts="$2"; shift 2 ;;
        --floor-store-us) floor_store_us="$2"; shift 2 ;;
        --floor-store-bytes) floor_store_bytes="$2"; shift 2 ;;
        # Without the setup phase most card references are unknown: not the benchmark, a check of the script.
        --no-setup) setup_flag="--no-setup"; shift ;;
        --tracing) tracing=true; shift ;;
        *) echo "usage: $0 [--rounds R] [--messages N] [--replicas \"1 2 3\"|none] [--no-setup]" \
               "[--floor-store-us US] [--floor-store-bytes BYTES] [--tracing]" >&2; exit 2 ;;
    esac
done
[ "$replica_counts" = none ] && replica_counts=""
for count in $replica_counts; do
    case "$count" in
        ''|*[!0-9]*|0) echo "benchmark-worker: --replicas takes positive counts, e.g. \"1 2 3\", or none" >&2; exit 2 ;;
    esac
done
# pg-R-cmp: the comparison build as R replicas on PostgreSQL, when both are asked for.
pg_compare=false
if [ -n "${COMPARE_WORKER_BIN:-}" ] && [ -n "$replica_counts" ]; then pg_compare=true; fi

# shellcheck source=lib/prerequisites.sh
source "$root/scripts/lib/prerequisites.sh"
if $tracing; then ensure_prerequisites build-essential python3; else ensure_prerequisites build-essential; fi

export RABBITMQ_PORT="${RABBITMQ_PORT:-5752}"
export RABBITMQ_DATA_DIR="${RABBITMQ_DATA_DIR:-/tmp/rmq-bench}"
broker() { "$root/scripts/rabbitmq-local.sh" "$@"; }
export AMQP_URL="amqp://guest:guest@127.0.0.1:$RABBITMQ_PORT/%2f"
export POSTGRES_PORT="${POSTGRES_PORT:-5762}"
export POSTGRES_DATA_DIR="${POSTGRES_DATA_DIR:-/tmp/pg-bench}"
postgres() { "$root/scripts/postgres-local.sh" "$@"; }
work="$(mktemp -d /tmp/benchmark-worker.XXXXXX)"
contender_pids=()
postgres_started=false
receiver_pid=""

stop_contenders() {
    local pid
    for pid in "${contender_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${contender_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    contender_pids=()
}

cleanup() {
    local status=$?
    stop_contenders
    if [ -n "$receiver_pid" ]; then
        kill -TERM "$receiver_pid" 2>/dev/null || true
        wait "$receiver_pid" 2>/dev/null || true
    fi
    broker stop >/dev/null 2>&1 || true
    if $postgres_started; then postgres stop >/dev/null 2>&1 || true; fi
    rm -f "$work"/*.sqlite "$work"/*.sqlite-wal "$work"/*.sqlite-shm "$work"/floor-store.bin
    echo "benchmark-worker: logs in $work" >&2
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build ---------------------------------------------------------------------------------------------------
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
read -ra rabbitmq_flags < <(pkg-config --cflags --libs librabbitmq)
cc -O2 -o "$work/consume_publish_ack" "$root/Benchmarks/baseline/consume_publish_ack.c" "${rabbitmq_flags[@]}"
baseline_bin="$work/consume_publish_ack"
# Every contender runs with the allocation-counting preload (Benchmarks/alloc-count): its heap allocations in the
# measured window, whole process, every thread. Costs two relaxed atomic adds per allocation.
cc -O2 -shared -fPIC -o "$work/alloc-count.so" "$root/Benchmarks/alloc-count/alloc_count_preload.c"
export BENCH_ALLOC_COUNT_DIR="$work/allocations"
mkdir -p "$BENCH_ALLOC_COUNT_DIR"

# --- broker and topology -------------------------------------------------------------------------------------
echo "== broker =="
# BENCH_BROKER_NO_BUSY_WAIT=1 runs the broker's Erlang VM without busy-waiting schedulers: their spinning counts
# as the broker's CPU and, on a machine the contenders share, takes cores from them. The default is RabbitMQ's (as
# in production, where the broker has hosts of its own); the C loops, which wait for each batch's confirms before
# the next, are faster with the spinning (its wake-ups are quicker), the worker slower (it loses CPU to it).
if [ "${BENCH_BROKER_NO_BUSY_WAIT:-0}" = 1 ]; then
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+sbwt none +sbwtdcpu none +sbwtdio none"
fi
broker start
broker_pid=$(cat "$RABBITMQ_DATA_DIR/rabbitmq.pid")
if [ -n "$replica_counts" ]; then
    echo "== PostgreSQL =="
    postgres start
    postgres_started=true
    postgres_pid=$(head -n 1 "$POSTGRES_DATA_DIR/cluster/postmaster.pid")
    postgres_url_base="$(postgres url | sed 's#/wallet$##')"
fi
"$worker_bin" declare --amqp-url "$AMQP_URL" >"$work/declare.log" 2>&1 || { cat "$work/declare.log" >&2; exit 1; }
# The baseline publishes results of the mean size of the worker's results for this mix.
"$load_bin" result-size --messages "$messages" >"$work/result-size.txt"
body_bytes=$(head -n 1 "$work/result-size.txt")
results_per_notification=$(sed -n 's/^results per notification \([0-9.]*\),.*/\1/p' "$work/result-size.txt")
echo "worker results for the mix: $(sed -n 2p "$work/result-size.txt")"
echo "baseline result body: $body_bytes bytes to wallet.transactions, routing key transactions.records;" \
    "baseline2: $results_per_notification results per notification"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"

# --- OTLP receiver (--tracing) -------------------------------------------------------------------------------
# One receiver for the whole run, on a free loopback port (bound, then closed for the receiver to take); its counts
# (cumulative: requests, spans, spans by kind, distinct process message ids) in $work/otlp-counts.json.
if $tracing; then
    receiver_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
    python3 "$root/scripts/lib/otlp-receiver.py" "$receiver_port" "$work/otlp-counts.json" >"$work/otlp-receiver.log" 2>&1 &
    receiver_pid=$!
    for _ in $(seq 50); do [ -f "$work/otlp-counts.json" ] && break; sleep 0.1; done
    if [ ! -f "$work/otlp-counts.json" ]; then
        echo "benchmark-worker: the OTLP receiver did not start; its log:" >&2
        cat "$work/otlp-receiver.log" >&2
        exit 1
    fi
    echo "OTLP receiver: http://127.0.0.1:$receiver_port (scripts/lib/otlp-receiver.py)"
    # What scripts/benchmark-tracing.sh sets, with the protocol and the sampler (the worker's defaults) spelled out.
    tracing_env=(OTEL_TRACES_EXPORTER=otlp "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$receiver_port"
        OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_TRACES_SAMPLER=parentbased_always_on)
fi
# receiver_counts: "process spans requests distinct_process_ids" so far.
receiver_counts() {
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["by_kind"].get("process", 0), c["spans"], c["requests"], c["process_message_ids"])' "$work/otlp-counts.json"
}

# --- rounds --------------------------------------------------------------------------------------------------
# run_contender NAME ROUND REPLICAS COMMAND...: preloads, starts REPLICAS processes of COMMAND, watches the queue
# drain, stops them; appends "NAME ROUND msg/s cpu_us_per_msg peak_mib window_s server_cpu_us_per_msg" to
# $work/results (the server column is PostgreSQL's CPU, "-" for contenders without it), then the broker's CPU,
# then the contender's read and write system calls and bytes per message (/proc/PID/io: files, and sockets read
# or written with read/write; librabbitmq's send/recv are not counted there), then the broker's socket counters
# for the contender's connections per message of the whole run (setup phase included): packets received and sent,
# bytes received and sent, then its heap allocations per message in the window (-1 when not counted).
run_contender() {
    local name="$1" round="$2" replicas="$3"
    shift 3
    "$load_bin" prepare >>"$work/prepare.log"
    "$load_bin" preload --messages "$messages" $setup_flag | tee "$work/preload-last.log" | sed 's/^/  /'
    cat "$work/preload-last.log" >>"$work/preload.log"
    # Everything the contender will take: the setup phase and the measured notifications.
    local total
    total=$(sed -n "s/.* holds \([0-9]*\)$/\1/p" "$work/preload-last.log" | tail -n 1)
    local replica server_flag=""
    for replica in $(seq 1 "$replicas"); do
        LD_PRELOAD="$work/alloc-count.so" "$@" >"$work/$name-$round-$replica.log" 2>&1 &
        contender_pids+=($!)
    done
    [[ "$name" == pg-* ]] && server_flag="--server-pid $postgres_pid"
    local line pids
    pids=$(IFS=,; echo "${contender_pids[*]}")
    if ! line=$("$load_bin" watch --pid "$pids" $server_flag --broker-pid "$broker_pid" --measured "$messages" \
        --interval 0.05); then
        echo "benchmark-worker: $name did not drain the queue; its log:" >&2
        tail -n 20 "$work/$name-$round-1.log" >&2
        exit 1
    fi
    window_ended_at=$(date +%s.%N)
    window_seconds=$(echo "$line" | sed -n 's/.*window_s=\([0-9.]*\).*/\1/p')
    # The contender's connections are the only ones left open (preload and watch have closed theirs).
    local traffic
    traffic=$(broker ctl list_connections --quiet --no-table-headers recv_cnt send_cnt recv_oct send_oct |
        awk -v total="$total" '{ r += $1; s += $2; ro += $3; so += $4 }
            END { printf "%.3f %.3f %.0f %.0f", r / total, s / total, ro / total, so / total }')
    stop_contenders
    # window_s=W messages=M cpu_s=C peak_kib=K server_cpu_s=S broker_cpu_s=B read_calls=… read_bytes=…
    # write_calls=… write_bytes=… allocations=…
    echo "$line" | awk -v name="$name" -v round="$round" -v traffic="$traffic" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        m = v["messages"]
        server = name ~ /^pg-/ ? sprintf("%.1f", 1e6 * v["server_cpu_s"] / m) : "-"
        allocations = v["allocations"] == "" || v["allocations"] < 0 ? -1 : v["allocations"] / m
        printf "%s %s %.0f %.1f %.1f %.3f %s %.1f %.3f %.0f %.3f %.0f %s %.1f\n", name, round, m / v["window_s"],
            1e6 * v["cpu_s"] / m, v["peak_kib"] / 1024, v["window_s"], server, 1e6 * v["broker_cpu_s"] / m,
            v["read_calls"] / m, v["read_bytes"] / m, v["write_calls"] / m, v["write_bytes"] / m, traffic, allocations
    }' | tee -a "$work/results" | awk '{
        printf "  %-10s round %s: %8s msg/s  %6s CPU us/msg  %7s MiB peak  %6s allocs/msg  broker %6s CPU us/msg  (%s s)",
            $1, $2, $3, $4, $5, $17, $8, $6
        if ($7 != "-") printf "  PostgreSQL %s CPU us/msg", $7
        printf "\n" }'
}

# A fresh database for one PostgreSQL contender (the workers migrate it), dropped afterwards by drop_database; one
# an interrupted run left behind in the kept data directory is dropped first.
drop_database() { postgres psql -qc "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null; }
create_database() {
    drop_database "$1"
    postgres psql -qc "CREATE DATABASE $1" >/dev/null
}

# The contenders compared in pairs, each its own function so a round can run a pair in either order.
run_worker() {
    rm -f "$work/store-$1.sqlite"*
    run_contender worker "$1" 1 "$worker_bin" run --amqp-url "$AMQP_URL" --store "sqlite:$work/store-$1.sqlite" \
        --prefetch 200 --http-port off
}
run_worker_traced() {
    local round=$1 taken process spans requests process_before spans_before requests_before
    rm -f "$work/store-traced-$round.sqlite"*
    read -r process_before spans_before requests_before _ < <(receiver_counts)
    run_contender worker-traced "$round" 1 env "${tracing_env[@]}" "$worker_bin" run --amqp-url "$AMQP_URL" \
        --store "sqlite:$work/store-traced-$round.sqlite" --prefetch 200 --http-port off
    # Everything the worker took (setup phase included) should arrive as one process span each: the worker
    # exports what is left when SIGTERM stops it; give the receiver up to 5 s to count the last export.
    taken=$(sed -n "s/.* holds \([0-9]*\)$/\1/p" "$work/preload-last.log" | tail -n 1)
    for _ in $(seq 50); do
        read -r process spans requests _ < <(receiver_counts)
        [ $((process - process_before)) -ge "$taken" ] && break
        sleep 0.1
    done
    echo "$round $taken $((process - process_before)) $((spans - spans_before)) $((requests - requests_before))" \
        >>"$work/spans"
    echo "  worker-traced round $round: $((process - process_before)) process spans received for $taken messages" \
        "taken, $((spans - spans_before)) spans in $((requests - requests_before)) exports"
}
# note_autovacuum NAME ROUND DATABASE: whether autovacuum (a vacuum or an analyze of one of the contender's tables)
# ended in its measured window or was still running after it. Its CPU is PostgreSQL's, so it lands in the window's
# PostgreSQL CPU per message: about 15 µs more in such a window, on the same build (an A/A run, 2026-11-29: 2 of 8
# windows; none with autovacuum off). Appended to the results line (column 18: 1 or 0).
note_autovacuum() {
    local ran
    ran=$(postgres psql -d "$3" -tAc "
        SELECT (SELECT count(*) FROM pg_stat_user_tables
                WHERE extract(epoch FROM greatest(last_autovacuum, last_autoanalyze))
                      > $window_ended_at - $window_seconds)
             + (SELECT count(*) FROM pg_stat_activity
                WHERE backend_type = 'autovacuum worker' AND datname = current_database())")
    [ "${ran:-0}" -gt 0 ] && ran=1 || ran=0
    awk -v name="$1" -v round="$2" -v ran="$ran" '$1 == name && $2 == round { $0 = $0 " " ran } { print }' \
        "$work/results" >"$work/results.new" && mv "$work/results.new" "$work/results"
    [ "$ran" = 1 ] && echo "  $1 round $2: autovacuum ran in its window (its PostgreSQL CPU includes it)"
    return 0
}
run_pg() {
    local database="bench_r${1}_x${2}"
    create_database "$database"
    run_contender "pg-$2" "$1" "$2" "$worker_bin" run --amqp-url "$AMQP_URL" \
        --store "$postgres_url_base/$database" --prefetch 200 --http-port off
    note_autovacuum "pg-$2" "$1" "$database"
    drop_database "$database"
}
run_pg_cmp() {
    local database="bench_r${1}_x${2}_cmp"
    create_database "$database"
    run_contender "pg-$2-cmp" "$1" "$2" "$COMPARE_WORKER_BIN" run --amqp-url "$AMQP_URL" --no-declare \
        --store "$postgres_url_base/$database" --prefetch 200 --http-port off
    note_autovacuum "pg-$2-cmp" "$1" "$database"
    drop_database "$database"
}

: >"$work/results"
: >"$work/spans"
for round in $(seq 1 "$rounds"); do
    echo "== round $round/$rounds (load $(cut -d' ' -f1-3 /proc/loadavg)) =="
    run_contender baseline "$round" 1 "$baseline_bin" --port "$RABBITMQ_PORT" --prefetch 200 --body-bytes "$body_bytes" \
        --idle-exit 30
    run_contender baseline2 "$round" 1 "$baseline_bin" --port "$RABBITMQ_PORT" --prefetch 200 --body-bytes "$body_bytes" \
        --results-per-delivery "$results_per_notification" --idle-exit 30
    # The second of a pair may pay for the first's leftovers (a checkpoint, the page cache): odd rounds run worker
    # before worker-traced and pg-R before pg-R-cmp, even rounds the other way round.
    if $tracing && [ $((round % 2)) = 0 ]; then
        run_worker_traced "$round"
        run_worker "$round"
    else
        run_worker "$round"
        if $tracing; then run_worker_traced "$round"; fi
    fi
    run_contender worker-mem "$round" 1 "$worker_bin" run --amqp-url "$AMQP_URL" --store memory \
        --prefetch 200 --http-port off
    if [ -n "${COMPARE_WORKER_BIN:-}" ]; then
        rm -f "$work/store-cmp-$round.sqlite"*
        # --no-declare: the topology is this build's (an earlier build may declare some queue with other arguments).
        run_contender worker-cmp "$round" 1 "$COMPARE_WORKER_BIN" run --amqp-url "$AMQP_URL" --no-declare \
            --store "sqlite:$work/store-cmp-$round.sqlite" --prefetch 200 --http-port off
        run_contender worker-mem-cmp "$round" 1 "$COMPARE_WORKER_BIN" run --amqp-url "$AMQP_URL" --no-declare \
            --store memory --prefetch 200 --http-port off
    fi
    run_contender floor "$round" 1 "$baseline_bin" --port "$RABBITMQ_PORT" --prefetch 200 --body-bytes "$body_bytes" \
        --results-per-delivery "$results_per_notification" --idle-exit 30 --overlap \
        --store-work-us "$floor_store_us" --store-file "$work/floor-store.bin" --store-bytes "$floor_store_bytes"
    rm -f "$work/floor-store.bin"
    for count in $replica_counts; do
        if $pg_compare; then
            if [ $((round % 2)) = 0 ]; then
                run_pg_cmp "$round" "$count"
                run_pg "$round" "$count"
            else
                run_pg "$round" "$count"
                run_pg_cmp "$round" "$count"
            fi
        else
            run_pg "$round" "$count"
        fi
    done
done

# --- medians -------------------------------------------------------------------------------------------------
# median [FORMAT]: the median of the numbers on stdin (the mean of the middle two for an even count); "n/a" when
# there are none (a contender that did not run), never 0, so no target reads as met without data.
median() { sort -g | awk -v format="${1:-%.1f}" '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit } m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf format "\n", m }'; }
column_of() { awk -v name="$1" -v col="$2" '$1 == name { print $col }' "$work/results" | median "$3"; }
echo "== medians of $rounds rounds, $messages notifications each (load now $(cut -d' ' -f1-3 /proc/loadavg)) =="
# column_ratio_of NAME BASE COLUMN [clean]: the per-round ratio of a results column (3: msg/s, 4: CPU us/msg, 7:
# PostgreSQL's CPU us/msg), NAME's over BASE's in the same round, then their median; with "clean", over the rounds
# where autovacuum ran in neither window (column 18).
column_ratio_of() {
    awk -v name="$1" -v base="$2" -v col="$3" -v clean="${4:-}" '
        $1 == base { b[$2] = $col; bv[$2] = $18 } $1 == name { w[$2] = $col; wv[$2] = $18 }
        END { for (r in w) if (b[r] > 0 && (clean == "" || (bv[r] != 1 && wv[r] != 1))) printf "%.3f\n", w[r] / b[r] }' \
        "$work/results" | median %.3f
}
# clean_rounds_of NAME BASE: "n of N rounds", n the rounds where autovacuum ran in neither window.
clean_rounds_of() {
    awk -v name="$1" -v base="$2" '$1 == base { bv[$2] = $18 } $1 == name { n++; if ($18 != 1) w[$2] = 1 }
        END { c = 0; for (r in w) if (bv[r] != 1) c++; printf "%d of %d rounds", c, n }' "$work/results"
}
# clean_windows_of NAME: the median PostgreSQL CPU per message of NAME's windows without autovacuum, then "(n of N)".
# NAME is matched whole as an awk regular expression: `pg-[0-9]+` pools every replica count.
clean_windows_of() {
    local n total
    n=$(awk -v name="^$1\$" '$1 ~ name && $18 != 1' "$work/results" | wc -l)
    total=$(awk -v name="^$1\$" '$1 ~ name' "$work/results" | wc -l)
    echo "$(clean_median_of "$1") ($n of $total)"
}
# clean_median_of NAME: that median alone.
clean_median_of() { awk -v name="^$1\$" '$1 ~ name && $18 != 1 { print $7 }' "$work/results" | median %.1f; }
# ratio_of NAME [BASE]: the throughput ratio (BASE: baseline).
ratio_of() { column_ratio_of "$1" "${2:-baseline}" 3; }
printf '  %-14s %10s %12s %10s %14s %18s %11s %11s\n' "" "msg/s" "CPU us/msg" "peak MiB" "broker us/msg" \
    "PostgreSQL us/msg" "/baseline" "/baseline2"
names="baseline baseline2 worker"
$tracing && names="$names worker-traced"
names="$names worker-mem"
[ -n "${COMPARE_WORKER_BIN:-}" ] && names="$names worker-cmp worker-mem-cmp"
names="$names floor"
for count in $replica_counts; do
    names="$names pg-$count"
    $pg_compare && names="$names pg-$count-cmp"
done
for name in $names; do
    server="-"
    [[ "$name" == pg-* ]] && server=$(column_of "$name" 7 %.1f)
    ratio="-" ratio2="-"
    [ "$name" != baseline ] && ratio=$(ratio_of "$name")
    [[ "$name" != baseline* ]] && ratio2=$(ratio_of "$name" baseline2)
    printf '  %-14s %10s %12s %10s %14s %18s %11s %11s\n' "$name" "$(column_of "$name" 3 %.0f)" \
        "$(column_of "$name" 4 %.1f)" "$(column_of "$name" 5 %.1f)" "$(column_of "$name" 8 %.1f)" "$server" \
        "$ratio" "$ratio2"
done
echo "  worker = one replica, SQLite store; worker-mem = the same with --store memory;"
echo "  floor = baseline2 doing the SQLite store's work and nothing else: $floor_store_us us of CPU and"
echo "  $floor_store_bytes bytes written per notification, one fdatasync per batch, the next batch stored while"
echo "  the previous one's confirms are on their way (as the worker does);"
echo "  pg-R = R replicas on one PostgreSQL (CPU and peak summed over the R"
echo "  processes; PostgreSQL's server and backends apart). $(nproc) CPUs: replicas beyond that compete with the"
echo "  broker and PostgreSQL for them."
$tracing && echo "  worker-traced = worker with tracing on, every span exported (OTLP/HTTP protobuf) to a local receiver;"
$pg_compare && echo "  pg-R-cmp = pg-R with COMPARE_WORKER_BIN's build."
# median_table "TITLE|TITLE|…" "COLUMN FORMAT" …: a row per contender, each cell the median of a results column.
median_table() {
    local titles name spec
    IFS='|' read -ra titles <<<"$1"
    shift
    printf '  %-14s' ""
    printf ' %13s' "${titles[@]}"
    printf '\n'
    for name in $names; do
        printf '  %-14s' "$name"
        # shellcheck disable=SC2086  # "COLUMN FORMAT" is two arguments of column_of
        for spec in "$@"; do printf ' %13s' "$(column_of "$name" $spec)"; done
        printf '\n'
    done
}
echo "  traffic with the broker per message, whole run (the broker's socket counters of the contender's connections):"
median_table "packets in|packets out|bytes in|bytes out" "13 %.3f" "14 %.3f" "15 %.0f" "16 %.0f"
echo "  client file I/O per message (/proc/PID/io: read and write system calls and bytes; not send/recv):"
median_table "reads|read bytes|writes|write bytes" "9 %.3f" "10 %.0f" "11 %.3f" "12 %.0f"
echo "  the contender's own cost per message in the window: CPU (user + system, every thread), heap allocations"
echo "  (malloc, calloc, realloc, aligned; Benchmarks/alloc-count's preload) and bytes written to files and sockets"
echo "  by write calls (/proc/PID/io wchar: WAL frames and checkpoints for SQLite; librabbitmq's send is not counted):"
median_table "CPU us|allocations|bytes written" "4 %.1f" "17 %.1f" "12 %.0f"
echo "  baseline2 = the C loop publishing $results_per_notification results per notification, as the worker does:"
echo "  the same work for the broker, none in the client."
echo "  throughput ratio worker/baseline (median of per-round ratios): $(ratio_of worker)"
echo "  throughput ratio worker/baseline2: $(ratio_of worker baseline2);" \
    "baseline2/baseline: $(ratio_of baseline2) (what the extra results cost the broker)"

if [ -n "${COMPARE_WORKER_BIN:-}" ]; then
    echo "== this build against $COMPARE_WORKER_BIN (CPU per message, median of per-round ratios; below 1 is cheaper) =="
    echo "  worker / worker-cmp (SQLite): $(column_ratio_of worker worker-cmp 4)"
    echo "  worker-mem / worker-mem-cmp (memory store): $(column_ratio_of worker-mem worker-mem-cmp 4)"
fi

# --- targets (issue 27) --------------------------------------------------------------------------------------
# target LABEL VALUE OP LIMIT [WIDTH]: one line, "met" or "NOT MET"; the label padded to WIDTH (default 44).
target() {
    awk -v label="$1" -v value="$2" -v op="$3" -v limit="$4" -v width="${5:-44}" 'BEGIN {
        met = (op == ">=") ? value >= limit : value <= limit
        verdict = (value == "n/a" || value == "") ? "no data" : (met ? "met" : "NOT MET")
        printf "  %-" width "s %9s  (target %s %s)  %s\n", label, value, op, limit, verdict }'
}
echo "== targets (medians above; issue 27) =="
target "throughput worker / baseline2 (SQLite)" "$(ratio_of worker baseline2)" ">=" 1.0
target "worker CPU us/message (SQLite)" "$(column_of worker 4 %.1f)" "<=" 25
target "worker CPU us/message (memory store)" "$(column_of worker-mem 4 %.1f)" "<=" 18
target "worker allocations/message (SQLite)" "$(column_of worker 17 %.1f)" "<=" 25
target "worker allocations/message (memory store)" "$(column_of worker-mem 17 %.1f)" "<=" 25
target "worker bytes written/message (SQLite)" "$(column_of worker 12 %.0f)" "<=" 2500
target "worker peak RSS MiB (SQLite)" "$(column_of worker 5 %.1f)" "<=" 64
echo "  the throughput target's floor: floor / baseline2 = $(ratio_of floor baseline2) (the C loop given only the"
echo "  SQLite store's work); worker / floor = $(ratio_of worker floor) (what the worker's own overhead costs)"

# --- targets (issue 38) --------------------------------------------------------------------------------------
echo "== targets (issue 38) =="
if [[ " $replica_counts " == *" 1 "* ]]; then
    echo "  medians, PostgreSQL, one replica: pg-1 worker $(column_of pg-1 4 %.1f) CPU us/msg," \
        "PostgreSQL $(column_of pg-1 7 %.1f) CPU us/msg"
    if $pg_compare; then
        echo "  medians, PostgreSQL, one replica: pg-1-cmp worker $(column_of pg-1-cmp 4 %.1f) CPU us/msg," \
            "PostgreSQL $(column_of pg-1-cmp 7 %.1f) CPU us/msg ($COMPARE_WORKER_BIN)"
        target "pg-1 worker CPU / pg-1-cmp worker CPU (median of per-round ratios)" \
            "$(column_ratio_of pg-1 pg-1-cmp 4)" "<=" 0.5 74
        target "pg-1 PostgreSQL CPU / pg-1-cmp PostgreSQL CPU (median of per-round ratios)" \
            "$(column_ratio_of pg-1 pg-1-cmp 7)" "<=" 0.5 74
        echo "  the same over the rounds where autovacuum ran in neither window: worker" \
            "$(column_ratio_of pg-1 pg-1-cmp 4 clean), PostgreSQL $(column_ratio_of pg-1 pg-1-cmp 7 clean)" \
            "($(clean_rounds_of pg-1 pg-1-cmp))"
        echo "  PostgreSQL CPU us/msg in the windows without autovacuum: pg-1 $(clean_windows_of pg-1)," \
            "pg-1-cmp $(clean_windows_of pg-1-cmp)"
        # The server's work per message hardly depends on the replica count: pooled, more windows are clean.
        pooled=$(clean_median_of 'pg-[0-9]+')
        pooled_cmp=$(clean_median_of 'pg-[0-9]+-cmp')
        echo "  the same, every replica count pooled: pg-R $(clean_windows_of 'pg-[0-9]+')," \
            "pg-R-cmp $(clean_windows_of 'pg-[0-9]+-cmp'), ratio of the medians" \
            "$(awk -v a="$pooled" -v b="$pooled_cmp" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "n/a" }')"
    else
        echo "  the half targets (pg-1 worker CPU and PostgreSQL CPU / the comparison build's <= 0.5) need"
        echo "  COMPARE_WORKER_BIN: the comparison build, run as pg-1-cmp"
    fi
else
    echo "  the PostgreSQL half targets need --replicas with 1 (and COMPARE_WORKER_BIN: the comparison build)"
fi
if $pg_compare; then
    for count in $replica_counts; do
        echo "  $count replica(s) on one PostgreSQL: pg-$count $(column_of "pg-$count" 3 %.0f) msg/s," \
            "pg-$count-cmp $(column_of "pg-$count-cmp" 3 %.0f) (medians); per-round throughput ratio" \
            "$(column_ratio_of "pg-$count" "pg-$count-cmp" 3), PostgreSQL CPU ratio" \
            "$(column_ratio_of "pg-$count" "pg-$count-cmp" 7)"
    done
fi
if $tracing; then
    echo "  medians: worker-traced $(column_of worker-traced 4 %.1f) CPU us/msg, worker $(column_of worker 4 %.1f)"
    target "worker-traced CPU / worker CPU (median of per-round ratios)" \
        "$(column_ratio_of worker-traced worker 4)" "<=" 1.3 74
    echo "  process spans received per message taken (every round): $(awk '{ printf "%s%d/%d", separator, $3, $2; separator = ", " }' "$work/spans")"
    read -r _ _ _ distinct < <(receiver_counts)
    # The rounds publish the same message ids: a duplicate in a round past the first cannot be told from a repeat.
    echo "  rounds with as many process spans as messages taken: $(awk '$3 == $2 { n++ } END { print n + 0 }' "$work/spans")" \
        "of $rounds; distinct message ids over the run: $distinct (every round's the same)"
else
    echo "  the tracing target (worker-traced CPU / worker CPU <= 1.3) needs --tracing"
fi

# --- floors (issue 27) ---------------------------------------------------------------------------------------
# What each target out of reach cannot go below on this machine, measured now without the broker: the routing core
# alone (routing-benchmark), routing with each store (store-benchmark), and what the SQLite store's bytes are made of
# (store-benchmark --pages: the WAL's frames by table and index). BENCH_NO_FLOORS=1 skips it.
if [ "${BENCH_NO_FLOORS:-0}" != 1 ]; then
    echo "== floors, measured now (no broker; Benchmarks/README.md, \"Issue 27\") =="
    for product in routing-benchmark store-benchmark; do
        (cd "$root/Benchmarks" && swift build -c release --product "$product" --scratch-path .build-bench 2>&1 |
            tail -n 1) >&2
    done
    bench_bin="$root/Benchmarks/.build-bench/release"
    routing_line=$("$bench_bin/routing-benchmark" --messages 50000 --runs 3 | grep 'heap allocations' || true)
    routing_allocations=$(echo "$routing_line" | sed -n 's/.*heap allocations: \([0-9.]*\) per notification.*/\1/p')
    store_cpu() { "$bench_bin/store-benchmark" --messages 20000 --batch 200 --store "$1" |
        sed -n 's/.*: \([0-9.]*\) CPU µs\/msg.*/\1/p'; }
    memory_cpu=$(store_cpu memory)
    sqlite_cpu=$(store_cpu sqlite)
    baseline2_cpu=$(column_of baseline2 4 %.1f)
    baseline2_allocations=$(column_of baseline2 17 %.1f)
    awk -v c="$baseline2_cpu" -v m="$memory_cpu" -v s="$sqlite_cpu" -v a="$baseline2_allocations" \
        -v r="$routing_allocations" 'BEGIN {
        printf "  CPU, memory store: the C loop %.1f + routing with the memory store %.1f = %.1f us/message\n", c, m, c + m
        printf "  CPU, SQLite: the C loop %.1f + routing with the SQLite store %.1f = %.1f us/message\n", c, s, c + s
        printf "  allocations: the C loop (librabbitmq) %.1f + the routing core alone %.1f = %.1f per message\n", a, r, a + r }'
    echo "  bytes written, SQLite: what the store writes, by table and index (store-benchmark --pages):"
    "$bench_bin/store-benchmark" --messages 20000 --batch 200 --pages | sed 's/^/    /'
fi
