#!/usr/bin/env bash
# The project's main job on a fresh machine.
#
#   scripts/run.sh [arguments]
#
# Installs the Debian packages it needs when missing, starts a private RabbitMQ on loopback when nothing
# answers at AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/%2f), builds in release and runs.
# Until the worker lands (issue 4) the main job is the transport demo: it declares a queue, publishes
# messages with publisher confirms, consumes and acknowledges them, and prints the rates.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/prerequisites.sh
ensure_prerequisites

export AMQP_URL="${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
authority="${AMQP_URL#*://}"; authority="${authority#*@}"; authority="${authority%%/*}"
host="${authority%:*}"; port="${authority##*:}"
[ "$host" = "$authority" ] && port=5672
if ! (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    echo "run: no broker answers at $host:$port; starting a local one"
    RABBITMQ_PORT="$port" scripts/rabbitmq-local.sh start
fi

swift build -c release --product amqp-demo
exec .build/release/amqp-demo "$@"
