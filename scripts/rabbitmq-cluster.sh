#!/usr/bin/env bash
# A three-node RabbitMQ cluster on loopback behind HAProxy, for the node-loss test (WorkerSurvivesANodeLossTests) and for
# trying a node loss by hand. Each node is a scripts/rabbitmq-local.sh node with its own port, node name and data
# directory; they share an Erlang cookie and nodes 2 and 3 join node 1. HAProxy sends every connection to the
# first node that is up (`balance first`), so the worker is on node 1 until node 1 is lost.
#
#   scripts/rabbitmq-cluster.sh start          # installs rabbitmq-server and haproxy if missing; starts all
#   scripts/rabbitmq-cluster.sh stop           # stops HAProxy and the nodes (by their pids), removes the data
#   scripts/rabbitmq-cluster.sh kill N         # SIGKILL node N (1-3): a node lost, no goodbye to the cluster
#   scripts/rabbitmq-cluster.sh start-node N   # starts node N again; it rejoins with its data
#   scripts/rabbitmq-cluster.sh url            # the AMQP URL through HAProxy (what a worker uses)
#   scripts/rabbitmq-cluster.sh node-url N     # the AMQP URL of node N itself
#   scripts/rabbitmq-cluster.sh ctl N ARGS     # rabbitmqctl against node N
#
# Environment: CLUSTER_PORT (default 5760): HAProxy listens there, node N on CLUSTER_PORT + 2N - 1 (its TLS
# listener on the next port, its Erlang distribution on that + 20000); CLUSTER_DATA_DIR (default
# /tmp/wallet-rabbitmq-cluster-$CLUSTER_PORT). WALLET_OWNER_PID: a process the cluster must not outlive; when it
# ends, HAProxy and the nodes are stopped (scripts/lib/stop-with-owner.sh; the tests set it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/stop-with-owner.sh
# haproxy lives in /usr/sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/sbin:/usr/local/sbin"

base_port="${CLUSTER_PORT:-5760}"
data_dir="${CLUSTER_DATA_DIR:-/tmp/wallet-rabbitmq-cluster-$base_port}"

node_port() { echo $((base_port + 2 * $1 - 1)); }
node_name() { echo "wallet-cluster-$(node_port "$1")@localhost"; }

# rabbitmq-local.sh for node N (its HOME, and so its Erlang cookie, is its data directory).
node() {
    local n=$1
    shift
    RABBITMQ_PORT="$(node_port "$n")" RABBITMQ_DATA_DIR="$data_dir/node$n" RABBITMQ_NODENAME="$(node_name "$n")" \
        scripts/rabbitmq-local.sh "$@"
}

check_node_number() {
    case "${1:-}" in
        1 | 2 | 3) ;;
        *) echo "rabbitmq-cluster: a node number is 1, 2 or 3" >&2; exit 2 ;;
    esac
}

ensure_haproxy() {
    if ! command -v haproxy >/dev/null; then
        echo "rabbitmq-cluster: installing haproxy with apt" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
    fi
}

start_haproxy() {
    local config="$data_dir/haproxy.cfg"
    cat > "$config" <<CFG
global
    maxconn 1000
defaults
    mode tcp
    timeout connect 2s
    # AMQP connections live long; heartbeats (10 s by default) keep them busy.
    timeout client 1h
    timeout server 1h
    # A connection to a node that has just died is tried on the next one instead.
    retries 2
    option redispatch
listen amqp
    bind 127.0.0.1:$base_port
    balance first
    default-server check inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions
    server node1 127.0.0.1:$(node_port 1)
    server node2 127.0.0.1:$(node_port 2)
    server node3 127.0.0.1:$(node_port 3)
CFG
    nohup haproxy -db -f "$config" > "$data_dir/haproxy.log" 2>&1 &
    echo $! > "$data_dir/haproxy.pid"
    stop_with_owner "$!" "$config" TERM
}

start() {
    ensure_haproxy
    mkdir -p "$data_dir"
    local cookie
    cookie=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n' | tr 'a-f' 'A-F')
    for n in 1 2 3; do
        mkdir -p "$data_dir/node$n"
        # One cookie for the three nodes and their rabbitmqctl: Erlang distribution needs it to form a cluster.
        if [ ! -f "$data_dir/node$n/.erlang.cookie" ]; then
            printf '%s' "$cookie" > "$data_dir/node$n/.erlang.cookie"
            chmod 400 "$data_dir/node$n/.erlang.cookie"
        fi
    done
    # The nodes boot in parallel (each takes seconds), then 2 and 3 join 1.
    local pids=()
    for n in 1 2 3; do
        node "$n" start > "$data_dir/node$n.start.log" 2>&1 &
        pids+=($!)
    done
    local failed=0
    for n in 1 2 3; do
        if ! wait "${pids[$((n - 1))]}"; then
            echo "rabbitmq-cluster: node $n did not start:" >&2
            cat "$data_dir/node$n.start.log" >&2
            failed=1
        fi
    done
    [ "$failed" = 0 ] || return 1
    for n in 2 3; do
        if ! node "$n" ctl cluster_status 2>/dev/null | grep -q "$(node_name 1)"; then
            node "$n" ctl stop_app >/dev/null
            node "$n" ctl join_cluster "$(node_name 1)" >/dev/null
            node "$n" ctl start_app >/dev/null
        fi
    done
    node 1 ctl await_online_nodes 3 --timeout 60000 >/dev/null 2>&1 || node 1 ctl cluster_status >&2
    start_haproxy
    # HAProxy answers once its checks have seen node 1.
    for _ in $(seq 1 50); do
        (exec 3<>"/dev/tcp/127.0.0.1/$base_port") 2>/dev/null && break
        sleep 0.2
    done
    echo "rabbitmq-cluster: three nodes ($(node_name 1), $(node_name 2), $(node_name 3)) on ports" \
        "$(node_port 1), $(node_port 2), $(node_port 3); HAProxy on 127.0.0.1:$base_port; data $data_dir"
}

stop() {
    if [ -f "$data_dir/haproxy.pid" ]; then
        kill "$(cat "$data_dir/haproxy.pid")" 2>/dev/null || true
        rm -f "$data_dir/haproxy.pid"
    fi
    for n in 3 2 1; do
        [ -d "$data_dir/node$n" ] && node "$n" stop >/dev/null || true
    done
    rm -rf "$data_dir"
    echo "rabbitmq-cluster: stopped"
}

kill_node() {
    check_node_number "$1"
    local pidfile="$data_dir/node$1/rabbitmq.pid"
    if [ ! -f "$pidfile" ]; then
        echo "rabbitmq-cluster: node $1 is not running" >&2
        return 1
    fi
    local pid
    pid=$(cat "$pidfile")
    kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    rm -f "$pidfile"
    echo "rabbitmq-cluster: node $1 ($(node_name "$1"), pid $pid) killed"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    kill) kill_node "${2:-}" ;;
    start-node) check_node_number "${2:-}"; node "$2" start ;;
    url) echo "amqp://guest:guest@127.0.0.1:$base_port/%2f" ;;
    node-url) check_node_number "${2:-}"; echo "amqp://guest:guest@127.0.0.1:$(node_port "$2")/%2f" ;;
    ctl) check_node_number "${2:-}"; n=$2; shift 2; node "$n" ctl "$@" ;;
    *) echo "usage: $0 start|stop|kill N|start-node N|url|node-url N|ctl N ARGS" >&2; exit 2 ;;
esac
