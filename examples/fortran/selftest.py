#!/usr/bin/python3
"""Standalone test of the Fortran example runner, independent of the harness.

    /usr/bin/python3 selftest.py PATH/TO/validate_fortran_example [layouts.json]

It plays the harness's part of the exec protocol: builds small cases whose
every axis has a different size (so a swapped H/W or C/N cannot cancel out),
computes conv2d / matmul, the MSE loss and every gradient in float64 straight
from the definitions (loops, no shared code with the program), writes the
inputs in the layouts named by layouts.json, runs the program with the
VALIDATE_* environment, reads the results back through the same layouts and
compares.  It also checks the program's error handling (missing file, wrong
size, missing variable) and the float16 / bfloat16 storage paths.

Training mode (exec protocol 2, docs/runners.md): a conv2d and a matmul
trajectory of SGD with momentum, dampening and weight decay (and one with
Nesterov) against a numpy trajectory written here from torch.optim.SGD's
definition in float32, and the planted bug (CONV_RUNNER_BUG=update_dw_krsc):
step 0 agrees, step 1's weight and loss do not.

Exit status 0 when everything agrees, 1 otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# Canonical (PyTorch) axis names of every tensor; layout specs permute these.
CANONICAL = {
    "conv2d": {"input": "NCHW", "target": "NCHW", "output": "NCHW", "grad_input": "NCHW",
               "weight": "OIHW", "grad_weight": "OIHW", "bias": "O", "grad_bias": "O"},
    "matmul": {"A": "MK", "B": "KN", "target": "MN", "output": "MN", "grad_A": "MK", "grad_B": "KN"},
}
STORAGE = {"float32": "<f4", "bfloat16": "<f4", "float16": "<f2"}

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


# ---------------------------------------------------------------- layouts
def parse_spec(spec):
    """'WHIO:F+flip=HW' -> ('WHIO', 'F', 'HW')."""
    flip = ""
    if "+flip=" in spec:
        spec, flip = spec.split("+flip=")
    order = "C"
    if ":" in spec:
        spec, order = spec.split(":")
    return spec, order, flip


def to_layout(x, canonical, spec):
    """Bytes of canonical array x stored in layout spec."""
    axes, order, flip = parse_spec(spec)
    assert sorted(axes) == sorted(canonical), (axes, canonical)
    # +flip=HW: canonical (h, w) is stored at (KH-1-h, KW-1-w) -- a reversal of those axes.
    for a in flip:
        x = np.flip(x, canonical.index(a))
    x = np.transpose(x, [canonical.index(a) for a in axes])
    return x.tobytes(order=order)   # "F": first axis fastest


def from_layout(data, canonical, spec, shape):
    """Inverse of to_layout: canonical array of the given canonical shape."""
    axes, order, flip = parse_spec(spec)
    stored_shape = [shape[canonical.index(a)] for a in axes]
    x = data.reshape(stored_shape, order=order)
    x = np.transpose(x, [axes.index(a) for a in canonical])
    for a in flip:
        x = np.flip(x, canonical.index(a))
    return x


# ---------------------------------------------------------------- rounding
def round_bf16(x):
    """float64 -> nearest bfloat16 (ties to even), as float64."""
    m, e = np.frexp(x)                  # x = m * 2**e, |m| in [0.5, 1)
    return np.ldexp(np.round(np.ldexp(m, 8)), e - 8)   # np.round is ties-to-even


def round_to(x, dtype):
    if dtype == "float32":
        return x.astype(np.float32).astype(np.float64)
    if dtype == "bfloat16":
        return round_bf16(x)
    return x.astype(np.float16).astype(np.float64)


# ---------------------------------------------------------------- references
def conv2d_reference(x, w, b, p):
    """PyTorch conv2d, MSE loss and gradients from the definition, float64 loops."""
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    G = p["groups"]
    Og = O // G
    (sh, sw), (ph, pw), (dh, dw) = p["stride"], p["padding"], p["dilation"]
    Ho = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    Wo = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1

    def taps(o, y, xx):
        """(c, iy, ix, ci, kh, kw) of every in-range tap of output (o, y, xx)."""
        g = o // Og
        for kh in range(KH):
            iy = y * sh - ph + kh * dh
            if not 0 <= iy < H:
                continue
            for kw in range(KW):
                ix = xx * sw - pw + kw * dw
                if not 0 <= ix < W:
                    continue
                for ci in range(Cg):
                    yield g * Cg + ci, iy, ix, ci, kh, kw

    out = np.zeros((N, O, Ho, Wo))
    for n in range(N):
        for o in range(O):
            for y in range(Ho):
                for xx in range(Wo):
                    s = b[o] if b is not None else 0.0
                    for c, iy, ix, ci, kh, kw in taps(o, y, xx):
                        s += x[n, c, iy, ix] * w[o, ci, kh, kw]
                    out[n, o, y, xx] = s
    return out, taps, (Ho, Wo)


def conv2d_case(p, dtype, rng):
    N, C, H, W, O = p["N"], p["C"], p["H"], p["W"], p["O"]
    KH, KW = p["kernel"]
    G = p["groups"]
    x = round_to(rng.standard_normal((N, C, H, W)), dtype)
    w = round_to(rng.standard_normal((O, C // G, KH, KW)) / np.sqrt(C // G * KH * KW), dtype)
    b = round_to(0.1 * rng.standard_normal(O), dtype) if p["bias"] else None
    out, taps, (Ho, Wo) = conv2d_reference(x, w, b, p)
    t = round_to(rng.standard_normal(out.shape), dtype)

    # Loss and gradients of the output as stored (the program rounds it once).
    y = round_to(out, dtype)
    loss = np.mean((y - t) ** 2)
    dy = 2 * (y - t) / y.size
    gx, gw = np.zeros_like(x), np.zeros_like(w)
    for n in range(N):
        for o in range(O):
            for yy in range(Ho):
                for xx in range(Wo):
                    for c, iy, ix, ci, kh, kw in taps(o, yy, xx):
                        gx[n, c, iy, ix] += dy[n, o, yy, xx] * w[o, ci, kh, kw]
                        gw[o, ci, kh, kw] += dy[n, o, yy, xx] * x[n, c, iy, ix]
    gb = dy.sum(axis=(0, 2, 3))

    # Spot-check the reference's own gradients by central differences: the loss
    # is quadratic in each parameter, so the difference quotient is exact up to
    # float64 rounding.  Uses the unrounded output (float64 semantics).
    def loss_of(xv, wv, bv):
        o, _, _ = conv2d_reference(xv, wv, bv, p)
        return np.mean((o - t) ** 2)

    ref_dy = 2 * (out - t) / out.size
    ref_gx = np.zeros_like(x)
    ref_gw = np.zeros_like(w)
    for n in range(N):
        for o in range(O):
            for yy in range(Ho):
                for xx in range(Wo):
                    for c, iy, ix, ci, kh, kw in taps(o, yy, xx):
                        ref_gx[n, c, iy, ix] += ref_dy[n, o, yy, xx] * w[o, ci, kh, kw]
                        ref_gw[o, ci, kh, kw] += ref_dy[n, o, yy, xx] * x[n, c, iy, ix]
    eps = 1e-3
    for arr, grad, name in ((x, ref_gx, "input"), (w, ref_gw, "weight")):
        for idx in [tuple(rng.integers(0, s) for s in arr.shape) for _ in range(3)]:
            a, bm = arr.copy(), arr.copy()
            a[idx] += eps
            bm[idx] -= eps
            args_p = (a, w, b) if name == "input" else (x, a, b)
            args_m = (bm, w, b) if name == "input" else (x, bm, b)
            fd = (loss_of(*args_p) - loss_of(*args_m)) / (2 * eps)
            assert abs(fd - grad[idx]) <= 1e-8 + 1e-6 * abs(grad[idx]), (name, idx, fd, grad[idx])

    env = {"VALIDATE_OP": "conv2d", "VALIDATE_N": N, "VALIDATE_C": C, "VALIDATE_H": H, "VALIDATE_W": W,
           "VALIDATE_O": O, "VALIDATE_KH": KH, "VALIDATE_KW": KW,
           "VALIDATE_SH": p["stride"][0], "VALIDATE_SW": p["stride"][1],
           "VALIDATE_PH": p["padding"][0], "VALIDATE_PW": p["padding"][1],
           "VALIDATE_DH": p["dilation"][0], "VALIDATE_DW": p["dilation"][1],
           "VALIDATE_GROUPS": G, "VALIDATE_HOUT": Ho, "VALIDATE_WOUT": Wo,
           "VALIDATE_BIAS": int(p["bias"])}
    inputs = {"input": x, "weight": w, "target": t}
    expected = {"output": y, "grad_input": gx, "grad_weight": gw}
    if p["bias"]:
        inputs["bias"] = b
        expected["grad_bias"] = gb
    return env, inputs, expected, loss


def matmul_case(M, K, Nc, dtype, rng):
    A = round_to(rng.standard_normal((M, K)), dtype)
    B = round_to(rng.standard_normal((K, Nc)) / np.sqrt(K), dtype)
    t = round_to(rng.standard_normal((M, Nc)), dtype)
    Y = np.zeros((M, Nc))
    for i in range(M):
        for j in range(Nc):
            Y[i, j] = sum(A[i, k] * B[k, j] for k in range(K))
    y = round_to(Y, dtype)
    loss = np.mean((y - t) ** 2)
    dY = 2 * (y - t) / y.size
    env = {"VALIDATE_OP": "matmul", "VALIDATE_M": M, "VALIDATE_K": K, "VALIDATE_NCOLS": Nc}
    return env, {"A": A, "B": B, "target": t}, {"output": y, "grad_A": dY @ B.T, "grad_B": A.T @ dY}, loss


# ---------------------------------------------------------------- running
def run_program(exe, workdir, env_extra, expect_rc=0):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VALIDATE_")}
    env.update({k: str(v) for k, v in env_extra.items()})
    r = subprocess.run([exe, workdir], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != expect_rc:
        print(r.stderr, file=sys.stderr)
    return r


def run_case(exe, layouts, op, name, dtype, env, inputs, expected, loss):
    lay = layouts[op]
    canon = CANONICAL[op]
    with tempfile.TemporaryDirectory(prefix="validate_selftest_") as d:
        for t, arr in inputs.items():
            store = arr.astype(STORAGE[dtype])
            with open(os.path.join(d, t + ".bin"), "wb") as f:
                f.write(to_layout(store, canon[t], lay[t]))
        env = dict(env, VALIDATE_DTYPE=dtype, VALIDATE_CASE=name)
        r = run_program(exe, d, env)
        check(r.returncode == 0, f"{dtype}/{name}/{op}: program exit status {r.returncode}")
        if r.returncode != 0:
            return
        # Outputs: the right size, and equal to the reference after un-doing the layout.
        for t, ref in expected.items():
            path = os.path.join(d, t + ".bin")
            data = np.fromfile(path, dtype=STORAGE[dtype]).astype(np.float64)
            if data.size != ref.size:
                check(False, f"{dtype}/{name}/{op}/{t}: {data.size} values, expected {ref.size}")
                continue
            got = from_layout(data, canon[t], lay[t], ref.shape)
            if dtype == "float32":
                err = np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30)
                check(err <= 1e-5, f"{dtype}/{name}/{op}/{t}: max error / max |ref| = {err:.2e} (<= 1e-5)")
            else:
                # The reference is computed in float64 and rounded once, like the
                # program: the stored values must be identical, which also proves
                # the bfloat16 / float16 rounding code.
                bad = np.count_nonzero(got != round_to(ref, dtype))
                check(bad == 0, f"{dtype}/{name}/{op}/{t}: {bad} of {ref.size} values differ from "
                                f"float64 rounded to {dtype}")
        got_loss = np.fromfile(os.path.join(d, "loss.bin"), dtype="<f4")
        ok = got_loss.size == 1 and abs(float(got_loss[0]) - loss) <= 1e-6 * abs(loss)
        check(ok, f"{dtype}/{name}/{op}/loss: {got_loss} vs {loss:.9g}")


# ---------------------------------------------------------------- training (protocol 2)
def conv2d_step(x, w, b, t, p):
    """One step's forward, MSE on the float32-stored output, and gradients, float64."""
    out, taps, (Ho, Wo) = conv2d_reference(x, w, b, p)
    y = round_to(out, "float32")
    loss = np.mean((y - t) ** 2)
    dy = 2 * (y - t) / y.size
    gw = np.zeros_like(w)
    N, O = x.shape[0], w.shape[0]
    for n in range(N):
        for o in range(O):
            for yy in range(Ho):
                for xx in range(Wo):
                    for c, iy, ix, ci, kh, kw in taps(o, yy, xx):
                        gw[o, ci, kh, kw] += dy[n, o, yy, xx] * x[n, c, iy, ix]
    return loss, {"weight": gw, "bias": dy.sum(axis=(0, 2, 3))}


def sgd_float32(param, grad, buf, cfg, first):
    """torch.optim.SGD's update in float32, every operation rounded (numpy float32 scalars)."""
    f = np.float32
    lr, mu, wd = f(cfg["lr"]), f(cfg["momentum"]), f(cfg["weight_decay"])
    keep = f(1.0 - cfg["dampening"])
    g = grad.astype(np.float32)
    if cfg["weight_decay"]:
        g = g + wd * param
    if cfg["momentum"]:
        buf[...] = g if first else mu * buf + keep * g
        g = g + mu * buf if cfg["nesterov"] else buf.copy()
    param -= lr * g


def train_reference(step_fn, params, batches, cfg, checkpoints):
    """The trajectory: losses of every step, parameters and gradients at the checkpoints."""
    p32 = {k: v.astype(np.float32) for k, v in params.items()}
    bufs = {k: np.zeros_like(v) for k, v in p32.items()}
    losses, kept = [], {}
    for s, batch in enumerate(batches):
        used = {k: v.astype(np.float64) for k, v in p32.items()}
        loss, grads = step_fn(batch, used)
        grads = {k: g.astype(np.float32) for k, g in grads.items()}
        losses.append(np.float32(loss))
        if s in checkpoints:
            for k in p32:
                kept[f"step{s}_{k}"] = used[k]
                kept[f"step{s}_grad_{k}"] = grads[k].astype(np.float64)
        for k in p32:
            sgd_float32(p32[k], grads[k], bufs[k], cfg, s == 0)
    return np.array(losses, dtype=np.float64), kept


def run_training(exe, layouts, op, name, params, batches, step_fn, cfg, checkpoints, env, bug=None):
    """Protocol 2 by hand: step 0's inputs in DIR, step s's batch in DIR/steps/s; returns the
    program's loss curve and checkpoint tensors in canonical layout (None when it failed)."""
    lay, canon = layouts[op], CANONICAL[op]
    with tempfile.TemporaryDirectory(prefix="validate_selftest_train_") as d:
        def put(sub, t, arr):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            with open(os.path.join(d, sub, t + ".bin"), "wb") as f:
                f.write(to_layout(arr.astype("<f4"), canon[t], lay[t]))
        for t, arr in params.items():
            put("", t, arr)
        for s, batch in enumerate(batches):
            for t, arr in batch.items():
                put("" if s == 0 else f"steps/{s}", t, arr)
        env = dict(env, VALIDATE_DTYPE="float32", VALIDATE_CASE=name, VALIDATE_PROTOCOL=2,
                   VALIDATE_STEPS=len(batches), VALIDATE_OPTIMIZER="sgd",
                   VALIDATE_LR=repr(cfg["lr"]), VALIDATE_MOMENTUM=repr(cfg["momentum"]),
                   VALIDATE_DAMPENING=repr(cfg["dampening"]),
                   VALIDATE_WEIGHT_DECAY=repr(cfg["weight_decay"]),
                   VALIDATE_NESTEROV=int(cfg["nesterov"]),
                   VALIDATE_NCHECKPOINTS=len(checkpoints),
                   VALIDATE_CHECKPOINTS=" ".join(map(str, checkpoints)))
        if bug:
            env["CONV_RUNNER_BUG"] = bug
        r = run_program(exe, d, env)
        check(r.returncode == 0, f"train/{name}{'/' + bug if bug else ''}: program exit status {r.returncode}")
        if r.returncode != 0:
            return None, None
        losses = np.fromfile(os.path.join(d, "train_loss.bin"), dtype="<f4").astype(np.float64)
        got = {}
        for s in checkpoints:
            for k, v in params.items():
                for t, base in ((f"step{s}_{k}", k), (f"step{s}_grad_{k}", "grad_" + k)):
                    data = np.fromfile(os.path.join(d, t + ".bin"), dtype="<f4").astype(np.float64)
                    got[t] = from_layout(data, canon[base], lay[base], v.shape)
        return losses, got


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def training(exe, layouts):
    rng = np.random.default_rng(15)
    steps, checkpoints = 7, [0, 1, 3, 6]
    p = {"N": 2, "C": 3, "H": 5, "W": 7, "O": 4, "kernel": (3, 2), "stride": (2, 1),
         "padding": (1, 0), "dilation": (1, 2), "groups": 1, "bias": True}
    KH, KW = p["kernel"]
    w0 = round_to(rng.standard_normal((4, 3, KH, KW)) / np.sqrt(3 * KH * KW), "float32")
    b0 = round_to(0.1 * rng.standard_normal(4), "float32")
    Ho = (5 + 2 - 2 - 1) // 2 + 1
    Wo = (7 + 0 - 2 * 1 - 1) // 1 + 1
    batches = [{"input": round_to(rng.standard_normal((2, 3, 5, 7)), "float32"),
                "target": round_to(rng.standard_normal((2, 4, Ho, Wo)), "float32")} for _ in range(steps)]
    env = {"VALIDATE_OP": "conv2d", "VALIDATE_N": 2, "VALIDATE_C": 3, "VALIDATE_H": 5, "VALIDATE_W": 7,
           "VALIDATE_O": 4, "VALIDATE_KH": KH, "VALIDATE_KW": KW, "VALIDATE_SH": 2, "VALIDATE_SW": 1,
           "VALIDATE_PH": 1, "VALIDATE_PW": 0, "VALIDATE_DH": 1, "VALIDATE_DW": 2, "VALIDATE_GROUPS": 1,
           "VALIDATE_HOUT": Ho, "VALIDATE_WOUT": Wo, "VALIDATE_BIAS": 1}
    conv_fn = lambda batch, q: conv2d_step(batch["input"], q["weight"], q["bias"], batch["target"], p)
    params = {"weight": w0, "bias": b0}
    for cname, cfg in (("momentum_wd_damp", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3, nesterov=False)),
                       ("nesterov", dict(lr=0.1, momentum=0.5, dampening=0.0, weight_decay=0.0, nesterov=True))):
        want_loss, want = train_reference(conv_fn, params, batches, cfg, checkpoints)
        losses, got = run_training(exe, layouts, "conv2d", "conv_" + cname, params, batches, conv_fn, cfg,
                                   checkpoints, env)
        if losses is None:
            continue
        check(losses.size == steps and rel(losses, want_loss) <= 1e-5,
              f"train/conv_{cname}/train_loss: {losses.size} steps, max rel error {rel(losses, want_loss):.2e} (<= 1e-5)")
        # The reference must move: a trajectory whose parameters never change would pass anything.
        moved = rel(want["step6_weight"], want["step0_weight"])
        check(moved > 1e-2, f"train/conv_{cname}: the weight moves over the trajectory ({moved:.2e})")
        for t in want:
            check(rel(got[t], want[t]) <= 1e-5, f"train/conv_{cname}/{t}: max error / max |ref| = {rel(got[t], want[t]):.2e} (<= 1e-5)")

    # The planted bug: dW applied in the KRSC filter layout to OIHW weights. Step 0 (parameters,
    # gradients, loss) is untouched; step 1's weight and loss are not.
    cfg = dict(lr=0.05, momentum=0.9, dampening=0.0, weight_decay=1e-4, nesterov=False)
    want_loss, want = train_reference(conv_fn, params, batches, cfg, checkpoints)
    losses, got = run_training(exe, layouts, "conv2d", "conv_bug", params, batches, conv_fn, cfg, checkpoints,
                               env, bug="update_dw_krsc")
    if losses is not None:
        for t in ("step0_weight", "step0_grad_weight", "step0_bias", "step1_bias"):
            check(rel(got[t], want[t]) <= 1e-5, f"train/conv_bug/{t}: agrees ({rel(got[t], want[t]):.2e})")
        check(abs(losses[0] - want_loss[0]) <= 1e-5 * abs(want_loss[0]), "train/conv_bug/train_loss[0] agrees")
        e1 = rel(got["step1_weight"], want["step1_weight"])
        check(e1 > 1e-3, f"train/conv_bug/step1_weight: differs ({e1:.2e} > 1e-3)")
        l1 = abs(losses[1] - want_loss[1]) / abs(want_loss[1])
        check(l1 > 1e-4, f"train/conv_bug/train_loss[1]: differs ({l1:.2e} > 1e-4)")

    # matmul: B is the parameter, A and target the batch.
    M, K, Nc = 5, 7, 3
    B0 = round_to(rng.standard_normal((K, Nc)) / np.sqrt(K), "float32")
    mbatches = [{"A": round_to(rng.standard_normal((M, K)), "float32"),
                 "target": round_to(rng.standard_normal((M, Nc)), "float32")} for _ in range(steps)]

    def mm_fn(batch, q):
        y = round_to(batch["A"] @ q["B"], "float32")
        dy = 2 * (y - batch["target"]) / y.size
        return np.mean((y - batch["target"]) ** 2), {"B": batch["A"].T @ dy}
    cfg = dict(lr=0.2, momentum=0.8, dampening=0.2, weight_decay=1e-2, nesterov=False)
    want_loss, want = train_reference(mm_fn, {"B": B0}, mbatches, cfg, checkpoints)
    losses, got = run_training(exe, layouts, "matmul", "matmul", {"B": B0}, mbatches, mm_fn, cfg, checkpoints,
                               {"VALIDATE_OP": "matmul", "VALIDATE_M": M, "VALIDATE_K": K, "VALIDATE_NCOLS": Nc})
    if losses is not None:
        check(rel(losses, want_loss) <= 1e-5, f"train/matmul/train_loss: max rel error {rel(losses, want_loss):.2e}")
        for t in want:
            check(rel(got[t], want[t]) <= 1e-5, f"train/matmul/{t}: {rel(got[t], want[t]):.2e} (<= 1e-5)")


def error_handling(exe):
    """A broken work directory must give exit 2 and a message naming the problem."""
    rng = np.random.default_rng(7)
    env, inputs, _, _ = matmul_case(5, 7, 3, "float32", rng)
    env = dict(env, VALIDATE_DTYPE="float32", VALIDATE_CASE="errors")
    with tempfile.TemporaryDirectory(prefix="validate_selftest_") as d:
        for t, arr in inputs.items():
            if t != "B":
                arr.astype("<f4").tofile(os.path.join(d, t + ".bin"))
        r = run_program(exe, d, env, expect_rc=2)
        check(r.returncode == 2 and "B.bin" in r.stderr and "no such file" in r.stderr,
              f"missing B.bin -> exit 2 naming it ({r.stderr.strip()!r})")
        inputs["B"][:-1].astype("<f4").tofile(os.path.join(d, "B.bin"))
        r = run_program(exe, d, env, expect_rc=2)
        check(r.returncode == 2 and "B.bin" in r.stderr and "expected 84" in r.stderr,
              f"short B.bin -> exit 2 with sizes ({r.stderr.strip()!r})")
        r = run_program(exe, d, {k: v for k, v in env.items() if k != "VALIDATE_K"}, expect_rc=2)
        check(r.returncode == 2 and "VALIDATE_K" in r.stderr,
              f"missing VALIDATE_K -> exit 2 naming it ({r.stderr.strip()!r})")
        # An op it does not do is the protocol's "not supported": unsupported.txt naming it, exit 0,
        # and no result files.
        r = run_program(exe, d, dict(env, VALIDATE_OP="conv_transpose2d"), expect_rc=0)
        unsup = os.path.join(d, "unsupported.txt")
        reason = open(unsup).read() if os.path.exists(unsup) else ""
        check(r.returncode == 0 and "conv_transpose2d" in reason and "conv2d and matmul only" in reason
              and not os.path.exists(os.path.join(d, "output.bin")),
              f"an op it does not do -> unsupported.txt naming it, exit 0 ({reason.strip()!r}, rc {r.returncode})")
        if os.path.exists(unsup):
            os.remove(unsup)
        r = run_program(exe, d, dict(env, VALIDATE_PROTOCOL=3), expect_rc=2)
        check(r.returncode == 2 and "VALIDATE_PROTOCOL=3" in r.stderr, f"protocol 3 -> exit 2 ({r.stderr.strip()!r})")
        r = run_program(exe, d, dict(env, CONV_RUNNER_BUG="update_dw"), expect_rc=2)
        check(r.returncode == 2 and "update_dw" in r.stderr,
              f"a misspelt CONV_RUNNER_BUG -> exit 2, never the clean program ({r.stderr.strip()!r})")
        train_env = dict(env, VALIDATE_PROTOCOL=2, VALIDATE_STEPS=2, VALIDATE_OPTIMIZER="sgd", VALIDATE_LR="0.1",
                         VALIDATE_MOMENTUM="0", VALIDATE_DAMPENING="0", VALIDATE_WEIGHT_DECAY="0",
                         VALIDATE_NESTEROV=0, VALIDATE_NCHECKPOINTS=2, VALIDATE_CHECKPOINTS="0 1")
        r = run_program(exe, d, dict(train_env, VALIDATE_OPTIMIZER="adagrad"), expect_rc=2)
        check(r.returncode == 2 and "adagrad" in r.stderr, f"an unknown optimizer -> exit 2 ({r.stderr.strip()!r})")
        r = run_program(exe, d, dict(train_env, VALIDATE_CHECKPOINTS="0"), expect_rc=2)
        check(r.returncode == 2 and "VALIDATE_CHECKPOINTS" in r.stderr,
              f"a short checkpoint list -> exit 2 ({r.stderr.strip()!r})")
        inputs["B"].astype("<f4").tofile(os.path.join(d, "B.bin"))
        r = run_program(exe, d, train_env, expect_rc=2)
        check(r.returncode == 2 and "steps/1/A.bin" in r.stderr and "no such file" in r.stderr,
              f"step 1's batch missing -> exit 2 naming steps/1/A.bin ({r.stderr.strip()!r})")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    exe = os.path.abspath(sys.argv[1])
    layouts_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(HERE, "layouts.json")
    with open(layouts_path) as f:
        layouts = json.load(f)
    check(layouts.get("format") == "bin", f"{layouts_path}: format is bin")

    # Every axis a different size; stride, padding and dilation differ between H and W.
    base = {"N": 2, "C": 3, "H": 5, "W": 7, "O": 4, "kernel": (3, 2),
            "stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 1}
    grouped = dict(base, C=4, O=6, groups=2)
    conv_cases = [("g1_bias", dict(base, bias=True)), ("g1_nobias", dict(base, bias=False)),
                  ("g2_bias", dict(grouped, bias=True)), ("g2_nobias", dict(grouped, bias=False))]

    rng = np.random.default_rng(20240601)
    for dtype in ("float32", "bfloat16", "float16"):
        for name, p in conv_cases:
            if dtype != "float32" and name not in ("g1_bias", "g2_nobias"):
                continue   # the storage paths need not be crossed with every variant
            run_case(exe, layouts, "conv2d", name, dtype, *conv2d_case(p, dtype, rng))
        run_case(exe, layouts, "matmul", "m5_k7_n3", dtype, *matmul_case(5, 7, 3, dtype, rng))
    training(exe, layouts)
    error_handling(exe)

    print(f"\n{len(failures)} failure(s)" if failures else "\nall checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
