#!/usr/bin/env bash
# The code's format: swift-format (part of the Swift toolchain) with the repository's .swift-format, over every Swift
# file of both packages; then shellcheck (Debian's package, installed when missing) over every shell script, at
# warnings and errors. CI runs it (.ci/run); a difference from the formatter's output, or a rule either reports, fails.
#
#   scripts/lint.sh         # check (exit 1 and the places, when something differs)
#   scripts/lint.sh --fix   # reformat in place, then check what the formatter cannot fix
set -euo pipefail
cd "$(dirname "$0")/.."

paths=(Package.swift Sources Tests Benchmarks/Package.swift Benchmarks/Sources)
if [ "${1:-}" = --fix ]; then
    swift format format --in-place --recursive --parallel "${paths[@]}"
elif [ $# -gt 0 ]; then
    echo "usage: scripts/lint.sh [--fix]" >&2
    exit 64
fi
if ! swift format lint --strict --recursive --parallel "${paths[@]}"; then
    echo "lint: the code differs from swift-format's output (.swift-format): run scripts/lint.sh --fix" >&2
    exit 1
fi
# shellcheck source=lib/prerequisites.sh
source scripts/lib/prerequisites.sh
ensure_packages_without_recommends shellcheck
mapfile -t shell_scripts < <(git ls-files '*.sh' .ci/run)
if ! shellcheck --severity=warning --external-sources "${shell_scripts[@]}"; then
    echo "lint: shellcheck reports the shell scripts above (warnings and errors)" >&2
    exit 1
fi
echo "lint: ok"
