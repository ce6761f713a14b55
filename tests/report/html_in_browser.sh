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
