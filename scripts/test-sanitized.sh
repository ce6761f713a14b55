#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (with LeakSanitizer): builds
# into build-asan/ with -DVALIDATE_SANITIZE=ON and runs ctest there, minus the `nightly` label
# (heavy sweeps, not in scripts/test.sh either) and the `fuzz` label (the fuzzers are their own
# ASan+UBSan build, run by scripts/test.sh's fuzz.script). Any sanitizer report fails the test that
# triggered it: ASan and LSan abort (abort_on_error), UBSan halts (halt_on_error, and the code is
# built with -fno-sanitize-recover=undefined). Extra arguments go to ctest. .ci/run calls this.
#
# LibTorch: ON, the same PyPI torch 2.11 as build/ (scripts/install-deps.sh installs it;
# VALIDATE_TORCH_PYTHON names another), so the generator, the torch runner, kill/resume and the
# full-disk tests run sanitized too; LibTorch's own kernels are not instrumented and run at full
# speed. VALIDATE_SANITIZE_TORCH=OFF|AUTO overrides it. CUDA stays OFF: the sanitizer flags would
# reach nvcc, and the CUDA runtime needs protect_shadow_gap=0 under ASan; the CUDA code's
# host-side tests run in build/ (scripts/test.sh). Times: docs/building.md.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
torch=${VALIDATE_SANITIZE_TORCH:-ON}
build=${VALIDATE_SANITIZE_BUILD:-build-asan}
# -O1 -g without NDEBUG: asserts stay on, stacks stay readable, tests stay fast enough.
cmake -S . -B "$build" -DVALIDATE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_Fortran_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DVALIDATE_TORCH="$torch" -DVALIDATE_CUDA=OFF -DVALIDATE_BUILD_BENCH=OFF \
  -DVALIDATE_TORCH_PYTHON="${VALIDATE_TORCH_PYTHON:-$PWD/.deps/torch-2.11/bin/python}"
cmake --build "$build" -j"$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=report_objects=1
cd "$build"
ctest --output-on-failure -j"$jobs" --timeout 900 -LE "nightly|fuzz" "$@"
