#!/usr/bin/env bash
# Publishes the notifications of examples/ (or the files given) to a running worker and prints its results.
#
#   scripts/publish-examples.sh [examples/cps.jsonl ...]
#
# Uses AMQP_URL like the worker (default amqp://guest:guest@127.0.0.1:5672/%2f). The results are read from a
# private queue bound to the five result exchanges, as a downstream consumer would; one JSON line per result.
# Each message with a digitalCardId carries it in the digitalCardId header too, so the examples also work with a
# worker in the ordered mode (--ordered-shards), whose consistent-hash exchange hashes that header.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/prerequisites.sh
ensure_prerequisites

swift build -c release --product wallet-notify
if [ $# -eq 0 ]; then
    set -- examples/*.jsonl
fi
exec .build/release/wallet-notify "$@"
