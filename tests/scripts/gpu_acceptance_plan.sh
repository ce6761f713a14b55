#!/usr/bin/env bash
# The GPU acceptance's step plan, checked on the CPU: every step of the default
# plan is estimated at <= 8 minutes (one device call runs at most 10), the plan prints the disk
# each step keeps, a step over the limit is refused (exit 2) before anything runs, --only cannot
# be empty, and the size model behind the estimates matches what `validate generate` really writes
# (exact element count from `validate list`).
#   gpu_acceptance_plan.sh REPO SCRATCH [VALIDATE]   (VALIDATE: a CLI that can generate; optional)
set -u
repo=$1 work=$2 validate=${3:-}
. "$(dirname "$0")/acceptance_checks.sh"

# 1. The default plan: exit 0, every step listed with its estimate <= 480 s, peak disk and what it keeps.
out=$("$script" --dry-run 2>&1); rc=$?
echo "$out"
[[ $rc == 0 ]] || fail "default --dry-run exited $rc"
steps=$(echo "$out" | awk -F'|' 'NR > 2 && /^\| [a-z]/ { gsub(/ /, "", $2); print $2 }' | paste -sd, -)
[[ $steps == build,smoke,sweep-refs,sweep-torch,sweep-channels_last,sweep-fortran,sweep-exact,sweep-tf32,bench,timing ]] ||
  fail "default steps: $steps"
while IFS='|' read -r _ name _ est _ peak keeps _ what _; do
  name=${name// /}; est=${est// /}
  [[ $est =~ ^[0-9]+$ ]] || { fail "step $name: estimate '$est' is not a number of seconds"; continue; }
  ((est > 0 && est <= 480)) || fail "step $name: estimate $est s not in 1..480"
  [[ $peak =~ [0-9]\ (B|KB|MB|GB|TB) ]] || fail "step $name: peak disk '$peak'"
  [[ $keeps =~ [0-9]\ (B|KB|MB|GB|TB) ]] || fail "step $name: keeps '$keeps'"
  [[ -n ${what// /} ]] || fail "step $name: no description"
done < <(echo "$out" | awk 'NR > 2 && /^\| [a-z]/')
# Without --keep nothing but reports stays behind.
echo "$out" | awk -F'|' 'NR > 2 && /^\| [a-z]/ { print $7 }' | grep -qv '^ 0 B $' && fail "a step keeps disk without --keep"

# 2. --keep: the sweep steps keep their CPU reference set (and say how much).
out=$("$script" --dry-run --keep --steps sweep-refs,sweep-torch 2>&1) || fail "--keep plan exited $?"
echo "$out" | grep -E '^\| sweep-torch \| 1 \| [0-9]+ \| [0-9]+ \| [0-9.]+ MB \| [0-9.]+ MB \|' >/dev/null || fail "--keep: sweep-torch keeps nothing: $out"

# 3. A step over the limit (here the whole sweep's exact step against a 120 s limit) is refused
#    with the reason, exit 2, both for the dry run and for a real invocation (which must not start
#    anything).
out=$(STEP_LIMIT_S=120 "$script" --dry-run --only . --steps sweep-exact 2>&1); rc=$?
[[ $rc == 2 ]] || fail "--only . sweep-exact dry run exited $rc"
echo "$out" | grep -q 'over 120 s' || fail "no 'over 120 s' mark: $out"
out=$(STEP_LIMIT_S=120 "$script" --only . --steps sweep-exact --work "$work/w" --out "$work/o" 2>&1); rc=$?
[[ $rc == 2 ]] || fail "real run of an over-long step exited $rc"
echo "$out" | grep -q 'pick a smaller --only' || fail "no advice: $out"
[[ ! -e $work/o ]] || fail "a refused run wrote $work/o"

# 4. Bad arguments: an empty --only, an unknown step.
"$script" --dry-run --only '' >/dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "empty --only exited $rc"
out=$("$script" --dry-run --steps smoke,nonsense 2>&1); rc=$?
[[ $rc == 2 ]] || fail "unknown step exited $rc"
echo "$out" | grep -q "unknown step 'nonsense'" || fail "unknown step message: $out"

# 5. The bundle's one call (--prebuilt, what run-acceptance.sh passes): the device query first, then
#    the steps of acceptance v2 in their order (tests/scripts/gpu_acceptance_v2.sh checks what
#    they hold); no build step, and asking for one is refused.
out=$("$script" --dry-run --prebuilt 2>&1); rc=$?
[[ $rc == 0 ]] || fail "--prebuilt --dry-run exited $rc: $out"
steps=$(echo "$out" | awk -F'|' 'NR > 2 && /^\| [a-z]/ { gsub(/ /, "", $2); print $2 }' | paste -sd, -)
[[ $steps == device,bench,tf32,conv-transpose,train,refs,presets-linear,algo-all-torch,three-way,nightly,algo-all-channels_last,algo-all-fortran,presets-linear-full,smoke,sweep-exact,sweep-refs,timing ]] ||
  fail "--prebuilt steps: $steps"
out=$("$script" --dry-run --prebuilt --steps build 2>&1); rc=$?
[[ $rc == 2 ]] || fail "--prebuilt --steps build exited $rc"

# 6. The size model against the generator: identical tensor element counts.
if [[ -n $validate && -x $validate ]]; then
  # shellcheck source=../../scripts/gpu-acceptance.sh
  VALIDATE_ACCEPTANCE_LIB=1 source "$script"
  # the last two with float16 named: every case gets it but one whose own "dtypes" leave it out
  for spec in "smoke.json;;float32,bfloat16" "default.json;k(0072|0144|0288|0576)_;float32,bfloat16" \
              "smoke.json;^float32/odd;float32,bfloat16" "smoke.json;;float32,bfloat16,float16" \
              "default.json;k(0072|0144)_;float32,bfloat16,float16"; do
    IFS=';' read -r file only dts <<<"$spec"
    dir=$work/ref-${file%.json}-$RANDOM
    args=(--cases "$repo/cases/$file" --dtype "$dts" --out "$dir" --progress 0)
    [[ -n $only ]] && args+=(--only "$only")
    "$validate" generate "${args[@]}" >/dev/null 2>&1 || { fail "generate $file '$only'"; continue; }
    real=$("$validate" list "$dir" | sed -n 's/^total: \([0-9]*\) cases.*, \([0-9]*\) tensor elements.*/\1 \2/p')
    read -r _ _ _ cases elements < <(estimate "$repo/cases/$file" "$only" "$dts")
    [[ "$cases $elements" == "$real" ]] && echo "ok: model $file '$only' $dts: $cases cases, $elements elements" ||
      fail "model $file '$only' $dts: estimated '$cases $elements', validate list says '$real'"
    rm -rf "$dir"
  done
else
  echo "note: no validate CLI with generate given; the size model was not checked against it"
fi

# 7. Every regular expression the script gives compare (--only, --variant) is one RE2 accepts:
#    lookaround is refused at the command line (exit 2), which made every gate of the first GPU
#    acceptance fail before it compared anything. Statically: no lookaround in the script (sed's
#    backreferences are not compare's). With a CLI: each pattern, with the script's own variables
#    expanded, passes compare's check (which comes before the sets are read).
grep -nE '\(\?[=!<]' "$script" | grep -v '^[0-9]*:#' && fail "lookaround in $script (RE2 has none)"
if [[ -n $validate && -x $validate ]]; then
  eval "$(VALIDATE_ACCEPTANCE_LIB=1 bash -c "source '$script' >/dev/null 2>&1; declare -p DIRECT_FWD DIRECT_BWD BIG_ONLY")"
  [[ -n ${DIRECT_FWD:-} && -n ${DIRECT_BWD:-} ]] || fail "DIRECT_FWD/DIRECT_BWD are not defined when the script is sourced"
  n=0
  while IFS= read -r pat; do
    n=$((n + 1))
    pat=${pat//\$DIRECT_FWD/${DIRECT_FWD:-}}; pat=${pat//\$DIRECT_BWD/${DIRECT_BWD:-}}; pat=${pat//\\\$/\$}
    pat=${pat//\$BIG_ONLY/${BIG_ONLY:-}}; pat=${pat//\$ONLY/k(0072|0144)_}
    msg=$("$validate" compare "$work/none-ref" "$work/none-run" --variant "$pat" --only "$pat" 2>&1)
    grep -q 'regular expression' <<<"$msg" && fail "pattern $pat: $msg"
  done < <(grep -oE -- "--(only|variant) (\"[^\"]*\"|'[^']*')" "$script" | sed -E "s/^--(only|variant) //; s/^[\"']//; s/[\"']\$//")
  ((n >= 8)) || fail "found only $n --only/--variant patterns in $script"
fi

checks_done "gpu-acceptance plan"
