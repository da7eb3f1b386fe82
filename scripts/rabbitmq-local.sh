#!/usr/bin/env bash
# Starts or stops a private RabbitMQ node on loopback with its own data directory, for tests,
# benchmarks and trying the worker. It never touches a system-wide RabbitMQ.
#
#   scripts/rabbitmq-local.sh start     # installs rabbitmq-server with apt if missing, starts, waits
#   scripts/rabbitmq-local.sh stop      # stops the node this script started (by its pid)
#   scripts/rabbitmq-local.sh restart   # stop then start, keeping the data (durable queues survive)
#   scripts/rabbitmq-local.sh status
#   scripts/rabbitmq-local.sh url       # prints the AMQP_URL of the node
#
#   scripts/rabbitmq-local.sh tls-url   # prints the amqps:// URL of the TLS listener
#   scripts/rabbitmq-local.sh ctl ARGS  # rabbitmqctl against this node (e.g. set_vm_memory_high_watermark)
#
# Environment: RABBITMQ_PORT (default 5672), RABBITMQ_TLS_PORT (default RABBITMQ_PORT + 1),
# RABBITMQ_DATA_DIR (default /tmp/wallet-rabbitmq-$RABBITMQ_PORT), RABBITMQ_NODENAME (default wallet-$RABBITMQ_PORT@localhost),
# RABBITMQ_DEFINITIONS (a definitions file or folder imported at boot, as deploy/rabbitmq/rabbitmq.conf does; such a
# node seeds no guest user: the definitions must bring a user), RABBITMQ_CONSUMER_TIMEOUT_MS (the broker's
# consumer_timeout, checked every second, for a test of what the worker does before it fires).
# RABBITMQ_FRAME_MAX (the broker's frame_max, 131072 by default: a smaller one for a test of what the worker
# fits into the frame size the broker agreed to). RABBITMQ_BUSY_WAIT (the Erlang schedulers' busy waiting: `none`
# makes idle schedulers sleep instead of spinning, as RabbitMQ's runtime guide advises for shared hosts, and
# scripts/test.sh sets it for every node of a test run; unset or `default` keeps the runtime's own).
# The TLS listener uses a CA and a server certificate for the name localhost (only) generated into $RABBITMQ_DATA_DIR/tls
# (ca.pem is what clients verify against). WALLET_OWNER_PID: a process the node must not outlive; when it ends, the
# node is stopped (scripts/lib/stop-with-owner.sh; scripts/test.sh and the tests set it).
set -euo pipefail
source "$(dirname "$0")/lib/stop-with-owner.sh"

port="${RABBITMQ_PORT:-5672}"
tls_port="${RABBITMQ_TLS_PORT:-$((port + 1))}"
data_dir="${RABBITMQ_DATA_DIR:-/tmp/wallet-rabbitmq-$port}"
node="${RABBITMQ_NODENAME:-wallet-$port@localhost}"
server_bin=/usr/lib/rabbitmq/bin

ensure_installed() {
    if [ ! -x "$server_bin/rabbitmq-server" ] || ! command -v openssl >/dev/null; then
        echo "rabbitmq-local: installing rabbitmq-server and openssl with apt" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server openssl >/dev/null
    fi
}

node_env() {
    export HOME="$data_dir"   # the Erlang cookie lives here, shared by the server and rabbitmqctl
    export RABBITMQ_NODENAME="$node"
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$port"
    export RABBITMQ_DIST_PORT=$((port + 20000))
    export RABBITMQ_MNESIA_BASE="$data_dir/mnesia"
    export RABBITMQ_LOG_BASE="$data_dir/log"
    export RABBITMQ_PID_FILE="$data_dir/rabbitmq.pid"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$data_dir/enabled_plugins"
    export RABBITMQ_CONFIG_FILE="$data_dir/rabbitmq"
    export RABBITMQ_ADVANCED_CONFIG_FILE="$data_dir/advanced.config"
    local busy_wait="${RABBITMQ_BUSY_WAIT:-default}"
    if [ "$busy_wait" != default ]; then
        export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+sbwt $busy_wait +sbwtdcpu $busy_wait +sbwtdio $busy_wait ${RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS:-}"
    fi
}

# A throw-away CA and a server certificate for localhost, so amqps:// is tested against a real TLS listener.
make_certificates() {
    local dir="$data_dir/tls"
    [ -f "$dir/server.pem" ] && return 0
    mkdir -p "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=wallet-test-ca" \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost\n' > "$dir/san.ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -days 30 -extfile "$dir/san.ext" -out "$dir/server.pem" 2>/dev/null
    chmod 644 "$dir"/*.key
}

is_running() {
    [ -f "$data_dir/rabbitmq.pid" ] && kill -0 "$(cat "$data_dir/rabbitmq.pid")" 2>/dev/null
}

start() {
    ensure_installed
    mkdir -p "$data_dir/log" "$data_dir/mnesia"
    node_env
    if is_running; then
        echo "rabbitmq-local: already running (pid $(cat "$RABBITMQ_PID_FILE"), port $port)"
        return 0
    fi
    # The Erlang cookie, written before the server or rabbitmqctl starts. Left to them, each creates one when the file
    # is missing: started together on a busy machine, both found it missing, the server kept a cookie the file does
    # not hold, and every `rabbitmqctl wait` was refused ("Invalid challenge reply") until the 90 s ran out.
    if [ ! -f "$data_dir/.erlang.cookie" ]; then
        od -An -N16 -tx1 /dev/urandom | tr -d ' \n' | tr 'a-f' 'A-F' > "$data_dir/.erlang.cookie"
        chmod 400 "$data_dir/.erlang.cookie"
    fi
    # The consistent-hash exchange is bundled with RabbitMQ; the ordered mode of the worker uses it.
    echo "[rabbitmq_consistent_hash_exchange]." > "$RABBITMQ_ENABLED_PLUGINS_FILE"
    make_certificates
    cat > "$RABBITMQ_CONFIG_FILE.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$port
listeners.ssl.default = 127.0.0.1:$tls_port
ssl_options.cacertfile = $data_dir/tls/ca.pem
ssl_options.certfile = $data_dir/tls/server.pem
ssl_options.keyfile = $data_dir/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
loopback_users.guest = true
vm_memory_high_watermark.relative = 0.4
disk_free_limit.absolute = 200MB
CONF
    if [ -n "${RABBITMQ_DEFINITIONS:-}" ]; then
        echo "load_definitions = $RABBITMQ_DEFINITIONS" >> "$RABBITMQ_CONFIG_FILE.conf"
    fi
    if [ -n "${RABBITMQ_FRAME_MAX:-}" ]; then
        echo "frame_max = $RABBITMQ_FRAME_MAX" >> "$RABBITMQ_CONFIG_FILE.conf"
    fi
    if [ -n "${RABBITMQ_CONSUMER_TIMEOUT_MS:-}" ]; then
        # A short consumer timeout for a test, checked every second (channel_tick_interval, 60 s by default).
        echo "consumer_timeout = $RABBITMQ_CONSUMER_TIMEOUT_MS" >> "$RABBITMQ_CONFIG_FILE.conf"
        echo "[{rabbit, [{channel_tick_interval, 1000}]}]." > "$RABBITMQ_ADVANCED_CONFIG_FILE"
    else
        echo "[]." > "$RABBITMQ_ADVANCED_CONFIG_FILE"
    fi
    nohup "$server_bin/rabbitmq-server" > "$data_dir/log/startup.log" 2>&1 &
    echo $! > "$data_dir/launcher.pid"
    # `wait` returns once the node is fully booted, or fails. It can fail within seconds while the node is still
    # booting (on a loaded machine its own Erlang node may not reach epmd in time): asked again while the server
    # process lives, up to 90 s in all.
    local deadline=$((SECONDS + 90)) waited=""
    until waited=$("$server_bin/rabbitmqctl" -n "$node" wait --timeout 90 "$RABBITMQ_PID_FILE" 2>&1); do
        if ! kill -0 "$(cat "$data_dir/launcher.pid")" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            echo "rabbitmq-local: the node did not start; rabbitmqctl wait said: $waited" >&2
            echo "rabbitmq-local: last log lines:" >&2
            tail -n 30 "$data_dir/log/startup.log" >&2 || true
            return 1
        fi
        sleep 1
    done
    stop_with_owner "$(cat "$RABBITMQ_PID_FILE")" "$data_dir" TERM
    echo "rabbitmq-local: running on 127.0.0.1:$port, TLS on $tls_port (node $node, pid $(cat "$RABBITMQ_PID_FILE"), data $data_dir)"
}

stop() {
    node_env
    if ! is_running; then
        echo "rabbitmq-local: not running"
        return 0
    fi
    local pid
    pid=$(cat "$RABBITMQ_PID_FILE")
    kill -TERM "$pid"
    for _ in $(seq 1 60); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "rabbitmq-local: node did not stop in 30 s; killing it" >&2
        kill -KILL "$pid" || true
    fi
    rm -f "$RABBITMQ_PID_FILE"
    echo "rabbitmq-local: stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    restart) stop; start ;;
    status) node_env; if is_running; then echo "running (pid $(cat "$RABBITMQ_PID_FILE"), port $port)"; else echo "stopped"; exit 1; fi ;;
    ctl) shift; node_env; exec "$server_bin/rabbitmqctl" -n "$node" "$@" ;;
    url) echo "amqp://guest:guest@127.0.0.1:$port/%2f" ;;
    tls-url) echo "amqps://guest:guest@localhost:$tls_port/%2f" ;;
    *) echo "usage: $0 start|stop|restart|status|url|tls-url|ctl ARGS" >&2; exit 2 ;;
esac
