#!/usr/bin/env bash
# The nightly gate, the same locally and in CI: build, generate (or restore) CPU references, run
# the backends this machine has, compare each against the references with the policy, write
# JUnit/HTML/Markdown/JSON reports, and exit non-zero if any gate failed.
#
#   VALIDATE_CASES   case file (default cases/default.json; cases/smoke.json for a quick check)
#   VALIDATE_DTYPES  dtypes (default float32,bfloat16)
#   VALIDATE_POLICY  compare policy file (default: the built-in policy)
#   VALIDATE_OUT     where references, runs and reports go (default out/nightly)
#   VALIDATE_REF     an existing reference set to use instead of generating (verified first)
#   VALIDATE_SKIP_BUILD=1  use an existing binary (VALIDATE_BIN, default build/validate)
set -uo pipefail
cd "$(dirname "$0")/.."
cases=${VALIDATE_CASES:-cases/default.json}
dtypes=${VALIDATE_DTYPES:-float32,bfloat16}
out=${VALIDATE_OUT:-out/nightly}
policy_args=()
[ -n "${VALIDATE_POLICY:-}" ] && policy_args=(--policy "$VALIDATE_POLICY")
bin=${VALIDATE_BIN:-build/validate}
log() { echo "nightly: $*"; }
[ "${VALIDATE_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh > /dev/null || { log "build failed"; exit 2; }
mkdir -p "$out/reports"
status=0

if [ -n "${VALIDATE_REF:-}" ]; then
  ref=$VALIDATE_REF
  $bin verify "$ref" > "$out/reports/verify.txt" || { log "restored references $ref do not verify"; exit 2; }
  log "using restored references $ref"
else
  ref=$out/ref
  rm -rf "$ref"
  $bin generate --cases "$cases" --dtype "$dtypes" --out "$ref" --progress 1 > "$out/reports/generate.txt" \
    || { log "generate failed: $(tail -3 "$out/reports/generate.txt")"; exit 2; }
  log "generated CPU references for $cases ($dtypes) in $ref"
fi

# name | run arguments
runs=()
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
  log "GPU found: $(nvidia-smi -L | head -1)"
  for layout in torch channels_last fortran; do runs+=("cudnn-$layout|--backend cudnn --layout $layout"); done
  runs+=("torch-cuda|--backend torch --device cuda")
else
  log "no GPU on this machine: running the float64 oracle and LibTorch on the CPU instead of cuDNN"
  runs+=("oracle-fortran|--backend oracle --layout fortran" "torch-cpu|--backend torch --device cpu")
fi

summary="$out/reports/summary.md"
echo "| run | run exit | compare exit |" > "$summary"
echo "|---|---|---|" >> "$summary"
for entry in "${runs[@]}"; do
  name=${entry%%|*}
  args=${entry#*|}
  # shellcheck disable=SC2086
  $bin run $args --ref "$ref" --out "$out/run-$name" --progress 1 > "$out/reports/run-$name.txt" 2>&1
  run_rc=$?
  $bin compare "$ref" "$out/run-$name" "${policy_args[@]}" --junit "$out/reports/$name.junit.xml" \
    --html "$out/reports/$name.html" --md "$out/reports/$name.md" --json "$out/reports/$name.json" \
    > "$out/reports/compare-$name.txt" 2>&1
  cmp_rc=$?
  echo "| $name | $run_rc | $cmp_rc |" >> "$summary"
  log "$name: run exit $run_rc, compare exit $cmp_rc — $(tail -1 "$out/reports/compare-$name.txt")"
  [ $run_rc -ne 0 ] && status=1
  [ $cmp_rc -ne 0 ] && status=$(( cmp_rc > status ? cmp_rc : status ))
done
log "reports in $out/reports (JUnit, HTML, Markdown, JSON); exit $status"
exit $status
