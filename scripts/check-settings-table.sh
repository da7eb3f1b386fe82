#!/usr/bin/env bash
# Checks that the README's configuration table is the one the worker prints: the lines between
# `<!-- settings:begin -->` and `<!-- settings:end -->` in README.md must equal `wallet-worker settings --markdown`
# byte for byte. On a difference it prints the diff (README, then what the worker prints) and exits 1.
#
#   scripts/check-settings-table.sh [path/to/wallet-worker]
#
# The executable: the argument, else $WALLET_WORKER_BIN, else wallet-worker in `swift build --show-bin-path` (debug,
# in $SCRATCH_PATH, default .build). Nothing is built: run `swift build --product wallet-worker` first.
# To update the README after changing the table (Sources/WalletWorker/Settings/SettingsTable.swift):
#   scripts/check-settings-table.sh --write [path/to/wallet-worker]
set -euo pipefail
cd "$(dirname "$0")/.."

write=false
if [ "${1:-}" = "--write" ]; then
    write=true
    shift
fi
worker="${1:-${WALLET_WORKER_BIN:-}}"
if [ -z "$worker" ]; then
    command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
    worker="$(swift build --scratch-path "${SCRATCH_PATH:-.build}" --show-bin-path)/wallet-worker"
fi
if [ ! -x "$worker" ]; then
    echo "check-settings-table: no wallet-worker executable at $worker: build it first (swift build --product wallet-worker)" >&2
    exit 2
fi

begin='<!-- settings:begin -->'
end='<!-- settings:end -->'
if [ "$(grep -cxF "$begin" README.md)" != 1 ] || [ "$(grep -cxF "$end" README.md)" != 1 ]; then
    echo "check-settings-table: README.md must hold one line '$begin' and one line '$end' around the table" >&2
    exit 1
fi

workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
"$worker" settings --markdown > "$workdir/generated.md"
# The lines strictly between the markers (each line with its newline, so a missing last newline differs too).
awk -v begin="$begin" -v end="$end" '$0 == end { inside = 0 } inside { print } $0 == begin { inside = 1 }' README.md \
    > "$workdir/readme.md"

if cmp -s "$workdir/readme.md" "$workdir/generated.md"; then
    echo "check-settings-table: README.md's configuration table is wallet-worker settings --markdown"
    exit 0
fi
if $write; then
    awk -v begin="$begin" -v end="$end" -v generated="$workdir/generated.md" '
        $0 == end { inside = 0 }
        !inside { print }
        $0 == begin { inside = 1; while ((getline line < generated) > 0) print line }
    ' README.md > "$workdir/README.md"
    cat "$workdir/README.md" > README.md
    echo "check-settings-table: README.md's configuration table rewritten from wallet-worker settings --markdown"
    exit 0
fi
echo "check-settings-table: README.md's configuration table differs from wallet-worker settings --markdown" >&2
echo "  (regenerate it: scripts/check-settings-table.sh --write)" >&2
diff -u --label "README.md (between the settings markers)" --label "wallet-worker settings --markdown" \
    "$workdir/readme.md" "$workdir/generated.md" >&2 || true
exit 1
