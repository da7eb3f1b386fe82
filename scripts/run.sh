#!/usr/bin/env bash
# The project's main job on a fresh machine: the worker, with the embedded SQLite store.
#
#   scripts/run.sh [wallet-worker run options]        e.g. scripts/run.sh --store sqlite:/var/lib/wallet.sqlite
#
# Installs the Debian packages it needs when missing, starts a private RabbitMQ on loopback when nothing
# answers at AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/%2f), builds the worker in release and runs
# `wallet-worker run` (default store: sqlite:wallet.sqlite in the current directory) until Ctrl-C or SIGTERM.
# In another terminal, `scripts/publish-examples.sh` sends the example notifications and prints the results.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/prerequisites.sh
ensure_prerequisites

export AMQP_URL="${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
authority="${AMQP_URL#*://}"; authority="${authority#*@}"; authority="${authority%%/*}"
host="${authority%:*}"; port="${authority##*:}"
[ "$host" = "$authority" ] && port=5672
if ! (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    echo "run: no broker answers at $host:$port; starting a local one (scripts/rabbitmq-local.sh stop ends it)"
    RABBITMQ_PORT="$port" scripts/rabbitmq-local.sh start
fi

swift build -c release --product wallet-worker
exec .build/release/wallet-worker run "$@"
