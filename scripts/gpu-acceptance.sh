#!/usr/bin/env bash
# GPU acceptance run of validate: build on the GPU machine, generate references on
# CPU and CUDA, run them through LibTorch-on-CUDA and the cuDNN/cuBLASLt runner in three layouts
# with every cuDNN algorithm, compare everything against the CPU references, prove 0-ULP agreement
# on exact inputs, prove that TF32 fails the 1e-6 loss gate (and passes policies/tf32.json), and
# measure the device layout kernels and the wall time of generate + run + compare. Every command is
# logged with its wall time into summary.md; the script runs every step it was given to the end
# and exits 1 if any command did not do what it must.
#
#   scripts/gpu-acceptance.sh [--steps LIST] [--only REGEX] [--timing-only REGEX] [--out DIR]
#                             [--work DIR] [--build DIR] [--jobs N] [--keep] [--pack FILE]
#                             [--dry-run] [--force] [--prebuilt] [--deadline S] [--pack-out DIR]
#   scripts/gpu-acceptance.sh --bundle FILE
#
#   --bundle F  build here against PyPI's torch 2.11.0+cu130 and write the self-contained GPU
#             bundle F (scripts/gpu-bundle.sh; at most 64 MiB): on the GPU machine
#             `tar xzf F && validate-gpu/run-acceptance.sh --out DIR` runs the one-call acceptance
#             on the prebuilt binaries (reports/gpu/PLAN.md), building nothing.
#   --prebuilt  the binaries in --build are given (the bundle): no `build` step; `device` checks
#             them instead. The bundle's launcher passes it.
#   --deadline S  stop starting steps once one would end past S seconds of this invocation (its
#             estimate, below, against the time left); the steps left are listed in summary.md and
#             on stderr as the second call's --steps
#   --pack-out D  at the end, write the results into D as at most 8 files: summary.md, verdicts.tsv
#             (one line per command), logs.tar.gz, compare.tar.gz (JSON + Markdown; HTML only
#             while the tar stays under 16 MiB), env.txt
#
#   --steps   comma list, run in this order (default: all of them, which no single device call
#             can hold; see docs/cudnn.md and reports/gpu/PLAN.md for the split):
#               build          env report, GoogleTest from the carry, configure (LibTorch 2.x from
#                              python's torch, guarded) and build, ctest -L gpu
#               device         (prebuilt binaries) env report, the device query (validate run
#                              --backend cudnn on one tiny case must open the device), gpu_tests
#               train          the device training trajectory: gpu_tests' training tests and
#                              cases/train_smoke.json through cudnn in the three presets
#               smoke          cases/smoke.json through everything below, in one step
#               sweep-refs     default-sweep subset: CPU and CUDA references, verify, same inputs,
#                              LibTorch on CUDA vs the CPU references
#               sweep-torch, sweep-channels_last, sweep-fortran
#                              the subset through cuDNN in one preset, --algo all --repeat 2
#               sweep-exact    exact-fill subset: 0-ULP gates per preset
#               sweep-tf32     --math tf32 must fail the default policy and pass policies/tf32.json
#               bench          bench_gpu_permute vs cudaMemcpy D2D
#               timing         wall time of generate + cudnn run + compare on --timing-only
#             `ctest-all` (the whole suite but nightly/fuzz, recorded) runs only when named.
#   --only    regex over 'dtype/case' for the sweep-* steps (default: the default sweep's cases
#             with K <= 9216, ic <= 1024). The full sweep (--only .) needs ~7 GB per reference set.
#   --timing-only  the subset the timing step measures (default: the whole default sweep)
#   --out     report folder (default reports/gpu/<UTC date>-<gpu name>/): small, meant to be committed
#   --work    references and runs (default /tmp/validate-gpu-work): large, never committed. Every
#             run is deleted right after its compare; references at the end unless --keep.
#   --build   build folder (default build-gpu)
#   --keep    keep the references in --work at the end (a later step on the same machine reuses them)
#   --pack F  right after the build step, tar the built binaries (validate with its modules in
#             lib/validate/, gpu_tests, bench_gpu_permute) into F
#             so a later device call on a fresh machine can skip the build (PLAN.md)
#   --dry-run print the plan — each step: what it does, estimated seconds, peak disk and the disk it
#             keeps — and exit: 0 when every step fits (<= 480 s), 2 when one does not
#   --force   run steps whose estimate exceeds 480 s anyway
#
# Time and disk. A device call runs at most 10 minutes and the GPU machine has a 64 GiB disk, so
# each step is planned to take at most 8 minutes, estimated from the bytes it writes and reads
# (the throughputs below, measured on the 2-core development machine and taken as a floor), and
# the script refuses a step estimated longer (exit 2) unless --force. The estimate is a plan, not a
# measurement: summary.md records what each command actually took.
#
# Dependencies. The GPU machine reaches no package registry: run scripts/prepare-gpu-carry.sh on the
# development machine first and bring third_party_carry/ along (it is git-ignored). This script
#   - builds the carried GoogleTest sources into third_party_carry/prefix (once),
#   - puts third_party_carry/prefix first in CMAKE_PREFIX_PATH (nlohmann_json, CLI11, header-only
#     fmt with FMT_HEADER_ONLY=1, GTest), with CMAKE_FIND_PACKAGE_PREFER_CONFIG=ON,
#   - uses the system OpenSSL headers if present, else the carried ones (OPENSSL_INCLUDE_DIR) with
#     the system libcrypto.so.3 (or the carried one) as OPENSSL_CRYPTO_LIBRARY,
#   - finds cuDNN's header and library under one root (find_cudnn), and cuBLASLt likewise,
#   - gets LibTorch from python3's torch (torch.utils.cmake_prefix_path, which the top-level
#     CMakeLists.txt queries itself, refusing torch < 2.8 or another CUDA major: ValidateTorchGuard)
#     with VALIDATE_TORCH=ON.

# ---- functions (tests/scripts source this file with VALIDATE_ACCEPTANCE_LIB=1 to test them) -----

# Estimated throughputs (bytes per second) and fixed costs (seconds) of the plan. Measured on the
# 2-core development machine under load (generate 60 MB/s, LibTorch CPU run 140 MB/s, compare
# 670 MB/s of reference + run) and rounded down; the GPU machine has 16 cores.
GEN_BPS=${GEN_BPS:-50000000}
RUN_BPS=${RUN_BPS:-100000000}
CMP_BPS=${CMP_BPS:-200000000}
VERIFY_BPS=${VERIFY_BPS:-300000000}
BUILD_S=${BUILD_S:-330}     # configure + build of validate, gpu_tests, bench (a guess: never run there)
CTEST_GPU_S=${CTEST_GPU_S:-90}
BENCH_S=${BENCH_S:-90}
STEP_LIMIT_S=${STEP_LIMIT_S:-480}
# --algo all runs at most this many conv2d variants per case: 8 fwd + 6 bwd_data + 7 bwd_filter
# algorithms, the baseline counted once per direction.
MAX_VARIANTS=19

# find_cudnn: sets CUDNN_INCLUDE and CUDNN_LIBRARY to a cudnn.h and the libcudnn.so of the SAME
# root and major version. Searches ${CUDNN_SEARCH_ROOTS} (default: $CUDNN_ROOT, /usr/local/cuda,
# /usr), each root's own lib64/ and lib/ (for /usr also lib/<multiarch>/), and then python3's
# nvidia-cudnn wheel ($PYTHON). The old search listed /usr/lib/x86_64-linux-gnu for every root, so
# the toolkit's header could be paired with a different cuDNN found first by `ls`.
cudnn_header_major() {  # the CUDNN_MAJOR an include dir declares
  local f
  for f in "$1/cudnn_version.h" "$1/cudnn.h"; do
    [[ -f $f ]] || continue
    sed -n 's/^#define CUDNN_MAJOR[[:space:]]\{1,\}\([0-9]\{1,\}\).*/\1/p' "$f" | head -1
    return 0
  done
}
cudnn_lib_in() {  # cudnn_lib_in MAJOR DIR... : the first DIR/libcudnn.so.MAJOR (or libcudnn.so)
  local major=$1 d
  shift
  for d in "$@"; do
    [[ -d $d ]] || continue
    if [[ -n $major && -e $d/libcudnn.so.$major ]]; then echo "$d/libcudnn.so.$major"; return 0; fi
    if [[ -e $d/libcudnn.so ]]; then
      # an unversioned link must lead to the same major
      local target
      target=$(readlink -f "$d/libcudnn.so")
      if [[ -z $major || $target == *libcudnn.so.$major* ]]; then echo "$d/libcudnn.so"; return 0; fi
    fi
  done
  return 1
}
find_cudnn() {
  CUDNN_INCLUDE=""; CUDNN_LIBRARY=""
  local d major lib multiarch
  multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  for d in ${CUDNN_SEARCH_ROOTS:-${CUDNN_ROOT:-} /usr/local/cuda /usr}; do
    [[ -n $d && -f $d/include/cudnn.h ]] || continue
    major=$(cudnn_header_major "$d/include")
    local dirs=("$d/lib64" "$d/lib")
    [[ $d == /usr || $d == */usr ]] && dirs+=("$d/lib/$multiarch")
    lib=$(cudnn_lib_in "$major" "${dirs[@]}") || continue
    CUDNN_INCLUDE=$d/include CUDNN_LIBRARY=$lib
    return 0
  done
  # python3's torch depends on the nvidia-cudnn wheel: include/cudnn.h and lib/libcudnn.so.9 under
  # one folder of the `nvidia` namespace package (nvidia/cudnn/, or a per-CUDA folder such as
  # nvidia/cu13/ in newer wheels). Each such folder is a root of its own.
  local nv
  for nv in $(nvidia_package_dirs); do
    for d in "$nv"/*/; do
      d=${d%/}
      [[ -f $d/include/cudnn.h ]] || continue
      major=$(cudnn_header_major "$d/include")
      lib=$(cudnn_lib_in "$major" "$d/lib" "$d/lib64") || continue
      CUDNN_INCLUDE=$d/include CUDNN_LIBRARY=$lib
      return 0
    done
  done
  return 1
}
nvidia_package_dirs() {  # the folders of python3's `nvidia` namespace package (pip's CUDA wheels)
  "${PYTHON:-python3}" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null || true
}

find_cublaslt() {
  CUBLASLT_LIBRARY=""
  ls /usr/local/cuda/lib64/libcublasLt.so* >/dev/null 2>&1 && return 0
  local nv
  for nv in $(nvidia_package_dirs); do
    CUBLASLT_LIBRARY=$(ls "$nv"/*/lib/libcublasLt.so.[0-9]* 2>/dev/null | head -1)
    [[ -n $CUBLASLT_LIBRARY ]] && return 0
  done
  return 0
}

# estimate CASEFILE ONLY DTYPES: prints "ref_bytes conv_out_bytes mm_out_bytes cases elements" for
# the cases `validate generate --cases CASEFILE --only ONLY --dtype DTYPES` writes. Tested against
# `validate list` (tests/scripts/gpu_acceptance_plan.sh): the element count must match exactly.
estimate() {
  "${PYTHON:-python3}" - "$@" <<'PY'
import json, re, sys
path, only, dtypes = sys.argv[1], sys.argv[2], [d for d in sys.argv[3].split(",") if d]
f = json.load(open(path))
defaults = dict(f.get("defaults", {}))
file_dtypes = f.get("dtypes", ["float32"])
cases = []
for ic in f.get("sweep", {}).get("in_channels", []):
    c = dict(defaults, in_channels=ic)
    k = ic // c.get("groups", 1) * c["kernel"][0] * c["kernel"][1]
    c["name"] = "k%04d_ic%03d" % (k, ic)
    cases.append(c)
for c in f.get("cases", []):
    cases.append(dict(defaults, **c))
ref = conv_out = mm_out = 0
n_cases = elements = 0
for dt in ["bfloat16", "float32", "float16", "float64"]:
    for c in cases:
        own = c.get("dtypes", file_dtypes)
        if dt not in own or (dtypes and dt not in dtypes):
            continue
        if only and not re.search(only, dt + "/" + c["name"]):
            continue
        n, ch, h, w, o = c.get("batch", 1), c["in_channels"], c["height"], c["width"], c["out_channels"]
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = c["kernel"], c["stride"], c["padding"], c["dilation"]
        g, bias = c.get("groups", 1), c.get("bias", True)
        ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        x, wt, y, b = n * ch * h * w, o * (ch // g) * kh * kw, n * o * ho * wo, o if bias else 0
        m, k = n * ho * wo, ch // g * kh * kw
        a, bb, my = m * k, k * o, m * o
        conv_in, conv_res = x + wt + b + y, y + 1 + x + wt + b     # input weight bias target | output loss dx dw db
        mm_in, mm_res = a + bb + my, my + 1 + a + bb               # A B target | output loss dA dB
        size = {"float16": 2, "float64": 8}.get(dt, 4)             # bfloat16 is stored as float32
        ref += (conv_in + conv_res + mm_in + mm_res) * size
        conv_out += conv_res * size
        mm_out += mm_res * size
        elements += conv_in + conv_res + mm_in + mm_res
        n_cases += 1
print(ref, conv_out, mm_out, n_cases, elements)
PY
}

# ---- the plan ---------------------------------------------------------------------------------
# plan_step NAME: sets PLAN_S (estimated seconds), PLAN_PEAK (bytes on --work at its peak),
# PLAN_KEEP (bytes it leaves on --work: references only with --keep) and PLAN_WHAT (one line).
human() { awk -v b="$1" 'BEGIN { s = "B KB MB GB TB"; split(s, u, " "); i = 1; while (b >= 1000 && i < 5) { b /= 1000; i++ } printf (i == 1 ? "%d %s" : "%.1f %s"), b, u[i] }'; }
sizes_for() {  # sizes_for CASEFILE ONLY -> R (ref bytes) CO (conv result bytes) MO (matmul result bytes)
  read -r R CO MO _ _ < <(estimate "$1" "$2" float32,bfloat16)
}
secs() { awk "BEGIN { printf \"%d\", ($1) + 0.999 }"; }  # evaluates the arithmetic in $1
plan_step() {
  local s=$1 file only
  PLAN_S=0 PLAN_PEAK=0 PLAN_KEEP=0
  case $s in
    smoke) file=cases/smoke.json only="" ;;
    timing) file=cases/default.json only=$TIMING_ONLY ;;
    sweep-*) file=cases/default.json only=$ONLY ;;
  esac
  [[ -n ${file:-} ]] && sizes_for "$file" "$only"
  local keep_refs=0
  case $s in
    build)
      PLAN_S=$((BUILD_S + CTEST_GPU_S)); PLAN_WHAT="configure + build (validate, gpu_tests, bench_gpu_permute), ctest -L gpu" ;;
    device)
      PLAN_S=$CTEST_GPU_S; PLAN_WHAT="env report, device query, gpu_tests (prebuilt)" ;;
    train)
      PLAN_S=120; PLAN_WHAT="training trajectories on the device: gpu_tests' training tests, train_smoke.json x 3 presets" ;;
    ctest-all)
      PLAN_S=300; PLAN_WHAT="the whole suite but nightly/fuzz (recorded, not required)" ;;
    bench)
      PLAN_S=$BENCH_S; PLAN_WHAT="bench_gpu_permute: device layout kernels vs cudaMemcpy D2D" ;;
    smoke)
      # 2 ref sets + 2 exact sets, 4 + 6 + 2 runs, each compared: tiny.
      PLAN_S=$(secs "60 + (4*$R)/$GEN_BPS + (13*($R))/$CMP_BPS")
      PLAN_PEAK=$((4 * R + MAX_VARIANTS * CO + MO)); keep_refs=$((4 * R))
      PLAN_WHAT="smoke: refs cpu+cuda, torch-cuda, cudnn x3 presets (--algo all --repeat 2), exact 0-ULP gates, tf32" ;;
    sweep-refs)
      PLAN_S=$(secs "20 + 2*$R/$GEN_BPS + 2*$R/$VERIFY_BPS + ($CO+$MO)/$RUN_BPS + ($R+$CO+$MO)/$CMP_BPS")
      PLAN_PEAK=$((2 * R + CO + MO)); keep_refs=$R
      PLAN_WHAT="default subset: generate cpu + cuda, verify, same inputs, torch --device cuda vs cpu refs" ;;
    sweep-torch | sweep-channels_last | sweep-fortran)
      # the CPU references (made here if the step runs alone), then 2 executions per variant
      PLAN_S=$(secs "10 + $R/$GEN_BPS + (2*$MAX_VARIANTS*$CO + $MO)/$RUN_BPS + ($R + $MAX_VARIANTS*$CO + $MO)/$CMP_BPS")
      PLAN_PEAK=$((R + MAX_VARIANTS * CO + MO)); keep_refs=$R
      PLAN_WHAT="default subset through cudnn, layout ${s#sweep-}, --algo all --repeat 2, compare" ;;
    sweep-exact)
      # exact refs cpu; per preset: fwd-all run + pinned-GEMM backward-all run, 5 gated compares
      PLAN_S=$(secs "20 + $R/$GEN_BPS + 3*(2*$MAX_VARIANTS*$CO + 2*$MO)/$RUN_BPS + 3*5*($R + $MAX_VARIANTS*$CO)/$CMP_BPS")
      PLAN_PEAK=$((R + MAX_VARIANTS * CO + MO)); keep_refs=$R
      PLAN_WHAT="exact-fill subset: float32 0-ULP output and gradient gates, 3 presets" ;;
    sweep-tf32)
      PLAN_S=$(secs "10 + $R/$GEN_BPS + ($CO+$MO)/$RUN_BPS + 2*($R+$CO+$MO)/$CMP_BPS")
      PLAN_PEAK=$((R + CO + MO)); keep_refs=$R
      PLAN_WHAT="--math tf32: default policy must fail, policies/tf32.json must pass" ;;
    timing)
      PLAN_S=$(secs "10 + $R/$GEN_BPS + ($CO+$MO)/$RUN_BPS + ($R+$CO+$MO)/$CMP_BPS")
      PLAN_PEAK=$((R + CO + MO))
      PLAN_WHAT="wall time: generate cpu + run cudnn (torch layout, auto algorithms) + compare" ;;
    *) echo "gpu-acceptance: unknown step '$s' (see --help)" >&2; return 2 ;;
  esac
  ((KEEP)) && PLAN_KEEP=$keep_refs
  return 0
}
print_plan() {  # prints the plan table; returns 2 if a step exceeds STEP_LIMIT_S
  local s bad=0 total=0
  echo "| step | estimated s | peak disk | keeps | what |"
  echo "|---|---:|---:|---:|---|"
  for s in ${STEPS//,/ }; do
    plan_step "$s" || return 2
    local mark=""
    ((PLAN_S > STEP_LIMIT_S)) && { mark=" **over ${STEP_LIMIT_S} s**"; bad=1; }
    printf '| %s | %d%s | %s | %s | %s |\n' "$s" "$PLAN_S" "$mark" "$(human "$PLAN_PEAK")" "$(human "$PLAN_KEEP")" "$PLAN_WHAT"
    total=$((total + PLAN_S))
  done
  echo
  echo "Estimated total: $total s; subset --only '$ONLY'; timing subset '$TIMING_ONLY'; reports only are kept under --out."
  return $((bad * 2))
}

# The cuDNN algorithms that sum products directly (neither FFT nor Winograd, whose transforms round
# differently), named one by one: compare's --variant takes RE2 syntax, which has no lookahead.
DIRECT_FWD='(IMPLICIT_GEMM|IMPLICIT_PRECOMP_GEMM|GEMM|DIRECT)'
DIRECT_BWD='(ALGO_0|ALGO_1|ALGO_3)'
# write_verdicts SUMMARY: summary.md's command rows as tab-separated lines, one per command, always
# six columns: step, command, expect, exit, verdict, seconds, after a header line naming them. The
# plan tables are left out. A row is read from both ends: its first cell is the step, its last four
# (which never hold a '|') expect, exit, verdict and seconds, and the command is everything between
# the backticks in between, so a '|' in a command never splits it. The command is written as step()
# shows it (a '|' escaped as '\|' there) with that escape undone; a tab in it becomes a space.
write_verdicts() {
  # shellcheck disable=SC2016  # the backticks are Markdown's, matched literally
  local line re='^\| ([^|]+) \| `(.*)` \| ([^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \|$' cmd
  printf 'step\tcommand\texpect\texit\tverdict\tseconds\n'
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line =~ $re ]] || continue
    cmd=${BASH_REMATCH[2]//\\|/|}
    cmd=${cmd//$'\t'/ }
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "${BASH_REMATCH[1]}" "$cmd" "${BASH_REMATCH[3]}" "${BASH_REMATCH[4]}" \
      "${BASH_REMATCH[5]}" "${BASH_REMATCH[6]}"
  done <"$1"
}
if [[ ${VALIDATE_ACCEPTANCE_LIB:-0} == 1 ]]; then
  return 0 2>/dev/null || exit 0
fi

# ---- main -------------------------------------------------------------------------------------
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ALL_STEPS="build,smoke,sweep-refs,sweep-torch,sweep-channels_last,sweep-fortran,sweep-exact,sweep-tf32,bench,timing"
STEPS=$ALL_STEPS
ONLY='k(0072|0144|0288|0576|1152|2304|4608|9216)_'
TIMING_ONLY='.'
OUT=""
WORK=/tmp/validate-gpu-work
BUILD=build-gpu
JOBS=$(nproc 2>/dev/null || echo 8)
CARRY=$ROOT/third_party_carry
KEEP=0 DRY=0 FORCE=0 PACK="" PREBUILT=0 DEADLINE=0 PACK_OUT=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --timing-only) TIMING_ONLY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --pack) PACK=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --force) FORCE=1; shift ;;
    --prebuilt) PREBUILT=1; shift ;;
    --deadline) DEADLINE=$2; shift 2 ;;
    --pack-out) PACK_OUT=$2; shift 2 ;;
    --bundle) exec "$ROOT/scripts/gpu-bundle.sh" "$2" ;;
    -h|--help) sed -n '2,/^# ---- functions/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-acceptance: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ((PREBUILT)) && [[ $STEPS == "$ALL_STEPS" ]]; then
  # The one call, cheapest and most informative first (reports/gpu/PLAN.md).
  STEPS=device,smoke,train,sweep-tf32,sweep-refs,sweep-torch,sweep-channels_last,sweep-fortran,sweep-exact,bench,timing
  ((DEADLINE)) || DEADLINE=450
fi
((PREBUILT)) && [[ ",$STEPS," == *",build,"* ]] && { echo "gpu-acceptance: --prebuilt has no build step (use device)" >&2; exit 2; }
[[ -z $ONLY ]] && { echo "gpu-acceptance: --only must name a subset (--only . for the whole default sweep)" >&2; exit 2; }
for s in ${STEPS//,/ }; do plan_step "$s" || exit 2; done

if ((DRY)); then
  print_plan
  exit $?
fi
plan_rc=0
plan_text=$(print_plan) || plan_rc=$?
if ((plan_rc != 0 && !FORCE)); then
  echo "$plan_text" >&2
  echo "gpu-acceptance: a step is estimated over ${STEP_LIMIT_S} s (one device call runs at most 10 minutes): pick a smaller --only, or --force" >&2
  exit 2
fi

want() { [[ ",$STEPS," == *",$1,"* ]]; }
GPU_NAME=$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo no-gpu) | head -1 | tr -c 'A-Za-z0-9.\n-' '_' | sed 's/_\{2,\}/_/g; s/_$//')
STAMP=$(date -u +%Y-%m-%d)
OUT=${OUT:-reports/gpu/$STAMP-$GPU_NAME}
mkdir -p "$OUT/logs" "$OUT/compare" "$WORK" || exit 2
OUT=$(cd "$OUT" && pwd)
SUMMARY=$OUT/summary.md
VALIDATE=$ROOT/$BUILD/validate
FAILED=()
T_START=$(date +%s)

# summary.md accumulates over several invocations (one per device call): a header once, then one
# section per invocation.
if [[ ! -f $SUMMARY ]]; then
  {
    echo "# GPU acceptance — $STAMP — ${GPU_NAME//_/ }"
    echo
    echo "Written by \`scripts/gpu-acceptance.sh\`. Logs: \`logs/\`; comparison reports: \`compare/\`."
    echo "Expectation: **pass** = exit 0 required; **fail** = exit 1 required (a gate must fail); **record** = exit 0 or 1 is data."
    echo "A **gate** also requires its compare JSON to count at least one passed check (a regex that selects nothing must not pass)."
  } >"$SUMMARY"
fi
{
  echo
  # The bundle has no git: its BUNDLE.txt names the commit it was built from.
  if [[ -f $ROOT/BUNDLE.txt ]]; then
    commit="$(sed -n 's/^commit: \(.\{12\}\).*/\1/p' "$ROOT/BUNDLE.txt" | head -1) (bundle)"
  else
    commit="$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' with uncommitted changes')"
  fi
  echo "## \`--steps $STEPS\` at $(date -u +%H:%M:%SZ), commit $commit"
  echo
  echo "Plan (estimates):"
  echo
  echo "$plan_text"
  echo
  echo "| step | command | expect | exit | verdict | seconds |"
  echo "|---|---|---|---:|---|---:|"
} >>"$SUMMARY"

# step NAME EXPECT CMD... — runs CMD with its output in logs/NAME.log and adds a summary row.
step() {
  local name=$1 expect=$2
  shift 2
  local log=$OUT/logs/$name.log rc=0 t0 t1 secs verdict
  t0=$(date +%s.%N)
  printf '%q ' "$@" >"$log"
  echo >>"$log"
  "$@" >>"$log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  case $expect:$rc in
    pass:0 | fail:1 | record:0 | record:1) verdict=ok ;;
    *) verdict=BAD; FAILED+=("$name") ;;
  esac
  local shown="$*"
  shown=${shown//$ROOT\//}
  shown=${shown//$WORK/\$WORK}
  shown=${shown//$OUT\//}
  shown=${shown//|/\\|}
  (( ${#shown} > 320 )) && shown="${shown:0:317}..."
  printf '| %s | `%s` | %s | %d | %s | %s |\n' "$name" "$shown" "$expect" "$rc" "$verdict" "$secs" >>"$SUMMARY"
  printf '[%s] %-48s exit %d, %ss\n' "$verdict" "$name" "$rc" "$secs"
  return 0
}

env_report() {
  echo "## nvidia-smi"; nvidia-smi || true
  echo "## nvcc"; (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 || true
  echo "## python3 / torch"; python3 -c 'import sys, torch; print(sys.executable, sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "available", torch.cuda.is_available())' 2>&1 || true
  echo "## cuDNN"; echo "include=$CUDNN_INCLUDE library=$CUDNN_LIBRARY (header major $(cudnn_header_major "$CUDNN_INCLUDE" 2>/dev/null))"
  echo "## cuBLASLt"; echo "${CUBLASLT_LIBRARY:-from the CUDA toolkit}"
  echo "## compiler"; c++ --version 2>&1 | head -1; cmake --version | head -1; ninja --version 2>&1 | head -1
  echo "## disk"; df -h "$WORK" | tail -1
  echo "## OS"; uname -a; head -2 /etc/os-release 2>/dev/null
}

build_gtest() {
  [[ -f $CARRY/prefix/lib/cmake/GTest/GTestConfig.cmake ]] && return 0
  [[ -d $CARRY/googletest ]] || { echo "no $CARRY/googletest: run scripts/prepare-gpu-carry.sh here and carry third_party_carry" >&2; return 1; }
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$CARRY/googletest" -B "$CARRY/build-gtest" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$CARRY/prefix" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "${gen[@]}" &&
    cmake --build "$CARRY/build-gtest" -j "$JOBS" && cmake --install "$CARRY/build-gtest"
}

configure_and_build() {
  local args=(-S "$ROOT" -B "$ROOT/$BUILD" -DCMAKE_BUILD_TYPE=Release -DVALIDATE_TORCH=ON -DVALIDATE_CUDA=ON
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON
    -DCMAKE_PREFIX_PATH="$CARRY/prefix" -DVALIDATE_CUDNN_INCLUDE="$CUDNN_INCLUDE"
    -DVALIDATE_CUDNN_LIBRARY="$CUDNN_LIBRARY" -DPython3_EXECUTABLE="$(command -v python3)")
  command -v ninja >/dev/null && args+=(-G Ninja)
  [[ -n ${CUBLASLT_LIBRARY:-} ]] && args+=(-DCUDA_cublasLt_LIBRARY="$CUBLASLT_LIBRARY")
  if [[ ! -f /usr/include/openssl/evp.h ]]; then
    local crypto
    crypto=$(ldconfig -p 2>/dev/null | awk '/libcrypto\.so\.3 .*x86-64/ { print $NF; exit }')
    args+=(-DOPENSSL_INCLUDE_DIR="$CARRY/openssl/include" -DOPENSSL_CRYPTO_LIBRARY="${crypto:-$CARRY/openssl/lib/libcrypto.so.3}")
  fi
  # Only what the acceptance runs: the CLI, the gpu tests and the device benchmark.
  cmake "${args[@]}" && cmake --build "$ROOT/$BUILD" -j "$JOBS" --target validate gpu_tests bench_gpu_permute
}

# Reference sets are reused within one machine when made with the same arguments (a marker
# records them), so steps run alone or together give the same results.
ensure_ref() {  # ensure_ref NAME DIR ARGS...  (generate into DIR unless it holds exactly that)
  local name=$1 dir=$2
  shift 2
  local key="$*"
  if [[ -f $dir/manifest.json && -f $dir.args && $(cat "$dir.args") == "$key" ]]; then
    echo "[reuse] $name: $dir"
    return 0
  fi
  rm -rf "$dir" "$dir.args"
  step "$name" pass "$VALIDATE" generate "$@" --out "$dir" --progress 0
  [[ -f $dir/manifest.json ]] && echo "$key" >"$dir.args"
  return 0
}
same_inputs() {  # every input hash of set $1 equals set $2's
  python3 - "$1" "$2" <<'PY'
import json, pathlib, sys
a, b = map(pathlib.Path, sys.argv[1:3])
bad = 0
metas = sorted(a.glob("*/*_metadata.json"))
for m in metas:
    other = b / m.relative_to(a)
    ha = json.loads(m.read_text()).get("input_hashes")
    hb = json.loads(other.read_text()).get("input_hashes") if other.exists() else None
    if ha != hb:
        bad += 1
        print("inputs differ:", m.relative_to(a))
print("checked", len(metas), "cases;", bad, "differ")
sys.exit(1 if bad or not metas else 0)
PY
}
refs_agree() {  # refs_agree CPU-SET CUDA-SET MARKDOWN: the CUDA generator's results vs the CPU's
  # `compare` takes a run directory, not a second reference set, so the two generators' results
  # (inputs are identical: same_inputs) are compared here, tensor by tensor: max |cuda - cpu|
  # relative to max |cpu|. Recorded; exit 1 if a float32 tensor differs by more than 1e-4.
  python3 - "$1" "$2" "$3" <<'PY'
import pathlib, sys
import numpy as np
a, b, md = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
inputs = ("_input.npy", "_weight.npy", "_bias.npy", "_target.npy", "_A.npy", "_B.npy")
rows, worst, bad = [], {}, 0
for f in sorted(a.glob("*/*.npy")):
    if f.name.endswith(inputs) and "_grad_" not in f.name:
        continue
    g = b / f.relative_to(a)
    if not g.exists():
        rows.append((str(f.relative_to(a)), "missing in the CUDA set")); bad += 1; continue
    x, y = np.load(f).astype(np.float64), np.load(g).astype(np.float64)
    scale = max(float(np.max(np.abs(x))) if x.size else 0.0, 1e-30)
    rel = float(np.max(np.abs(x - y))) / scale if x.size else 0.0
    dt = f.parent.name
    worst[dt] = max(worst.get(dt, 0.0), rel)
    rows.append((str(f.relative_to(a)), "%.3e" % rel))
    if dt == "float32" and rel > 1e-4:
        bad += 1
with md.open("w") as out:
    out.write("# generate --device cuda vs --device cpu\n\nmax |cuda - cpu| / max |cpu| per result tensor\n\n")
    out.write("| tensor | relative difference |\n|---|---:|\n")
    for r in rows:
        out.write("| %s | %s |\n" % r)
for dt, w in sorted(worst.items()):
    print("%s: worst relative difference %.3e" % (dt, w))
print(len(rows), "tensors;", bad, "float32 tensors over 1e-4 or missing")
sys.exit(1 if bad else 0)
PY
}
on_gpu() {  # the set was generated on the GPU, not silently on the CPU
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); f=d.get("device_fallback"); print("device:", d.get("device"), "fallback:", f); sys.exit(1 if f else 0)' "$1/system_info.json"
}
compare_to() {  # compare_to NAME EXPECT REF RUN [compare args...]
  local name=$1 expect=$2 ref=$3 run=$4
  shift 4
  step "$name" "$expect" "$VALIDATE" compare "$ref" "$run" "$@" --json "$OUT/compare/$name.json" --md "$OUT/compare/$name.md" \
    --html "$OUT/compare/$name.html" --color never
}
checked_something() {  # a gate passes only if it compared something: compare exits 0 on an empty selection
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; print(s["line"]); sys.exit(0 if s["passed"] > 0 else 1)' "$1"
}
gate() {  # gate NAME REF RUN [compare args...]: must pass, and must have checked something
  local name=$1
  shift
  compare_to "$name" pass "$@"
  step "$name-nonempty" pass checked_something "$OUT/compare/$name.json"
}
drop() { rm -rf "$@"; }
layout_mode() { [[ $1 == fortran ]] && echo conv || echo xcorr; }  # fortran weights are pre-flipped

# One case file, the parts a step asks for. Runs are deleted right after their compare.
PRESETS=(torch channels_last fortran)
refs_and_torch() {  # refs_and_torch TAG CASEFILE ONLY-ARGS...
  local tag=$1 file=$2
  shift 2
  local REF=$WORK/ref/$tag
  for dev in cpu cuda; do
    ensure_ref "generate-$tag-$dev" "$REF-$dev" --cases "$file" --device "$dev" --dtype float32,bfloat16 "$@"
    step "verify-$tag-$dev" pass "$VALIDATE" verify "$REF-$dev"
  done
  step "generate-$tag-cuda-on-gpu" pass on_gpu "$REF-cuda"
  step "generate-$tag-same-inputs" pass same_inputs "$REF-cpu" "$REF-cuda"
  step "generate-$tag-cuda-vs-cpu" record refs_agree "$REF-cpu" "$REF-cuda" "$OUT/compare/generate-$tag-cuda-vs-cpu.md"
  step "run-$tag-torch-cuda" record "$VALIDATE" run --backend torch --device cuda --ref "$REF-cpu" --out "$WORK/run/$tag-torch-cuda" --progress 0
  compare_to "compare-$tag-torch-cuda" record "$REF-cpu" "$WORK/run/$tag-torch-cuda"
  drop "$WORK/run/$tag-torch-cuda" "$REF-cuda" "$REF-cuda.args"
}
cudnn_preset() {  # cudnn_preset TAG CASEFILE PRESET ONLY-ARGS...
  local tag=$1 file=$2 L=$3
  shift 3
  local REF=$WORK/ref/$tag-cpu RUN=$WORK/run/$tag-cudnn-$L
  ensure_ref "generate-$tag-cpu" "$REF" --cases "$file" --device cpu --dtype float32,bfloat16 "$@"
  drop "$RUN"
  step "run-$tag-cudnn-$L" record "$VALIDATE" run --backend cudnn --device cuda --layout "$L" --conv-mode "$(layout_mode "$L")" \
    --algo all --repeat 2 --ref "$REF" --out "$RUN" --progress 0
  # recorded: FFT/Winograd variants may miss float32 gates, which is data; the baseline is gated
  compare_to "compare-$tag-cudnn-$L" record "$REF" "$RUN"
  gate "gate-$tag-cudnn-$L-float32-baseline" "$REF" "$RUN" --only '^float32/' \
    --variant "^fwd=$DIRECT_FWD,bwd_data=$DIRECT_BWD,bwd_filter=$DIRECT_BWD\$|^\$"
  drop "$RUN"
}
exact_gates() {  # exact_gates TAG CASEFILE ONLY-ARGS...
  local tag=$1 file=$2
  shift 2
  local REF=$WORK/ref/$tag-exact-cpu
  ensure_ref "generate-$tag-exact-cpu" "$REF" --cases "$file" --device cpu --dtype float32,bfloat16 --fill exact "$@"
  if [[ $tag == smoke ]]; then  # the CUDA generator draws the same exact inputs (checked on smoke)
    ensure_ref "generate-$tag-exact-cuda" "$WORK/ref/$tag-exact-cuda" --cases "$file" --device cuda --dtype float32,bfloat16 --fill exact "$@"
    step "generate-$tag-exact-same-inputs" pass same_inputs "$REF" "$WORK/ref/$tag-exact-cuda"
    drop "$WORK/ref/$tag-exact-cuda" "$WORK/ref/$tag-exact-cuda.args"
  fi
  local zero=(--gate float32.rtol=0 --gate float32.max_ulp=0 --gate float32.min_pcc=none)
  for L in "${PRESETS[@]}"; do
    local FWD=$WORK/run/$tag-exact-fwd-$L BWD=$WORK/run/$tag-exact-bwd-$L
    # (1) every forward algorithm: the float32 output is an exact sum, so every non-FFT,
    # non-Winograd forward must give it bit for bit (grad_bias = sum of dL/dy, exact where dL/dy
    # is, needs an exact forward too).
    drop "$FWD"
    step "run-$tag-exact-fwd-$L" record "$VALIDATE" run --backend cudnn --device cuda --layout "$L" --conv-mode "$(layout_mode "$L")" \
      --algo-fwd all --ref "$REF" --out "$FWD" --progress 0
    gate "gate-$tag-exact-$L-fwd-0ulp" "$REF" "$FWD" \
      --only '^float32/([^/]+/conv2d/output|k[^/]+/conv2d/grad_bias)$' --variant "^fwd=$DIRECT_FWD," "${zero[@]}"
    gate "gate-$tag-exact-$L-cublaslt-0ulp" "$REF" "$FWD" \
      --only '^float32/([^/]+/matmul/output|k[^/]+/matmul/grad_[AB])$' "${zero[@]}"
    compare_to "compare-$tag-exact-fwd-$L-all" record "$REF" "$FWD"
    drop "$FWD"
    # (2) the gradients: y and so dL/dy are exact only after an exact forward, and the heuristic's
    # forward may be Winograd or FFT, so the forward is pinned to IMPLICIT_PRECOMP_GEMM and every
    # backward algorithm varied. Exact gradients need numel(output) a power of two (k* cases).
    drop "$BWD"
    step "run-$tag-exact-bwd-$L" record "$VALIDATE" run --backend cudnn --device cuda --layout "$L" --conv-mode "$(layout_mode "$L")" \
      --algo-fwd IMPLICIT_PRECOMP_GEMM --algo-bwd-data all --algo-bwd-filter all --ref "$REF" --out "$BWD" --progress 0
    gate "gate-$tag-exact-$L-bwd-data-0ulp" "$REF" "$BWD" \
      --only '^float32/k[^/]+/conv2d/grad_input$' --variant "^fwd=IMPLICIT_PRECOMP_GEMM,bwd_data=$DIRECT_BWD," "${zero[@]}"
    gate "gate-$tag-exact-$L-bwd-filter-0ulp" "$REF" "$BWD" \
      --only '^float32/k[^/]+/conv2d/grad_weight$' --variant "^fwd=IMPLICIT_PRECOMP_GEMM,bwd_data=[^,]*,bwd_filter=$DIRECT_BWD\$" "${zero[@]}"
    compare_to "compare-$tag-exact-bwd-$L-all" record "$REF" "$BWD"
    drop "$BWD"
  done
}
tf32_gates() {  # tf32_gates TAG CASEFILE ONLY-ARGS...
  local tag=$1 file=$2
  shift 2
  local REF=$WORK/ref/$tag-cpu RUN=$WORK/run/$tag-cudnn-tf32
  ensure_ref "generate-$tag-cpu" "$REF" --cases "$file" --device cpu --dtype float32,bfloat16 "$@"
  drop "$RUN"
  step "run-$tag-cudnn-tf32" record "$VALIDATE" run --backend cudnn --device cuda --layout torch --math tf32 \
    --ref "$REF" --out "$RUN" --progress 0 --only '^float32/'
  compare_to "compare-$tag-cudnn-tf32-must-fail" fail "$REF" "$RUN" --only '^float32/'
  gate "gate-$tag-cudnn-tf32-policy-passes" "$REF" "$RUN" --only '^float32/' --policy "$ROOT/policies/tf32.json"
  drop "$RUN"
}
timing() {
  local REF=$WORK/ref/timing-cpu RUN=$WORK/run/timing-cudnn
  drop "$REF" "$REF.args" "$RUN"
  local t0 t1 t2 t3
  t0=$(date +%s.%N)
  step timing-generate pass "$VALIDATE" generate --cases cases/default.json --device cpu --dtype float32,bfloat16 --only "$TIMING_ONLY" --out "$REF" --progress 0
  t1=$(date +%s.%N)
  step timing-run-cudnn record "$VALIDATE" run --backend cudnn --device cuda --layout torch --ref "$REF" --out "$RUN" --progress 0
  t2=$(date +%s.%N)
  compare_to timing-compare record "$REF" "$RUN"
  t3=$(date +%s.%N)
  {
    echo "# Wall time: generate (cpu) + run (cudnn, torch layout, auto algorithms) + compare"
    echo
    echo "Subset: \`--only '$TIMING_ONLY'\` of cases/default.json, float32 + bfloat16; reference set $(du -sh "$REF" | cut -f1), run $(du -sh "$RUN" | cut -f1)."
    echo
    awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN { printf "| generate | run | compare | total |\n|---:|---:|---:|---:|\n| %.1f s | %.1f s | %.1f s | %.1f s |\n", b-a, c-b, d-c, d-a }'
  } >"$OUT/timing.md"
  drop "$REF" "$RUN"
}

# The device query: the CPU smoke references (reused by smoke), then the cudnn runner on their
# float32 cases. Without a usable device it ends here, with "no usable CUDA device: <why>".
device_query() {
  nvidia-smi -L || true
  [[ -n ${VALIDATE_BUNDLE_TORCH:-} ]] && echo "torch: $VALIDATE_BUNDLE_TORCH"
  "$VALIDATE" run --backend cudnn --device cuda --layout torch --ref "$WORK/ref/smoke-cpu" --out "$WORK/run/device-query" \
    --only '^float32/' --progress 0
  local rc=$?
  drop "$WORK/run/device-query"
  return $rc
}
# Training trajectories on the device: gpu_tests' training tests, then
# cases/train_smoke.json (LibTorch references) through cudnn in the three presets; conv2d's and
# matmul's train_loss and last checkpoint must pass.
train_device() {
  local rc=0 W=$WORK/train L M op
  "$ROOT/$BUILD/tests/gpu/gpu_tests" --gtest_filter='CudnnTrain*:*CudnnTrainConv*' || rc=1
  drop "$W"
  "$VALIDATE" generate --cases cases/train_smoke.json --out "$W/ref" --progress 0 || return 1
  for L in "${PRESETS[@]}"; do
    M=$(layout_mode "$L")
    "$VALIDATE" run --backend cudnn --device cuda --layout "$L" --conv-mode "$M" --ref "$W/ref" --out "$W/cudnn-$L" --progress 0 || rc=1
    "$VALIDATE" compare "$W/ref" "$W/cudnn-$L" --color never --json "$OUT/compare/train-$L.json" >"$OUT/compare/train-$L.txt" || rc=1
    for op in conv2d matmul; do
      grep -Eq " $op +train_loss .* passed" "$OUT/compare/train-$L.txt" &&
        grep -Eq " $op +step99_(weight|B) .* passed" "$OUT/compare/train-$L.txt" ||
        { echo "train $L $op: no passed trajectory"; rc=1; }
    done
    grep -ho '"update_layout": *"[^"]*"' "$W/cudnn-$L"/float32/*_run.json 2>/dev/null | sort | uniq -c
  done
  drop "$W"
  return $rc
}
# --pack-out: the results as at most 8 files of at most 16 MiB in one folder (what one device call
# brings back): summary.md, verdicts.tsv, env.txt, logs.tar.gz, compare.tar.gz.
pack_out() {
  local d=$1 max=$((16 * 1024 * 1024)) f
  mkdir -p "$d"
  cp "$SUMMARY" "$d/summary.md"
  write_verdicts "$SUMMARY" >"$d/verdicts.tsv"
  [[ -f $OUT/logs/env.log ]] && cp "$OUT/logs/env.log" "$d/env.txt"
  tar -C "$OUT" -czf "$d/logs.tar.gz" logs
  tar -C "$OUT" -czf "$d/compare.tar.gz" compare
  if (($(stat -c %s "$d/compare.tar.gz") > max)); then  # the HTML reports are the large part
    tar -C "$OUT" -czf "$d/compare.tar.gz" --exclude='*.html' compare
  fi
  for f in "$d"/*; do
    if (($(stat -c %s "$f") > max)); then
      echo "gpu-acceptance: $f is over 16 MiB; keeping its last 16 MiB" >&2
      tail -c "$max" "$f" >"$f.tmp" && mv "$f.tmp" "$f"
    fi
  done
  echo "gpu-acceptance: packed the results into $d ($(ls "$d" | wc -l) files, $(du -sh "$d" | cut -f1))"
}

# ---- the steps --------------------------------------------------------------------------------
if [[ ! -d $CARRY ]] && want build; then
  echo "gpu-acceptance: $CARRY is missing: run scripts/prepare-gpu-carry.sh on the development machine and carry it" >&2
fi
find_cudnn || { CUDNN_INCLUDE=""; CUDNN_LIBRARY=""; }
find_cublaslt
# cuDNN from a wheel and cuBLASLt from a wheel are found at run time through these.
export LD_LIBRARY_PATH=${CUDNN_LIBRARY:+$(dirname "$CUDNN_LIBRARY"):}${CUBLASLT_LIBRARY:+$(dirname "$CUBLASLT_LIBRARY"):}${LD_LIBRARY_PATH:-}
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
SUB=(--only "$ONLY")

LEFT=() STOPPED=0
for s in ${STEPS//,/ }; do
  ((STOPPED)) && { LEFT+=("$s"); continue; }
  if ((DEADLINE)); then
    plan_step "$s"
    if (($(date +%s) - T_START + PLAN_S > DEADLINE)) || ((${#LEFT[@]})); then
      LEFT+=("$s")  # in order: the first step that does not fit ends this call
      continue
    fi
  fi
  if [[ $s != build && $s != ctest-all && ! -x $VALIDATE ]]; then
    echo "gpu-acceptance: $VALIDATE was not built; step $s cannot run" >&2
    FAILED+=("$s:no-validate-binary")
    continue
  fi
  case $s in
    build)
      step env record env_report
      step build-gtest pass build_gtest
      step build pass configure_and_build
      # Packed right away, so a call cut off later in its steps still brings the binaries back.
      if [[ -n $PACK && -x $VALIDATE ]]; then
        # lib/validate: the on-demand modules (libvalidate_torch.so for generate, libvalidate_cudnn.so
        # for --backend cudnn) that validate dlopens from beside itself; without them a later call
        # cannot generate or run cuDNN.
        (cd "$ROOT" && tar czf "$PACK" "$BUILD/validate" "$BUILD/lib/validate" "$BUILD/tests/gpu/gpu_tests" "$BUILD/bench/gpu/bench_gpu_permute") &&
          echo "gpu-acceptance: packed the binaries into $PACK ($(du -h "$PACK" | cut -f1))"
      fi
      step ctest-gpu pass ctest --test-dir "$ROOT/$BUILD" -L gpu --output-on-failure ;;
    device)
      step env record env_report
      ensure_ref generate-smoke-cpu "$WORK/ref/smoke-cpu" --cases cases/smoke.json --device cpu --dtype float32,bfloat16
      step device-query pass device_query
      step gpu-tests pass "$ROOT/$BUILD/tests/gpu/gpu_tests" --gtest_brief=1
      if [[ " ${FAILED[*]} " == *" device-query "* ]]; then
        # Without a usable device every later step fails the same way: stop here, saying why.
        grep -h "no usable CUDA device" "$OUT/logs/device-query.log" >&2 || true
        STOPPED=1
      fi ;;
    train) step train pass train_device ;;
    ctest-all)
      cmake --build "$ROOT/$BUILD" -j "$JOBS" >/dev/null 2>&1 || true
      step ctest-all record ctest --test-dir "$ROOT/$BUILD" --output-on-failure -j "$JOBS" -LE 'nightly|fuzz' --timeout 300 ;;
    smoke)
      refs_and_torch smoke cases/smoke.json
      for L in "${PRESETS[@]}"; do cudnn_preset smoke cases/smoke.json "$L"; done
      exact_gates smoke cases/smoke.json
      tf32_gates smoke cases/smoke.json ;;
    sweep-refs) refs_and_torch sweep cases/default.json "${SUB[@]}" ;;
    sweep-torch | sweep-channels_last | sweep-fortran) cudnn_preset sweep cases/default.json "${s#sweep-}" "${SUB[@]}" ;;
    sweep-exact) exact_gates sweep cases/default.json "${SUB[@]}" ;;
    sweep-tf32) tf32_gates sweep cases/default.json "${SUB[@]}" ;;
    bench)
      if [[ -x $ROOT/$BUILD/bench/gpu/bench_gpu_permute ]]; then
        step bench-gpu-permute pass bash -c "set -o pipefail; '$ROOT/$BUILD/bench/gpu/bench_gpu_permute' | tee '$OUT/bench.md'"
      else
        FAILED+=("bench:not-built")
      fi ;;
    timing) timing ;;
  esac
done
((KEEP)) || drop "$WORK/ref" "$WORK/run"


T_END=$(date +%s)
{
  echo
  echo "Wall time of this invocation: $((T_END - T_START)) s. Disk left in $WORK: $(du -sh "$WORK" 2>/dev/null | cut -f1)."
  echo
  for f in "$OUT"/logs/compare-*.log "$OUT"/logs/gate-*.log; do
    [[ -f $f ]] || continue
    [[ $f -nt $WORK/.summary-stamp || ! -f $WORK/.summary-stamp ]] || continue
    echo "- \`$(basename "$f" .log)\`: $(grep -a -E '^validate: [0-9]+ passed' "$f" | tail -1 || true)"
  done
  echo
  if ((${#LEFT[@]})); then
    left=${LEFT[*]}
    echo "Not run ($( ((STOPPED)) && echo 'no usable CUDA device' || echo "past --deadline $DEADLINE s")): ${LEFT[*]}. Second call: \`--steps ${left// /,}\`."
    echo
  fi
  if ((${#FAILED[@]})); then
    echo "**Result: ${#FAILED[@]} command(s) did not do what they must:** ${FAILED[*]}"
  else
    echo "**Result: every command did what it must.**"
  fi
} >>"$SUMMARY"
touch "$WORK/.summary-stamp"
echo "gpu-acceptance: summary in $SUMMARY"
if ((${#LEFT[@]})); then
  left=${LEFT[*]}
  echo "gpu-acceptance: not run ($( ((STOPPED)) && echo 'no usable CUDA device' || echo "past --deadline $DEADLINE s")): second call --steps ${left// /,}" >&2
fi
[[ -n $PACK_OUT ]] && pack_out "$PACK_OUT"
((${#FAILED[@]} == 0))
