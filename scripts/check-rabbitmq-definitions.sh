#!/usr/bin/env bash
# Checks deploy/rabbitmq/definitions.json against what the worker declares, on a real broker: a private RabbitMQ
# (port $RABBITMQ_PORT, default 5712, its own data directory) imports deploy/rabbitmq/*.json at boot as the compose
# broker does, then
#   1. the broker holds exactly the exchanges, queues and bindings of definitions.json (nothing failed to import);
#   2. `wallet-worker declare --queue-type quorum` succeeds: every queue argument it sends equals the file's (a
#      difference is RabbitMQ's 406 PRECONDITION_FAILED, which stops a worker);
#   3. after it, the broker's definitions are unchanged: the worker declares nothing the file lacks;
#   4. controls that must fail do: `declare` with the classic queue type, and with another retry delay.
#
#   scripts/check-rabbitmq-definitions.sh
#
# WALLET_WORKER_BIN: a wallet-worker executable to use; by default `swift build --product wallet-worker` (debug,
# in SCRATCH_PATH, default .build) builds one. The node is stopped by its pid and its data directory removed at exit.
set -euo pipefail
# The servers this script starts stop when it ends, even killed (scripts/lib/stop-with-owner.sh).
export WALLET_OWNER_PID=$$
cd "$(dirname "$0")/.."

source scripts/lib/prerequisites.sh
ensure_prerequisites

export RABBITMQ_PORT="${RABBITMQ_PORT:-5712}"
RABBITMQ_DATA_DIR="$(mktemp -d /tmp/wallet-definitions-rabbitmq.XXXXXX)"
export RABBITMQ_DATA_DIR
definitions_dir="$RABBITMQ_DATA_DIR/definitions.d"
# The broker's only user comes from compose-users.json, as in docker-compose.yml.
amqp_url="amqp://wallet:wallet@127.0.0.1:$RABBITMQ_PORT/%2f"

if [ -z "${WALLET_WORKER_BIN:-}" ]; then
    scratch_path="${SCRATCH_PATH:-.build}"
    swift build --scratch-path "$scratch_path" --product wallet-worker
    WALLET_WORKER_BIN="$(swift build --scratch-path "$scratch_path" --show-bin-path)/wallet-worker"
fi

stop_broker() {
    scripts/rabbitmq-local.sh stop >/dev/null || true
    rm -rf "$RABBITMQ_DATA_DIR"
}
trap stop_broker EXIT

mkdir -p "$definitions_dir"
cp deploy/rabbitmq/definitions.json "$definitions_dir/10-topology.json"
cp deploy/rabbitmq/compose-users.json "$definitions_dir/00-users.json"
RABBITMQ_DEFINITIONS="$definitions_dir" scripts/rabbitmq-local.sh start

failures=0
check() {
    local name="$1"
    shift
    if "$@"; then
        echo "definitions check: ok: $name"
    else
        echo "definitions check: FAILED: $name" >&2
        failures=$((failures + 1))
    fi
}

export_definitions() {
    scripts/rabbitmq-local.sh ctl export_definitions "$1" >/dev/null
}

# Exchanges, queues and bindings of two definitions files, compared as sets (the broker adds fields such as
# queue types and leaves out its built-in amq.* exchanges).
same_topology() {
    python3 - "$1" "$2" <<'PY'
import json, sys

def topology(path):
    data = json.load(open(path))
    exchanges = {(e["vhost"], e["name"]): (e["type"], e["durable"], e["auto_delete"], e.get("internal", False), json.dumps(e.get("arguments", {}), sort_keys=True))
                 for e in data.get("exchanges", []) if e["name"] and not e["name"].startswith("amq.")}
    queues = {(q["vhost"], q["name"]): (q["durable"], q["auto_delete"], json.dumps(q.get("arguments", {}), sort_keys=True))
              for q in data.get("queues", [])}
    bindings = {(b["vhost"], b["source"], b["destination"], b["destination_type"], b["routing_key"], json.dumps(b.get("arguments", {}), sort_keys=True)): "bound"
                for b in data.get("bindings", [])}
    return {"exchange": exchanges, "queue": queues, "binding": bindings}

expected, actual = topology(sys.argv[1]), topology(sys.argv[2])
same = True
for kind in expected:
    for key in sorted(expected[kind].keys() | actual[kind].keys()):
        want, have = expected[kind].get(key), actual[kind].get(key)
        if want != have:
            same = False
            print(f"  {kind} {key}: {want} in {sys.argv[1]}, {have} in {sys.argv[2]}", file=sys.stderr)
sys.exit(0 if same else 1)
PY
}

declare_topology() {
    AMQP_URL="$amqp_url" "$WALLET_WORKER_BIN" declare --log-level warning "$@"
}

# `declare` accepts a queue an earlier version declared (without the arguments added since) with a warning; the
# file must be this version's, so that warning fails the check.
declare_topology_as_this_version() {
    local output
    output=$(declare_topology "$@" 2>&1) || { echo "$output" >&2; return 1; }
    if grep -q "declared by an earlier version" <<<"$output"; then
        echo "  definitions.json is an earlier version's topology: $output" >&2
        return 1
    fi
}

declare_is_refused() {
    local output
    if output=$(declare_topology "$@" 2>&1); then
        echo "  declare $* succeeded; the broker should have refused it" >&2
        return 1
    fi
    grep -q "PRECONDITION_FAILED" <<<"$output" || { echo "  declare $* failed for another reason: $output" >&2; return 1; }
}

export_definitions "$RABBITMQ_DATA_DIR/imported.json"
check "the broker imported exactly definitions.json" same_topology deploy/rabbitmq/definitions.json "$RABBITMQ_DATA_DIR/imported.json"
check "wallet-worker declare --queue-type quorum is accepted" declare_topology_as_this_version --queue-type quorum
export_definitions "$RABBITMQ_DATA_DIR/declared.json"
check "declare added or changed nothing" same_topology "$RABBITMQ_DATA_DIR/imported.json" "$RABBITMQ_DATA_DIR/declared.json"
check "control: declare --queue-type classic is refused (406)" declare_is_refused --queue-type classic
check "control: declare --retry-delay 6s is refused (406)" declare_is_refused --queue-type quorum --retry-delay 6s

if [ "$failures" -ne 0 ]; then
    echo "definitions check: $failures check(s) failed" >&2
    exit 1
fi
echo "definitions check: deploy/rabbitmq/definitions.json matches wallet-worker declare --queue-type quorum"
