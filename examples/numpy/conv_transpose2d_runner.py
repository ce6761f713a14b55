#!/usr/bin/env python3
"""A `--backend exec` program for conv_transpose2d written with numpy (docs/runners.md): reads the
protocol's environment and the torch-preset .bin files in {dir}, writes output, loss and every
gradient. An independent implementation (scatter form, float64) the harness tests its oracle and
exec protocol against. Usage: validate run --backend exec --cmd "python3 conv_transpose2d_runner.py {dir}" ...
"""
import os
import sys

import numpy as np


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


def main(d):
    e = lambda k: int(os.environ[k])
    if os.environ["VALIDATE_OP"] != "conv_transpose2d":
        return 3
    N, C, H, W, O, KH, KW = (e(k) for k in ("VALIDATE_N", "VALIDATE_C", "VALIDATE_H", "VALIDATE_W", "VALIDATE_O",
                                            "VALIDATE_KH", "VALIDATE_KW"))
    SH, SW, PH, PW = e("VALIDATE_SH"), e("VALIDATE_SW"), e("VALIDATE_PH"), e("VALIDATE_PW")
    DH, DW, G, HO, WO = e("VALIDATE_DH"), e("VALIDATE_DW"), e("VALIDATE_GROUPS"), e("VALIDATE_HOUT"), e("VALIDATE_WOUT")
    bias = e("VALIDATE_BIAS") == 1
    CG, OG = C // G, O // G
    dtype = os.environ["VALIDATE_DTYPE"]
    storage = "<f2" if dtype == "float16" else "<f4"  # bfloat16 values travel as float32
    rd = lambda name, shape: np.fromfile(os.path.join(d, name + ".bin"), storage).astype(np.float64).reshape(shape)
    x, w, t = rd("input", (N, C, H, W)), rd("weight", (C, OG, KH, KW)), rd("target", (N, O, HO, WO))
    # The uncropped output: input pixel (ih, iw) and tap (u, v) land on (ih*SH + u*DH, iw*SW + v*DW).
    HF, WF = max((H - 1) * SH + DH * (KH - 1) + 1, PH + HO), max((W - 1) * SW + DW * (KW - 1) + 1, PW + WO)
    yf = np.zeros((N, O, HF, WF))
    taps = lambda u, v: (slice(u * DH, u * DH + (H - 1) * SH + 1, SH), slice(v * DW, v * DW + (W - 1) * SW + 1, SW))
    for g in range(G):
        ci, oi = slice(g * CG, (g + 1) * CG), slice(g * OG, (g + 1) * OG)
        for u in range(KH):
            for v in range(KW):
                hs, ws = taps(u, v)
                yf[:, oi, hs, ws] += np.einsum("nchw,co->nohw", x[:, ci], w[ci, :, u, v])
    y = yf[:, :, PH:PH + HO, PW:PW + WO].copy()
    if bias:
        b = rd("bias", (O,))
        y += b[None, :, None, None]
    y32 = as_stored(y, dtype)  # the loss is taken on the output as the case dtype holds it
    loss = np.mean((y32 - t) ** 2)
    dy = 2 * (y32 - t) / y.size
    dyf = np.zeros_like(yf)
    dyf[:, :, PH:PH + HO, PW:PW + WO] = dy
    dx, dw = np.zeros_like(x), np.zeros_like(w)
    for g in range(G):
        ci, oi = slice(g * CG, (g + 1) * CG), slice(g * OG, (g + 1) * OG)
        for u in range(KH):
            for v in range(KW):
                hs, ws = taps(u, v)
                dx[:, ci] += np.einsum("nohw,co->nchw", dyf[:, oi, hs, ws], w[ci, :, u, v])
                dw[ci, :, u, v] += np.einsum("nchw,nohw->co", x[:, ci], dyf[:, oi, hs, ws])
    out = {"output": y, "loss": np.array(loss), "grad_input": dx, "grad_weight": dw}
    if bias:
        out["grad_bias"] = dy.sum(axis=(0, 2, 3))
    for name, a in out.items():
        if name == "loss":
            a.astype("<f4").tofile(os.path.join(d, name + ".bin"))  # the loss is always float32
        else:
            as_stored(a, dtype).astype(storage).tofile(os.path.join(d, name + ".bin"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
