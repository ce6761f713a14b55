#!/usr/bin/env bash
# The README's second command: build (if needed) and run the whole test suite with ctest.
# Heavy sweeps are opt-in labels (see README: ctest -L nightly / gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
cd build
ctest --output-on-failure -j"$jobs" --timeout 600 -LE "nightly" "$@"
