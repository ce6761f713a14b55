#!/usr/bin/env python3
"""Correct stacks that use other algorithms than the direct sum, in numpy float32, for
`validate run --backend exec` (layouts_<variant>.json declares each tensor's algorithm).

conv2d data is channels-last (NHWC, OHWI weights), matmul's B a Linear weight [out, in], .npy files,
each result rounded once to the case dtype (panel_numpy.py's round_to); dL/dy rounded to the case
dtype before the backward pass, as LibTorch does.

Usage: panel_algorithms.py DIR VARIANT
  winograd_f2, winograd_f4, winograd_f6
           conv2d's output and grad_input by Winograd F(mxm, 3x3), m = 2, 4, 6 (Lavin and Gray's
           transforms from the Toom-Cook points 0, +-1, +-2, +-1/2, infinity), in float32: tile
           transforms, one float32 GEMM over the channels per transformed point, the output
           transform. Only 3x3 kernels with stride 1 and dilation 1 (what cuDNN, oneDNN and NNPACK
           run as Winograd); other geometries, grad_weight, grad_bias and matmul use im2col + SGEMM.
  fft      conv2d's output, grad_input and grad_weight through a 2-D FFT of the whole (padded)
           plane, in complex64 throughout: a radix-2 FFT written here (numpy.fft computes in
           float64 before numpy 2.0), the channel sums as complex64 GEMMs per frequency. Stride 1
           and dilation 1 only (cuDNN's FFT has the same limit); others im2col. Pruned as FFT
           convolutions are: the padding's rows of zeros and the result's unwanted columns are not
           transformed (every value kept is the whole transform's, to the bit).
  split_k  every GEMM (conv2d and matmul, forward and backward) with its reduction split into
           S = 8 slices, each a float32 GEMM, the 8 partial results then added in float32 in order.
"""
import functools
import os
import sys
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from panel_numpy import env_int, fail, load, round_to, save  # noqa: E402

VARIANTS = ("winograd_f2", "winograd_f4", "winograd_f6", "fft", "split_k")
SPLIT = 8
F32 = np.float32
CHUNK = 1 << 18  # complex64 values per block of planes in fft2 (2 MiB)


# ---- Winograd F(m, 3) -------------------------------------------------------------------------

def winograd_points(m):
    """The finite Toom-Cook points of F(m, 3) (n = m + 2 points with infinity), Lavin and Gray's."""
    pts = [Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2), Fraction(-1, 2)]
    return pts[:m + 1]


def winograd_matrices(m, r=3):
    """A^T (m x n), G (n x r), B^T (n x n) of F(m, r) with y = A^T [(G g) * (B^T d)], exact.

    From the transposition principle: correlation is the transpose of the linear convolution
    c = V^-1 [(V_r g) * (V_m h)], so A^T = V_m^T, G = V_r, B^T = V^-T, with the point at infinity
    taking the leading coefficient. Row j of G is divided by f_j = prod_{l != j} (p_j - p_l) and
    row j of B^T multiplied by it (Lavin and Gray's scaling: integer-valued B^T for F(2,3), F(4,3))."""
    p = winograd_points(m)
    n = m + r - 1

    def vander(cols):
        rows = [[q ** k for k in range(cols)] for q in p]
        rows.append([Fraction(int(k == cols - 1)) for k in range(cols)])  # infinity
        return rows

    vm, vr, vn = vander(m), vander(r), vander(n)
    # V^-T by Gauss-Jordan in exact fractions.
    a = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(vn)]
    for c in range(n):
        piv = next(i for i in range(c, n) if a[i][c] != 0)
        a[c], a[piv] = a[piv], a[c]
        a[c] = [v / a[c][c] for v in a[c]]
        for i in range(n):
            if i != c and a[i][c] != 0:
                a[i] = [x - a[i][c] * y for x, y in zip(a[i], a[c])]
    vinv = [row[n:] for row in a]
    bt = [[vinv[j][i] for j in range(n)] for i in range(n)]  # (V^-1)^T
    at = [[vm[j][i] for j in range(n)] for i in range(m)]
    g = [row[:] for row in vr]
    for j, q in enumerate(p):
        f = Fraction(1)
        for other in p:
            if other != q:
                f *= q - other
        g[j] = [v / f for v in g[j]]
        bt[j] = [v * f for v in bt[j]]
    as64 = lambda x: np.array([[float(v) for v in row] for row in x])
    return as64(at), as64(g), as64(bt)


def winograd_conv(x, w, pad, m):
    """Cross-correlation of x [N, C, H, W] with w [O, C, 3, 3], stride 1, in float32 by F(m, 3)."""
    at, g, bt = (t.astype(F32) for t in winograd_matrices(m))
    N, C, H, W = x.shape
    O = w.shape[0]
    n = m + 2
    HO, WO = H + 2 * pad[0] - 2, W + 2 * pad[1] - 2
    th, tw = -(-HO // m), -(-WO // m)
    xp = np.zeros((N, C, th * m + 2, tw * m + 2), dtype=F32)
    xp[:, :, pad[0]:pad[0] + H, pad[1]:pad[1] + W] = x
    # d[N, C, th, tw, n, n]: the overlapping input tiles
    idx_h = (np.arange(th) * m)[:, None] + np.arange(n)[None, :]
    idx_w = (np.arange(tw) * m)[:, None] + np.arange(n)[None, :]
    d = xp[:, :, idx_h[:, None, :, None], idx_w[None, :, None, :]]
    v = np.matmul(np.matmul(bt, d), bt.T)                     # B^T d B, float32
    u = np.matmul(np.matmul(g, w.astype(F32)), g.T)           # G g G^T: [O, C, n, n]
    # one GEMM per transformed point: M[xi, nu] = U[xi, nu] (O x C) @ V[xi, nu] (C x N th tw)
    vt = np.ascontiguousarray(v.transpose(4, 5, 1, 0, 2, 3).reshape(n, n, C, N * th * tw))
    ut = np.ascontiguousarray(u.transpose(2, 3, 0, 1))
    mm = np.matmul(ut, vt).reshape(n, n, O, N, th, tw).transpose(3, 2, 4, 5, 0, 1)
    y = np.matmul(np.matmul(at, mm), at.T)                    # A^T M A: [N, O, th, tw, m, m]
    y = y.transpose(0, 1, 2, 4, 3, 5).reshape(N, O, th * m, tw * m)
    return y[:, :, :HO, :WO]


# ---- FFT in complex64 -------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def bit_reversal(L):
    bits = L.bit_length() - 1
    return np.array([int(format(i, f"0{bits}b")[::-1], 2) for i in range(L)]) if bits else np.arange(1)


@functools.lru_cache(maxsize=None)
def twiddles(s, inverse):
    sign = 1 if inverse else -1
    return np.exp(sign * 2j * np.pi * np.arange(s // 2) / s).astype(np.complex64)


def fft_last(x, inverse=False):
    """Radix-2 decimation-in-time FFT along the last axis, every operation in complex64 (twiddles
    computed in float64 and rounded once)."""
    L = x.shape[-1]
    x = x[..., bit_reversal(L)].astype(np.complex64)
    s = 2
    while s <= L:
        half = s // 2
        tw = twiddles(s, inverse)
        x = x.reshape(*x.shape[:-1], L // s, s)
        even, odd = x[..., :half], x[..., half:] * tw
        x = np.concatenate([even + odd, even - odd], axis=-1).reshape(*x.shape[:-2], L)
        s *= 2
    return x


def fft2(x, L, inverse=False, cols=None):
    """2-D FFT (W axis first, then H) of the planes x[..., h, w], zero-padded to L x L (a power of
    two), in complex64. Only the padded plane's first h rows are nonzero, so the W pass transforms
    those alone (the others transform to zero); with `cols`, only the result's first `cols` columns
    are wanted, so the H pass transforms those alone. Either way every value kept is the one the
    whole transform gives. The planes go through in blocks of CHUNK values: each stage then runs
    in cache."""
    *lead, h, w = x.shape
    cols = L if cols is None else cols
    flat = x.reshape(-1, h, w)
    out = np.empty((flat.shape[0], L, cols), dtype=np.complex64)
    step = max(1, CHUNK // (L * L))
    for i in range(0, flat.shape[0], step):
        blk = flat[i:i + step]
        y = np.zeros((blk.shape[0], L, L), dtype=np.complex64)
        y[:, :h, :w] = blk
        y[:, :h] = fft_last(y[:, :h], inverse)
        y = fft_last(np.swapaxes(y[:, :, :cols], -1, -2), inverse)
        out[i:i + step] = np.swapaxes(y, -1, -2)
    if inverse:
        out *= np.complex64(1.0 / (L * L))  # a power of two: exact
    return out.reshape(*lead, L, cols)


def fft_size(*extents):
    L = 1
    while L < max(extents):
        L *= 2
    return L


def freq_matmul(a, b):
    """[L, L, P, Q] @ [L, L, Q, R] per frequency, complex64 (cgemm)."""
    out = np.matmul(a, b)
    assert out.dtype == np.complex64
    return out


def padded(x, pad):
    """x [N, C, H, W] zero-padded by pad = (rows, columns) on each side, float32."""
    N, C, H, W = x.shape
    xp = np.zeros((N, C, H + 2 * pad[0], W + 2 * pad[1]), dtype=F32)
    xp[:, :, pad[0]:pad[0] + H, pad[1]:pad[1] + W] = x
    return xp


def weight_spectra(w, L):
    """conj(FFT2(w)) of every (output, input) channel pair as [L, L, C, O], made one block of
    input channels at a time: no whole [O, C, L, L] temporary or transposed copy of it (8.6 GB
    each at 8192 channels)."""
    O, C = w.shape[:2]
    out = np.empty((L, L, C, O), dtype=np.complex64)
    step = max(1, CHUNK // (O * L * L))
    for c0 in range(0, C, step):
        out[:, :, c0:c0 + step] = np.conj(fft2(w[:, c0:c0 + step], L)).transpose(2, 3, 1, 0)
    return out


def fft_conv(x, w, pad):
    """Cross-correlation y = x (*) w, x [N, C, H, W], w [O, C, KH, KW], stride 1, through FFTs:
    y[i, j] = IFFT(FFT(xp) conj(FFT(w)))[i, j], no wrap-around when L >= the padded extent."""
    O, _, KH, KW = w.shape
    xp = padded(x, pad)
    Hp, Wp = xp.shape[-2:]
    L = fft_size(Hp, Wp)
    X = np.ascontiguousarray(fft2(xp, L).transpose(2, 3, 0, 1))     # [L, L, N, C]
    Y = freq_matmul(X, weight_spectra(w.astype(F32), L)).transpose(2, 3, 0, 1)
    y = fft2(Y, L, inverse=True, cols=Wp - KW + 1).real
    assert y.dtype == np.float32
    return y[:, :, :Hp - KH + 1, :Wp - KW + 1]


def fft_grad_weight(x, dy, pad, KH, KW):
    """dW[o, c, kh, kw] = sum_n sum_ij xp[n, c, i + kh, j + kw] dy[n, o, i, j]: the correlation of
    xp with dy, the sum over n taken per frequency."""
    xp = padded(x, pad)
    C, Hp, Wp = xp.shape[1:]
    L = fft_size(Hp, Wp)
    D = np.ascontiguousarray(np.conj(fft2(dy.astype(F32), L)).transpose(2, 3, 0, 1))  # [L, L, N, O]
    # Channels in blocks of about 2 MiB of spectra (O x c x L^2 complex64 values): each block's
    # arrays are reused from the allocator rather than mapped afresh (8.6 GB for 8192 channels
    # at L = 64 whole); every plane's transforms and products are the same either way.
    out = np.empty((dy.shape[1], C, KH, KW), dtype=F32)
    step = max(1, CHUNK // (dy.shape[1] * L * L))
    for c0 in range(0, C, step):
        X = fft2(xp[:, c0:c0 + step], L).transpose(2, 3, 1, 0)         # [L, L, c, N]
        G = freq_matmul(np.ascontiguousarray(X), D).transpose(3, 2, 0, 1)  # [O, c, L, L]
        out[:, c0:c0 + step] = fft2(G, L, inverse=True, cols=KW).real[:, :, :KH, :KW]
    return out


# ---- GEMMs, im2col, split-K -------------------------------------------------------------------

def gemm(a, b, split):
    """a @ b in float32; with `split`, the reduction cut into `split` slices summed in order."""
    a, b = a.astype(F32), b.astype(F32)
    if not split:
        return np.matmul(a, b)
    K = a.shape[-1]
    edges = [K * i // split for i in range(split + 1)]
    total = None
    for lo, hi in zip(edges, edges[1:]):
        part = np.matmul(a[..., lo:hi], b[..., lo:hi, :]) if hi > lo else None
        if part is not None:
            total = part if total is None else total + part
    return total


class Geometry:
    def __init__(self):
        g = {k: env_int("VALIDATE_" + k) for k in ("N", "C", "H", "W", "O", "KH", "KW", "SH", "SW", "PH", "PW",
                                                    "DH", "DW", "GROUPS", "HOUT", "WOUT", "BIAS")}
        self.__dict__.update(g)

    def fast(self):
        """Stride 1 and dilation 1: where FFT applies; Winograd also needs a 3x3 kernel."""
        return self.SH == self.SW == self.DH == self.DW == 1

    def winograd(self):
        return self.fast() and self.KH == self.KW == 3 and self.PH <= 2 and self.PW <= 2


def im2col(xp, g):
    """cols[N, HO, WO, KH, KW, C] of the padded NHWC input."""
    cols = np.empty((g.N, g.HOUT, g.WOUT, g.KH, g.KW, g.C), dtype=F32)
    for kh in range(g.KH):
        for kw in range(g.KW):
            cols[:, :, :, kh, kw, :] = xp[:, kh * g.DH:kh * g.DH + g.SH * (g.HOUT - 1) + 1:g.SH,
                                          kw * g.DW:kw * g.DW + g.SW * (g.WOUT - 1) + 1:g.SW, :]
    return cols


def conv_gemm_parts(x, w, g, split):
    """Forward by im2col; returns y [N, HO, WO, O] and what the backward GEMMs need."""
    Cg, Og = g.C // g.GROUPS, g.O // g.GROUPS
    xp = np.zeros((g.N, g.H + 2 * g.PH, g.W + 2 * g.PW, g.C), dtype=F32)
    xp[:, g.PH:g.PH + g.H, g.PW:g.PW + g.W, :] = x
    cols = im2col(xp, g)
    P = g.N * g.HOUT * g.WOUT
    y = np.empty((P, g.O), dtype=F32)
    groups = []
    for gi in range(g.GROUPS):
        cg = np.ascontiguousarray(cols[..., gi * Cg:(gi + 1) * Cg]).reshape(P, g.KH * g.KW * Cg)
        wg = w[gi * Og:(gi + 1) * Og].reshape(Og, g.KH * g.KW * Cg)
        y[:, gi * Og:(gi + 1) * Og] = gemm(cg, wg.T, split)
        groups.append((cg, wg))
    return y.reshape(g.N, g.HOUT, g.WOUT, g.O), xp, groups


def conv_gemm_backward(dy, xp, groups, g, split):
    """grad_input [N, H, W, C] and grad_weight [O, KH, KW, Cg] by GEMMs and col2im."""
    Cg, Og = g.C // g.GROUPS, g.O // g.GROUPS
    P = g.N * g.HOUT * g.WOUT
    dyp = dy.reshape(P, g.O)
    gw = np.empty((g.O, g.KH * g.KW * Cg), dtype=F32)
    gcols = np.empty((g.N, g.HOUT, g.WOUT, g.KH, g.KW, g.C), dtype=F32)
    for gi, (cg, wg) in enumerate(groups):
        dyg = np.ascontiguousarray(dyp[:, gi * Og:(gi + 1) * Og])
        gw[gi * Og:(gi + 1) * Og] = gemm(dyg.T, cg, split)
        gcols[..., gi * Cg:(gi + 1) * Cg] = gemm(dyg, wg, split).reshape(g.N, g.HOUT, g.WOUT, g.KH, g.KW, Cg)
    gxp = np.zeros_like(xp)
    for kh in range(g.KH):
        for kw in range(g.KW):
            gxp[:, kh * g.DH:kh * g.DH + g.SH * (g.HOUT - 1) + 1:g.SH,
                kw * g.DW:kw * g.DW + g.SW * (g.WOUT - 1) + 1:g.SW, :] += gcols[:, :, :, kh, kw, :]
    return gxp[:, g.PH:g.PH + g.H, g.PW:g.PW + g.W, :], gw.reshape(g.O, g.KH, g.KW, Cg)


def per_group(fn, a, b, g, a_axis, b_axis):
    """fn on each group's slices of a (channels on a_axis) and b (on b_axis), concatenated on 1."""
    Ga, Gb = a.shape[a_axis] // g.GROUPS, b.shape[b_axis] // g.GROUPS
    outs = [fn(np.take(a, range(i * Ga, (i + 1) * Ga), axis=a_axis), np.take(b, range(i * Gb, (i + 1) * Gb), axis=b_axis))
            for i in range(g.GROUPS)]
    return np.concatenate(outs, axis=1)


def nchw(t):
    return np.ascontiguousarray(t.transpose(0, 3, 1, 2))


def nhwc(t):
    return np.ascontiguousarray(t.transpose(0, 2, 3, 1))


def loss_and_dy(y, t, dtype):
    """MSE on the stored output and dL/dy = 2 (y - t) / numel rounded to the case dtype."""
    d = round_to(y, dtype).astype(F32) - t.astype(F32)
    n = d.size
    loss = np.sum(d * d, dtype=F32) / F32(n)
    dy = d * F32(2) / F32(n)
    if dtype != "float32":
        dy = round_to(dy, dtype).astype(F32)
    return loss, dy


def conv2d(d, dtype, variant):
    g = Geometry()
    x = load(d, "input").astype(F32)        # [N, H, W, C]
    w = load(d, "weight").astype(F32)       # [O, KH, KW, Cg]
    t = load(d, "target")
    split = SPLIT if variant == "split_k" else 0
    wino = variant.startswith("winograd") and g.winograd()
    fft = variant == "fft" and g.fast()
    w_oihw = np.ascontiguousarray(w.transpose(0, 3, 1, 2))
    # w flipped and with its channel axes swapped: the kernel of grad_input as a forward conv
    w_back = np.ascontiguousarray(w_oihw[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    pad_back = (g.KH - 1 - g.PH, g.KW - 1 - g.PW)
    if fft:  # output and both gradients by FFTs: no im2col GEMM at all
        y = nhwc(per_group(lambda a, b: fft_conv(a, b, (g.PH, g.PW)), nchw(x), w_oihw, g, 1, 0))
    else:  # Winograd's grad_weight is im2col's
        y, xp, groups = conv_gemm_parts(x, w, g, split)
    if wino:
        m = int(variant[-1])
        y = nhwc(per_group(lambda a, b: winograd_conv(a, b, (g.PH, g.PW), m), nchw(x), w_oihw, g, 1, 0))
    if g.BIAS:
        y = y + load(d, "bias").astype(F32)
    loss, dy = loss_and_dy(y, t, dtype)
    if fft:
        gx = nhwc(per_group(lambda a, b: fft_conv(a, b, pad_back), nchw(dy), w_back, g, 1, 1))
        gw_oihw = per_group(lambda a, b: fft_grad_weight(a, b, (g.PH, g.PW), g.KH, g.KW).transpose(1, 0, 2, 3),
                            nchw(x), nchw(dy), g, 1, 1)
        gw = np.ascontiguousarray(gw_oihw.transpose(1, 0, 2, 3).transpose(0, 2, 3, 1))
    else:
        gx, gw = conv_gemm_backward(dy, xp, groups, g, split)
    if wino:
        m = int(variant[-1])
        gx = nhwc(per_group(lambda a, b: winograd_conv(a, b, pad_back, m), nchw(dy), w_back, g, 1, 1))
    save(d, "output", y, dtype)
    np.save(os.path.join(d, "loss.npy"), np.array(round_to(loss, "float32"), dtype=np.float32))
    save(d, "grad_input", gx, dtype)
    save(d, "grad_weight", gw, dtype)
    if g.BIAS:
        save(d, "grad_bias", np.sum(dy.reshape(-1, g.O), axis=0, dtype=F32), dtype)


def matmul(d, dtype, variant):
    """Split-K GEMMs for split_k; the other variants have no other algorithm for a matmul."""
    split = SPLIT if variant == "split_k" else 0
    a = load(d, "A").astype(F32)            # [M, K]
    b = load(d, "B").astype(F32)            # [N, K]
    t = load(d, "target")
    y = gemm(a, np.ascontiguousarray(b.T), split)
    loss, dy = loss_and_dy(y, t, dtype)
    save(d, "output", y, dtype)
    np.save(os.path.join(d, "loss.npy"), np.array(round_to(loss, "float32"), dtype=np.float32))
    save(d, "grad_A", gemm(dy, b, split), dtype)
    save(d, "grad_B", gemm(np.ascontiguousarray(dy.T), a, split), dtype)


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in VARIANTS:
        fail(f"usage: panel_algorithms.py DIR {{{'|'.join(VARIANTS)}}}")
    d, variant = sys.argv[1], sys.argv[2]
    dtype = os.environ.get("VALIDATE_DTYPE", "")
    if dtype not in ("float32", "bfloat16", "float16"):
        fail(f"VALIDATE_DTYPE={dtype!r} is not float32, bfloat16 or float16")
    if os.environ.get("VALIDATE_PROTOCOL", "1") != "1":
        fail("training cases (protocol 2) are not part of the panel")
    op = os.environ.get("VALIDATE_OP")
    if op == "conv2d":
        conv2d(d, dtype, variant)
    elif op == "matmul":
        matmul(d, dtype, variant)
    else:
        fail(f"VALIDATE_OP={op!r}: the panel computes conv2d and matmul")


if __name__ == "__main__":
    main()
