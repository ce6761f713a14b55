#!/usr/bin/env bash
# Configures and builds into build/ (the CLI is build/validate). Extra arguments go to CMake's
# configure step, e.g. scripts/build.sh -DVALIDATE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j"$jobs"
