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
# VALIDATE_SKIP_BROWSER=1 (scripts/test-sanitized.sh): everything but Chromium's rendering, which
# depends only on the HTML's bytes, the same from every build; scripts/test.sh renders them.
render() {  # render HTML PNG
  if [ "${VALIDATE_SKIP_BROWSER:-0}" = 1 ]; then echo "not rendered (VALIDATE_SKIP_BROWSER=1): $1"; return 0; fi
  bash "$src/scripts/check-html.sh" "$1" "$2"
}
"$bin" run --backend oracle --layout fortran --ref "$src/references/smoke" --out "$work/run" --progress 0 > "$work/run.log" 2>&1 ||
  { cat "$work/run.log"; exit 1; }
"$bin" compare "$src/references/smoke" "$work/run" --html "$work/report.html" --color never > "$work/compare.log" 2>&1
rc=$?
[ $rc -le 1 ] || { cat "$work/compare.log"; echo "compare exited $rc"; exit 1; }
render "$work/report.html" "$work/report.png"
rc=$?
[ $rc -eq 0 ] || exit $rc
# A report whose ULP histograms reach the bin "1073741825-2147483648" (21 characters): a program that hands
# back the reference's results except grad_input (grad_A), for which it writes its input — values
# unrelated to the gradient, billions of ULPs off. check-html.sh measures in Chromium that each
# rotated bin label stays inside its picture and above the axis title.
cat > "$work/wrong_grad.sh" <<'SH'
set -e
r="$REF/$VALIDATE_DTYPE/${VALIDATE_CASE}_${VALIDATE_OP}"
for t in output loss grad_weight grad_bias grad_B; do
  if [ -f "${r}_$t.npy" ]; then cp "${r}_$t.npy" "$VALIDATE_DIR/$t.npy"; fi
done
case "$VALIDATE_OP" in
  conv2d) cp "$VALIDATE_DIR/input.npy" "$VALIDATE_DIR/grad_input.npy" ;;
  matmul) cp "$VALIDATE_DIR/A.npy" "$VALIDATE_DIR/grad_A.npy" ;;
esac
SH
cat > "$work/canonical.json" <<'JSON'
{"format": "npy",
 "conv2d": {"input": "NCHW", "weight": "OIHW", "bias": "O", "target": "NCHW", "output": "NCHW", "loss": "scalar",
            "grad_input": "NCHW", "grad_weight": "OIHW", "grad_bias": "O"},
 "matmul": {"A": "MK", "B": "KN", "target": "MN", "output": "MN", "loss": "scalar", "grad_A": "MK", "grad_B": "KN"}}
JSON
REF="$src/references/smoke" "$bin" run --backend exec --cmd "sh $work/wrong_grad.sh" --layout "$work/canonical.json" \
  --ref "$src/references/smoke" --out "$work/wrong_run" --progress 0 > "$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
# Two failing tensors (float32 k0072_ic008 grad_input and grad_A): few enough cards that the
# error-versus-K plots stay inside the screenshot check-html.sh inspects.
"$bin" compare "$src/references/smoke" "$work/wrong_run" --only '^float32/k0072_ic008/' --html "$work/wrong.html" \
  --color never > "$work/compare.log" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$work/compare.log"; echo "FAIL: compare of the wrong gradients exited $rc, expected 1"; exit 1; }
grep -q '1073741825-2147483648</text>' "$work/wrong.html" || { echo "FAIL: no histogram reaches the bin 1073741825-2147483648"; exit 1; }
render "$work/wrong.html" "$work/wrong.png" || exit 1
# A training report: cases/train_smoke.json's trajectories against the float64 oracle,
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
render "$work/train.html" "$work/train.png"
