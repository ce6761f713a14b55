#!/usr/bin/env bash
# GPU acceptance run of validate. With --prebuilt (the bundle's launcher), one device call of at
# most 8 minutes, most informative per second first: the device query and gpu_tests, the layout
# kernels' bandwidth, the device trajectories (SGD, Adam, mixed precision) and conv_transpose2d
# through cuDNN in all five presets, TF32 caught, then the whole default sweep (every K to 73728)
# in float32, bfloat16 and float16: scripts/nightly.sh as shipped (cuDNN in torch, channels_last
# and fortran, LibTorch on CUDA), the three-way verdict against the float64 oracle on the largest
# bfloat16 cases, cuDNN with every algorithm of every direction gated under the algorithm-aware
# bounds, and the linear presets; what does not fit is a second, optional call. Without
# --prebuilt it can also build on the GPU machine. Every command is logged with its wall time
# into summary.md; the script runs every step it was given to the end and exits 1 if any command
# did not do what it must.
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
#             them instead. The bundle's launcher passes it. Default steps: CALL1_STEPS, then
#             CALL2_STEPS (below), with --deadline 480.
#   --deadline S  stop starting steps once one would end past S seconds of this invocation (its
#             estimate, below, against the time left); the steps left are listed in summary.md and
#             on stderr as the second call's --steps. A command still running S + 45 s after the
#             start is ended (exit 124, a BAD row), so that the summary and --pack-out are still
#             written inside the device call.
#   --pack-out D  at the end, write the results into D as at most 8 files: summary.md, verdicts.tsv
#             (one line per command), logs.tar.gz, compare.tar.gz (JSON + Markdown; HTML only
#             while the tar stays under 16 MiB; over that, compare.tar.xz, and then JSON reports
#             over 2 MiB left out and listed in compare/left-out.txt), env.txt
#   --dry-run print the plan — each step: the call it falls in, estimated seconds (and the basis of
#             the estimate: an H200 measurement, or bytes scaled by the H200's rates), peak disk and
#             the disk it keeps — then every command of every step with its expectation, and exit:
#             0 when every step fits (<= 480 s), 2 when one does not
#
#   --steps   comma list, run in this order (default without --prebuilt: build and the subset
#             steps; see docs/cudnn.md and reports/gpu/PLAN.md):
#               build          env report, GoogleTest from the carry, configure (LibTorch 2.x from
#                              python's torch, guarded) and build, ctest -L gpu
#               device         (prebuilt binaries) env report, smoke CPU references, the device
#                              query (validate run --backend cudnn on one tiny case must open the
#                              device; without one the call stops here), all of gpu_tests
#               bench          bench_gpu_permute vs cudaMemcpy D2D
#               train          gpu_tests' training tests; cases/train_smoke.json (SGD),
#                              train_adam.json (Adam), train_mixed.json (bfloat16/float16 on
#                              float32 masters) through cudnn in the five presets, --require-all,
#                              every trajectory passed
#               conv-transpose cases/conv_transpose2d.json through cudnn in the five presets:
#                              default algorithms (--require-all) and --algo all --repeat 2
#               tf32           (also sweep-tf32) the subset, --math tf32: must fail the default
#                              policy and pass policies/tf32.json
#               refs           the whole default sweep's CPU references, float32 + bfloat16 +
#                              float16, verified (reused by every step below that needs them)
#               nightly        scripts/nightly.sh on the prebuilt binaries and those references
#                              (VALIDATE_SKIP_BUILD=1 VALIDATE_BIN VALIDATE_REF): its GPU branch,
#                              cudnn x torch/channels_last/fortran + LibTorch CUDA, every dtype
#                              gated; its reports come back under compare/nightly/
#               three-way      BIG_ONLY (the largest bfloat16 cases): the float64 oracle's run,
#                              cudnn --algo all and LibTorch CUDA, each compare --oracle
#               algo-all-torch, algo-all-channels_last, algo-all-fortran
#                              the whole sweep through cudnn --algo all (every direction) in one
#                              preset: every variant gated, every dtype judged
#               presets-linear, presets-linear-full
#                              linear_in_out and linear_out_in, default algorithms, --require-all:
#                              on the subset (--only), on the whole sweep
#               smoke          cases/smoke.json through the subset steps below, in one step
#               sweep-refs     default-sweep subset: CPU and CUDA references, verify, same inputs,
#                              LibTorch on CUDA vs the CPU references
#               sweep-torch, sweep-channels_last, sweep-fortran
#                              the subset through cuDNN in one preset, --algo all --repeat 2
#               sweep-exact    exact-fill subset: 0-ULP gates per preset
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
#   --force   run steps whose estimate exceeds 480 s anyway
#
# Time and disk. A device call runs at most 10 minutes and the GPU machine has a 64 GiB disk, so
# each step is planned to take at most 8 minutes, estimated from the bytes it writes and reads at
# the rates the H200 measured (below), and the script refuses a step estimated longer (exit 2)
# unless --force. The estimate is a plan, not a measurement: summary.md records what each command
# actually took.
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

# Estimated seconds of the plan. Every rate is what the H200 measured (reports/gpu/2026-11-27-H200,
# per command in callN/summary.md), expressed per byte a command reads and writes plus a fixed
# start, so that a step the H200 never ran is its bytes (the size model `estimate`, below) at
# those rates: the plan's "basis" column says which steps are measured and which are scaled.
#   generate (CPU, 16 cores): the whole default sweep, float32 + bfloat16 (6.6 GB written), in
#     15.9-18.8 s = 350 MB/s; generate has stored the dL/dy choice terms since, 1.16-1.22x on the
#     development machine (docs/evidence.md): 280 MB/s + 1 s.
#   run (cudnn, default algorithms): 6.6 GB read + 3.3 GB written in 13.9-14.8 s = 670 MB/s:
#     600 MB/s + 1.5 s (a run that opens the device took 1.3-1.5 s in `device-query`).
#   compare: 9.9 GB (reference + run) in 7.3-9.8 s = 1.0-1.35 GB/s: 900 MB/s + 0.5 s; with
#     --oracle the oracle's run is read too, and a compare that writes HTML and JUnit counts 1.2x.
#   oracle (float64 on the CPU): no H200 figure; the 2-core development machine ran the whole
#     sweep (6.6 GB) in 195 s (docs/evidence.md), 34 MB/s; 16 cores taken as 6x that: 200 MB/s.
#   verify: 0.36 GB in 0.0-0.1 s (calls 2-3): 1 GB/s.
#   tiny sets (smoke, training, conv_transpose2d): a run 2 s, a compare 0.5 s, a generate 2 s.
# A compare also diagnoses each failing tensor, which the rates leave out: the subset's --algo all
# compare took 24.5 s with 85 failures (call 1) and 1.6 s with 4 (call 3). A step that runs long
# for that reason is ended at --deadline + 45 s, and the steps after it go to the next call.
H_GEN_BPS=${H_GEN_BPS:-280000000}
H_RUN_BPS=${H_RUN_BPS:-600000000}
H_CMP_BPS=${H_CMP_BPS:-900000000}
H_ORACLE_BPS=${H_ORACLE_BPS:-200000000}
H_VERIFY_BPS=${H_VERIFY_BPS:-1000000000}
BUILD_S=${BUILD_S:-330}     # configure + build of validate, gpu_tests, bench (a guess: never run there)
CTEST_GPU_S=${CTEST_GPU_S:-90}
STEP_LIMIT_S=${STEP_LIMIT_S:-480}
# --algo all runs at most this many conv2d variants per case: 8 fwd + 6 bwd_data + 7 bwd_filter
# algorithms, the baseline counted once per direction. Each variant writes the case's whole result.
MAX_VARIANTS=19
# The one device call (--prebuilt): these steps, most informative per second first, fit 480 s
# (--dry-run --prebuilt shows the sums); CALL2 is what a second, optional call runs.
CALL1_STEPS=device,bench,tf32,conv-transpose,train,refs,presets-linear,algo-all-torch,three-way,nightly
CALL2_STEPS=algo-all-channels_last,algo-all-fortran,presets-linear-full,smoke,sweep-exact,sweep-refs,timing
# The whole default sweep in every dtype the GPU gates, and the cases the three-way verdict
# (compare --oracle) judges: the largest bfloat16 ones.
FULL_DTYPES=float32,bfloat16,float16
BIG_ONLY='^bfloat16/k(55296|64512|73728)_'
PRESETS_ALL=(torch channels_last fortran linear_in_out linear_out_in)

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
        # generate's rule: without --dtype a case's own "dtypes", else the file's; with --dtype the
        # listed dtypes, less those a case's own "dtypes" leaves out
        own = c.get("dtypes")
        if dtypes:
            if dt not in dtypes or (own and dt not in own):
                continue
        elif dt not in (own or file_dtypes):
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
# PLAN_KEEP (bytes it leaves on --work: references only with --keep), PLAN_WHAT (one line) and
# PLAN_BASIS (where the estimate comes from: an H200 measurement, or bytes scaled by its rates).
# A step that needs the whole-sweep reference set counts its generate unless an earlier step of
# the same invocation made it (FULL_REF_READY, set by plan_all).
human() { awk -v b="$1" 'BEGIN { s = "B KB MB GB TB"; split(s, u, " "); i = 1; while (b >= 1000 && i < 5) { b /= 1000; i++ } printf (i == 1 ? "%d %s" : "%.1f %s"), b, u[i] }'; }
declare -A EST_CACHE=()
est() {  # est CASEFILE ONLY DTYPES: sets EST to estimate's line, each computed once per invocation
  local k="$1|$2|$3"
  [[ -n ${EST_CACHE[$k]:-} ]] || EST_CACHE[$k]=$(estimate "$1" "$2" "$3")
  EST=${EST_CACHE[$k]}
}
sizes_for() {  # sizes_for CASEFILE ONLY [DTYPES] -> R (ref bytes) CO (conv result bytes) MO (matmul result bytes)
  est "$1" "$2" "${3:-float32,bfloat16}"
  read -r R CO MO _ _ <<<"$EST"
}
secs() { awk "BEGIN { printf \"%d\", ($1) + 0.999 }"; }  # evaluates the arithmetic in $1
# The H200's rates as awk arithmetic: a generate writing B bytes; a run reading R and writing W;
# a compare reading B; the oracle's run over a reference set of B bytes.
gen_t() { echo "(1 + ($1)/$H_GEN_BPS)"; }
run_t() { echo "(1.5 + (($1) + ($2))/$H_RUN_BPS)"; }
cmp_t() { echo "(0.5 + ($1)/$H_CMP_BPS)"; }
oracle_t() { echo "(1.5 + ($1)/$H_ORACLE_BPS)"; }
FULL_REF_READY=0
plan_step() {
  local s=$1 file only
  PLAN_S=0 PLAN_PEAK=0 PLAN_KEEP=0 PLAN_BASIS=""
  case $s in
    smoke) file=cases/smoke.json only="" ;;
    timing) file=cases/default.json only=$TIMING_ONLY ;;
    sweep-*) file=cases/default.json only=$ONLY ;;
  esac
  [[ -n ${file:-} ]] && sizes_for "$file" "$only"
  # the whole default sweep in float32, bfloat16 and float16 (RF, CF, MF) and the three-way's cases
  local RF CF MF NF RB CB MB RS CS MS
  est cases/default.json "" "$FULL_DTYPES"; read -r RF CF MF _ NF <<<"$EST"
  est cases/default.json "$BIG_ONLY" "$FULL_DTYPES"; read -r RB CB MB _ _ <<<"$EST"
  est cases/default.json "$ONLY" "$FULL_DTYPES"; read -r RS CS MS _ _ <<<"$EST"
  # generate's cost follows the elements it computes, not the bytes it stores: float16's are
  # counted at 4 bytes, as float32's and bfloat16's are stored
  local full_gen=0
  ((FULL_REF_READY)) || full_gen="$(gen_t "$NF*4")"
  local keep_refs=0 V=$MAX_VARIANTS
  case $s in
    build)
      PLAN_S=$((BUILD_S + CTEST_GPU_S)); PLAN_BASIS="a guess: never built there"
      PLAN_WHAT="configure + build (validate, gpu_tests, bench_gpu_permute), ctest -L gpu" ;;
    device)
      PLAN_S=25; PLAN_BASIS="H200: 8.8-12.7 s (calls 1-4); gpu_tests has grown since"
      PLAN_WHAT="env report, smoke CPU refs, device query (stops the call without a device), all of gpu_tests" ;;
    bench)
      PLAN_S=5; PLAN_BASIS="H200: 0.4-0.6 s (calls 1, 2, 4)"
      PLAN_WHAT="bench_gpu_permute: every device layout kernel's bandwidth vs cudaMemcpy D2D" ;;
    train)
      # gpu_tests' training tests; 3 case files generated; 3 x 5 presets runs + compares
      PLAN_S=$(secs "8 + 3*2 + 15*(2 + 0.5)"); PLAN_BASIS="scaled: H200 4.1-4.2 s for the training tests + 3 runs (calls 1-3); 15 runs at 2 s, 15 compares at 0.5 s"
      PLAN_WHAT="device trajectories: gpu_tests' training tests; SGD (train_smoke), Adam (train_adam), mixed precision (train_mixed) through cudnn in 5 presets, --require-all" ;;
    conv-transpose)
      PLAN_S=$(secs "2 + 5*(2*2 + 2*0.5)"); PLAN_BASIS="new: 10 runs at 2 s, 10 compares at 0.5 s"
      PLAN_WHAT="cases/conv_transpose2d.json through cudnn in 5 presets, default algorithms (--require-all) and --algo all --repeat 2" ;;
    tf32 | sweep-tf32)
      sizes_for cases/default.json "$ONLY"
      PLAN_S=$(secs "$(gen_t "$R") + $(run_t "$R/2" "($CO+$MO)/2") + 2*$(cmp_t "$R/2 + ($CO+$MO)/2")")
      PLAN_PEAK=$((R + (CO + MO) / 2)); PLAN_BASIS="H200: 3.9-5.1 s (sweep-tf32, calls 1-3)"
      PLAN_WHAT="default subset, float32, --math tf32: the default policy must fail, policies/tf32.json must pass" ;;
    refs)
      PLAN_S=$(secs "$(gen_t "$NF*4") + $RF/$H_VERIFY_BPS"); PLAN_PEAK=$RF; keep_refs=$RF
      PLAN_BASIS="scaled: timing-generate's sweep (15.9-18.8 s) plus float16, $((NF / 1000000))M elements at the H200's generate rate"
      PLAN_WHAT="the whole default sweep's CPU references, float32 + bfloat16 + float16 (every K to 73728), verified" ;;
    nightly)
      # 8 probes (a module each), verify, 4 runs, 4 compares with HTML + JUnit
      PLAN_S=$(secs "$full_gen + 8 + $RF/$H_VERIFY_BPS + 4*$(run_t "$RF" "$CF+$MF") + 4*1.2*$(cmp_t "$RF+$CF+$MF")")
      PLAN_PEAK=$((RF + 4 * (CF + MF))); keep_refs=$RF
      PLAN_BASIS="scaled: 4 runs and compares of $(human "$((RF + CF + MF))") each at the H200's timing-run/-compare rates"
      PLAN_WHAT="scripts/nightly.sh as shipped, on the bundle's binaries: whole sweep, 3 dtypes, cudnn in torch/channels_last/fortran + LibTorch CUDA, gated" ;;
    three-way)
      PLAN_S=$(secs "$full_gen + $(oracle_t "$RB") + $(run_t "$RB" "$V*$CB+$MB") + $(run_t "$RB" "$CB+$MB") + 1.4*$(cmp_t "$RB+$V*$CB+$MB+$CB+$MB") + 1.4*$(cmp_t "$RB+2*($CB+$MB)")")
      PLAN_PEAK=$((RF + V * CB + 3 * (CB + MB))); keep_refs=$RF
      PLAN_BASIS="new: the oracle at 6x the development machine's rate; runs and compares scaled ($(human "$RB") of references)"
      PLAN_WHAT="three-way verdict (compare --oracle) on $BIG_ONLY: float64 oracle, cudnn --algo all (every variant) and LibTorch CUDA" ;;
    algo-all-*)
      PLAN_S=$(secs "$full_gen + $(run_t "$RF" "$V*$CF+$MF") + $(cmp_t "$RF+$V*$CF+$MF")")
      PLAN_PEAK=$((RF + V * CF + MF)); keep_refs=$RF
      PLAN_BASIS="scaled: $V variants' results ($(human "$((V * CF + MF))")) at the H200's rates"
      PLAN_WHAT="whole sweep, 3 dtypes, cudnn --algo all (every direction) in ${s#algo-all-}: every variant gated under the algorithm-aware bounds" ;;
    presets-linear)
      PLAN_S=$(secs "$full_gen + 2*($(run_t "$RS" "$CS+$MS") + $(cmp_t "$RS+$CS+$MS"))")
      PLAN_PEAK=$((RF + CS + MS)); keep_refs=$RF
      PLAN_BASIS="scaled: 2 runs and compares of $(human "$((RS + CS + MS))") at the H200's rates"
      PLAN_WHAT="default subset (--only), 3 dtypes, cudnn default algorithms in linear_in_out and linear_out_in, --require-all" ;;
    presets-linear-full)
      PLAN_S=$(secs "$full_gen + 2*($(run_t "$RF" "$CF+$MF") + $(cmp_t "$RF+$CF+$MF"))")
      PLAN_PEAK=$((RF + CF + MF)); keep_refs=$RF
      PLAN_BASIS="scaled: like nightly's runs, 2 presets"
      PLAN_WHAT="whole sweep, 3 dtypes, cudnn default algorithms in linear_in_out and linear_out_in, --require-all" ;;
    ctest-all)
      PLAN_S=300; PLAN_BASIS="a guess"; PLAN_WHAT="the whole suite but nightly/fuzz (recorded, not required)" ;;
    smoke)
      PLAN_S=30; PLAN_BASIS="H200: 17.8-21.6 s (calls 1-4)"
      PLAN_PEAK=$((4 * R + MAX_VARIANTS * CO + MO)); keep_refs=$((4 * R))
      PLAN_WHAT="smoke: refs cpu+cuda, torch-cuda, cudnn x3 presets (--algo all --repeat 2), exact 0-ULP gates, tf32" ;;
    sweep-refs)
      PLAN_S=$(secs "2*$(gen_t "$R") + 2*$R/$H_VERIFY_BPS + $(run_t "$R" "$CO+$MO") + $(cmp_t "$R+$CO+$MO") + 2")
      PLAN_PEAK=$((2 * R + CO + MO)); keep_refs=$R; PLAN_BASIS="H200: 6.3-10.9 s (calls 1-3)"
      PLAN_WHAT="default subset: generate cpu + cuda, verify, same inputs, torch --device cuda vs cpu refs" ;;
    sweep-torch | sweep-channels_last | sweep-fortran)
      PLAN_S=$(secs "$(gen_t "$R") + 2*$(run_t "$R" "$MAX_VARIANTS*$CO + $MO") + 3*$(cmp_t "$R + $MAX_VARIANTS*$CO + $MO")")
      PLAN_PEAK=$((R + MAX_VARIANTS * CO + MO)); keep_refs=$R; PLAN_BASIS="H200: 3.1-28.5 s (calls 1-3; the slower with failing tensors diagnosed)"
      PLAN_WHAT="default subset through cudnn, layout ${s#sweep-}, --algo all --repeat 2, compare" ;;
    sweep-exact)
      PLAN_S=$(secs "$(gen_t "$R") + 6*$(run_t "$R" "$MAX_VARIANTS*$CO + $MO") + 15*$(cmp_t "$R + $MAX_VARIANTS*$CO")")
      PLAN_PEAK=$((R + MAX_VARIANTS * CO + MO)); keep_refs=$R; PLAN_BASIS="H200: 22.9-66.6 s (calls 1-3; the slower with failing tensors diagnosed)"
      PLAN_WHAT="exact-fill subset: float32 0-ULP output and gradient gates, 3 presets" ;;
    timing)
      PLAN_S=$(secs "$(gen_t "$R") + $(run_t "$R" "$CO+$MO") + $(cmp_t "$R+$CO+$MO")")
      PLAN_PEAK=$((R + CO + MO)); PLAN_BASIS="H200: 39.6-40.9 s (calls 1-2)"
      PLAN_WHAT="wall time: generate cpu + run cudnn (torch layout, auto algorithms) + compare" ;;
    *) echo "gpu-acceptance: unknown step '$s' (see --help)" >&2; return 2 ;;
  esac
  ((KEEP)) && PLAN_KEEP=$keep_refs
  return 0
}
uses_full_ref() { [[ $1 == refs || $1 == nightly || $1 == three-way || $1 == algo-all-* || $1 == presets-linear* ]]; }
# plan_all: the estimate of every step of STEPS in order, each with the call it falls into when
# one call stops starting steps at DEADLINE_PLAN seconds (the first step that does not fit ends it,
# as the real run does): arrays P_NAME, P_S, P_CALL, P_PEAK, P_KEEP, P_WHAT, P_BASIS.
plan_all() {
  local s call=1 used=0
  P_NAME=() P_S=() P_CALL=() P_PEAK=() P_KEEP=() P_WHAT=() P_BASIS=()
  FULL_REF_READY=0
  for s in ${STEPS//,/ }; do
    plan_step "$s" || return 2
    if ((call == 1 && DEADLINE_PLAN > 0 && used + PLAN_S > DEADLINE_PLAN)); then
      call=2
      FULL_REF_READY=0  # a second call starts on a fresh machine
      plan_step "$s"
    fi
    ((call == 1)) && used=$((used + PLAN_S))
    uses_full_ref "$s" && FULL_REF_READY=1
    P_NAME+=("$s") P_S+=("$PLAN_S") P_CALL+=("$call") P_PEAK+=("$PLAN_PEAK") P_KEEP+=("$PLAN_KEEP")
    P_WHAT+=("$PLAN_WHAT") P_BASIS+=("$PLAN_BASIS")
  done
}
print_plan() {  # prints the plan table; returns 2 if a step exceeds STEP_LIMIT_S
  local i bad=0 total=0 c1=0 c2=0 cum=0 n1=() n2=()
  plan_all || return 2
  echo "| step | call | estimated s | cumulative s | peak disk | keeps | basis of the estimate | what |"
  echo "|---|---:|---:|---:|---:|---:|---|---|"
  for i in "${!P_NAME[@]}"; do
    local mark=""
    ((P_S[i] > STEP_LIMIT_S)) && { mark=" **over ${STEP_LIMIT_S} s**"; bad=1; }
    if ((P_CALL[i] == 1)); then c1=$((c1 + P_S[i])); cum=$c1; n1+=("${P_NAME[i]}"); else c2=$((c2 + P_S[i])); cum=$c2; n2+=("${P_NAME[i]}"); fi
    printf '| %s | %d | %d%s | %d | %s | %s | %s | %s |\n' "${P_NAME[i]}" "${P_CALL[i]}" "${P_S[i]}" "$mark" "$cum" \
      "$(human "${P_PEAK[i]}")" "$(human "${P_KEEP[i]}")" "${P_BASIS[i]}" "${P_WHAT[i]}"
    total=$((total + P_S[i]))
  done
  echo
  local l1=${n1[*]} l2=${n2[*]}
  echo "Estimated total: $total s."
  if ((DEADLINE_PLAN)); then
    echo "Call 1: $c1 s (${l1// /,}), --deadline $DEADLINE_PLAN s."
    ((${#n2[@]})) && echo "Call 2: $c2 s (--steps ${l2// /,})."
  fi
  echo "Estimates, not measurements: H200 rates from reports/gpu/2026-11-27-H200; summary.md records what each command took."
  echo "Subset --only '$ONLY'; timing subset '$TIMING_ONLY'; whole sweep $FULL_DTYPES; three-way '$BIG_ONLY'; reports only are kept under --out."
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
[[ $DEADLINE =~ ^[0-9]+$ ]] || { echo "gpu-acceptance: --deadline takes whole seconds, not '$DEADLINE'" >&2; exit 2; }
if ((PREBUILT)); then
  # The one call, most informative per second first, then what a second call holds
  # (reports/gpu/PLAN.md); it stops starting steps at --deadline.
  [[ $STEPS == "$ALL_STEPS" ]] && STEPS=$CALL1_STEPS,$CALL2_STEPS
  ((DEADLINE)) || DEADLINE=$STEP_LIMIT_S
fi
# The split into calls that --dry-run shows: the run's own deadline, else one call's 480 s.
DEADLINE_PLAN=$DEADLINE
((PREBUILT || DEADLINE_PLAN)) || DEADLINE_PLAN=0
((PREBUILT)) && [[ ",$STEPS," == *",build,"* ]] && { echo "gpu-acceptance: --prebuilt has no build step (use device)" >&2; exit 2; }
[[ -z $ONLY ]] && { echo "gpu-acceptance: --only must name a subset (--only . for the whole default sweep)" >&2; exit 2; }
for s in ${STEPS//,/ }; do plan_step "$s" || exit 2; done
plan_rc=0
plan_text=$(print_plan) || plan_rc=$?
if ((!DRY && plan_rc != 0 && !FORCE)); then
  echo "$plan_text" >&2
  echo "gpu-acceptance: a step is estimated over ${STEP_LIMIT_S} s (one device call runs at most 10 minutes): pick a smaller --only, or --force" >&2
  exit 2
fi
want() { [[ ",$STEPS," == *",$1,"* ]]; }
VALIDATE=$ROOT/$BUILD/validate
FAILED=() HARD_STOPPED=0
# --dry-run lists every command with placeholders for the folders: nothing is run or written.
if ((DRY)); then
  OUT='$OUT' WORK='$WORK' SUMMARY=/dev/null
fi

# step NAME EXPECT CMD... — runs CMD with its output in logs/NAME.log and adds a summary row.
# With --deadline, a command still running at the hard stop (--deadline + HARD_STOP_GRACE s) is
# ended (exit 124), so the call still writes its summary and --pack-out before the device call's
# own limit. With --dry-run it only lists the command.
HARD_STOP_GRACE=${HARD_STOP_GRACE:-45}
step() {
  local name=$1 expect=$2
  shift 2
  if ((DRY)); then
    local all="$*"
    all=${all//$ROOT\//}
    printf -- '- `%s` %s: `%s`\n' "$expect" "$name" "$all"
    return 0
  fi
  local log=$OUT/logs/$name.log rc=0 t0 t1 secs verdict limit=()
  ((HARD_STOPPED)) && return 0  # past the hard stop nothing more of this step runs
  if ((DEADLINE)) && ! declare -F "$1" >/dev/null; then
    local left=$((T_START + DEADLINE + HARD_STOP_GRACE - $(date +%s)))
    if ((left <= 0)); then
      HARD_STOPPED=1
      echo "gpu-acceptance: $name not started: past the hard stop (--deadline $DEADLINE + $HARD_STOP_GRACE s)"
      return 0
    fi
    limit=(timeout -k 5 "$left")
  fi
  t0=$(date +%s.%N)
  printf '%q ' "$@" >"$log"
  echo >>"$log"
  "${limit[@]}" "$@" >>"$log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  case $expect:$rc in
    pass:0 | fail:1 | record:0 | record:1) verdict=ok ;;
    *) verdict=BAD; FAILED+=("$name") ;;
  esac
  if ((${#limit[@]} && (rc == 124 || rc == 137))); then
    echo "gpu-acceptance: $name was ended at the hard stop (--deadline $DEADLINE + $HARD_STOP_GRACE s)" >>"$log"
    HARD_STOPPED=1  # the step is incomplete: it is named again among the steps left
  fi
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
  if ((DRY)); then  # listed once per set and arguments, as the real run generates it once
    if [[ ${DRY_MADE[$dir]:-} == "$key" ]]; then echo "- reuse $name: \`$dir\`"; return 0; fi
    DRY_MADE[$dir]=$key
    step "$name" pass "$VALIDATE" generate "$@" --out "$dir" --progress 0
    return 0
  fi
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
  # NO_HTML=1: the whole sweep's reports stay JSON + Markdown (HTML of every variant is large)
  local html=(--html "$OUT/compare/$name.html")
  ((${NO_HTML:-0})) && html=()
  step "$name" "$expect" "$VALIDATE" compare "$ref" "$run" "$@" --json "$OUT/compare/$name.json" --md "$OUT/compare/$name.md" \
    "${html[@]}" --color never
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
drop() { ((DRY)) || rm -rf "$@"; }
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
  ((DRY)) && return 0
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
# --pack-out: the results as at most 8 files of at most 16 MiB in one folder (what one device call
# brings back): summary.md, verdicts.tsv, env.txt, logs.tar.gz, compare.tar.gz (compare.tar.xz
# when the whole sweep's JSON reports need it).
pack_out() {
  local d=$1 max=$((16 * 1024 * 1024)) f
  mkdir -p "$d"
  cp "$SUMMARY" "$d/summary.md"
  write_verdicts "$SUMMARY" >"$d/verdicts.tsv"
  # a call without the env step (a second call on a fresh machine) still says what ran it
  if [[ -f $OUT/logs/env.log ]]; then cp "$OUT/logs/env.log" "$d/env.txt"; else env_report >"$d/env.txt" 2>&1; fi
  tar -C "$OUT" -czf "$d/logs.tar.gz" logs
  tar -C "$OUT" -czf "$d/compare.tar.gz" compare
  if (($(stat -c %s "$d/compare.tar.gz") > max)); then  # the HTML reports are the large part
    tar -C "$OUT" -czf "$d/compare.tar.gz" --exclude='*.html' compare
  fi
  if (($(stat -c %s "$d/compare.tar.gz") > max)); then  # the whole sweep's JSON: xz packs it tighter
    rm -f "$d/compare.tar.gz"
    tar -C "$OUT" -cJf "$d/compare.tar.xz" --exclude='*.html' compare
  fi
  if [[ -f $d/compare.tar.xz ]] && (($(stat -c %s "$d/compare.tar.xz") > max)); then  # then the largest JSON, listed
    (cd "$OUT" && find compare -name '*.json' -size +2M | sort) >"$OUT/compare/left-out.txt"
    tar -C "$OUT" -cJf "$d/compare.tar.xz" --exclude='*.html' -X "$OUT/compare/left-out.txt" compare
    echo "gpu-acceptance: compare.tar.xz leaves out the HTML and $(wc -l <"$OUT/compare/left-out.txt") JSON reports over 2 MiB (compare/left-out.txt)" >&2
  fi
  for f in "$d"/*; do
    if (($(stat -c %s "$f") > max)); then
      echo "gpu-acceptance: $f is over 16 MiB; keeping its last 16 MiB" >&2
      tail -c "$max" "$f" >"$f.tmp" && mv "$f.tmp" "$f"
    fi
  done
  echo "gpu-acceptance: packed the results into $d ($(ls "$d" | wc -l) files, $(du -sh "$d" | cut -f1))"
}

# ---- checks on compare's JSON (each a command of its own in summary.md) ----------------------
# gated_dtypes JSON DTYPES: every dtype of the comma list was judged (at least one passed check of
# its own) and none failed: a gate over several dtypes must not pass on one of them alone.
gated_dtypes() {
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = 0
for dt in sys.argv[2].split(","):
    mine = [e for e in d["entries"] if e.get("dtype") == dt]
    passed = sum(e.get("verdict") == "passed" for e in mine)
    failed = sum(bool(e.get("failed")) for e in mine)
    variants = len({e.get("variant", "") for e in mine})
    print("%s: %d passed, %d failed, %d variant(s)" % (dt, passed, failed, variants))
    bad += passed == 0 or failed > 0
sys.exit(1 if bad else 0)
PY
}
# trained JSON: the run trained every training case it was given (compare's trajectories: at
# least one, every one "passed": loss curve and checkpoints).
trained() {
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d.get("trajectories", [])
for x in t:
    print(x.get("verdict"), x.get("id"), x.get("variant", ""), "-", x.get("headline", ""))
sys.exit(0 if t and all(x.get("verdict") == "passed" for x in t) else 1)
PY
}
# nightly_checked REPORTS RUNS DTYPES: scripts/nightly.sh took its GPU branch (every run of the
# comma list RUNS has its compare report) and each of those compares gated every dtype.
nightly_checked() {
  local dir=$1 r rc=0
  [[ -f $dir/nightly.junit.xml ]] || { echo "no $dir/nightly.junit.xml"; return 1; }
  for r in ${2//,/ }; do
    echo "== $r"
    [[ -f $dir/$r.json ]] || { echo "no $dir/$r.json: nightly.sh did not run $r"; rc=1; continue; }
    gated_dtypes "$dir/$r.json" "$3" || rc=1
  done
  return $rc
}
keep_reports() {  # keep_reports FROM TO: a report folder's small files into --out (compare.tar.gz)
  mkdir -p "$2" && find "$1" -maxdepth 1 -type f -size -8M -exec cp {} "$2"/ \; && ls "$2"
}

# ---- the steps of acceptance v2 (reports/gpu/PLAN.md) -----------------------------------------
FULL_REF='$WORK/ref/full-cpu'  # set for real below, once --work is known
full_ref() {  # the whole default sweep on the CPU, float32 + bfloat16 + float16, made once
  ensure_ref generate-full-cpu "$FULL_REF" --cases cases/default.json --device cpu --dtype "$FULL_DTYPES"
}
# The device trajectories: gpu_tests' training tests, then SGD (train_smoke.json), Adam
# (train_adam.json) and mixed precision (train_mixed.json: bfloat16/float16 on float32 masters),
# each case file through cudnn in the five presets; every tensor checked (--require-all) and
# every trajectory passed.
train_step() {
  step gpu-tests-train pass "$ROOT/$BUILD/tests/gpu/gpu_tests" --gtest_filter='CudnnTrain*:*CudnnTrainConv*'
  local f L REF RUN
  for f in train_smoke train_adam train_mixed; do
    REF=$WORK/ref/$f
    ensure_ref "generate-$f" "$REF" --cases "cases/$f.json" --device cpu
    for L in "${PRESETS_ALL[@]}"; do
      RUN=$WORK/run/$f-cudnn-$L
      drop "$RUN"
      step "run-$f-cudnn-$L" pass "$VALIDATE" run --backend cudnn --device cuda --layout "$L" --ref "$REF" --out "$RUN" --progress 0
      gate "gate-$f-cudnn-$L" "$REF" "$RUN" --require-all
      step "gate-$f-cudnn-$L-trained" pass trained "$OUT/compare/gate-$f-cudnn-$L.json"
      drop "$RUN"
    done
  done
}
# conv_transpose2d (backward-data as the forward) in the five presets: default algorithms with
# every tensor checked, and every algorithm of every direction (--algo all --repeat 2) gated
# under the algorithm-aware bounds.
conv_transpose_step() {
  local REF=$WORK/ref/conv_transpose2d L RUN
  ensure_ref generate-conv_transpose2d "$REF" --cases cases/conv_transpose2d.json --device cpu
  for L in "${PRESETS_ALL[@]}"; do
    RUN=$WORK/run/conv_transpose2d-cudnn-$L
    drop "$RUN" "$RUN-all"
    step "run-conv_transpose2d-cudnn-$L" pass "$VALIDATE" run --backend cudnn --device cuda --layout "$L" --ref "$REF" --out "$RUN" --progress 0
    gate "gate-conv_transpose2d-cudnn-$L" "$REF" "$RUN" --require-all
    step "run-conv_transpose2d-cudnn-$L-all" pass "$VALIDATE" run --backend cudnn --device cuda --layout "$L" --algo all --repeat 2 \
      --ref "$REF" --out "$RUN-all" --progress 0
    gate "gate-conv_transpose2d-cudnn-$L-all" "$REF" "$RUN-all"
    drop "$RUN" "$RUN-all"
  done
}
refs_step() {
  full_ref
  step verify-full-cpu pass "$VALIDATE" verify "$FULL_REF"
}
# scripts/nightly.sh as a user runs it on prebuilt binaries (VALIDATE_SKIP_BUILD=1, VALIDATE_BIN),
# on the whole-sweep references (VALIDATE_REF: it checks that they were made for its case file and
# dtypes, and verifies them): on a machine whose nvidia-smi lists a GPU it runs cudnn in torch,
# channels_last and fortran and LibTorch on CUDA, float32 + bfloat16 + float16, compare
# --require-all. Its reports come back under compare/nightly/.
NIGHTLY_RUNS=cudnn-torch,cudnn-channels_last,cudnn-fortran,torch-cuda
nightly_step() {
  full_ref
  drop "$WORK/nightly"
  step nightly pass env VALIDATE_SKIP_BUILD=1 VALIDATE_BIN="$VALIDATE" VALIDATE_REF="$FULL_REF" VALIDATE_OUT="$WORK/nightly" \
    "$ROOT/scripts/nightly.sh"
  step nightly-gpu-runs pass nightly_checked "$WORK/nightly/reports" "$NIGHTLY_RUNS" "$FULL_DTYPES"
  step nightly-reports record keep_reports "$WORK/nightly/reports" "$OUT/compare/nightly"
  drop "$WORK/nightly"
}
# The three-way verdict on the largest bfloat16 cases: the float64 oracle's run, then cudnn with
# every algorithm (its baseline variant is the default mode) and LibTorch on CUDA, each compared
# with --oracle (which side is closer to exact).
three_way_step() {
  full_ref
  local ORA=$WORK/run/big-oracle RC=$WORK/run/big-cudnn-torch-all RT=$WORK/run/big-torch-cuda
  drop "$ORA" "$RC" "$RT"
  step run-big-oracle pass "$VALIDATE" run --backend oracle --ref "$FULL_REF" --only "$BIG_ONLY" --out "$ORA" --progress 0
  NO_HTML=1 gate gate-big-oracle "$FULL_REF" "$ORA" --only "$BIG_ONLY"
  step run-big-cudnn-torch-all pass "$VALIDATE" run --backend cudnn --device cuda --layout torch --algo all \
    --ref "$FULL_REF" --only "$BIG_ONLY" --out "$RC" --progress 0
  NO_HTML=1 gate three-way-big-cudnn-torch-all "$FULL_REF" "$RC" --only "$BIG_ONLY" --oracle "$ORA"
  drop "$RC"
  step run-big-torch-cuda pass "$VALIDATE" run --backend torch --device cuda --ref "$FULL_REF" --only "$BIG_ONLY" --out "$RT" --progress 0
  NO_HTML=1 gate three-way-big-torch-cuda "$FULL_REF" "$RT" --only "$BIG_ONLY" --oracle "$ORA"
  drop "$ORA" "$RT"
}
# The whole sweep through cudnn with every algorithm of every direction in one preset: every
# variant gated (compare reads each variant's info.algorithms and bounds it by its algorithm).
algo_all_step() {  # algo_all_step PRESET
  full_ref
  local L=$1 RUN=$WORK/run/full-cudnn-$1-all
  drop "$RUN"
  step "run-full-cudnn-$L-all" pass "$VALIDATE" run --backend cudnn --device cuda --layout "$L" --algo all \
    --ref "$FULL_REF" --out "$RUN" --progress 0
  NO_HTML=1 gate "gate-full-cudnn-$L-all" "$FULL_REF" "$RUN"
  step "gate-full-cudnn-$L-all-dtypes" pass gated_dtypes "$OUT/compare/gate-full-cudnn-$L-all.json" "$FULL_DTYPES"
  drop "$RUN"
}
# The two presets nightly.sh does not run (linear_in_out is torch's layouts under its own name;
# linear_out_in stores matmul's B as [N,K]), in cuDNN's default mode: TAG sub on the default
# subset (--only), TAG full on the whole sweep.
presets_linear_step() {  # presets_linear_step sub|full
  full_ref
  local tag=$1 L RUN sel=()
  [[ $tag == sub ]] && sel=(--only "$ONLY")
  for L in linear_in_out linear_out_in; do
    RUN=$WORK/run/$tag-cudnn-$L
    drop "$RUN"
    step "run-$tag-cudnn-$L" pass "$VALIDATE" run --backend cudnn --device cuda --layout "$L" --ref "$FULL_REF" "${sel[@]}" \
      --out "$RUN" --progress 0
    NO_HTML=1 gate "gate-$tag-cudnn-$L" "$FULL_REF" "$RUN" "${sel[@]}" --require-all
    step "gate-$tag-cudnn-$L-dtypes" pass gated_dtypes "$OUT/compare/gate-$tag-cudnn-$L.json" "$FULL_DTYPES"
    drop "$RUN"
  done
}
bench_step() {
  if ((DRY)) || [[ -x $ROOT/$BUILD/bench/gpu/bench_gpu_permute ]]; then
    step bench-gpu-permute pass bash -c "set -o pipefail; '$ROOT/$BUILD/bench/gpu/bench_gpu_permute' | tee '$OUT/bench.md'"
  else
    FAILED+=("bench:not-built")
  fi
}

# ---- the steps --------------------------------------------------------------------------------
SUB=(--only "$ONLY")
run_step() {  # run_step NAME: every command of one step (listed instead with --dry-run)
  local s=$1
  case $s in
    build)
      step env record env_report
      step build-gtest pass build_gtest
      step build pass configure_and_build
      # Packed right away, so a call cut off later in its steps still brings the binaries back.
      if ((!DRY)) && [[ -n $PACK && -x $VALIDATE ]]; then
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
      if ((!DRY)) && [[ " ${FAILED[*]} " == *" device-query "* ]]; then
        # Without a usable device every later step fails the same way: stop here, saying why.
        grep -h "no usable CUDA device" "$OUT/logs/device-query.log" >&2 || true
        STOPPED=1
      fi ;;
    bench) bench_step ;;
    train) train_step ;;
    conv-transpose) conv_transpose_step ;;
    tf32 | sweep-tf32) tf32_gates sweep cases/default.json "${SUB[@]}" ;;
    refs) refs_step ;;
    nightly) nightly_step ;;
    three-way) three_way_step ;;
    algo-all-*) algo_all_step "${s#algo-all-}" ;;
    presets-linear) presets_linear_step sub ;;
    presets-linear-full) presets_linear_step full ;;
    ctest-all)
      ((DRY)) || cmake --build "$ROOT/$BUILD" -j "$JOBS" >/dev/null 2>&1 || true
      step ctest-all record ctest --test-dir "$ROOT/$BUILD" --output-on-failure -j "$JOBS" -LE 'nightly|fuzz' --timeout 300 ;;
    smoke)
      refs_and_torch smoke cases/smoke.json
      for L in "${PRESETS[@]}"; do cudnn_preset smoke cases/smoke.json "$L"; done
      exact_gates smoke cases/smoke.json
      tf32_gates smoke cases/smoke.json ;;
    sweep-refs) refs_and_torch sweep cases/default.json "${SUB[@]}" ;;
    sweep-torch | sweep-channels_last | sweep-fortran) cudnn_preset sweep cases/default.json "${s#sweep-}" "${SUB[@]}" ;;
    sweep-exact) exact_gates sweep cases/default.json "${SUB[@]}" ;;
    timing) timing ;;
  esac
}

# --dry-run: the plan, then every command of every step in order, with $WORK and $OUT for the
# folders; exit 0 when every step fits STEP_LIMIT_S, 2 when one does not.
if ((DRY)); then
  declare -A DRY_MADE=()
  plan_rc=0
  print_plan || plan_rc=$?
  echo
  echo "## Commands"
  echo
  echo 'Each line: `expectation` name: `command` (pass: exit 0; fail: exit 1; record: 0 or 1 is data; a gate'
  echo 'is a compare that must pass and then a check that it judged something). $WORK: --work; $OUT: --out.'
  for i in "${!P_NAME[@]}"; do
    # a second call runs on a fresh machine: its references are made again
    ((i > 0 && P_CALL[i] != P_CALL[i - 1])) && DRY_MADE=()
    echo
    echo "### ${P_NAME[i]} (call ${P_CALL[i]}, estimated ${P_S[i]} s)"
    echo
    run_step "${P_NAME[i]}"
  done
  exit $plan_rc
fi

GPU_NAME=$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo no-gpu) | head -1 | tr -c 'A-Za-z0-9.\n-' '_' | sed 's/_\{2,\}/_/g; s/_$//')
STAMP=$(date -u +%Y-%m-%d)
OUT=${OUT:-reports/gpu/$STAMP-$GPU_NAME}
mkdir -p "$OUT/logs" "$OUT/compare" "$WORK" || exit 2
OUT=$(cd "$OUT" && pwd)
WORK=$(cd "$WORK" && pwd)  # scripts/nightly.sh runs from the repository root: absolute paths
FULL_REF=$WORK/ref/full-cpu
SUMMARY=$OUT/summary.md
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

if [[ ! -d $CARRY ]] && want build; then
  echo "gpu-acceptance: $CARRY is missing: run scripts/prepare-gpu-carry.sh on the development machine and carry it" >&2
fi
find_cudnn || { CUDNN_INCLUDE=""; CUDNN_LIBRARY=""; }
find_cublaslt
# cuDNN from a wheel and cuBLASLt from a wheel are found at run time through these.
export LD_LIBRARY_PATH=${CUDNN_LIBRARY:+$(dirname "$CUDNN_LIBRARY"):}${CUBLASLT_LIBRARY:+$(dirname "$CUBLASLT_LIBRARY"):}${LD_LIBRARY_PATH:-}
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH

LEFT=() STOPPED=0 FULL_REF_READY=0
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
  run_step "$s"
  uses_full_ref "$s" && FULL_REF_READY=1
  ((HARD_STOPPED)) && LEFT+=("$s")  # cut short: the next call runs it again, and what follows
done
((KEEP)) || drop "$WORK/ref" "$WORK/run"


T_END=$(date +%s)
{
  echo
  echo "Wall time of this invocation: $((T_END - T_START)) s. Disk left in $WORK: $(du -sh "$WORK" 2>/dev/null | cut -f1)."
  echo
  for f in "$OUT"/logs/compare-*.log "$OUT"/logs/gate-*.log "$OUT"/logs/three-way-*.log; do
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
