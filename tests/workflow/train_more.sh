#!/usr/bin/env bash
# Training trajectories beyond float32 SGD (docs/training.md): bfloat16/float16 in mixed precision
# (cases/train_mixed.json) and Adam (cases/train_adam.json). generate LibTorch's trajectory and
# check it against numpy (the parameter checkpoints are the float32 masters, the gradients are
# values of the case dtype, and the first update is the float32 SGD or Adam step on them); the
# float64 oracle (in two layouts), the torch runner and the numpy exec example (the conv_transpose2d
# cases, protocol 2) run the same trajectory and compare passes with --require-all under the
# built-in gates; the torch runner reproduces the reference bit for bit.
# usage: train_more.sh VALIDATE_BIN WORK_DIR CASE_FILE NUMPY_PYTHON NUMPY_RUNNER LAYOUTS NUMPY_ONLY
set -euo pipefail
bin=$1 work=$2 cases=$3 py=${4:-} runner=${5:-} layouts=${6:-} numpy_only=${7:-.}
rm -rf "$work" && mkdir -p "$work"
name=$(basename "$cases" .json)
fail() { echo "$name: FAIL: $*"; exit 1; }
"$bin" generate --cases "$cases" --out "$work/ref" --progress 0 > "$work/gen.log" 2>&1 || fail "generate: $(tail -3 "$work/gen.log")"
"$bin" verify "$work/ref" > /dev/null || fail "the training set does not verify"
dtypes=$(cd "$work/ref" && for d in */; do ls "$d"*_metadata.json > /dev/null 2>&1 && echo "${d%/}"; done)
[ -n "$dtypes" ] || fail "the set has no dtype directory"
for dt in $dtypes; do
  ls "$work/ref/$dt/"*_conv2d_step29_grad_weight.npy > /dev/null || fail "$dt: no last-step checkpoint"
done
if [ -n "$py" ]; then
  "$py" - "$work/ref" <<'PY' || fail "numpy cross-check"
import glob, json, os, sys
import numpy as np
root = sys.argv[1]
def bf16(a):  # nearest-even bfloat16 of float32 values, as float32
    b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
checked = 0
for dt in sorted(os.listdir(root)):
    for meta_path in glob.glob(os.path.join(root, dt, "*_metadata.json")):
        meta = json.load(open(meta_path))
        t = meta["train"]
        for op, opj in meta["ops"].items():
            pre = os.path.join(root, dt, f'{meta["case"]}_{op}_')
            curve = np.load(pre + "train_loss.npy")
            assert curve.dtype == np.float32 and curve[0] == np.load(pre + "loss.npy"), pre
            params = [n for n, tj in opj["tensors"].items() if tj["role"] == "input" and f"step0_{n}" in opj["tensors"]]
            assert params, pre
            for p in params:
                w0 = np.load(pre + f"step0_{p}.npy")
                assert w0.dtype == np.float32, f"{pre}step0_{p}: the master copy is {w0.dtype}, not float32"
                assert (w0 == np.load(pre + f"{p}.npy").astype(np.float32)).all(), "step 0 does not start from the inputs"
                g0 = np.load(pre + f"step0_grad_{p}.npy")
                assert g0.dtype == (np.float16 if dt == "float16" else np.float32), (pre, g0.dtype)
                assert (g0 == np.load(pre + f"grad_{p}.npy")).all(), "step 0's gradient is not the single step's"
                g = g0.astype(np.float32)
                # The gradient the optimizer receives is a value of the case dtype.
                narrow = {"bfloat16": bf16, "float16": lambda a: a.astype(np.float16).astype(np.float32)}.get(dt, lambda a: a)
                assert (g == narrow(g)).all(), f"{pre}step0_grad_{p} holds values that are not {dt}"
                step = g.astype(np.float64) + t["weight_decay"] * w0.astype(np.float64)
                if t["optimizer"] == "adam":
                    # Adam's first update: m_hat = g, v_hat = g^2, so lr g / (|g| + eps).
                    step = step / (np.abs(step) + t["eps"])
                elif t.get("nesterov"):  # SGD's: the momentum buffer starts as g
                    step = step * (1 + t["momentum"])
                w1 = w0.astype(np.float64) - t["lr"] * step
                got = np.load(pre + f"step1_{p}.npy")
                assert got.dtype == np.float32, (pre, got.dtype)
                # ULPs of the largest operand: w1 may cancel to near 0 (w0 ~ lr * step).
                big = np.maximum(np.abs(w0), np.abs(t["lr"] * step)).astype(np.float32)
                ulp = np.spacing(big).astype(np.float64)
                err = np.max(np.abs(got.astype(np.float64) - w1) / ulp)
                assert err <= 3, f"{pre}step1_{p}: {err} float32 ULP from numpy's first SGD update"
                checked += 1
            assert curve[-5:].mean() < curve[:5].mean(), (pre, curve[:5].mean(), curve[-5:].mean())
assert checked >= 8, checked
print(f"numpy cross-check of {checked} parameters passed")
PY
fi
for layout in torch channels_last; do
  "$bin" run --backend oracle --layout "$layout" --ref "$work/ref" --out "$work/oracle_$layout" --progress 0 > "$work/run.log" 2>&1 \
    || fail "oracle run ($layout): $(tail -3 "$work/run.log")"
  "$bin" compare "$work/ref" "$work/oracle_$layout" --require-all > "$work/compare.log" 2>&1 \
    || fail "compare oracle ($layout): $(tail -30 "$work/compare.log")"
  for dt in $dtypes; do
    n=$(sed -n '/^training trajectories/,/^$/p' "$work/compare.log" | grep -c "^  $dt/.* passed: " || true)
    [ "$n" -ge 3 ] || fail "compare does not report the $dt trajectories (3 ops) as passed: $(cat "$work/compare.log")"
  done
done
"$bin" run --backend torch --device cpu --ref "$work/ref" --out "$work/torch" --progress 0 > "$work/run.log" 2>&1 \
  || fail "torch run: $(tail -3 "$work/run.log")"
"$bin" compare "$work/ref" "$work/torch" --require-all > "$work/compare.log" 2>&1 || fail "compare torch: $(tail -8 "$work/compare.log")"
for f in "$work/ref/"*/*_train_loss.npy "$work/ref/"*/*_step29_weight.npy "$work/ref/"*/*_step19_grad_weight.npy; do
  [ -e "$f" ] || fail "$f: missing"
  rel=${f#"$work/ref/"}
  cmp -s "$f" "$work/torch/$rel" || fail "$rel: the torch runner's trajectory differs from the reference's"
done
if [ -n "$py" ] && [ -n "$runner" ]; then
  "$bin" run --backend exec --cmd "$py $runner {dir}" --layout "$layouts" --ref "$work/ref" --only "$numpy_only" \
    --out "$work/numpy" --progress 0 > "$work/run.log" 2>&1 || fail "numpy exec run: $(tail -5 "$work/run.log")"
  "$bin" compare "$work/ref" "$work/numpy" --only "$numpy_only" --require-all > "$work/compare.log" 2>&1 \
    || fail "compare numpy exec: $(tail -30 "$work/compare.log")"
  grep -q "^  .*conv_transpose2d  passed: " "$work/compare.log" || fail "the numpy trajectory was not compared: $(cat "$work/compare.log")"
fi
[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
echo "$name: passed"
