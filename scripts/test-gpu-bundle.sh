#!/usr/bin/env bash
# The LibTorch 2.11 (PyPI, CUDA 13.0) leg of CI: installs torch 2.11.0 into .deps/ (once), builds
# the GPU bundle against it in build-torch211/ (scripts/gpu-bundle.sh), runs the host-side tests
# that touch LibTorch, CUDA or the device path there, and proves the bundle on this GPU-less
# machine (scripts/check-gpu-bundle.sh: a separate torch 2.11.0, "no usable CUDA device").
# The whole suite and the sanitizer suite run against Debian's 1.13 in CI (scripts/test.sh,
# scripts/test-sanitized.sh); both pass against 2.11 too, run by hand (docs/building.md says how
# and why not in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bundle=${VALIDATE_BUNDLE:-.deps/bundle/validate-gpu.tar.gz}
scripts/gpu-bundle.sh "$bundle"
t1=$SECONDS
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build build-torch211 -j"$jobs" --target validate_core_tests validate_generate_tests
# the core and generator tests (LibTorch 2.11 on the CPU, the device fallback), then every
# gpu-labelled test (host-side ones run, device ones skip)
ctest --test-dir build-torch211 --output-on-failure -j"$jobs" -LE gpu \
  -R '^(CudaUnusable|Generate|Inputs|Verify|CaseFile|Merge|MergeSets|Npy|Philox|PhiloxVector|Dtype|OutputDir|ShellQuote|ParallelHash)\.'
ctest --test-dir build-torch211 --output-on-failure -j"$jobs" -L gpu
t2=$SECONDS
scripts/check-gpu-bundle.sh "$bundle"
echo "test-torch211: install + build + bundle $((t1 - t0)) s, tests $((t2 - t1)) s, bundle check $((SECONDS - t2)) s"
