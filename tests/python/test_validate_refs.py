"""Checks python/validate_refs.py against a reference set written by the C++ harness.
Run by ctest with Debian's python3 (numpy): test_validate_refs.py REF_DIR SCRATCH_DIR"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import validate_refs as vr  # noqa: E402

ref, scratch = sys.argv[1], sys.argv[2]
cases = vr.list_cases(ref)
assert ("float32", "k0072_ic008") in cases, cases
assert ("float16", "odd_n3_c5_h11_w6") in cases, cases
assert cases[0][0] == "float32"

c = vr.load_case(ref, "float32", "odd_n2_c6_h7_w9_g2")
x, w, y = c["conv2d"]["input"], c["conv2d"]["weight"], c["conv2d"]["output"]
assert x.shape == (2, 6, 7, 9) and w.shape == (4, 3, 3, 2) and y.shape == (2, 4, 4, 7), (x.shape, w.shape, y.shape)
assert "bias" not in c["conv2d"]
# Independent check of the reference itself: numpy conv2d (stride 2x1, pad 1x0, dilation 1x2, groups 2).
xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (0, 0)))
ref_y = np.zeros(y.shape)
for o in range(4):
    g = o // 2
    for i in range(3):
        for kh in range(3):
            for kw in range(2):
                ref_y[:, o] += w[o, i, kh, kw] * xp[:, g * 3 + i, kh : kh + 2 * 4 : 2, kw * 2 : kw * 2 + 7]
assert np.allclose(y, ref_y, rtol=1e-5, atol=1e-5), np.abs(y - ref_y).max()
loss = c["conv2d"]["loss"]
assert loss.shape == () and abs(float(loss) - np.mean((ref_y - c["conv2d"]["target"]) ** 2)) < 1e-5

assert vr.verify_hashes(ref) > 100
print(vr.summary(ref).splitlines()[0])

# A flipped byte in an input is caught and named.
bad = os.path.join(scratch, "bad")
shutil.rmtree(bad, ignore_errors=True)
shutil.copytree(ref, bad)
p = os.path.join(bad, "float32", "k0072_ic008_conv2d_weight.npy")
with open(p, "r+b") as f:
    f.seek(300)
    b = f.read(1)
    f.seek(300)
    f.write(bytes([b[0] ^ 1]))
try:
    vr.verify_hashes(bad)
    raise SystemExit("verify_hashes missed a flipped byte")
except vr.HashMismatch as e:
    assert "k0072_ic008_conv2d_weight.npy" in str(e), e
try:
    vr.ReferenceSet(bad)._safe_path("../etc/passwd")
    raise SystemExit("path escape not refused")
except ValueError:
    pass
shutil.rmtree(bad)
print("validate_refs: all checks passed")
