#!/usr/bin/env bash
# The "validate a training loop" workflow (docs/training.md) on cases/train_smoke.json (100 SGD
# steps with momentum and weight decay; conv2d, its im2col matmul, conv_transpose2d): generate the
# LibTorch trajectory, check it against numpy (the first update by hand from the reference's own
# step-0 checkpoint), then the float64 oracle (in two layouts) and the torch runner run the same
# trajectory and compare passes with --require-all; the torch runner reproduces the reference bit
# for bit (the later batches it draws are the ones generate drew).
# usage: train_loop.sh VALIDATE_BIN WORK_DIR CASE_FILE NUMPY_PYTHON
set -euo pipefail
bin=$1 work=$2 cases=$3 py=${4:-}
rm -rf "$work" && mkdir -p "$work"
fail() { echo "train_loop: FAIL: $*"; exit 1; }
"$bin" generate --cases "$cases" --out "$work/ref" --progress 0 > "$work/gen.log" 2>&1 || fail "generate: $(tail -3 "$work/gen.log")"
"$bin" verify "$work/ref" > /dev/null || fail "the training set does not verify"
"$bin" list "$work/ref" | grep -q "train_n2_c6_h7_w9_g2 .* 100 SGD steps, lr 0.05, momentum 0.9" \
  || fail "list does not show the training schedule: $("$bin" list "$work/ref")"
ls "$work/ref/float32/"*_conv2d_step99_grad_weight.npy > /dev/null || fail "no last-step checkpoint"
if [ -n "$py" ]; then
  "$py" - "$work/ref/float32" <<'PY' || fail "numpy cross-check"
import glob, json, os, sys
import numpy as np
d = sys.argv[1]
checked = 0
for meta_path in glob.glob(os.path.join(d, "*_metadata.json")):
    meta = json.load(open(meta_path))
    t = meta["train"]
    for op, opj in meta["ops"].items():
        pre = os.path.join(d, f'{meta["case"]}_{op}_')
        curve = np.load(pre + "train_loss.npy")
        assert curve.dtype == np.float32 and curve.shape == (t["steps"],), (pre, curve.shape)
        assert curve[0] == np.load(pre + "loss.npy"), "train_loss[0] is not the single-step loss"
        params = [n for n, tj in opj["tensors"].items() if tj["role"] == "input" and f"step0_{n}" in opj["tensors"]]
        assert params, pre
        for p in params:
            w0 = np.load(pre + f"step0_{p}.npy")
            assert (w0 == np.load(pre + f"{p}.npy")).all(), "step 0 does not start from the reference's inputs"
            g0 = np.load(pre + f"step0_grad_{p}.npy")
            assert (g0 == np.load(pre + f"grad_{p}.npy")).all(), "step 0's gradient is not the single step's"
            # The first SGD update (the momentum buffer starts as the gradient), in float64.
            g = g0.astype(np.float64) + t["weight_decay"] * w0.astype(np.float64)
            w1 = w0.astype(np.float64) - t["lr"] * g
            got = np.load(pre + f"step1_{p}.npy").astype(np.float64)
            ulp = np.spacing(np.abs(got).astype(np.float32)).astype(np.float64)
            err = np.max(np.abs(got - w1) / ulp)
            assert err <= 2, f"{pre}step1_{p}: {err} float32 ULP from numpy's first SGD update"
            checked += 1
        # The loss decreases over the trajectory (it is training, not noise).
        assert curve[-10:].mean() < curve[:10].mean(), (pre, curve[:10].mean(), curve[-10:].mean())
assert checked >= 4, checked
print(f"train_loop: numpy cross-check of {checked} parameters passed")
PY
fi
for layout in torch channels_last; do
  "$bin" run --backend oracle --layout "$layout" --ref "$work/ref" --out "$work/oracle_$layout" --progress 0 > "$work/run.log" 2>&1 \
    || fail "oracle run ($layout): $(tail -3 "$work/run.log")"
  "$bin" compare "$work/ref" "$work/oracle_$layout" --require-all > "$work/compare.log" 2>&1 \
    || fail "compare oracle ($layout): $(tail -8 "$work/compare.log")"
  grep -q "train_loss" "$work/compare.log" || fail "compare did not check train_loss"
done
"$bin" run --backend torch --device cpu --ref "$work/ref" --out "$work/torch" --progress 0 > "$work/run.log" 2>&1 \
  || fail "torch run: $(tail -3 "$work/run.log")"
"$bin" compare "$work/ref" "$work/torch" --require-all > "$work/compare.log" 2>&1 || fail "compare torch: $(tail -8 "$work/compare.log")"
for f in "$work/ref/float32/"*_train_loss.npy "$work/ref/float32/"*_step99_weight.npy; do
  cmp -s "$f" "$work/torch/float32/$(basename "$f")" || fail "$(basename "$f"): the torch runner's trajectory differs from the reference's"
done
rm -rf "$work"
echo "train_loop: passed"
