#!/usr/bin/env python3
"""A `--backend exec` program for conv_transpose2d written with numpy (docs/runners.md): reads the
protocol's environment and the torch-preset .bin files in {dir}, writes output, loss and every
gradient; on a training case (protocol 2) it runs the whole trajectory, SGD as torch.optim.SGD in
float32, and writes train_loss and the checkpoints. An independent implementation (scatter form, float64) the harness tests its oracle and
exec protocol against. Usage: validate run --backend exec --cmd "python3 conv_transpose2d_runner.py {dir}" ...
"""
import math
import os
import sys

import numpy as np


def fail(message):
    """A bad environment is the harness's or the user's mistake: exit 2 naming it, never a traceback."""
    sys.stderr.write(f"conv_transpose2d_runner.py: {message}\n")
    sys.exit(2)


def env(name):
    if name not in os.environ:
        fail(f"{name} is not set")
    return os.environ[name]


def env_number(name, kind=float):
    try:
        v = kind(env(name))
    except ValueError:
        fail(f'{name}="{os.environ[name]}" is not {"an integer" if kind is int else "a number"}')
    if not math.isfinite(v):
        fail(f'{name}="{os.environ[name]}" is not finite')
    return v


def as_stored(a, dtype):
    """Rounds float64 values once to the case dtype (bfloat16: nearest-even on float32's top 16 bits)."""
    if dtype == "float16":
        return a.astype(np.float16).astype(np.float64)
    f = a.astype(np.float32)
    if dtype == "bfloat16":
        bits = f.view(np.uint32).astype(np.uint64)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
        f = bits.view(np.float32)
    return f.astype(np.float64)


def read_geometry():
    e = lambda k: env_number(k, int)
    g = {k: e("VALIDATE_" + k) for k in ("N", "C", "H", "W", "O", "KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW",
                                          "GROUPS", "HOUT", "WOUT")}
    g["BIAS"] = e("VALIDATE_BIAS") == 1
    return g


def step(g, x, w, b, t, dtype):
    """Forward, MSE loss on the stored output, and every gradient, in float64."""
    N, C, H, W, O, KH, KW = (g[k] for k in ("N", "C", "H", "W", "O", "KH", "KW"))
    SH, SW, PH, PW, DH, DW, G, HO, WO = (g[k] for k in ("SH", "SW", "PH", "PW", "DH", "DW", "GROUPS", "HOUT", "WOUT"))
    CG, OG = C // G, O // G
    # The uncropped output: input pixel (ih, iw) and tap (u, v) land on (ih*SH + u*DH, iw*SW + v*DW).
    HF, WF = max((H - 1) * SH + DH * (KH - 1) + 1, PH + HO), max((W - 1) * SW + DW * (KW - 1) + 1, PW + WO)
    yf = np.zeros((N, O, HF, WF))
    taps = lambda u, v: (slice(u * DH, u * DH + (H - 1) * SH + 1, SH), slice(v * DW, v * DW + (W - 1) * SW + 1, SW))
    for gi in range(G):
        ci, oi = slice(gi * CG, (gi + 1) * CG), slice(gi * OG, (gi + 1) * OG)
        for u in range(KH):
            for v in range(KW):
                hs, ws = taps(u, v)
                yf[:, oi, hs, ws] += np.einsum("nchw,co->nohw", x[:, ci], w[ci, :, u, v])
    y = yf[:, :, PH:PH + HO, PW:PW + WO].copy()
    if b is not None:
        y += b[None, :, None, None]
    y32 = as_stored(y, dtype)  # the loss is taken on the output as the case dtype holds it
    loss = np.mean((y32 - t) ** 2)
    dy = 2 * (y32 - t) / y.size
    dyf = np.zeros_like(yf)
    dyf[:, :, PH:PH + HO, PW:PW + WO] = dy
    dx, dw = np.zeros_like(x), np.zeros_like(w)
    for gi in range(G):
        ci, oi = slice(gi * CG, (gi + 1) * CG), slice(gi * OG, (gi + 1) * OG)
        for u in range(KH):
            for v in range(KW):
                hs, ws = taps(u, v)
                dx[:, ci] += np.einsum("nohw,co->nchw", dyf[:, oi, hs, ws], w[ci, :, u, v])
                dw[ci, :, u, v] += np.einsum("nchw,nohw->co", x[:, ci], dyf[:, oi, hs, ws])
    grads = {"grad_input": dx, "grad_weight": dw}
    if b is not None:
        grads["grad_bias"] = dy.sum(axis=(0, 2, 3))
    return y, loss, grads


def sgd_float32(p, grad, buf, first):
    """torch.optim.SGD's update in float32, every operation rounded (harness/train sgd.hpp)."""
    f32 = np.float32
    lr, mu = f32(env_number("VALIDATE_LR")), f32(env_number("VALIDATE_MOMENTUM"))
    wd, keep = f32(env_number("VALIDATE_WEIGHT_DECAY")), f32(1.0 - env_number("VALIDATE_DAMPENING"))
    g = grad.astype(np.float32)
    if wd != 0:
        g = g + wd * p
    if mu != 0:
        buf[...] = g if first else mu * buf + keep * g
        g = g + mu * buf if env("VALIDATE_NESTEROV") == "1" else buf.copy()
    p -= lr * g


def adam_float32(p, grad, state):
    """torch.optim.Adam's update in float32 (L2 weight decay, no AMSGrad; harness/train adam.hpp)."""
    f32 = np.float32
    lr, wd = env_number("VALIDATE_LR"), f32(env_number("VALIDATE_WEIGHT_DECAY"))
    b1, b2 = env_number("VALIDATE_BETA1"), env_number("VALIDATE_BETA2")
    eps = f32(env_number("VALIDATE_EPS"))
    if not (0 <= b1 < 1 and 0 <= b2 < 1):
        fail("VALIDATE_BETA1 and VALIDATE_BETA2 must lie in [0, 1)")
    if not eps > 0:
        fail("VALIDATE_EPS must be > 0 in float32")
    state["t"] += 1
    t = state["t"]
    g = grad.astype(np.float32)
    if wd != 0:
        g = g + wd * p
    m, v = state["m"], state["v"]
    m[...] = f32(b1) * m + f32(1 - b1) * g
    v[...] = f32(b2) * v + (f32(1 - b2) * g) * g
    denom = np.sqrt(v) / f32(np.sqrt(1 - b2 ** t)) + eps
    p -= f32(lr / (1 - b1 ** t)) * (m / denom)


def main(d):
    if env("VALIDATE_OP") != "conv_transpose2d":
        return 3
    g = read_geometry()
    N, C, H, W, O, KH, KW, G = (g[k] for k in ("N", "C", "H", "W", "O", "KH", "KW", "GROUPS"))
    dtype = env("VALIDATE_DTYPE")
    storage = "<f2" if dtype == "float16" else "<f4"  # bfloat16 values travel as float32
    rd = lambda where, name, shape: np.fromfile(os.path.join(where, name + ".bin"), storage).astype(np.float64).reshape(shape)
    wr = lambda name, a: as_stored(a, dtype).astype(storage).tofile(os.path.join(d, name + ".bin"))
    xs, ts = (N, C, H, W), (N, O, g["HOUT"], g["WOUT"])
    w = rd(d, "weight", (C, O // G, KH, KW))
    b = rd(d, "bias", (O,)) if g["BIAS"] else None
    # Protocol 2 (docs/runners.md): the whole trajectory in one run, parameters kept in float32.
    training = os.environ.get("VALIDATE_PROTOCOL") == "2"
    steps = env_number("VALIDATE_STEPS", int) if training else 1
    try:
        checkpoints = {int(k) for k in os.environ.get("VALIDATE_CHECKPOINTS", "").split()}
    except ValueError:
        fail(f'VALIDATE_CHECKPOINTS="{os.environ["VALIDATE_CHECKPOINTS"]}" is not a list of integers')
    params = {"weight": w.astype(np.float32)}
    if b is not None:
        params["bias"] = b.astype(np.float32)
    bufs = {k: np.zeros_like(v) for k, v in params.items()}
    adam = os.environ.get("VALIDATE_OPTIMIZER") == "adam"
    if training and env("VALIDATE_OPTIMIZER") not in ("sgd", "adam"):
        fail(f'VALIDATE_OPTIMIZER={env("VALIDATE_OPTIMIZER")} is not sgd or adam')
    moments = {k: {"m": np.zeros_like(v), "v": np.zeros_like(v), "t": 0} for k, v in params.items()}
    losses = []
    for s in range(steps):
        where = d if s == 0 else os.path.join(d, "steps", str(s))
        x, t = rd(where, "input", xs), rd(where, "target", ts)
        # Mixed precision for bfloat16/float16 (docs/training.md): the forward sees the float32
        # parameters cast to the case dtype; the checkpoints record the float32 masters.
        used = {k: as_stored(v.astype(np.float64), dtype) for k, v in params.items()}
        y, loss, grads = step(g, x, used["weight"], used.get("bias"), t, dtype)
        losses.append(loss)
        if s == 0:
            wr("output", y)
            np.array(loss).astype("<f4").tofile(os.path.join(d, "loss.bin"))  # the loss is always float32
            for name, a in grads.items():
                wr(name, a)
        if training:
            if s in checkpoints:
                for k in params:
                    params[k].astype("<f4").tofile(os.path.join(d, f"step{s}_{k}.bin"))  # float32 always
                    wr(f"step{s}_grad_{k}", grads["grad_" + k])
            for k in params:
                if adam:
                    adam_float32(params[k], as_stored(grads["grad_" + k], dtype), moments[k])
                else:
                    sgd_float32(params[k], as_stored(grads["grad_" + k], dtype), bufs[k], s == 0)
    if training:
        np.array(losses).astype("<f4").tofile(os.path.join(d, "train_loss.bin"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
