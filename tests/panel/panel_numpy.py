#!/usr/bin/env python3
"""A correct stack for `validate run --backend exec`, written with numpy from docs/runners.md only.

conv2d as im2col + one GEMM per group, matmul as one GEMM, MSE loss on the stored output and every
gradient, channels-last data (NHWC), OHWI weights, matmul's B stored as a Linear weight [out, in]
(layouts_numpy.json), .npy files. Results are rounded once to the case dtype by round_to() below.

Usage: panel_numpy.py DIR VARIANT
  blas          float32 GEMMs through numpy's BLAS (blocked sums); dL/dy kept in float32
  blas_dyround  the same with dL/dy rounded to the case dtype before the backward pass (what
                LibTorch does for bfloat16 and float16; identical to blas on float32 cases)
  f64           float64 GEMMs and loss, each result rounded once to the case dtype
  bias_after    blas_dyround with conv2d's sum rounded to the case dtype before the bias is added
                and the result rounded again (cuDNN's cudnnAddTensor after the convolution, and
                LibTorch on CUDA, do this)
Deliberately wrong (the panel's negative controls):
  tf32          float32 GEMMs on operands rounded to 10 mantissa bits (TensorFloat-32)
  wtrans        the weight's memory read with its H and W axes swapped (OWHI for OHWI), and
                matmul's B buffer [N, K] read as if it were [K, N]
  grad_a_acc    blas_dyround, but matmul's grad_A summed with its running sum rounded to the case
                dtype after every add (a half-precision accumulator in the backward GEMM only)
  grad_conv_acc blas_dyround, but conv2d's backward GEMMs keep their running sums in the case dtype:
                grad_weight summed over (n, oh, ow) in order, and grad_input's columns summed over
                the output channels in order, then added into grad_input tap by tap in (kh, kw)
                order by col2im, every add rounded to the case dtype (float32 cases: a float32
                accumulator, which is correct)
  dy_fp8        blas_dyround, but dL/dy rounded to an 8-bit float (E4M3: 4 significand bits,
                scaled per tensor by a power of two so its largest magnitude fits, as FP8 training
                scales it) before the backward pass
  bias_trunc    bias_after, but the sum converted to the case dtype by truncation (its low bits
                dropped, a hand-written float32 -> bfloat16 conversion) before the bias is added;
                the sum with the bias rounded to nearest as usual
"""
import os
import sys

import numpy as np

VARIANTS = ("blas", "blas_dyround", "bias_after", "f64", "tf32", "wtrans", "grad_a_acc", "grad_conv_acc", "dy_fp8",
            "bias_trunc")
# (significand bits including the implicit one, smallest normal exponent) of each dtype.
FORMATS = {"float32": (24, -126), "bfloat16": (8, -126), "float16": (11, -14), "tf32": (11, -126),
           "e4m3": (4, -6)}


def fail(message):
    sys.stderr.write(f"panel_numpy.py: {message}\n")
    sys.exit(2)


def on_grid(x, fmt, to_integer):
    """x (as float64) brought onto `fmt`'s grid by to_integer (np.rint: nearest, ties to even;
    np.trunc: toward zero).

    The quantum of x is 2^(e - p + 1) for its binade e (never below the smallest normal's, so
    subnormals round on the fixed subnormal grid); x / quantum is exact. Values are far from
    overflow in every case of the sets."""
    p, emin = FORMATS[fmt]
    x = np.asarray(x, dtype=np.float64)
    _, e = np.frexp(x)
    quantum = np.ldexp(1.0, np.maximum(e - 1, emin) - (p - 1))
    return to_integer(x / quantum) * quantum


def round_to(x, fmt):
    """Rounds to the nearest value of `fmt` with ties to even, as float64 (one rounding)."""
    return on_grid(x, fmt, np.rint)


def truncate_to(x, fmt):
    """x with its bits below `fmt`'s significand dropped (rounded toward zero), as float64."""
    return on_grid(x, fmt, np.trunc)


def env_int(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        fail(f"{name} is missing or not an integer")


def load(d, name):
    return np.load(os.path.join(d, name + ".npy")).astype(np.float64)


def save(d, name, values, dtype):
    """Rounds once to the case dtype and writes the storage dtype (float16 for float16 cases)."""
    r = round_to(values, dtype)
    storage = np.float16 if dtype == "float16" else np.float32
    np.save(os.path.join(d, name + ".npy"), r.astype(storage))  # exact: r is representable


class Arith:
    """The working precision of one variant: float32 or float64 arrays, and the GEMM operands."""

    def __init__(self, variant):
        self.variant = variant
        self.t = np.float64 if variant == "f64" else np.float32

    def arr(self, a):
        return np.ascontiguousarray(a, dtype=self.t)

    def gemm(self, a, b):
        if self.variant == "tf32":
            a, b = round_to(a, "tf32").astype(np.float32), round_to(b, "tf32").astype(np.float32)
        return np.matmul(a, b)


def loss_and_dy(ar, y, t, dtype, dyround):
    """MSE on the output as stored (rounded to the case dtype), and dL/dy = 2 (y - t) / numel."""
    ys = ar.arr(round_to(y, dtype))
    t = ar.arr(t)
    d = ys - t
    n = d.size
    loss = np.sum(d * d, dtype=ar.t) / ar.t(n)
    dy = d * ar.t(2) / ar.t(n)
    if dyround and dtype != "float32":
        dy = ar.arr(round_to(dy, dtype))
    if ar.variant == "dy_fp8":
        most = float(np.max(np.abs(dy)))
        scale = np.ldexp(1.0, int(np.floor(np.log2(448.0 / most)))) if most > 0 else 1.0
        dy = ar.arr(round_to(dy * scale, "e4m3") / scale)
    return loss, dy


def accumulated_in(dtype, a, b):
    """a [M, J] times b [J, K] with each running sum rounded to `dtype` after every add, j in order."""
    acc = np.zeros((a.shape[0], b.shape[1]))
    for j in range(a.shape[1]):
        acc = round_to(np.float32(acc + np.outer(a[:, j], b[j, :]).astype(np.float32)), dtype)
    return acc


def conv2d(d, dtype, ar, dyround):
    g = {k: env_int("VALIDATE_" + k) for k in ("N", "C", "H", "W", "O", "KH", "KW", "SH", "SW", "PH", "PW",
                                                "DH", "DW", "GROUPS", "HOUT", "WOUT", "BIAS")}
    N, C, H, W, O, KH, KW = (g[k] for k in ("N", "C", "H", "W", "O", "KH", "KW"))
    SH, SW, PH, PW, DH, DW = (g[k] for k in ("SH", "SW", "PH", "PW", "DH", "DW"))
    G, HO, WO = g["GROUPS"], g["HOUT"], g["WOUT"]
    Cg, Og = C // G, O // G
    x = ar.arr(load(d, "input"))            # [N, H, W, C]
    w = load(d, "weight")                   # [O, KH, KW, Cg]
    if ar.variant == "wtrans":              # the buffer read as [O, KW, KH, Cg]
        w = w.reshape(O, KW, KH, Cg).transpose(0, 2, 1, 3)
    w = ar.arr(w)
    t = load(d, "target")
    xp = np.zeros((N, H + 2 * PH, W + 2 * PW, C), dtype=ar.t)
    xp[:, PH:PH + H, PW:PW + W, :] = x
    # cols[n, oy, ox, kh, kw, c]: the input under each kernel tap (zeros in the padding)
    cols = np.empty((N, HO, WO, KH, KW, C), dtype=ar.t)
    for kh in range(KH):
        for kw in range(KW):
            cols[:, :, :, kh, kw, :] = xp[:, kh * DH:kh * DH + SH * (HO - 1) + 1:SH,
                                          kw * DW:kw * DW + SW * (WO - 1) + 1:SW, :]
    P = N * HO * WO
    y = np.empty((P, O), dtype=ar.t)
    gcols = np.empty((N, HO, WO, KH, KW, C), dtype=ar.t)
    per_group = []
    for gi in range(G):
        cg = np.ascontiguousarray(cols[..., gi * Cg:(gi + 1) * Cg]).reshape(P, KH * KW * Cg)
        wg = w[gi * Og:(gi + 1) * Og].reshape(Og, KH * KW * Cg)
        y[:, gi * Og:(gi + 1) * Og] = ar.gemm(cg, wg.T)
        per_group.append((cg, wg))
    if g["BIAS"]:
        if ar.variant == "bias_after":      # the sum stored in the case dtype, then the bias added
            y = ar.arr(round_to(y, dtype))
        elif ar.variant == "bias_trunc":    # ... stored by truncation
            y = ar.arr(truncate_to(y, dtype))
        y += ar.arr(load(d, "bias"))
    y = y.reshape(N, HO, WO, O)
    loss, dy = loss_and_dy(ar, y, t, dtype, dyround)
    dyp = dy.reshape(P, O)
    gw = np.empty((O, KH * KW * Cg), dtype=ar.t)
    narrow = ar.variant == "grad_conv_acc"
    gemm = (lambda a, b: accumulated_in(dtype, a, b)) if narrow else ar.gemm
    for gi, (cg, wg) in enumerate(per_group):
        dyg = np.ascontiguousarray(dyp[:, gi * Og:(gi + 1) * Og])
        gw[gi * Og:(gi + 1) * Og] = gemm(dyg.T, cg)
        gcols[..., gi * Cg:(gi + 1) * Cg] = gemm(dyg, wg).reshape(N, HO, WO, KH, KW, Cg)
    gxp = np.zeros_like(xp)
    for kh in range(KH):           # col2im: each tap's contribution added in (kh, kw) order
        for kw in range(KW):
            sl = (slice(None), slice(kh * DH, kh * DH + SH * (HO - 1) + 1, SH),
                  slice(kw * DW, kw * DW + SW * (WO - 1) + 1, SW), slice(None))
            if narrow:             # the add rounded to the case dtype, as a half-precision buffer holds it
                gxp[sl] = round_to(np.float32(gxp[sl] + gcols[:, :, :, kh, kw, :]), dtype)
            else:
                gxp[sl] += gcols[:, :, :, kh, kw, :]
    save(d, "output", y, dtype)
    np.save(os.path.join(d, "loss.npy"), np.array(round_to(loss, "float32"), dtype=np.float32))
    save(d, "grad_input", gxp[:, PH:PH + H, PW:PW + W, :], dtype)
    gw = gw.reshape(O, KH, KW, Cg)
    if ar.variant == "wtrans":     # written back through the same misreading
        gw = np.ascontiguousarray(gw.transpose(0, 2, 1, 3)).reshape(O, KH, KW, Cg)
    save(d, "grad_weight", gw, dtype)
    if g["BIAS"]:
        save(d, "grad_bias", np.sum(dyp, axis=0, dtype=ar.t), dtype)


def matmul(d, dtype, ar, dyround):
    M, K, NC = env_int("VALIDATE_M"), env_int("VALIDATE_K"), env_int("VALIDATE_NCOLS")
    a = ar.arr(load(d, "A"))                # [M, K]
    b = load(d, "B")                        # stored [NCOLS, K] (a Linear weight)
    bt = b.reshape(K, NC).T if ar.variant == "wtrans" else b   # wtrans: [N, K] read as [K, N]
    bt = ar.arr(bt)
    t = load(d, "target")
    y = ar.gemm(a, bt.T)
    loss, dy = loss_and_dy(ar, y, t, dtype, dyround)
    save(d, "output", y, dtype)
    np.save(os.path.join(d, "loss.npy"), np.array(round_to(loss, "float32"), dtype=np.float32))
    save(d, "grad_A", accumulated_in(dtype, dy, bt) if ar.variant == "grad_a_acc" else ar.gemm(dy, bt), dtype)
    gb = ar.gemm(dy.T, a)                   # [N, K]
    if ar.variant == "wtrans":
        gb = gb.T.reshape(NC, K)
    save(d, "grad_B", gb, dtype)


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in VARIANTS:
        fail(f"usage: panel_numpy.py DIR {{{'|'.join(VARIANTS)}}}")
    d, variant = sys.argv[1], sys.argv[2]
    dtype = os.environ.get("VALIDATE_DTYPE", "")
    if dtype not in ("float32", "bfloat16", "float16"):
        fail(f"VALIDATE_DTYPE={dtype!r} is not float32, bfloat16 or float16")
    if os.environ.get("VALIDATE_PROTOCOL", "1") != "1":
        fail("training cases (protocol 2) are not part of the panel")
    ar = Arith(variant)
    op = os.environ.get("VALIDATE_OP")
    if op == "conv2d":
        conv2d(d, dtype, ar, variant in ("blas_dyround", "bias_after", "grad_a_acc", "grad_conv_acc", "dy_fp8", "bias_trunc"))
    elif op == "matmul":
        matmul(d, dtype, ar, variant in ("blas_dyround", "bias_after", "grad_a_acc", "grad_conv_acc", "dy_fp8", "bias_trunc"))
    else:
        fail(f"VALIDATE_OP={op!r}: the panel computes conv2d and matmul")


if __name__ == "__main__":
    main()
