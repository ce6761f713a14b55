#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (with LeakSanitizer): builds
# into build-asan/ with -DVALIDATE_SANITIZE=ON and runs ctest there, minus the `nightly` and `fuzz`
# labels (the fuzzers have their own sanitized build: scripts/fuzz.sh). Any sanitizer report fails
# the test that triggered it (abort_on_error / halt_on_error). Extra arguments go to ctest.
#
# LibTorch: OFF by default here. Debian's LibTorch 1.13 is not instrumented and its own tests take
# most of the time under ASan; docs/reliability.md has the measurements behind this choice. Set
# VALIDATE_SANITIZE_TORCH=AUTO to include it anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
torch=${VALIDATE_SANITIZE_TORCH:-OFF}
build=${VALIDATE_SANITIZE_BUILD:-build-asan}
# -O1 -g without NDEBUG: asserts stay on, stacks stay readable, tests stay fast enough.
cmake -S . -B "$build" -DVALIDATE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DVALIDATE_TORCH="$torch" -DVALIDATE_CUDA=OFF -DVALIDATE_BUILD_BENCH=OFF
cmake --build "$build" -j"$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$build"
ctest --output-on-failure -j"$jobs" --timeout 900 -LE "nightly|fuzz" "$@"
