#!/usr/bin/env bash
# Proves, on a machine without a GPU, that the GPU bundle (scripts/gpu-bundle.sh) runs on the GPU
# machine with nothing built there and nothing of this machine's paths in it:
#   1. it unpacks into an empty folder, at most 64 MiB;
#   2. no ELF file in it has a run path (RPATH/RUNPATH) or names a library by a path;
#   3. a separate python with `pip install torch==2.11.0` (a fresh venv in the temp folder, as the
#      GPU machine's python3 has it) provides every library: with the launcher's environment, ldd
#      resolves each one, and torch's, cuDNN's, cuBLAS's and the CUDA runtime's resolve inside that
#      venv, none inside this repository;
#   4. the launcher refuses a python without torch 2.11 + CUDA 13 (exit 2, saying why);
#   5. the one-call acceptance starts: the CPU smoke references are generated with the bundle's
#      LibTorch 2.11 module, gpu_tests run (their device tests skip), and the device query stops
#      the call with "no usable CUDA device: <why>" (exit 1), its results packed into one folder of
#      at most 8 files of at most 16 MiB;
#   6. `validate generate --device cuda` falls back to the CPU recording the CUDA runtime's reason
#      (not "built without CUDA": the bundle's LibTorch is the CUDA one);
#   7. scripts/nightly.sh runs from the bundle on its binaries: its CPU branch end to end on the
#      smoke set, and its GPU branch (nvidia-smi stood in) until each run says "no usable CUDA
#      device".
#
#   scripts/check-gpu-bundle.sh BUNDLE.tar.gz [--python PY]
#     --python PY       use PY's torch instead of making the venv (it must not be the one the bundle
#                       was built against, or check 3 proves nothing)
#     VALIDATE_WHEELS   a folder of wheels to install torch==2.11.0 from (pip --no-index); default:
#                       scripts/install-torch.sh's download folder when it exists, else PyPI
# Exit 0 when every check holds; each failure is printed with what was found.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:?usage: scripts/check-gpu-bundle.sh BUNDLE.tar.gz [--python PY]}
[[ $bundle = /* ]] || bundle=$PWD/$bundle
py=""
[[ ${2:-} == --python ]] && py=${3:?--python needs a path}
fails=0
ok() { echo "check-gpu-bundle: ok   $*"; }
bad() { echo "check-gpu-bundle: FAIL $*"; fails=$((fails + 1)); }
t0=$SECONDS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bundle-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
size=$(stat -c %s "$bundle")
((size <= 64 * 1024 * 1024)) && ok "bundle is $((size / 1024)) KiB (limit 65536 KiB)" || bad "bundle is $size bytes, over 64 MiB"
mkdir "$tmp/unpacked"
tar -C "$tmp/unpacked" -xzf "$bundle" || { bad "tar xzf $bundle"; exit 1; }
b=$tmp/unpacked/validate-gpu
[[ -x $b/run-acceptance.sh && -x $b/build-gpu/validate ]] || { bad "no validate-gpu/run-acceptance.sh or build-gpu/validate in the bundle"; exit 1; }
ok "unpacked: $(find "$b" -type f | wc -l) files, $(du -sh "$b" | cut -f1)"

# 2. run paths and library names
elves=()
while IFS= read -r -d '' f; do head -c4 "$f" | grep -q ELF && elves+=("$f"); done < <(find "$b" -type f -print0)
for f in "${elves[@]}"; do
  d=$(readelf -d "$f")
  if grep -Eq '\((RPATH|RUNPATH)\)' <<<"$d"; then
    bad "${f#$b/} has a run path: $(grep -E '\((RPATH|RUNPATH)\)' <<<"$d")"
  fi
  if grep -E '\(NEEDED\)' <<<"$d" | grep -q '\[/'; then
    bad "${f#$b/} names a library by path: $(grep -E '\(NEEDED\)' <<<"$d" | grep '\[/')"
  fi
done
ok "${#elves[@]} ELF files checked for run paths and library paths"
# Every library named is the base system's (glibc, libstdc++, libgcc_s, libcrypto.so.3), one of
# torch's or the nvidia-* wheels' (checked in 3), or carried in build-gpu/syslib/: this machine's
# /usr/lib resolves everything here, so ldd alone could not tell.
base_libs=" libc.so.6 libm.so.6 libgcc_s.so.1 libstdc++.so.6 ld-linux-x86-64.so.2 libmvec.so.1 libcrypto.so.3 libdl.so.2 libpthread.so.0 librt.so.1 "
for f in "${elves[@]}"; do
  [[ $f == */syslib/* ]] && continue
  for lib in $(readelf -d "$f" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $5); print $5 }'); do
    # The wheel's torch libraries have unversioned sonames; a versioned one (libc10.so.1.13) is a
    # Debian LibTorch that the build picked up from the system's folders.
    if [[ ($lib == libtorch* || $lib == libc10*) && $lib == *.so.* ]]; then
      bad "${f#$b/} needs $lib: a system LibTorch, not the wheel's"
      continue
    fi
    [[ $base_libs == *" $lib "* || -e $b/build-gpu/syslib/$lib || $lib == libtorch* || $lib == libc10* ||
       $lib == libcud* || $lib == libcublas* ]] && continue
    bad "${f#$b/} needs $lib, which is neither base system, torch/nvidia nor carried in build-gpu/syslib"
  done
done

# 3. a separate torch 2.11.0
if [[ -z $py ]]; then
  t1=$SECONDS
  python3 -m venv "$tmp/venv" || { bad "python3 -m venv"; exit 1; }
  src=()
  wheels=${VALIDATE_WHEELS:-${VALIDATE_TORCH_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/validate/wheels-torch-2.11}}
  [[ -d $wheels ]] && src=(--no-index --find-links "$wheels")
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$tmp/venv/bin/python" -m pip install -q "${src[@]}" torch==2.11.0 ||
    { bad "pip install torch==2.11.0 into a fresh venv"; exit 1; }
  py=$tmp/venv/bin/python
  ok "fresh venv with torch==2.11.0 in $((SECONDS - t1)) s: $("$py" -c 'import torch; print(torch.__version__)')"
fi
site=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
export VALIDATE_PYTHON=$py
for f in "$b/build-gpu/validate" "$b"/build-gpu/lib/validate/*.so "$b/build-gpu/tests/gpu/gpu_tests" "$b/build-gpu/bench/gpu/bench_gpu_permute"; do
  out=$("$b/run-acceptance.sh" --exec ldd "$f" 2>&1)
  if grep -q "not found" <<<"$out"; then bad "${f#$b/}: $(grep 'not found' <<<"$out" | tr -s ' \t' ' ')"; fi
  for lib in libtorch_cpu.so libtorch_cuda.so libc10.so libcudnn.so.9 libcublasLt.so.13 libcudart.so.13; do
    where=$(awk -v l="$lib" '$1 == l { print $3 }' <<<"$out")
    [[ -z $where ]] && continue
    case $where in
      "$root"/*) bad "${f#$b/}: $lib resolves to this repository ($where)" ;;
      "$site"/*) ;;
      *) bad "${f#$b/}: $lib resolves outside the separate torch ($where)" ;;
    esac
  done
done
ok "ldd with the launcher's environment: torch, cuDNN, cuBLASLt, cudart from $site"

# 4. a python without torch 2.11 is refused
out=$(VALIDATE_PYTHON=/nonexistent/python3 "$b/run-acceptance.sh" --steps device 2>&1); rc=$?
[[ $rc == 2 ]] && ok "a python without torch is refused (exit 2): $out" || bad "a missing python gave exit $rc: $out"

# 5. the one call, as far as it goes without a GPU
out=$("$b/run-acceptance.sh" --out "$tmp/report" --work "$tmp/work" --pack-out "$tmp/back" 2>&1); rc=$?
echo "$out" | sed 's/^/    /'
[[ $rc == 1 ]] || bad "the acceptance without a GPU exited $rc (expected 1)"
grep -q "^\[ok\] generate-smoke-cpu" <<<"$out" && ok "CPU smoke references generated with the bundle's LibTorch module" ||
  bad "generate-smoke-cpu did not pass"
grep -q "^\[ok\] gpu-tests" <<<"$out" && ok "gpu_tests ran (device tests skip)" || bad "gpu_tests did not pass"
why=$(grep -h "no usable CUDA device: " "$tmp/report/logs/device-query.log" 2>/dev/null | head -1)
[[ -n $why ]] && ok "device query stops the call: $why" || bad "device-query.log has no 'no usable CUDA device'"
# every step of the plan after `device`, as --dry-run lists the two calls
plan=$("$b/scripts/gpu-acceptance.sh" --dry-run --prebuilt 2>/dev/null)
left=$(sed -n 's/^Call 1: [0-9]* s (device,\([^)]*\)).*/\1/p' <<<"$plan"),$(sed -n 's/^Call 2: .*--steps \([^)]*\)).*/\1/p' <<<"$plan")
grep -qF "second call --steps $left" <<<"$out" && ok "the steps left are named for a second call: $left" ||
  bad "the steps left were not named ($left)"
n=$(find "$tmp/back" -type f | wc -l)
big=$(find "$tmp/back" -type f -size +16M | wc -l)
((n >= 1 && n <= 8 && big == 0)) && ok "results: $n files in one folder ($(ls "$tmp/back" | tr '\n' ' '))" ||
  bad "results folder: $n files, $big over 16 MiB"

# 6. generate --device cuda records the CUDA runtime's reason
"$b/run-acceptance.sh" --exec "$b/build-gpu/validate" generate --cases "$b/cases/smoke.json" --device cuda \
  --dtype float32 --out "$tmp/ref-cuda" --progress 0 >/dev/null 2>&1 || bad "generate --device cuda failed"
fb=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("libtorch_version"), "|", d.get("device"), "|", d.get("device_fallback"))' "$tmp/ref-cuda/system_info.json" 2>&1)
if [[ $fb == 2.11.0*"| cpu | no usable CUDA device: "* && $fb != *"built without CUDA"* ]]; then
  ok "generate --device cuda: $fb"
else
  bad "generate --device cuda recorded: $fb"
fi

# 7. scripts/nightly.sh as shipped, on the bundle's binaries (nothing built): without a GPU its CPU
#    branch gates the smoke set end to end; where nvidia-smi lists a GPU (a stand-in here) its GPU
#    branch passes its command-line probes, generates float32 + bfloat16 + float16 references, and
#    each of its four runs (cudnn x3 presets, LibTorch on CUDA) stops at "no usable CUDA device"
#    (exit 2).
nightly=(env VALIDATE_SKIP_BUILD=1 VALIDATE_BIN=build-gpu/validate VALIDATE_CASES=cases/smoke.json "$b/scripts/nightly.sh")
out=$(VALIDATE_OUT="$tmp/nightly-cpu" "$b/run-acceptance.sh" --exec "${nightly[@]}" 2>&1); rc=$?
if [[ $rc == 0 && $out == *"no GPU on this machine"* && ! -e $tmp/nightly-cpu/reports/build.txt ]]; then
  ok "nightly.sh from the bundle, no GPU: $(grep -c '^nightly: .*compare exit 0' <<<"$out") gated runs, exit 0, nothing built"
else
  bad "nightly.sh from the bundle without a GPU exited $rc: $(tail -3 <<<"$out")"
fi
mkdir -p "$tmp/fake-gpu"
printf '#!/bin/sh\necho "GPU 0: stand-in (UUID: GPU-0)"\n' >"$tmp/fake-gpu/nvidia-smi" && chmod +x "$tmp/fake-gpu/nvidia-smi"
out=$(PATH="$tmp/fake-gpu:$PATH" VALIDATE_OUT="$tmp/nightly-gpu" "$b/run-acceptance.sh" --exec "${nightly[@]}" 2>&1); rc=$?
r=$tmp/nightly-gpu/reports
if [[ $rc == 2 && $out == *"GPU found"* && $(grep -c "no usable CUDA device" "$r"/run-{cudnn-torch,cudnn-channels_last,cudnn-fortran,torch-cuda}.txt 2>/dev/null | grep -c ':1$') == 4 &&
      $(python3 -c 'import json,sys; print(",".join(sorted(json.load(open(sys.argv[1]))["dtypes"])))' "$tmp/nightly-gpu/ref/config.json" 2>/dev/null) == bfloat16,float16,float32 ]]; then
  ok "nightly.sh from the bundle, GPU branch: float16 references made, its 4 runs parsed and stopped at: $(head -1 "$r/run-cudnn-torch.txt")"
else
  bad "nightly.sh's GPU branch from the bundle exited $rc: $(tail -3 <<<"$out")"
fi

echo "check-gpu-bundle: $fails failure(s), $((SECONDS - t0)) s"
((fails == 0))
