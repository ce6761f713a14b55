#!/usr/bin/env bash
# An exec program's "not supported" answer (docs/runners.md, "Not supported") end to end: a
# reference set with a matmul case and a conv_transpose2d case; a program that does matmul only
# writes unsupported.txt for the other op and exits 0. `validate run` exits 0 with the op
# `unsupported` (its reason in <case>_run.json), `compare` passes and lists it as unsupported, and
# `compare --require-all` fails it.
# With FORTRAN_BIN (examples/fortran), the same through the Fortran example under `--layout fortran`
# and under examples/fortran/layouts.json: both give the same outcomes.
# usage: exec_unsupported.sh VALIDATE_BIN WORK_DIR [FORTRAN_BIN LAYOUTS_JSON]
set -euo pipefail
bin=$1 work=$2 fortran=${3:-} fortran_layouts=${4:-}
fail() { echo "exec_unsupported: FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
# Every axis a different size, batch > 1.
cat > "$work/cases.json" <<'JSON'
{"format": "validate-cases/1", "seed": 7, "loss": "mse", "dtypes": ["float32"],
 "cases": [
  {"name": "mm_m3_k5_n4", "op": "matmul", "M": 3, "K": 5, "N": 4},
  {"name": "ct_n2_c3_h4_w5", "op": "conv_transpose2d", "batch": 2, "in_channels": 3, "height": 4, "width": 5,
   "out_channels": 6, "kernel": [2, 3], "stride": [2, 1], "padding": [0, 1], "output_padding": [1, 0],
   "dilation": [1, 1], "groups": 1, "bias": true}]}
JSON
"$bin" generate --cases "$work/cases.json" --out "$work/ref" --progress 0 > "$work/gen.log" 2>&1 ||
  fail "generate: $(tail -3 "$work/gen.log")"

# check RUN LABEL: the outcomes every program here must produce on this set.
check() {
  local run=$1 label=$2 rc
  grep -q '1 ok, 0 error, 0 skipped, 1 unsupported' "$work/$run.log" ||
    fail "$label: run summary: $(tail -3 "$work/$run.log")"
  grep -q '"outcome": "unsupported"' "$work/$run/float32/ct_n2_c3_h4_w5_run.json" ||
    fail "$label: conv_transpose2d is not recorded unsupported"
  set +e
  "$bin" compare "$work/ref" "$work/$run" > "$work/$run.txt" 2>&1
  rc=$?
  set -e
  [ $rc -eq 0 ] || fail "$label: compare exited $rc: $(cat "$work/$run.txt")"
  grep -Eq 'ct_n2_c3_h4_w5 +conv_transpose2d +\(op\) .* unsupported$' "$work/$run.txt" ||
    fail "$label: compare does not list conv_transpose2d as unsupported: $(cat "$work/$run.txt")"
  grep -q '4 passed, 0 failed, 0 not run, 1 unsupported' "$work/$run.txt" ||
    fail "$label: compare summary: $(tail -2 "$work/$run.txt")"
  set +e
  "$bin" compare "$work/ref" "$work/$run" --require-all > "$work/$run.all.txt" 2>&1
  rc=$?
  set -e
  [ $rc -eq 1 ] || fail "$label: compare --require-all exited $rc, expected 1: $(tail -2 "$work/$run.all.txt")"
  grep -q -- '--require-all: 1 not checked' "$work/$run.all.txt" ||
    fail "$label: --require-all does not name the unchecked op: $(tail -2 "$work/$run.all.txt")"
}

# A matmul-only program in shell: it hands back the reference's own matmul results (canonical
# layouts, .npy) and answers "not supported" for anything else.
cat > "$work/matmul_only.sh" <<'SH'
set -e
case "$VALIDATE_OP" in
  matmul) for t in output loss grad_A grad_B; do
            cp "$REF/$VALIDATE_DTYPE/${VALIDATE_CASE}_matmul_$t.npy" "$VALIDATE_DIR/$t.npy"
          done ;;
  *) echo "this program does matmul only, not $VALIDATE_OP" > "$VALIDATE_DIR/unsupported.txt" ;;
esac
SH
cat > "$work/layouts.json" <<'JSON'
{"format": "npy",
 "matmul": {"A": "MK", "B": "KN", "target": "MN", "output": "MN", "loss": "scalar", "grad_A": "MK", "grad_B": "KN"},
 "conv_transpose2d": {"input": "NCHW"}}
JSON
REF="$work/ref" "$bin" run --backend exec --cmd "sh $work/matmul_only.sh" --layout "$work/layouts.json" \
  --ref "$work/ref" --out "$work/sh" --progress 0 > "$work/sh.log" 2>&1 || fail "run (shell program) exited $?: $(tail -3 "$work/sh.log")"
check sh "shell program"
grep -q '"message": "the program does not support this task: this program does matmul only, not conv_transpose2d (unsupported.txt)"' \
  "$work/sh/float32/ct_n2_c3_h4_w5_run.json" || fail "the program's reason is not the op's message"

if [ -n "$fortran" ]; then
  for layout in fortran "$fortran_layouts"; do
    out=fortran_$([ "$layout" = fortran ] && echo preset || echo file)
    "$bin" run --backend exec --cmd "$fortran {dir}" --layout "$layout" --ref "$work/ref" --out "$work/$out" \
      --progress 0 > "$work/$out.log" 2>&1 || fail "run ($out) exited $?: $(tail -3 "$work/$out.log")"
    check "$out" "Fortran example, --layout $layout"
  done
fi
rm -rf "$work"
echo "exec_unsupported: passed"
