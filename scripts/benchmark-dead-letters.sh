#!/usr/bin/env bash
# The dead-letter tool's memory at scale (issue 24): fills a classic dead-letter queue on a private RabbitMQ with
# COUNT dead letters of BODY_BYTES each (default 100,000 of 16 KiB), then runs `wallet-worker dead-letters list`
# (or WALLET_DLQ_COMMAND, e.g. summary) ROUNDS times (default 3) under GNU time and prints each run's peak resident
# size and duration, and their medians. The queue must hold the same messages afterwards (checked). Every tenth
# dead letter has no AMQP timestamp and every seventh is an MG one, so that `summary` has groups to make.
#
#   scripts/benchmark-dead-letters.sh [COUNT] [BODY_BYTES] [ROUNDS]
#
# Environment: WALLET_DLQ_COMMAND=list|summary (default list), WALLET_QUEUE_TYPE=quorum for a quorum dead-letter queue (default classic),
# RABBITMQ_PORT (default 5792: its own node, data directory under /tmp, stopped at the end),
# WALLET_WORKER_BIN (default: .build/release/wallet-worker if built, else .build/debug/wallet-worker; build one
# first: `swift build -c release --product wallet-worker`). Needs python3 with pika (apt: python3-pika) for the fill.
set -euo pipefail
# The servers this script starts stop when it ends, even killed (scripts/lib/stop-with-owner.sh).
export WALLET_OWNER_PID=$$
cd "$(dirname "$0")/.."

count="${1:-100000}"
body_bytes="${2:-16384}"
rounds="${3:-3}"
command="${WALLET_DLQ_COMMAND:-list}"
export RABBITMQ_PORT="${RABBITMQ_PORT:-5792}"
export RABBITMQ_DATA_DIR="${RABBITMQ_DATA_DIR:-$(mktemp -d /tmp/wallet-dlq-bench.XXXXXX)}"

if [ -z "${WALLET_WORKER_BIN:-}" ]; then
    if [ -x .build/release/wallet-worker ]; then WALLET_WORKER_BIN=.build/release/wallet-worker
    else WALLET_WORKER_BIN=.build/debug/wallet-worker; fi
fi
[ -x "$WALLET_WORKER_BIN" ] || { echo "no wallet-worker at $WALLET_WORKER_BIN: swift build -c release --product wallet-worker" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "GNU time is needed: apt-get install time" >&2; exit 1; }
python3 -c 'import pika' 2>/dev/null || apt-get install -y -q python3-pika >/dev/null

scripts/rabbitmq-local.sh start >/dev/null
trap 'scripts/rabbitmq-local.sh stop >/dev/null || true; rm -rf "$RABBITMQ_DATA_DIR"' EXIT
export AMQP_URL="amqp://guest:guest@127.0.0.1:$RABBITMQ_PORT/%2f"

"$WALLET_WORKER_BIN" declare --log-level warning
echo "filling wallet.notifications.dead with $count dead letters of $body_bytes bytes" >&2
python3 - "$count" "$body_bytes" "$RABBITMQ_PORT" <<'PY'
import sys, pika
count, size, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
channel = connection.channel()
channel.confirm_delivery()
for index in range(count):
    sender = "MG" if index % 7 == 0 else "TNS"
    prefix = ('{"sender":"%s","digitalCardId":"DC-%d","n":%d,"pad":"' % (sender, index, index)).encode()
    body = prefix + b"x" * max(0, size - len(prefix) - 2) + b'"}'
    reason = "body is not JSON" if index % 3 == 0 else "transient failure, gave up after 5 attempts: store unavailable"
    properties = pika.BasicProperties(
        message_id="bench-%d" % index, delivery_mode=2, timestamp=None if index % 10 == 0 else 1790000000 + index,
        content_type="application/json", headers={"x-worker-error": reason})
    channel.basic_publish("wallet.notifications.dlx", "backend." + sender.lower(), body, properties, mandatory=True)
connection.close()
PY
ready() { scripts/rabbitmq-local.sh ctl list_queues name messages 2>/dev/null | awk '$1 == "wallet.notifications.dead" { print $2 }'; }
# A quorum queue's count lags behind what it holds for a while after a publisher or a consumer closes (a count of
# 98,413 read right after 100,000 confirmed publishes): read it until it reaches COUNT, for at most a minute.
settled_count() {
    local held
    for _ in $(seq 1 60); do
        held=$(ready)
        [ "$held" = "$count" ] && break
        sleep 1
    done
    echo "$held"
}
echo "queue holds $(settled_count) messages (WALLET_QUEUE_TYPE=${WALLET_QUEUE_TYPE:-classic})" >&2

rss=(); seconds=()
for round in $(seq 1 "$rounds"); do
    /usr/bin/time -o /tmp/dlq-bench-time.$$ -f "%M %e" "$WALLET_WORKER_BIN" dead-letters "$command" --json \
        >/tmp/dlq-bench-stdout.$$ 2>/tmp/dlq-bench-stderr.$$
    read -r kib elapsed </tmp/dlq-bench-time.$$
    rss+=("$kib"); seconds+=("$elapsed")
    echo "round $round: peak RSS $((kib / 1024)) MiB ($kib KiB), $elapsed s, $(tail -1 /tmp/dlq-bench-stderr.$$)"
done
[ "$command" = summary ] && { echo "the last round's groups:"; cat /tmp/dlq-bench-stdout.$$; }
rm -f /tmp/dlq-bench-stderr.$$ /tmp/dlq-bench-time.$$ /tmp/dlq-bench-stdout.$$
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
held=$(settled_count)
echo "median of $rounds: peak RSS $(( $(median "${rss[@]}") / 1024 )) MiB, $(median "${seconds[@]}") s for dead-letters $command on $count dead letters of $body_bytes bytes ($WALLET_WORKER_BIN); queue holds $held afterwards"
[ "$held" = "$count" ] || { echo "the queue holds $held, not $count" >&2; exit 1; }
