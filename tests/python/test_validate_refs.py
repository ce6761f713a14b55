"""Checks python/validate_refs.py against a reference set written by the C++ harness.
Run by ctest with Debian's python3 (numpy):
    test_validate_refs.py REF_DIR SCRATCH_DIR [VALIDATE_BIN]
With VALIDATE_BIN, also runs the float64 oracle in the fortran layouts and checks load_run."""
import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import validate_refs as vr  # noqa: E402

ref, scratch = sys.argv[1], sys.argv[2]
bin_ = sys.argv[3] if len(sys.argv) > 3 else None
os.makedirs(scratch, exist_ok=True)
cases = vr.list_cases(ref)
assert ("float32", "k0072_ic008") in cases, cases
assert ("float16", "odd_n3_c5_h11_w6") in cases, cases
assert cases[0][0] == "float32"


def numpy_conv(x, w):
    """The smoke set's odd case: stride 2x1, pad 1x0, dilation 1x2, groups 2, no bias (float64)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (0, 0)))
    y = np.zeros((x.shape[0], 4, 4, 7))
    for o in range(4):
        g = o // 2
        for i in range(3):
            for kh in range(3):
                for kw in range(2):
                    y[:, o] += float(w[o, i, kh, kw]) * xp[:, g * 3 + i, kh: kh + 2 * 4: 2, kw * 2: kw * 2 + 7]
    return y


# By name, dtype as a keyword; the earlier (root, dtype, case) order still works.
c = vr.load_case(ref, "odd_n2_c6_h7_w9_g2", dtype="float32")
assert c.dtype == "float32" and c.name == "odd_n2_c6_h7_w9_g2"
x, w, y = c["conv2d"]["input"], c["conv2d"]["weight"], c["conv2d"]["output"]
assert x.shape == (2, 6, 7, 9) and w.shape == (4, 3, 3, 2) and y.shape == (2, 4, 4, 7), (x.shape, w.shape, y.shape)
assert "bias" not in c["conv2d"]
assert np.array_equal(vr.load_case(ref, "float32", "odd_n2_c6_h7_w9_g2")["conv2d"]["output"], y)
# Independent check of the reference itself: numpy conv2d.
ref_y = numpy_conv(x, w)
assert np.allclose(y, ref_y, rtol=1e-5, atol=1e-5), np.abs(y - ref_y).max()
loss = c["conv2d"]["loss"]
assert loss.shape == () and abs(float(loss) - np.mean((ref_y - c["conv2d"]["target"]) ** 2)) < 1e-5
# A case in exactly one dtype needs none: a copy of the set whose manifest lists odd_n3 in float16 only.
one = os.path.join(scratch, "one_dtype")
shutil.rmtree(one, ignore_errors=True)
shutil.copytree(ref, one)
man = json.load(open(os.path.join(one, "manifest.json")))
man["files"] = {k: v for k, v in man["files"].items() if not k.startswith("float32/odd_n3")}
json.dump(man, open(os.path.join(one, "manifest.json"), "w"))
assert vr.load_case(one, "odd_n3_c5_h11_w6")["conv2d"]["input"].dtype == np.float16
shutil.rmtree(one)

# A miss lists what exists and suggests the nearest names; an ambiguous name asks for the dtype.
for bad_case, bad_dtype, must in [("k0072_ic009", "float32", ["k0072_ic008", "float32/k0144_ic016"]),
                                  ("k0072_ic008", "float64", ["float64", "bfloat16"]),
                                  ("k0072_ic008", None, ["float32", "bfloat16", "dtype="])]:
    try:
        vr.load_case(ref, bad_case, dtype=bad_dtype)
        raise SystemExit(f"load_case({bad_case!r}, dtype={bad_dtype!r}) did not raise")
    except vr.CaseNotFound as e:
        for m in must:
            assert m in str(e), (m, str(e))
# odd_n3 is float32 + float16 only: asking for bfloat16 says where it is.
try:
    vr.load_case(ref, "odd_n3_c5_h11_w6", dtype="bfloat16")
    raise SystemExit("bfloat16 odd_n3 did not raise")
except vr.CaseNotFound as e:
    assert "exists in float32, float16" in str(e), str(e)

# bfloat16: a dtype hint, and ml_dtypes arrays when importable.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    b = vr.load_case(ref, "k0072_ic008", dtype="bfloat16")
bx = b["conv2d"]["input"]
assert b.logical_dtype("conv2d", "input") == "bfloat16" and b.logical_dtype("matmul", "grad_A") == "bfloat16"
assert b.logical_dtype("conv2d", "loss") == "float32"
f32 = np.asarray(bx).astype(np.float32)
assert not np.any(f32.view(np.uint32) & 0xFFFF), "bfloat16 reference values have low mantissa bits"
if vr._ml_dtypes is None:
    assert bx.dtype == np.float32
    assert any(issubclass(m.category, vr.BFloat16AsFloat32Warning) for m in caught), [str(m.message) for m in caught]
    print("ml_dtypes not importable: bfloat16 as float32 with a BFloat16AsFloat32Warning")
else:
    assert str(bx.dtype) == "bfloat16", bx.dtype
    assert vr.load_case(ref, "k0072_ic008", dtype="bfloat16", ml_dtypes=False)["conv2d"]["input"].dtype == np.float32
    print("ml_dtypes importable: bfloat16 arrays")
h = vr.load_case(ref, "odd_n3_c5_h11_w6", dtype="float16")
assert h["conv2d"]["output"].dtype == np.float16 and h.logical_dtype("conv2d", "output") == "float16"
assert h["conv2d"]["loss"].dtype == np.float32

assert vr.verify_hashes(ref) > 100
print(vr.summary(ref).splitlines()[0])

# A flipped byte in an input is caught and named.
bad = os.path.join(scratch, "bad")
shutil.rmtree(bad, ignore_errors=True)
shutil.copytree(ref, bad)
p = os.path.join(bad, "float32", "k0072_ic008_conv2d_weight.npy")
with open(p, "r+b") as f:
    f.seek(300)
    byte = f.read(1)
    f.seek(300)
    f.write(bytes([byte[0] ^ 1]))
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

# load_run: a run in the fortran layouts (the program saw CHWN:F data, flipped WHIO:F weights)
# comes back canonical, exactly the files compare pairs with the reference.
if bin_:
    run_dir = os.path.join(scratch, "run")
    shutil.rmtree(run_dir, ignore_errors=True)
    subprocess.run([bin_, "run", "--backend", "oracle", "--layout", "fortran", "--ref", ref, "--out", run_dir,
                    "--only", "^(float32|bfloat16)/(odd_n2|k0072)", "--progress", "0"], check=True)
    run = vr.load_run(run_dir)
    assert run.list_cases() == [("float32", "k0072_ic008"), ("float32", "odd_n2_c6_h7_w9_g2"),
                                ("bfloat16", "k0072_ic008"), ("bfloat16", "odd_n2_c6_h7_w9_g2")], run.list_cases()
    r = run.load_case("odd_n2_c6_h7_w9_g2", dtype="float32")
    assert r.outcome("conv2d") == "ok" and r.outcome("matmul") == "ok"
    assert r.layouts["conv2d"]["input"] != "NCHW" and r.layouts["conv2d"]["output"] != "NCHW", r.layouts
    ry = r["conv2d"]["output"]
    assert ry.shape == (2, 4, 4, 7), ry.shape
    assert np.allclose(ry, ref_y, rtol=1e-6, atol=1e-6), np.abs(ry - ref_y).max()  # canonical NCHW
    for t in ("grad_input", "grad_weight"):
        assert r["conv2d"][t].shape == c["conv2d"][t].shape
        assert np.allclose(r["conv2d"][t], c["conv2d"][t], rtol=1e-4, atol=1e-6), t
    assert set(r["conv2d"]) == set(r.record["ops"]["conv2d"]["produced"])
    assert "input" not in r["conv2d"]
    # matmul A [M,K] with M != K: a transposed read would change the shape or the values.
    rm = run.load_case("k0072_ic008", dtype="float32")
    cm = vr.load_case(ref, "k0072_ic008", dtype="float32")
    assert np.allclose(rm["matmul"]["output"], cm["matmul"]["A"].astype(np.float64) @ cm["matmul"]["B"], rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rb = run.load_case("k0072_ic008", dtype="bfloat16")
    assert rb.logical_dtype("conv2d", "output") == "bfloat16"
    try:
        run.load_case("k0144_ic016", dtype="float32")
        raise SystemExit("a case the run did not hold loaded")
    except vr.CaseNotFound as e:
        assert "float32/odd_n2_c6_h7_w9_g2" in str(e), str(e)
    print(run.summary().splitlines()[0])
print("validate_refs: all checks passed")
