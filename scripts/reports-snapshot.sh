#!/usr/bin/env bash
# reports-snapshot.sh VALIDATE_BINARY OUTDIR
#
# Every report `validate compare` writes (terminal text, --json, --md, --html, --junit), for a
# fixed set of stacks, into OUTDIR: the proof that a change to the code changed no report. Take a snapshot
# with the binary built before the change and one with the binary built after, then
#     diff -r /tmp/snap_before /tmp/snap_after      # must print nothing
# The stacks, each run with VALIDATE_BINARY itself:
#   - references/smoke (committed) against the float64 oracle and the torch runner (also compared
#     three-way, --oracle), plain, -v and --require-all;
#   - references/smoke against the exec mutants (examples/mutants: all 33 planted mistakes and the
#     clean program, in the channels_last, torch and fortran layout families), the deliberately
#     buggy C matmul (examples/c_buggy: none, transpose_B, fortran_order) and the Fortran example;
#   - a smoke set generated with error-bound scales (cases/smoke.json, --threads 1, as the panel
#     tests make it) against the panel's correct C stack and its wrong numpy stacks (tests/panel:
#     numpy_tf32, numpy_wtrans), plain and --oracle;
#   - training sets (cases/train_exec.json, train_mixed.json, train_adam.json) against the oracle,
#     the torch runner and the Fortran example clean and with each planted bug
#     (CONV_RUNNER_BUG=update_dw_krsc, narrow_masters, no_weight_decay: docs/training.md).
# OUTDIR/<stack>/ holds terminal.txt (stdout), stderr.txt, exit.txt and report.{json,md,html,xml};
# OUTDIR/commands.txt every command run. Runs and reference sets are made in ${SNAP_WORK:-OUTDIR.work}
# (removed first), and the unfiltered reports stay in its raw/ folder.
#
# The filter (filter() below, one sed): what differs between two snapshots of the SAME binary, or
# by construction between two builds, becomes a placeholder, and nothing else does:
#   - paths: the work directory, OUTDIR, the binary's directory (the example programs' commands in
#     run_info) and the repository -> WORK, OUT, BUILD, REPO (headers, run_info, repro commands);
#   - the binary's git commit (JSON git_commit, the HTML header) -> COMMIT: another build, another commit;
#   - times: created_at and the HTML "created", elapsed_s, the JUnit <testsuites time>, the HTML
#     header's seconds, run_info's time_s block -> TIME / SECONDS;
#   - manifest_sha256: a generated set's manifest records when it was made -> SHA.
# Each rule is needed: dropping any one of the time or hash rules makes two snapshots of one binary
# differ (checked: 38 to 480 lines each), the path rules because OUTDIR differs, the commit rules
# once the commit does. Two snapshots of one binary differ in WORK/raw, never in OUTDIR.
# Needs: the build's example programs next to VALIDATE_BINARY (examples/validate_*_example,
# tests/panel/validate_panel_c), LibTorch (generate, torch runner), python3 with numpy.
# Environment: SNAP_PYTHON (python3 with numpy; default /usr/bin/python3), SNAP_WORK.
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 VALIDATE_BINARY OUTDIR" >&2
  exit 2
fi
bin=$(realpath "$1")
out=$(realpath -m "$2")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(realpath -m "${SNAP_WORK:-$out.work}")
py=${SNAP_PYTHON:-/usr/bin/python3}
bdir=$(dirname "$bin")
mutant=$bdir/examples/validate_mutant_example
cbuggy=$bdir/examples/validate_c_buggy_example
fortran=$bdir/examples/validate_fortran_example
panel_c=$bdir/tests/panel/validate_panel_c
for f in "$bin" "$mutant" "$cbuggy" "$fortran" "$panel_c"; do
  [ -x "$f" ] || { echo "reports-snapshot.sh: $f: not built" >&2; exit 2; }
done
rm -rf "$out" "$work"
mkdir -p "$out" "$work/raw"
export OMP_NUM_THREADS=1  # the torch runner and generate: one summation order on any machine

log() { printf '%s\n' "$*" >> "$work/commands.txt"; }
die() { echo "reports-snapshot.sh: $*" >&2; exit 1; }
# v ARGS...: the binary, quiet, logged; fails the snapshot when it fails.
v() {
  log "validate $*"
  "$bin" "$@" > "$work/last.log" 2>&1 || die "validate $* failed: $(tail -5 "$work/last.log")"
}
gen() {  # gen NAME CASES [generate options]: a reference set in WORK/NAME
  local name=$1 cases=$2
  shift 2
  v generate --cases "$repo/cases/$cases" --threads 1 --progress 0 --out "$work/$name" "$@"
}
run() {  # run NAME REF [VAR=VALUE...] -- run options: a run in WORK/NAME
  local name=$1 ref=$2 vars=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  log "${vars[*]} validate run --ref $ref --out $work/$name $*"
  env "${vars[@]}" "$bin" run --progress 0 --ref "$ref" --out "$work/$name" "$@" > "$work/$name.log" 2>&1 \
    || die "run $name failed: $(tail -5 "$work/$name.log")"
}
cmp_() {  # cmp_ STACK REF RUN [compare options]: every report format of one comparison
  local stack=$1 ref=$2 run_dir=$3
  shift 3
  local d=$work/raw/$stack
  mkdir -p "$d"
  log "validate compare $ref $run_dir --color never --json ... --md ... --html ... --junit ... $*"
  "$bin" compare "$ref" "$run_dir" --color never --json "$d/report.json" --md "$d/report.md" \
    --html "$d/report.html" --junit "$d/report.xml" "$@" > "$d/terminal.txt" 2> "$d/stderr.txt"
  echo $? > "$d/exit.txt"
}

# The placeholders (the comment block at the top says why each is there).
filter() {
  sed -E \
    -e "s#$work#WORK#g; s#$out#OUT#g; s#$bdir#BUILD#g; s#$repo#REPO#g" \
    -e 's/"git_commit": "[^"]*"/"git_commit": "COMMIT"/' \
    -e 's#(<dt>harness</dt><dd>[^ <]+ \()[^)]*\)#\1COMMIT)#' \
    -e 's/"created_at": "[^"]*"/"created_at": "TIME"/' \
    -e 's#(<dt>created</dt><dd>)[^<]*#\1TIME#' \
    -e 's/"elapsed_s": [0-9.eE+-]+/"elapsed_s": SECONDS/' \
    -e 's/(<testsuites name="[^"]*" .* time=")[0-9.]+"/\1SECONDS"/' \
    -e 's#(, kernel [a-z0-9]+, )[0-9.]+ s</dd>#\1SECONDS s</dd>#' \
    -e '/"time_s": \{/,/\}/ s/: [0-9.eE+-]+/: SECONDS/' \
    -e 's/"manifest_sha256": "[0-9a-f]{64}"/"manifest_sha256": "SHA"/' \
    "$1"
}

ref=$repo/references/smoke

# 1. The committed smoke set: oracle and torch.
run oracle "$ref" -- --backend oracle
run torch "$ref" -- --backend torch --device cpu --threads 1
cmp_ smoke.oracle "$ref" "$work/oracle"
cmp_ smoke.oracle.verbose "$ref" "$work/oracle" -v --require-all
cmp_ smoke.torch "$ref" "$work/torch"
cmp_ smoke.torch.three_way "$ref" "$work/torch" --oracle "$work/oracle"
cmp_ smoke.torch.no_diagnose_gate "$ref" "$work/torch" --no-diagnose --gate float32.output.max_ulp=0

# 2. The exec mutants: every planted mistake in every layout family, and the clean program.
mutants=$(sed -n '/^MUTANTS = OrderedDict/,/^])/p' "$repo/examples/mutants/mutation_suite.py" |
  grep -oE '^    \("[a-z0-9_]+"' | tr -d ' ("')
[ "$(echo "$mutants" | wc -l)" -ge 30 ] || die "could not read the mutants of mutation_suite.py"
for family in channels_last torch fortran; do
  case $family in
    channels_last) layouts=layouts.json ;;
    *) layouts=layouts_$family.json ;;
  esac
  for m in $mutants; do
    run "mut_${family}_$m" "$ref" -- --backend exec --cmd "$mutant {dir} $m $family" \
      --layout "$repo/examples/mutants/$layouts"
    cmp_ "mutant.$family.$m" "$ref" "$work/mut_${family}_$m"
    rm -rf "$work/mut_${family}_$m"
  done
done
run mut_verbose "$ref" -- --backend exec --cmd "$mutant {dir} in_hw_swap_out_fortran channels_last" \
  --layout "$repo/examples/mutants/layouts.json"
cmp_ mutant.verbose.pair "$ref" "$work/mut_verbose" -v --oracle "$work/oracle"
run forward_only "$ref" -- --backend exec --cmd "$mutant {dir} none channels_last" \
  --layout "$repo/examples/mutants/layouts_forward_only.json"
cmp_ mutant.forward_only "$ref" "$work/forward_only" --require-all

# 3. The buggy C matmul and the Fortran example.
for bug in none transpose_B fortran_order; do
  run "c_buggy_$bug" "$ref" -- --backend exec --cmd "$cbuggy {dir} $bug" --layout "$repo/examples/c_buggy/layouts.json"
  cmp_ "c_buggy.$bug" "$ref" "$work/c_buggy_$bug"
done
run fortran "$ref" -- --backend exec --cmd "$fortran {dir}" --layout "$repo/examples/fortran/layouts.json"
cmp_ fortran.smoke "$ref" "$work/fortran"

# 4. The panel on a set with error-bound scales (the bounds gate).
gen smoke_bounds smoke.json
run bounds_oracle "$work/smoke_bounds" -- --backend oracle
run panel_c_naive "$work/smoke_bounds" -- --backend exec --cmd "$panel_c {dir} naive" \
  --layout "$repo/tests/panel/layouts_c.json"
cmp_ panel.c_naive "$work/smoke_bounds" "$work/panel_c_naive"
cmp_ panel.c_naive.oracle "$work/smoke_bounds" "$work/panel_c_naive" --oracle "$work/bounds_oracle"
for w in tf32 wtrans; do
  run "panel_$w" "$work/smoke_bounds" -- --backend exec --cmd "$py $repo/tests/panel/panel_numpy.py {dir} $w" \
    --layout "$repo/tests/panel/layouts_numpy.json"
  cmp_ "panel.numpy_$w" "$work/smoke_bounds" "$work/panel_$w"
  cmp_ "panel.numpy_$w.oracle" "$work/smoke_bounds" "$work/panel_$w" --oracle "$work/bounds_oracle"
done

# 5. Training: the loss curve, the checkpoints and the update diagnosis.
gen train_exec train_exec.json
run train_exec_oracle "$work/train_exec" -- --backend oracle --layout channels_last
run train_exec_torch "$work/train_exec" -- --backend torch --device cpu --threads 1
cmp_ train.exec.oracle "$work/train_exec" "$work/train_exec_oracle" --require-all
cmp_ train.exec.torch "$work/train_exec" "$work/train_exec_torch" --require-all
flayout=$repo/examples/fortran/layouts.json
run train_exec_fortran "$work/train_exec" -- --backend exec --cmd "$fortran {dir}" --layout "$flayout"
cmp_ train.exec.fortran "$work/train_exec" "$work/train_exec_fortran" --require-all
run train_exec_krsc "$work/train_exec" CONV_RUNNER_BUG=update_dw_krsc -- --backend exec --cmd "$fortran {dir}" --layout "$flayout"
cmp_ train.exec.fortran.update_dw_krsc "$work/train_exec" "$work/train_exec_krsc" --require-all
cmp_ train.exec.fortran.update_dw_krsc.verbose "$work/train_exec" "$work/train_exec_krsc" -v
for set in mixed adam; do
  gen "train_$set" "train_$set.json" --only "t${set}_conv"
  run "train_${set}_oracle" "$work/train_$set" -- --backend oracle
  cmp_ "train.$set.oracle" "$work/train_$set" "$work/train_${set}_oracle" --require-all
  bugs="none update_dw_krsc"
  [ "$set" = mixed ] && bugs="$bugs narrow_masters no_weight_decay"
  for b in $bugs; do
    vars=()
    [ "$b" = none ] || vars=("CONV_RUNNER_BUG=$b")
    run "train_${set}_$b" "$work/train_$set" "${vars[@]}" -- --backend exec --cmd "$fortran {dir}" --layout "$flayout"
    cmp_ "train.$set.fortran.$b" "$work/train_$set" "$work/train_${set}_$b" --require-all
  done
done

# The snapshot: every raw file through the filter.
(cd "$work/raw" && find . -type f) | sort | while read -r f; do
  mkdir -p "$out/$(dirname "$f")"
  filter "$work/raw/$f" > "$out/$f"
done
filter "$work/commands.txt" > "$out/commands.txt"
echo "reports-snapshot.sh: $(ls "$work/raw" | wc -l) comparisons, $(find "$out" -type f | wc -l) files in $out"
