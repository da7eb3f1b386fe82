#!/usr/bin/env bash
# The project's test command: sets up a fresh machine and runs every test against a real broker.
#
#   scripts/test.sh [extra `swift test` arguments]
#
# Installs the Debian packages it needs when missing, starts a private RabbitMQ on loopback
# (port $RABBITMQ_PORT, default 5682, its own data directory) and a private PostgreSQL (port $POSTGRES_PORT,
# default 5442, its own data directory), runs `swift test` with AMQP_URL and POSTGRES_URL pointing at them,
# stops both by their pids, and exits with the tests' status.
# Set AMQP_URL yourself to test against a broker you already run (nothing is started then; the TLS tests
# then need AMQPS_URL and AMQP_TLS_CA_FILE too, the user_id test AMQP_SECOND_USER_URL: another user's URL, and the
# --no-declare test AMQP_RUNTIME_USER_URL: a user with no configure permission). Likewise POSTGRES_URL: a role that may create schemas.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/prerequisites.sh
# haproxy: the node-loss test puts a three-node cluster behind it (scripts/rabbitmq-cluster.sh).
ensure_prerequisites haproxy
# prometheus: the alert test evaluates deploy/'s PrometheusRule on a real Prometheus (PrometheusAlertTests).
ensure_packages_without_recommends prometheus

# A test run starts up to five RabbitMQ nodes (this one, and the private nodes of some suites, which inherit the
# variable) on two cores beside the workers: their idle schedulers sleep instead of spinning.
export RABBITMQ_BUSY_WAIT="${RABBITMQ_BUSY_WAIT:-none}"

# The servers this run starts, and those its tests start, stop when it ends, even killed (scripts/lib/stop-with-owner.sh;
# the tests give their own process's pid to the servers they start).
export WALLET_OWNER_PID=$$

started_broker=false
if [ -z "${AMQP_URL:-}" ]; then
    export RABBITMQ_PORT="${RABBITMQ_PORT:-5682}"
    export RABBITMQ_DATA_DIR="${RABBITMQ_DATA_DIR:-$(mktemp -d /tmp/wallet-test-rabbitmq.XXXXXX)}"
    scripts/rabbitmq-local.sh start
    started_broker=true
    export AMQP_URL="amqp://guest:guest@127.0.0.1:$RABBITMQ_PORT/%2f"
    # The TLS listener of the same broker, and the CA its certificate is signed by.
    AMQPS_URL="$(scripts/rabbitmq-local.sh tls-url)"
    export AMQPS_URL
    export AMQP_TLS_CA_FILE="$RABBITMQ_DATA_DIR/tls/ca.pem"
    # A second user, for a backend that publishes with its own `user_id` (PoisonMessageTests).
    scripts/rabbitmq-local.sh ctl add_user wallet-backend backend-secret >/dev/null
    scripts/rabbitmq-local.sh ctl set_permissions -p / wallet-backend '.*' '.*' '.*' >/dev/null
    export AMQP_SECOND_USER_URL="amqp://wallet-backend:backend-secret@127.0.0.1:$RABBITMQ_PORT/%2f"
    # A runtime user without configure rights, for `run --no-declare` (LeastPrivilegeTests).
    scripts/rabbitmq-local.sh ctl add_user wallet-runtime runtime-secret >/dev/null
    scripts/rabbitmq-local.sh ctl set_permissions -p / wallet-runtime '^$' '.*' '.*' >/dev/null
    export AMQP_RUNTIME_USER_URL="amqp://wallet-runtime:runtime-secret@127.0.0.1:$RABBITMQ_PORT/%2f"
fi
started_postgres=false
if [ -z "${POSTGRES_URL:-}" ]; then
    export POSTGRES_PORT="${POSTGRES_PORT:-5442}"
    export POSTGRES_DATA_DIR="${POSTGRES_DATA_DIR:-$(mktemp -d /tmp/wallet-test-postgres.XXXXXX)}"
    started_postgres=true
    scripts/postgres-local.sh start
    POSTGRES_URL="$(scripts/postgres-local.sh url)"
    export POSTGRES_URL
fi
stop_servers() {
    if $started_broker; then
        scripts/rabbitmq-local.sh stop || true
        rm -rf "$RABBITMQ_DATA_DIR"
    fi
    if $started_postgres; then
        scripts/postgres-local.sh stop || true
        rm -rf "$POSTGRES_DATA_DIR"
    fi
}
trap stop_servers EXIT

echo "test: AMQP_URL=${AMQP_URL//:guest@/:***@}"
echo "test: POSTGRES_URL=$(echo "$POSTGRES_URL" | sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#')"
# The run's output is also kept in a file: when it fails, what failed is repeated at the end, where a CI log's tail
# shows it (a crash's backtrace lists every thread, and the crashed one comes first, thousands of lines up).
log="$(mktemp /tmp/wallet-test-output.XXXXXX)"
status=0
# --force-resolved-versions: the versions the committed Package.resolved pins (the ones the image ships), or fail.
swift test --force-resolved-versions "$@" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo "test: failed (status $status); what failed, from $log:"
    grep -E "^(✘|Fatal error|error: |.*Program crashed)|crashed:$" "$log" | head -60 || true
    # The crashed thread's frames, when the process crashed.
    awk '/crashed:$/ { show = 40 } show > 0 { print; show-- }' "$log" | head -60
else
    rm -f "$log"
fi
exit $status
