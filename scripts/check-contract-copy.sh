#!/usr/bin/env bash
# Checks that docs/contract.md, the product's own copy of the message contract (what the README, the docs and the
# code comments cite as CONTRACT.md), is byte for byte the shared contract beside the repository,
# ../shared/CONTRACT.md, when that exists. A clone on its own has no ../shared: the check then says so and passes.
#
#   scripts/check-contract-copy.sh
#
# Exits 1, with the difference, when the two differ: copy the shared contract over docs/contract.md (and review what
# changed against docs/contract-decisions.md), or have the shared contract changed.
set -euo pipefail
cd "$(dirname "$0")/.."

copy=docs/contract.md
shared=../shared/CONTRACT.md

if [ ! -f "$copy" ]; then
    echo "check-contract-copy: FAILED: $copy is missing" >&2
    exit 1
fi
if [ ! -e "$shared" ]; then
    echo "check-contract-copy: ok: no $shared beside the repository, nothing to compare $copy with"
    exit 0
fi
if cmp -s "$shared" "$copy"; then
    echo "check-contract-copy: ok: $copy is identical to $shared"
    exit 0
fi
echo "check-contract-copy: FAILED: $copy differs from $shared (diff from the shared contract to the copy):" >&2
diff -u --label "$shared" --label "$copy" "$shared" "$copy" >&2 || true
echo "check-contract-copy: to take the shared contract: cp $shared $copy" >&2
exit 1
