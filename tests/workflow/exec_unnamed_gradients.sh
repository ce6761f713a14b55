#!/usr/bin/env bash
# A layout file that names conv2d's and matmul's inputs but no gradient (docs/layouts.md, "Layout
# files"; docs/runners.md, step 8), end to end on references/smoke's float32 case with every axis a
# different size and batch 3 (odd_n3_c5_h11_w6). The program hands back the reference's own results
# (so every value is right), in the layouts the file's base preset (torch) gives them:
#   all      writes every gradient: they are read in the base's layouts and checked, compare passes,
#            nothing is "not requested", and every report format warns that the layouts were not
#            declared;
#   nhwc     writes grad_input in its input's layout (NHWC) instead: compare fails it (exit 1) and
#            names the layout the bytes are in;
#   forward  writes no gradient: they are "not requested", exit 0, no warning.
# Needs python3 (standard library only) for the program.
# usage: exec_unnamed_gradients.sh VALIDATE_BIN SOURCE_DIR WORK_DIR
set -uo pipefail
bin=$1 src=$2 work=$3
ref=$src/references/smoke
fail() { echo "exec_unnamed_gradients: FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"

cat > "$work/layouts.json" <<'JSON'
{"base": "torch", "conv2d": {"input": "NHWC"}, "matmul": {"A": "MK"}}
JSON
# prog.py MODE REF DIR CASE OP DTYPE: the reference's results as raw little-endian files.
cat > "$work/prog.py" <<'PY'
import ast, os, struct, sys
mode, ref, d, case, op, dtype = sys.argv[1:7]
def npy(name):
    b = open(os.path.join(ref, dtype, f"{case}_{op}_{name}.npy"), "rb").read()
    hl = struct.unpack("<H", b[8:10])[0] if b[6] == 1 else struct.unpack("<I", b[8:12])[0]
    start = (10 if b[6] == 1 else 12) + hl
    return ast.literal_eval(b[start - hl:start].decode("latin1"))["shape"], b[start:]
def write(name, data):
    open(os.path.join(d, name + ".bin"), "wb").write(data)
for t in ("output", "loss"):
    write(t, npy(t)[1])
if mode == "forward":
    sys.exit(0)
grads = {"conv2d": ["grad_input", "grad_weight", "grad_bias"], "matmul": ["grad_A", "grad_B"]}[op]
for g in grads:
    if not os.path.exists(os.path.join(ref, dtype, f"{case}_{op}_{g}.npy")):
        continue  # no bias
    shape, data = npy(g)
    if mode == "nhwc" and g == "grad_input":  # NCHW -> NHWC, 4-byte elements
        n, c, h, w = shape
        v = [data[4 * i:4 * i + 4] for i in range(n * c * h * w)]
        data = b"".join(v[((i * c + k) * h + y) * w + x] for i in range(n) for y in range(h) for x in range(w) for k in range(c))
    write(g, data)
PY

for mode in all nhwc forward; do
  "$bin" run --backend exec --cmd "python3 $work/prog.py $mode $ref {dir} {case} {op} {dtype}" \
    --layout "$work/layouts.json" --ref "$ref" --out "$work/run_$mode" --only '^float32/odd_n3_c5_h11_w6$' \
    --progress 0 > "$work/run_$mode.log" 2>&1 || fail "$mode: run: $(tail -5 "$work/run_$mode.log")"
  "$bin" compare "$ref" "$work/run_$mode" --only '^float32/odd_n3_c5_h11_w6/' --color never \
    --json "$work/$mode.json" --md "$work/$mode.md" --junit "$work/$mode.xml" --html "$work/$mode.html" \
    > "$work/$mode.txt" 2>&1
  echo "$mode: exit $? ($(tail -1 "$work/$mode.txt"))" > "$work/$mode.rc"
  cat "$work/$mode.rc"
done

# all: every gradient checked and passed; the warning in each format (Markdown escapes '_').
grep -q '^all: exit 0 (validate: 9 passed, 0 failed, 0 not run)$' "$work/all.rc" || fail "all: $(cat "$work/all.txt")"
warn="the layout file $work/layouts.json names no grad_bias, grad_input, grad_weight for conv2d, but the program wrote them: read in the layouts of its base preset (grad_bias O, grad_input NCHW, grad_weight OIHW) and checked"
warn_mm="names no grad_A, grad_B for matmul, but the program wrote them: read in the layouts of its base preset (grad_A MK, grad_B KN)"
grep -qF "warning: $work/run_all: $warn" "$work/all.txt" || fail "all: no warning on the terminal: $(cat "$work/all.txt")"
grep -qF "$warn_mm" "$work/all.txt" || fail "all: no matmul warning on the terminal"
python3 - "$work/all.json" "$warn" <<'PY' || fail "all: no warning in the JSON report"
import json, sys
w = json.load(open(sys.argv[1]))["warnings"]
sys.exit(0 if sum(sys.argv[2] in x for x in w) == 1 and sum("for matmul" in x for x in w) == 1 else 1)
PY
grep -qF "$(printf '%s' "$warn" | sed 's/_/\\_/g')" "$work/all.md" || fail "all: no warning in the Markdown report"
grep -qF "<property name=\"warning\" value=\"$work/run_all: $warn" "$work/all.xml" || fail "all: no warning property in the JUnit report"
grep -qF "<system-err>warning: $work/run_all: $warn" "$work/all.xml" || fail "all: no warning in the JUnit suite's stderr"
grep -qF "Warning: $work/run_all: $warn" "$work/all.html" || fail "all: no warning in the HTML report"

# nhwc: grad_input fails, named as the NHWC bytes it is.
grep -q '^nhwc: exit 1 ' "$work/nhwc.rc" || fail "nhwc: $(cat "$work/nhwc.txt")"
grep -q 'FAILED float32/odd_n3_c5_h11_w6/conv2d/grad_input' "$work/nhwc.txt" || fail "nhwc: grad_input did not fail: $(cat "$work/nhwc.txt")"
grep -q 'diagnosis: run grad_input equals reference read as NHWC' "$work/nhwc.txt" ||
  fail "nhwc: the diagnosis does not name NHWC: $(cat "$work/nhwc.txt")"

# forward: no gradient written, none asked for.
grep -q '^forward: exit 0 (validate: 4 passed, 0 failed, 0 not run, 5 not requested)$' "$work/forward.rc" ||
  fail "forward: $(cat "$work/forward.txt")"
! grep -q 'names no grad' "$work/forward.txt" || fail "forward: a warning without unnamed gradients: $(cat "$work/forward.txt")"
echo "exec_unnamed_gradients: passed"
