"""The original reference script's loader API, run unchanged against a validate reference set.
Run by ctest with Debian's python3: test_original_loader.py REF_DIR SCRATCH_DIR"""
import contextlib
import hashlib
import io
import os
import shutil
import subprocess
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
pydir = os.path.join(here, "..", "..", "python")
sys.path.insert(0, pydir)
ref, scratch = os.path.abspath(sys.argv[1]), sys.argv[2]
os.makedirs(scratch, exist_ok=True)

# The guide's snippets, as a user of the original script wrote them.
from load_torch_reference_outputs import ReferenceDataLoader  # noqa: E402

loader = ReferenceDataLoader(ref)
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    loader.print_summary()
text = buf.getvalue()
assert "ic=8" in text and "K=72" in text and "odd_n2_c6_h7_w9_g2" in text, text

assert loader.list_available_cases() == [("bfloat16", 8), ("bfloat16", 16), ("float32", 8), ("float32", 16)], \
    loader.list_available_cases()
assert loader.ic_to_k[8] == 72 and loader.ic_to_k[16] == 144, loader.ic_to_k

data = loader.load_test_case(dtype="bfloat16", input_channels=8)
x, w = data["conv2d"]["input"], data["conv2d"]["weight"]
A, B = data["matmul"]["A"], data["matmul"]["B"]
assert x.shape == (1, 8, 32, 32) and w.shape == (32, 8, 3, 3), (x.shape, w.shape)
assert A.shape == (1024, 72) and B.shape == (72, 32), (A.shape, B.shape)
assert x.dtype == np.float32  # as the original: bfloat16 values in float32 arrays
meta = data["metadata"]
assert meta["shapes"]["conv2d"]["input"] == [1, 8, 32, 32] and meta["shapes"]["matmul"]["B"] == [72, 32]
assert meta["dtypes"]["conv2d"]["output"] == "float32"
# The metadata hash is independent of this loader: SHA-256 of the values as little-endian float32.
assert meta["input_hashes"]["matmul"]["A"] == hashlib.sha256(A.astype("<f4").tobytes()).hexdigest()
# matmul is the im2col of the conv: output == A @ B, computed here in float64.
f32 = loader.load_test_case(dtype="float32", input_channels=16)
mm = f32["matmul"]
assert np.allclose(mm["output"], mm["A"].astype(np.float64) @ mm["B"], rtol=1e-5, atol=1e-5)

ok = loader.verify_hashes(dtype="bfloat16", input_channels=8)
assert set(ok) == {"conv2d", "matmul"}, ok
assert ok["conv2d"] == {"bias": True, "input": True, "target": True, "weight": True}, ok
assert ok["matmul"] == {"A": True, "B": True, "target": True}, ok

try:
    loader.load_test_case(dtype="float32", input_channels=9)
    raise SystemExit("a missing case loaded")
except FileNotFoundError as e:
    assert "('float32', 8)" in str(e), str(e)

# A transferred set with one flipped byte: verify_hashes names the tensor, the script exits 1.
bad = os.path.join(scratch, "bad")
shutil.rmtree(bad, ignore_errors=True)
shutil.copytree(ref, bad)
p = os.path.join(bad, "float32", "k0144_ic016_matmul_B.npy")
with open(p, "r+b") as f:
    f.seek(200)
    byte = f.read(1)
    f.seek(200)
    f.write(bytes([byte[0] ^ 0x40]))
res = ReferenceDataLoader(bad).verify_hashes(dtype="float32", input_channels=16)
assert res["matmul"] == {"A": True, "B": False, "target": True}, res
script = os.path.join(pydir, "load_torch_reference_outputs.py")
good = subprocess.run([sys.executable, script, ref], capture_output=True, text=True)
assert good.returncode == 0 and "OK" in good.stdout, (good.returncode, good.stdout, good.stderr)
broken = subprocess.run([sys.executable, script, bad], capture_output=True, text=True)
assert broken.returncode == 1 and "float32/k0144_ic016_matmul_B.npy" in broken.stdout, (broken.returncode, broken.stdout)
assert "float32 ic=16 matmul.B (input hash)" in broken.stdout, broken.stdout
missing = subprocess.run([sys.executable, script, scratch], capture_output=True, text=True)
assert missing.returncode == 2 and "manifest.json" in missing.stderr, (missing.returncode, missing.stderr)
shutil.rmtree(bad)
print("load_torch_reference_outputs: all checks passed")
