#!/usr/bin/env bash
# Line and function coverage of the WalletWorker module (the files under Sources/WalletWorker/), measured as issue 35
# asks: `swift test --enable-code-coverage` through scripts/test.sh, for each revision given (default HEAD), each in a
# git worktree of its own under $COVERAGE_DIR (default /tmp/wallet-coverage). The profiles of the test process and of
# the worker processes it starts are merged also when a test failed (`swift test` exports its own JSON only when every
# test passed): a failed test's lines count as far as it ran, and the script says that it failed.
#
#   scripts/coverage.sh [REV ...]      # e.g. scripts/coverage.sh c928bf1 HEAD
#
# Prints one line per revision (lines and functions covered of the module's) and leaves the build, the log and the
# llvm-cov JSON in $COVERAGE_DIR. Each revision is a cold build (about 10 minutes on 2 cores) and a test run. One
# revision at a time, and never beside another scripts/test.sh: they use the same private ports.
# Our modules are built -Onone here (WALLET_UNOPTIMIZED=1, Package.swift): optimized code inlines and merges lines, and
# the counts would not compare with a revision built before debug builds were optimized.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${COVERAGE_DIR:-/tmp/wallet-coverage}"
toolchain="$(dirname "$(readlink -f "$(command -v swift)")")"
[ $# -gt 0 ] || set -- HEAD
mkdir -p "$dir"

for rev in "$@"; do
    commit="$(git rev-parse --short "$rev")"
    tree="$dir/$commit"
    [ -d "$tree" ] || git worktree add --detach "$tree" "$commit" >/dev/null
    echo "coverage: $commit: building and testing (log: $dir/$commit.log)" >&2
    status=0
    (cd "$tree" && rm -f .build/debug/codecov/*.profraw && WALLET_UNOPTIMIZED=1 scripts/test.sh --enable-code-coverage) \
        >"$dir/$commit.log" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
        echo "coverage: $commit: tests failed (status $status; what failed is at the end of $dir/$commit.log)" >&2
    fi
    build="$tree/.build/debug"
    "$toolchain/llvm-profdata" merge -sparse "$build"/codecov/*.profraw -o "$dir/$commit.profdata"
    "$toolchain/llvm-cov" export -summary-only -instr-profile "$dir/$commit.profdata" \
        "$build/wallet-notification-workerPackageTests.xctest" >"$dir/$commit.json"
    python3 - "$dir/$commit.json" "$commit" <<'PY'
import json, sys
files = [f for f in json.load(open(sys.argv[1]))["data"][0]["files"] if "/Sources/WalletWorker/" in f["filename"]]
lines = [sum(f["summary"]["lines"][k] for f in files) for k in ("covered", "count")]
functions = [sum(f["summary"]["functions"][k] for f in files) for k in ("covered", "count")]
print(f"{sys.argv[2]}: WalletWorker ({len(files)} files): lines {lines[0]:,} of {lines[1]:,} = {100 * lines[0] / lines[1]:.2f}%, "
      f"functions {functions[0]:,} of {functions[1]:,} = {100 * functions[0] / functions[1]:.2f}%")
PY
done
