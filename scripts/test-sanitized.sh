#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (with LeakSanitizer): builds
# into build-asan/ with -DVALIDATE_SANITIZE=ON and runs ctest there, minus the `nightly` label
# (heavy sweeps, not in scripts/test.sh either) and the `source_only` label (tests that run no
# program of this build — the docs' links, the GPU carry's packing — and pass or fail alike in every
# build: scripts/test.sh runs them). Any sanitizer report fails the test that
# triggered it: ASan and LSan abort (abort_on_error), UBSan halts (halt_on_error, and the code is
# built with -fno-sanitize-recover=undefined). Extra arguments go to ctest. .ci/run calls this.
#
# Compiler: clang when it can link libFuzzer (scripts/install-deps.sh installs clang and
# libclang-rt-dev). The libFuzzer targets of tests/fuzz are then built inside this build and the
# `fuzz.<target>` tests run each fuzzer for 20 s with the suite: the fuzzers share this build's
# sanitized libraries instead of a third build of their own. Without clang, GCC builds it and the
# fuzzers are left to scripts/test.sh's fuzz.script (skipped there too without clang).
# Debug info is line tables only (-gline-tables-only / -g1): sanitizer stacks keep their function
# names, files and lines, and the build is about a third cheaper than with full -g.
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

. scripts/lib/fuzz-clang.sh
if fuzz_clang; then
  fuzz=ON
  compilers=(-DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx")
  debug=-gline-tables-only
else
  fuzz=OFF
  echo "test-sanitized: $fuzz_clang_why: building with GCC, without the fuzzers"
  # CI runs the fuzzers only here (.ci/run leaves fuzz.script out of scripts/test.sh).
  [ "${CI:-}" != true ] || { echo "test-sanitized: under CI the fuzzers must run: install clang and libclang-rt-dev" >&2; exit 1; }
  compilers=(-DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++)
  debug=-g1
fi
# A build tree configured with the other compiler cannot switch in place (CMake keeps the first);
# VALIDATE_FUZZ in its cache says which one it was (ON: clang).
if [ -f "$build/CMakeCache.txt" ] && ! grep -qx "VALIDATE_FUZZ:BOOL=$fuzz" "$build/CMakeCache.txt"; then
  echo "test-sanitized: $build/ was configured with another compiler: building it anew"
  rm -rf "$build"
fi
# -O1 without NDEBUG: asserts stay on, stacks stay readable, tests stay fast enough.
cmake -S . -B "$build" "${compilers[@]}" -DVALIDATE_SANITIZE=ON -DVALIDATE_FUZZ=$fuzz \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 $debug" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 $debug" \
  -DCMAKE_Fortran_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DVALIDATE_TORCH="$torch" -DVALIDATE_CUDA=OFF -DVALIDATE_BUILD_BENCH=OFF \
  -DVALIDATE_TORCH_PYTHON="${VALIDATE_TORCH_PYTHON:-$PWD/.deps/torch-2.11/bin/python}"
cmake --build "$build" -j"$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=report_objects=1
# report.html_in_chromium makes its reports here (instrumented) but leaves their rendering in
# Chromium, which reads only the HTML's bytes, to scripts/test.sh (html_in_browser.sh).
export VALIDATE_SKIP_BROWSER=1
cd "$build"
ctest --output-on-failure -j"$jobs" --timeout 900 -LE "nightly|source_only" "$@"
