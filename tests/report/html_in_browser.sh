#!/bin/sh
# ctest report.html_in_chromium: a real comparison report (smoke references against the float64
# oracle in the fortran layouts) rendered by headless Chromium through scripts/check-html.sh.
# Exit 77 (skipped) without Chromium.   usage: html_in_browser.sh VALIDATE_BIN SOURCE_DIR WORK_DIR
set -u
bin=$1 src=$2 work=$3
command -v chromium >/dev/null 2>&1 || { echo "SKIP: no chromium (apt-get install chromium)"; exit 77; }
rm -rf "$work" && mkdir -p "$work" || exit 1
"$bin" run --backend oracle --layout fortran --ref "$src/references/smoke" --out "$work/run" --progress 0 > "$work/run.log" 2>&1 ||
  { cat "$work/run.log"; exit 1; }
"$bin" compare "$src/references/smoke" "$work/run" --html "$work/report.html" --color never > "$work/compare.log" 2>&1
rc=$?
[ $rc -le 1 ] || { cat "$work/compare.log"; echo "compare exited $rc"; exit 1; }
bash "$src/scripts/check-html.sh" "$work/report.html" "$work/report.png"
