#!/bin/sh
# ctest report.html_in_chromium: a real comparison report (smoke references against the float64
# oracle in the fortran layouts) rendered by headless Chromium through scripts/check-html.sh.
# scripts/install-deps.sh installs Debian's chromium, so this runs on a fresh CI machine; exit 77
# (skipped) without Chromium only outside CI -- under CI (CI set) a missing browser fails the test.
#   usage: html_in_browser.sh VALIDATE_BIN SOURCE_DIR WORK_DIR
set -u
bin=$1 src=$2 work=$3
if ! command -v chromium >/dev/null 2>&1; then
  [ -n "${CI:-}" ] && { echo "FAIL: no chromium under CI (scripts/install-deps.sh installs it)"; exit 1; }
  echo "SKIP: no chromium (scripts/install-deps.sh, or apt-get install chromium)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
"$bin" run --backend oracle --layout fortran --ref "$src/references/smoke" --out "$work/run" --progress 0 > "$work/run.log" 2>&1 ||
  { cat "$work/run.log"; exit 1; }
"$bin" compare "$src/references/smoke" "$work/run" --html "$work/report.html" --color never > "$work/compare.log" 2>&1
rc=$?
[ $rc -le 1 ] || { cat "$work/compare.log"; echo "compare exited $rc"; exit 1; }
bash "$src/scripts/check-html.sh" "$work/report.html" "$work/report.png"
rc=$?
[ $rc -eq 0 ] || exit $rc
# A training report (issue 15): cases/train_smoke.json's trajectories against the float64 oracle,
# whose "Training trajectories" section draws two line plots per op that trained (both loss curves;
# their relative difference with the gate curve), rendered by Chromium too.
"$bin" generate --cases "$src/cases/train_smoke.json" --out "$work/train_ref" --progress 0 > "$work/gen.log" 2>&1 ||
  { cat "$work/gen.log"; exit 1; }
"$bin" run --backend oracle --ref "$work/train_ref" --out "$work/train_run" --progress 0 > "$work/run.log" 2>&1 ||
  { cat "$work/run.log"; exit 1; }
"$bin" compare "$work/train_ref" "$work/train_run" --require-all --html "$work/train.html" --color never > "$work/compare.log" 2>&1 ||
  { cat "$work/compare.log"; echo "compare of the training trajectories failed"; exit 1; }
grep -q '<h2 id="trajectories">Training trajectories</h2>' "$work/train.html" || { echo "FAIL: no trajectory section"; exit 1; }
plots=$(grep -o 'class="lineplot"' "$work/train.html" | wc -l)
[ "$plots" -eq 6 ] || { echo "FAIL: $plots trajectory plots, expected 6 (3 ops x 2)"; exit 1; }
gates=$(grep -o 'data-series="gate r0·sqrt(1+step)" data-points="[0-9]*"' "$work/train.html" | sed 's/.*points="//;s/"//' | sort | tr '\n' ' ')
[ "$gates" = "100 100 40 " ] || { echo "FAIL: gate curves with $gates points, expected 100 100 40"; exit 1; }
bash "$src/scripts/check-html.sh" "$work/train.html" "$work/train.png"
