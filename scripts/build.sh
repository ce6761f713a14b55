#!/usr/bin/env bash
# Configures and builds into build/ (the CLI is build/validate). Extra arguments go to CMake's
# configure step, e.g. scripts/build.sh -DVALIDATE_CUDA=OFF.
#   scripts/build.sh --runtime [cmake args]: only the CLI and its modules, no tests or benchmarks
#   (what scripts/install-deps.sh --runtime provides is enough; scripts/nightly.sh uses it).
# LibTorch is the torch of VALIDATE_TORCH_PYTHON when set (your own venv or conda env), else the
# one scripts/install-torch.sh put in .deps/torch-2.11 (PyPI's 2.11.0+cu130).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# Both settings are passed every time: the cache of build/ keeps the last one otherwise, and a
# runtime build followed by scripts/test.sh would then configure no tests.
parts=(-DVALIDATE_BUILD_TESTS=ON -DVALIDATE_BUILD_BENCH=ON)
if [ "${1:-}" = "--runtime" ]; then
  shift
  parts=(-DVALIDATE_BUILD_TESTS=OFF -DVALIDATE_BUILD_BENCH=OFF)
fi
torch_python=${VALIDATE_TORCH_PYTHON:-$PWD/.deps/torch-2.11/bin/python}
[ -x "$torch_python" ] || { echo "build: no $torch_python: run scripts/install-deps.sh (or set VALIDATE_TORCH_PYTHON)" >&2; exit 2; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVALIDATE_TORCH=ON -DVALIDATE_TORCH_PYTHON="$torch_python" \
  "${parts[@]}" "$@"
cmake --build build -j"$jobs"
