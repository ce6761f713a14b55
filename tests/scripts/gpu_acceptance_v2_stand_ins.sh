#!/usr/bin/env bash
# The whole one-call plan (`--prebuilt`, both calls' steps), run for real on stand-ins for the GPU
# machine's binaries and nvidia-smi: every command's bookkeeping, the checks on compare's JSON and
# scripts/nightly.sh's GPU branch run as they will there, and summary.md must list exactly the
# commands `--dry-run` lists, in its order and with its expectations; the steps leave no reference
# set or run behind. (The plan's content is checked by gpu_acceptance_v2.sh.)
#   gpu_acceptance_v2_stand_ins.sh REPO SCRATCH
set -u
repo=$1 work=$2
. "$(dirname "$0")/acceptance_checks.sh"
bin=$work/fake-bin
mkdir -p "$bin"
printf '#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-test)"\n' >"$bin/nvidia-smi"
chmod +x "$bin/nvidia-smi"

fb=$work/fb/build-gpu
mkdir -p "$fb/tests/gpu" "$fb/bench/gpu"
printf '#!/bin/sh\necho "[  PASSED  ] stand-in"\n' >"$fb/tests/gpu/gpu_tests"
printf '#!/bin/sh\necho "| sweep | ours / memcpy |"\n' >"$fb/bench/gpu/bench_gpu_permute"
cat >"$fb/validate" <<'SH'
#!/usr/bin/env bash
# a stand-in for validate on a GPU machine: references, runs and compare reports of the right form
a=("$@") out="" cases="" dtypes="" json="" md=""
for ((i = 0; i < ${#a[@]}; i++)); do
  case ${a[i]} in --out) out=${a[i+1]} ;; --cases) cases=${a[i+1]} ;; --dtype) dtypes=${a[i+1]} ;;
    --json) json=${a[i+1]} ;; --md) md=${a[i+1]} ;; esac
done
case $1 in
  generate)
    [[ " $* " == *" --only ^\$ "* ]] && { echo "validate generate: no case of x matches the selection"; exit 2; }
    mkdir -p "$out" && touch "$out/manifest.json" && echo '{"device": "cpu"}' >"$out/system_info.json"
    python3 - "$cases" "$dtypes" "$out/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(seed=c.get("seed", 42), fill="random", selection={}, dtypes=sys.argv[2].split(",") if sys.argv[2] else c.get("dtypes", []))
json.dump(c, open(sys.argv[3], "w"))
PY
    ;;
  run)
    ref=""; for ((i = 0; i < ${#a[@]}; i++)); do [[ ${a[i]} == --ref ]] && ref=${a[i+1]}; done
    [[ -d $ref ]] || { echo "validate run: reference set $ref: no such directory"; exit 2; }
    mkdir -p "$out" ;;
  compare)
    [[ $2 == --help ]] && { echo "  --require-all"; exit 0; }
    [[ -d $2 ]] || { echo "validate compare: $2: no such reference set"; exit 2; }
    for ((i = 0; i < ${#a[@]}; i++)); do [[ ${a[i]} == --junit ]] && echo '<testsuites failures="0" errors="0">' >"${a[i+1]}"; done
    e='{"dtype": "%s", "verdict": "passed", "failed": false}'
    [[ -n $json ]] && printf '{"summary": {"passed": 3, "line": "validate: 3 passed"}, "entries": [%s, %s, %s], "trajectories": [{"verdict": "passed"}]}\n' \
      "$(printf "$e" float32)" "$(printf "$e" bfloat16)" "$(printf "$e" float16)" >"$json"
    [[ -n $md ]] && echo "validate: 3 passed" >"$md"
    echo "validate: 3 passed, 0 failed, 0 not run" ;;
esac
exit 0
SH
chmod +x "$fb/validate" "$fb/tests/gpu/gpu_tests" "$fb/bench/gpu/bench_gpu_permute"
rel=$(realpath --relative-to="$repo" "$fb")
args=(--prebuilt --build "$rel" --deadline 100000)
dry=$(cd "$repo" && "$script" --dry-run "${args[@]}" 2>&1 | sed -n 's/^- `\([a-z]*\)` \([^:]*\): .*/\2 \1/p')
(cd "$repo" && PATH="$bin:$PATH" HARD_STOP_GRACE=100000 "$script" "${args[@]}" --out "$work/full" --work "$work/fw") >"$work/full.log" 2>&1
rows=$(sed -n 's/^| \([^ |]*\) | `.*` | \([a-z]*\) | [0-9]* | [a-zA-Z]* | [0-9.]* |$/\1 \2/p' "$work/full/summary.md")
if [[ -n $dry && $rows == "$dry" ]]; then
  echo "ok: the real run executed the $(wc -l <<<"$rows") commands the plan lists, in order"
else
  fail "the real run's commands differ from the plan's: $(diff <(echo "$dry") <(echo "$rows") | head -10) (log: $(tail -5 "$work/full.log"))"
fi
for n in nightly nightly-gpu-runs gate-full-cudnn-torch-all-dtypes gate-train_adam-cudnn-linear_out_in-trained \
         three-way-big-torch-cuda gate-sub-cudnn-linear_out_in-dtypes; do
  grep -q "^| $n | .* | ok | " "$work/full/summary.md" || fail "on stand-ins, $n was not ok: $(grep "^| $n |" "$work/full/summary.md")"
done
left=$(find "$work/fw" -mindepth 1 -not -name .summary-stamp | head -5)
[[ -z $left ]] || fail "the steps left behind: $left"

checks_done "gpu-acceptance v2 on stand-ins"
