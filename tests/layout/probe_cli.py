"""`validate probe --out` checked with numpy, which knows nothing of our layout code.

For each spec: canonical.npy must hold 0..n-1 in C order; layout.npy, read by numpy with the axes
of the spec, must equal the canonical array transposed to those axes (and flipped where the spec
says); layout.bin must be layout.npy's memory, in the order the spec walks it (first axis fastest
for :F).  Equal axis sizes must draw a warning.  Usage: probe_cli.py VALIDATE_BIN WORKDIR
"""
import os
import subprocess
import sys

import numpy as np

validate, work = sys.argv[1], sys.argv[2]

CASES = [
    # spec, canonical axes, canonical shape
    ("CHWN:F", "NCHW", (2, 3, 4, 5)),
    ("NHWC", "NCHW", (2, 3, 4, 5)),
    ("WHIO:F+flip=HW", "OIHW", (2, 3, 4, 5)),
    ("HWIO+flip=W", "OIHW", (5, 4, 3, 2)),
    ("KM:F", "MK", (3, 7)),
]

failures = 0
for spec, axes, shape in CASES:
    out = os.path.join(work, spec.replace(":", "_").replace("+", "_").replace("=", "_"))
    cmd = [validate, "probe", "--layout", spec, "--axes", axes,
           "--shape", ",".join(map(str, shape)), "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL {spec}: exit {r.returncode}: {r.stderr}")
        failures += 1
        continue
    canonical = np.load(os.path.join(out, "canonical.npy"))
    laid = np.load(os.path.join(out, "layout.npy"))
    raw = np.fromfile(os.path.join(out, "layout.bin"), dtype="<f4")
    body, _, flips = spec.partition("+flip=")
    letters, _, order = body.partition(":")
    want = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    expect = want.transpose([axes.index(a) for a in letters])
    for a in flips:
        expect = np.flip(expect, axis=letters.index(a))
    checks = {
        "canonical.npy is 0..n-1": np.array_equal(canonical, want),
        "layout.npy is the transposed/flipped canonical": np.array_equal(laid, expect),
        "layout.bin is layout.npy's memory": np.array_equal(
            raw, expect.flatten(order="F" if order == "F" else "C")),
    }
    for what, ok in checks.items():
        if not ok:
            print(f"FAIL {spec}: {what}")
            failures += 1
    print(f"{'ok  ' if all(checks.values()) else 'FAIL'} {spec} ({axes} {shape})")

r = subprocess.run([validate, "probe", "--layout", "NHWC", "--shape", "2,3,4,4"],
                   capture_output=True, text=True)
if r.returncode != 0 or "warning: axes H and W are both 4 long" not in r.stderr:
    print(f"FAIL: a square probe must warn that H and W are both 4 long; stderr: {r.stderr!r}")
    failures += 1
print(f"{len(CASES) + 1 - min(failures, len(CASES) + 1)} passed, {failures} failed")
sys.exit(1 if failures else 0)
