#!/usr/bin/env bash
# Acceptance v2's one device call, checked on the CPU from its plan (`--dry-run --prebuilt`: every
# step, the call it falls in, its estimate and every command with its expectation):
#   1. call 1's estimate fits 480 s, every step is estimated, and call 2 holds only what did not fit;
#   2. every required item is a command of call 1 with the right expectation: the whole default
#      sweep (every K of cases/default.json, no --only) in float32, bfloat16 and float16 through
#      scripts/nightly.sh on the prebuilt binaries (cudnn in torch/channels_last/fortran, LibTorch
#      on CUDA), cudnn --algo all gated with every dtype judged, the three-way verdict against the
#      float64 oracle on the largest bfloat16 cases, SGD / Adam / mixed-precision trajectories and
#      conv_transpose2d through cudnn in all five presets, TF32 caught, the layout kernels' bench;
#   3. scripts/nightly.sh takes its GPU branch on prebuilt binaries as the acceptance runs it: with
#      an nvidia-smi that lists a GPU and a stand-in `validate` that records its arguments, it
#      builds nothing, uses the given references, and runs and gates what the plan counts on;
#   4. --deadline: a call whose time is up starts nothing and names every step left for the next;
#   and reports/gpu/PLAN.md's table of call 1 is the plan's (steps, order, estimates).
# gpu_acceptance_v2_stand_ins.sh runs the whole plan for real on stand-ins.
#   gpu_acceptance_v2.sh REPO SCRATCH
set -u
repo=$1 work=$2
. "$(dirname "$0")/acceptance_checks.sh"

plan=$("$script" --dry-run --prebuilt 2>&1); rc=$?
echo "$plan" >"$work/plan.md"
[[ $rc == 0 ]] || fail "--dry-run --prebuilt exited $rc"

# --- 1. the table: | step | call | estimated s | cumulative s | peak | keeps | basis | what |
declare -A CALL EST
c1=0 order=()
while IFS='|' read -r _ name call est _ _ _ basis _; do
  name=${name// /} call=${call// /} est=${est// /}
  [[ $est =~ ^[0-9]+$ ]] || { fail "step $name: estimate '$est'"; continue; }
  ((est > 0 && est <= 480)) || fail "step $name: estimate $est s not in 1..480"
  [[ -n ${basis// /} ]] || fail "step $name: no basis for its estimate"
  CALL[$name]=$call EST[$name]=$est order+=("$name")
  ((call == 1)) && c1=$((c1 + est))
done < <(grep -E '^\| [a-z]' <<<"$plan" | grep -v '^| step |')
((${#order[@]} >= 10)) || fail "only ${#order[@]} steps in the plan"
((c1 > 0 && c1 <= 480)) && echo "ok: call 1 is estimated at $c1 s" || fail "call 1 is estimated at $c1 s (limit 480)"
grep -q "^Call 1: $c1 s " <<<"$plan" || fail "the plan's 'Call 1:' line does not say $c1 s"
[[ ${order[0]} == device ]] || fail "the first step is ${order[0]}, not device (the device query stops a call without a GPU)"
# Call 2 starts with the first step that did not fit: it would have ended past 480 s.
first2=""
for s in "${order[@]}"; do [[ ${CALL[$s]} == 2 ]] && { first2=$s; break; }; done
if [[ -n $first2 ]]; then
  ((c1 + EST[$first2] > 480)) || fail "call 2 starts with $first2 ($((EST[$first2])) s), which fits call 1 ($c1 s)"
  grep -q "^Call 2: .*--steps $first2," <<<"$plan" || fail "the plan names no second call starting with $first2"
fi
for s in "${order[@]}"; do
  [[ ${CALL[$s]} == 1 ]] || continue
  grep -q "^### $s (call 1, estimated ${EST[$s]} s)" <<<"$plan" || fail "no command list for step $s"
done

# The commands of call 1 (and of every call), one per line: - `EXPECT` NAME: `COMMAND`
call1=$(awk '/^### / { c = ($0 ~ /\(call 1,/) } c && /^- `/' <<<"$plan")
echo "$call1" >"$work/call1.txt"
n1=$(grep -c . <<<"$call1")
((n1 >= 100)) && echo "ok: call 1 lists $n1 commands" || fail "call 1 lists only $n1 commands"
# has EXPECT NAME-REGEX [COMMAND-SUBSTRING...]: a call-1 command with that expectation, a name
# matching the regex, and every substring in its command
has() {
  local expect=$1 name=$2 line ok
  shift 2
  while IFS= read -r line; do
    [[ $line =~ ^-\ \`$expect\`\ ($name):\ \`(.*)\`$ ]] || continue
    ok=1
    for sub in "$@"; do [[ ${BASH_REMATCH[2]} == *"$sub"* ]] || { ok=0; break; }; done
    ((ok)) && { HAS_CMD=${BASH_REMATCH[2]}; return 0; }
  done <<<"$call1"
  return 1
}
need() { has "$@" || fail "call 1 has no \`$1\` command named /$2/ with: ${*:3}"; }

# --- 2. the required items
dtypes=float32,bfloat16,float16
# the whole default sweep's references: no --only, the three dtypes
need pass 'generate-full-cpu' "generate --cases cases/default.json --device cpu --dtype $dtypes --out \$WORK/ref/full-cpu"
[[ ${HAS_CMD:-} == *--only* ]] && fail "the whole-sweep references are a subset: $HAS_CMD"
need pass 'verify-full-cpu' 'verify $WORK/ref/full-cpu'
# nightly.sh as shipped, on the prebuilt binaries and those references, its GPU runs checked
need pass 'nightly' 'VALIDATE_SKIP_BUILD=1' 'VALIDATE_BIN=build-gpu/validate' 'VALIDATE_REF=$WORK/ref/full-cpu' 'scripts/nightly.sh'
need pass 'nightly-gpu-runs' 'nightly_checked' 'cudnn-torch,cudnn-channels_last,cudnn-fortran,torch-cuda' "$dtypes"
# cudnn --algo all in every direction on the whole sweep, every variant gated, every dtype judged
need pass 'run-full-cudnn-[a-z_]+-all' '--backend cudnn --device cuda' '--algo all' '--ref $WORK/ref/full-cpu --out $WORK/run/full-cudnn-'
run_cmd=$HAS_CMD
[[ $run_cmd == *--only* || $run_cmd == *--algo-* ]] && fail "the --algo all run is not the whole sweep in every direction: $run_cmd"
run_dir=$(grep -oE '\$WORK/run/full-cudnn-[a-z_]+-all' <<<"$run_cmd")
need pass 'gate-full-cudnn-[a-z_]+-all' "compare \$WORK/ref/full-cpu $run_dir --json"
[[ $HAS_CMD == *--variant* || $HAS_CMD == *--only* || $HAS_CMD == *--gate* || $HAS_CMD == *--policy* ]] &&
  fail "the --algo all gate leaves variants, cases or default gates out: $HAS_CMD"
need pass 'gate-full-cudnn-[a-z_]+-all-nonempty' 'checked_something'
need pass 'gate-full-cudnn-[a-z_]+-all-dtypes' 'gated_dtypes' "$dtypes"
# the three-way verdict on the largest bfloat16 cases of the default sweep
big=$(python3 - "$repo/cases/default.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
d = f["defaults"]
ks = sorted(ic // d.get("groups", 1) * d["kernel"][0] * d["kernel"][1] for ic in f["sweep"]["in_channels"])
print(" ".join("k%04d_" % k for k in ks[-3:]))
PY
)
need pass 'run-big-oracle' '--backend oracle' '--ref $WORK/ref/full-cpu' "--only ^bfloat16/"
for k in $big; do k=${k//[!0-9]/}; [[ $HAS_CMD == *"$((10#$k))"* ]] || fail "the oracle's run leaves out the largest case $k: $HAS_CMD"; done
need pass 'three-way-[a-z0-9-]*cudnn[a-z0-9-]*' 'compare $WORK/ref/full-cpu' '--oracle $WORK/run/big-oracle'
need pass 'three-way-[a-z0-9-]*torch-cuda' 'compare $WORK/ref/full-cpu' '--oracle $WORK/run/big-oracle'
need pass 'run-big-torch-cuda' '--backend torch --device cuda'
# the device trajectories (SGD, Adam, mixed precision) and conv_transpose2d, every preset
presets=$(sed -n '/^std::vector<std::string> preset_names() {/,/^}/p' "$repo/harness/layout/src/preset.cpp" | grep -oE '"[a-z_]+"' | tr -d '"')
[[ $(wc -w <<<"$presets") == 5 ]] || fail "expected five presets in preset.cpp, found: $presets"
need pass 'gpu-tests-train' 'gpu_tests --gtest_filter=CudnnTrain'
for f in train_smoke train_adam train_mixed conv_transpose2d; do
  need pass "generate-$f" "generate --cases cases/$f.json --device cpu"
  for L in $presets; do
    need pass "run-$f-cudnn-$L" "--backend cudnn --device cuda --layout $L --ref \$WORK/ref/$f --out"
    need pass "gate-$f-cudnn-$L" "compare \$WORK/ref/$f \$WORK/run/$f-cudnn-$L --require-all"
    [[ $f == train_* ]] && need pass "gate-$f-cudnn-$L-trained" "trained"
  done
done
for L in $presets; do
  need pass "run-conv_transpose2d-cudnn-$L-all" "--layout $L --algo all"
  need pass "gate-conv_transpose2d-cudnn-$L-all" "compare \$WORK/ref/conv_transpose2d \$WORK/run/conv_transpose2d-cudnn-$L-all"
done
grep -q '"optimizer": "adam"' "$repo/cases/train_adam.json" || fail "cases/train_adam.json trains no Adam"
grep -q '"float16"' "$repo/cases/train_mixed.json" || fail "cases/train_mixed.json trains no float16"
# all five presets on the default sweep's cases too: nightly's three, the linear ones in the plan
for L in linear_in_out linear_out_in; do
  need pass "run-[a-z]+-cudnn-$L" "--layout $L --ref \$WORK/ref/full-cpu"
  need pass "gate-[a-z]+-cudnn-$L" '--require-all'
  need pass "gate-[a-z]+-cudnn-$L-dtypes" "gated_dtypes" "$dtypes"
done
# TF32 caught; the layout kernels measured; the device query first
need fail 'compare-[a-z]+-cudnn-tf32-must-fail' '--only ^float32/'
need pass 'gate-[a-z]+-cudnn-tf32-policy-passes' '--policy policies/tf32.json'
need pass 'bench-gpu-permute' 'bench_gpu_permute'
need pass 'device-query' 'device_query'
need pass 'gpu-tests' 'gpu_tests --gtest_brief=1'
# Required steps are all in call 1: nothing required is left to the optional call.
for s in device bench train conv-transpose tf32 refs nightly three-way algo-all-torch presets-linear; do
  [[ ${CALL[$s]:-} == 1 ]] || fail "required step $s is in call ${CALL[$s]:-none}"
done

# A command still running at the hard stop (--deadline + HARD_STOP_GRACE) is ended, and its step is
# named first among the steps left; the summary and --pack-out are still written. The deadline
# leaves the script's own start-up (seconds on a loaded machine) time to reach the command.
mkdir -p "$work/b/build-gpu/bench/gpu"
printf '#!/bin/sh\nexit 0\n' >"$work/b/build-gpu/validate"
printf '#!/bin/sh\nsleep 300\n' >"$work/b/build-gpu/bench/gpu/bench_gpu_permute"
chmod +x "$work/b/build-gpu/validate" "$work/b/build-gpu/bench/gpu/bench_gpu_permute"
t0=$SECONDS
hout=$(cd "$repo" && PATH="$work/nogpu:$PATH" HARD_STOP_GRACE=1 "$script" --prebuilt --build "$(realpath --relative-to="$repo" "$work/b/build-gpu")" \
  --steps bench,tf32 --deadline 20 --out "$work/hreport" --work "$work/hw" --pack-out "$work/hback" 2>&1); rc=$?
((SECONDS - t0 < 120)) || fail "the hard stop did not end the command (the call took $((SECONDS - t0)) s)"
[[ $rc == 1 ]] || fail "a call ended at the hard stop exited $rc, not 1"
grep -q '^| bench-gpu-permute | .* | pass | 124 | BAD |' "$work/hreport/summary.md" || fail "no BAD row with exit 124 for the ended command"
grep -qF -- "second call --steps bench,tf32" <<<"$hout" && echo "ok: a command past the hard stop is ended and its step named again" ||
  fail "the ended step was not named first among the steps left: $hout"
[[ -f $work/hback/summary.md ]] || fail "--pack-out wrote nothing after the hard stop"

# reports/gpu/PLAN.md's table of call 1 is the plan's: the same steps, in order, with the same estimates
doc=$(sed -n '/^| step | estimated s | what it proves |/,/^$/p' "$repo/reports/gpu/PLAN.md" | grep -E '^\| `' |
  awk -F'|' '{ gsub(/[ `]/, "", $2); gsub(/ /, "", $3); printf "%s=%s ", $2, $3 }')
want=""
for s in "${order[@]}"; do [[ ${CALL[$s]} == 1 ]] && want+="$s=${EST[$s]} "; done
[[ $doc == "$want" ]] && echo "ok: PLAN.md's call 1 is the plan's" || fail "PLAN.md's call 1 table '$doc' is not the plan's '$want'"
grep -q "^Call 1: $c1 s estimated" "$repo/reports/gpu/PLAN.md" || fail "PLAN.md does not give call 1's estimate as $c1 s"

# --- 3. nightly.sh's GPU branch on prebuilt binaries, with stand-ins for nvidia-smi and validate
bin=$work/fake-bin ref=$work/ref out=$work/nightly
mkdir -p "$bin" "$ref"
printf '#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-test)"\n' >"$bin/nvidia-smi"
cat >"$bin/validate" <<'SH'
#!/usr/bin/env bash
# records its arguments; answers as validate does where nightly.sh reads the answer
echo "$*" >>"$FAKE_LOG"
case $1 in
  generate) echo "validate generate: no case of x matches the selection (--dtype/--only/--shard)"; exit 2 ;;
  verify) exit 0 ;;
  run)
    while [[ $# -gt 0 ]]; do
      case $1 in --ref) r=$2; shift ;; --out) o=$2; shift ;; esac; shift
    done
    [[ -d $r ]] || { echo "validate run: reference set $r: no such directory"; exit 2; }
    mkdir -p "$o"; exit 0 ;;
  compare)
    [[ $2 == --help ]] && { echo "  --require-all"; exit 0; }
    [[ -d $2 ]] || { echo "validate compare: $2: no such reference set"; exit 2; }
    while [[ $# -gt 0 ]]; do case $1 in --json) j=$2 ;; --junit) x=$2 ;; esac; shift; done
    [[ -n ${x:-} ]] && echo '<testsuites tests="1" failures="0" errors="0"></testsuites>' >"$x"
    [[ -n ${j:-} ]] && echo '{"summary": {"passed": 3}, "entries": [{"dtype": "float32", "verdict": "passed"}, {"dtype": "bfloat16", "verdict": "passed"}, {"dtype": "float16", "verdict": "passed"}]}' >"$j"
    echo "validate: 3 passed, 0 failed, 0 not run"; exit 0 ;;
esac
exit 0
SH
chmod +x "$bin/nvidia-smi" "$bin/validate"
# the references as generate records them: the case file, plus seed, fill, selection, dtypes
python3 - "$repo/cases/default.json" "$ref/config.json" "$dtypes" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg.update(seed=cfg.get("seed", 42), fill="random", selection={"only": "", "shard": "0/1"}, dtypes=sys.argv[3].split(","))
json.dump(cfg, open(sys.argv[2], "w"))
PY
touch "$ref/manifest.json"
export FAKE_LOG=$work/validate-args.log
nout=$(PATH="$bin:$PATH" VALIDATE_SKIP_BUILD=1 VALIDATE_BIN="$bin/validate" VALIDATE_REF="$ref" VALIDATE_OUT="$out" \
  bash "$repo/scripts/nightly.sh" 2>&1); rc=$?
[[ $rc == 0 ]] || fail "nightly.sh on stand-ins exited $rc: $(tail -5 <<<"$nout")"
grep -q "using restored references $ref" <<<"$nout" || fail "nightly.sh did not use VALIDATE_REF: $nout"
grep -q "GPU found" <<<"$nout" || fail "nightly.sh did not take its GPU branch: $nout"
[[ -e $out/reports/build.txt ]] && fail "nightly.sh built with VALIDATE_SKIP_BUILD=1"
for want in "run --backend cudnn --layout torch --ref $ref" "run --backend cudnn --layout channels_last --ref $ref" \
            "run --backend cudnn --layout fortran --ref $ref" "run --backend torch --device cuda --ref $ref"; do
  grep -qF -- "$want" "$FAKE_LOG" || fail "nightly.sh never ran '$want'"
done
n=$(grep -c "^compare $ref .* --require-all" "$FAKE_LOG")
((n == 4)) || fail "nightly.sh ran $n compares of the references with --require-all, not 4"
grep -q -- "--dtype $dtypes" "$FAKE_LOG" || fail "nightly.sh's GPU branch does not check dtypes $dtypes"
# ...and what the acceptance then checks of its reports passes on them
(eval "$(sed -n '/^gated_dtypes() {/,/^}/p; /^nightly_checked() {/,/^}/p' "$script")"
 nightly_checked "$out/reports" cudnn-torch,cudnn-channels_last,cudnn-fortran,torch-cuda "$dtypes") >"$work/checked.txt" 2>&1 ||
  fail "nightly_checked on nightly.sh's reports: $(cat "$work/checked.txt")"

# --- 4. --deadline: with no time left nothing starts, and every step is named for the next call
mkdir -p "$work/b/build-gpu"
printf '#!/bin/sh\nexit 0\n' >"$work/b/build-gpu/validate" && chmod +x "$work/b/build-gpu/validate"
dout=$(cd "$repo" && PATH="$work/nogpu:$PATH" "$script" --prebuilt --build "$(realpath --relative-to="$repo" "$work/b/build-gpu")" --deadline 1 \
  --out "$work/report" --work "$work/w" --pack-out "$work/back" 2>&1); rc=$?
[[ $rc == 0 ]] || fail "a call with no time left exited $rc: $dout"
all=$(sed -n 's/^Call 1: [0-9]* s (\([^)]*\)).*/\1/p' <<<"$plan"),$(sed -n 's/^Call 2: .*--steps \([^)]*\)).*/\1/p' <<<"$plan")
grep -qF -- "second call --steps $all" <<<"$dout" && echo "ok: a cut call names every step left" ||
  fail "a call with no time left did not name every step ($all) for the next: $dout"
grep -q "past --deadline 1 s" "$work/report/summary.md" || fail "summary.md does not say the call stopped at --deadline"
[[ -f $work/back/summary.md && -f $work/back/verdicts.tsv ]] || fail "--pack-out wrote no summary.md/verdicts.tsv"

checks_done "gpu-acceptance v2 plan"
