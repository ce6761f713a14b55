"""`validate probe --out` checked with numpy, which knows nothing of our layout code.

For each spec: canonical.npy must hold 0..n-1 in C order; layout.npy, read by numpy with the axes
of the spec, must equal the canonical array transposed to those axes (and flipped where the spec
says); layout.bin must be layout.npy's memory, in the order the spec walks it (first axis fastest
for :F).  Equal axis sizes must draw a warning. A preset with --tensor (and without: the commands to type)
is checked against the memory a Fortran code declares.  Usage: probe_cli.py VALIDATE_BIN WORKDIR
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

# A preset names a spec per op and tensor: `--layout fortran` alone is refused with the commands to
# type (exit 2), `--axes` does not stand in for the tensor, and the command it prints for a tensor
# writes that tensor's layout. The expected memory is written here from what a Fortran code
# declares, not from the preset's spec strings: x(C,H,W,N), w(KW,KH,I,O) stored flipped in H and
# W, a transposed convolution's w(KW,KH,O,I), B(K,N) -- each column-major. Every axis a different
# size, batch 2.
def check(what, ok, detail=""):
    global failures
    if not ok:
        print(f"FAIL {what} {detail}")
        failures += 1
    else:
        print(f"ok   {what}")

r = subprocess.run([validate, "probe", "--layout", "fortran"], capture_output=True, text=True)
check("--layout fortran alone: exit 2 naming --tensor", r.returncode == 2 and "--tensor OP.TENSOR" in r.stderr,
      repr(r.stderr))
cmds = {}
for line in r.stderr.splitlines():
    words = line.split()
    if words[:3] == ["validate", "probe", "--layout"] and "--tensor" in words:
        cmds[words[words.index("--tensor") + 1]] = [validate] + words[1:words.index("--tensor") + 2]
check("it lists a ready-to-paste command per tensor",
      {"conv2d.input", "conv2d.weight", "conv2d.grad_weight", "conv_transpose2d.weight", "matmul.B"} <= cmds.keys()
      and "conv2d.loss" not in cmds, sorted(cmds))
r = subprocess.run([validate, "probe", "--layout", "fortran", "--axes", "NCHW"], capture_output=True, text=True)
check("--layout fortran --axes NCHW: exit 2 naming --tensor, not an axis letter",
      r.returncode == 2 and "--tensor" in r.stderr and "axis letter" not in r.stderr, repr(r.stderr))
r = subprocess.run([validate, "probe", "--layout", "fortran", "--tensor", "conv2d.wieght"], capture_output=True, text=True)
check("a misspelt tensor: exit 2 naming it and the op's tensors",
      r.returncode == 2 and "'wieght'" in r.stderr and "weight" in r.stderr.split("its tensors:")[-1], repr(r.stderr))

def expect_fortran(tensor, shape):
    c = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    if tensor in ("conv2d.input", "conv2d.grad_input"):            # NCHW -> x(C,H,W,N)
        a = c.transpose(1, 2, 3, 0)
    elif tensor in ("conv2d.weight", "conv2d.grad_weight"):        # OIHW -> w(KW,KH,I,O), flipped
        a = c[:, :, ::-1, ::-1].transpose(3, 2, 1, 0)
    elif tensor == "conv_transpose2d.weight":                      # IOHW -> w(KW,KH,O,I)
        a = c.transpose(3, 2, 1, 0)
    elif tensor == "matmul.B":                                     # KN -> B(K,N)
        a = c
    return a.flatten(order="F")

for tensor, shape in [("conv2d.input", (2, 3, 4, 5)), ("conv2d.weight", (3, 2, 4, 5)),
                      ("conv2d.grad_weight", (3, 2, 4, 5)), ("conv_transpose2d.weight", (3, 2, 4, 5)),
                      ("matmul.B", (3, 5))]:
    out = os.path.join(work, "preset_" + tensor.replace(".", "_"))
    r = subprocess.run(cmds.get(tensor, ["/bin/false"]) + ["--shape", ",".join(map(str, shape)), "--out", out],
                       capture_output=True, text=True)
    ok = r.returncode == 0 and r.stdout.startswith(f"fortran, {tensor}: layout ")
    raw = np.fromfile(os.path.join(out, "layout.bin"), dtype="<f4") if ok else None
    check(f"the listed command for {tensor} {shape} writes its Fortran memory",
          ok and np.array_equal(raw, expect_fortran(tensor, shape)), f"exit {r.returncode}: {r.stderr}")
# Without --shape: as many axes as the tensor has, each a different size.
r = subprocess.run([validate, "probe", "--layout", "fortran", "--tensor", "matmul.A"], capture_output=True, text=True)
check("matmul.A without --shape: a [3, 5] probe", r.returncode == 0 and "MK tensor [3, 5]" in r.stdout, r.stdout + r.stderr)

print(f"{failures} failed")
sys.exit(1 if failures else 0)
