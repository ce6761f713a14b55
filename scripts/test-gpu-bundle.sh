#!/usr/bin/env bash
# The GPU bundle leg of CI: packs the GPU acceptance bundle from build/ (scripts/gpu-bundle.sh;
# build/ is what scripts/test.sh built against PyPI's torch 2.11.0+cu130, so nothing is rebuilt)
# and proves it on this GPU-less machine (scripts/check-gpu-bundle.sh: a separate torch 2.11.0 in
# a venv of its own, installed from the wheels scripts/install-torch.sh downloaded, and the
# device query ending in "no usable CUDA device"). The host-side tests of the CUDA code run in
# build/ with the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bundle=${VALIDATE_BUNDLE:-.deps/bundle/validate-gpu.tar.gz}
scripts/gpu-bundle.sh "$bundle"
t1=$SECONDS
scripts/check-gpu-bundle.sh "$bundle"
echo "test-gpu-bundle: bundle $((t1 - t0)) s, bundle check $((SECONDS - t1)) s"
