#!/usr/bin/env python3
"""The scales of an op fed a user's tensor cover its partial sums, in every order a correct stack
may sum in (docs/compare.md, "Partial sums on the data at hand").

numpy writes weights ordered along the sum (one sign over the first half of a matmul's k, over the
first kernel row or the first half of the channels of a conv2d, over the first half of a
conv_transpose2d's input channels); generate makes the set; then, in
float64 from the set's own inputs, every element's partial sums are walked forward and backward
in the (c, kh, kw) and (kh, kw, c) nestings and split into 3 and 4 ranges, and the bound's
accumulation term must cover the largest: |y| + rho >= max|s_k| for an output,
u sqrt(n) |g| + u_d S >= u sqrt(n) max|s_k| for a gradient. The data is checked to climb beyond
|y| + sqrt(sum p^2), the scale without the measured partial sums, so the test can fail.

usage: partial_sums.py VALIDATE_BIN WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

U = 2.0 ** -24


def make_set(validate, work):
    rng = np.random.default_rng(7)
    m, k, n = 5, 1152, 7
    b = np.abs(rng.standard_normal((k, n))) / np.sqrt(k)
    b[k // 2:] *= -1
    c = 64
    w_kh = np.abs(rng.standard_normal((6, c, 3, 2))) / np.sqrt(c * 6)
    w_kh[:, :, 1:] *= -1  # climbs in a (kh, kw, c) nesting
    w_c = np.abs(rng.standard_normal((6, c, 3, 2))) / np.sqrt(c * 6)
    w_c[:, c // 2:] *= -1  # climbs in a (c, kh, kw) nesting
    w_t = np.abs(rng.standard_normal((c, 7, 3, 2))) / np.sqrt(c * 6)
    w_t[c // 2:] *= -1  # conv_transpose2d's IOHW weight: climbs over its input channels
    for name, a in (("B", b), ("w_kh", w_kh), ("w_c", w_c), ("w_t", w_t)):
        np.save(os.path.join(work, name + ".npy"), a.astype(np.float32))
    conv = {"op": "conv2d", "batch": 2, "in_channels": c, "out_channels": 6, "height": 7, "width": 5,
            "kernel": [3, 2], "padding": [1, 0]}
    cases = [{"name": "mm", "op": "matmul", "M": m, "K": k, "N": n,
              "inputs": {"A": {"dist": "relu_normal"}, "B": {"dist": "npy", "file": "B.npy"}}}]
    for name in ("w_kh", "w_c"):
        cases.append(dict(conv, name="conv_" + name[2:],
                          inputs={"input": {"dist": "relu_normal"}, "weight": {"dist": "npy", "file": name + ".npy"}}))
    cases.append({"name": "convt", "op": "conv_transpose2d", "batch": 3, "in_channels": c, "height": 4, "width": 6,
                  "out_channels": 7, "kernel": [3, 2], "stride": [2, 1], "padding": [0, 1], "output_padding": [1, 0],
                  "dilation": [2, 1], "inputs": {"input": {"dist": "relu_normal"},
                                                 "weight": {"dist": "npy", "file": "w_t.npy"}}})
    with open(os.path.join(work, "cases.json"), "w") as f:
        json.dump({"format": "validate-cases/1", "seed": 3, "dtypes": ["float32", "bfloat16"], "cases": cases}, f)
    subprocess.run([validate, "generate", "--cases", os.path.join(work, "cases.json"), "--out",
                    os.path.join(work, "ref"), "--threads", "1"], check=True, stdout=subprocess.DEVNULL)


def largest_partial_sum(terms, nestings):
    """terms[..., r1, r2, ...]: the largest |partial sum| of each element over the orders."""
    nr = len(nestings[0])
    lead = terms.ndim - nr
    best = np.zeros(terms.shape[:lead])
    for nest in nestings:
        q = np.moveaxis(terms, [lead + a for a in nest], list(range(lead, terms.ndim)))
        q = q.reshape(q.shape[:lead] + (-1,))
        for seq in (q, q[..., ::-1]):
            best = np.maximum(best, np.abs(np.cumsum(seq, -1)).max(-1))
            for parts in (3, 4):  # split sums: each range's running sum, then the ranges' totals
                cuts = np.linspace(0, seq.shape[-1], parts + 1).astype(int)
                total = np.zeros(best.shape)
                for lo, hi in zip(cuts[:-1], cuts[1:]):
                    best = np.maximum(best, np.abs(np.cumsum(seq[..., lo:hi], -1)).max(-1))
                    total = total + seq[..., lo:hi].sum(-1)
                    best = np.maximum(best, np.abs(total))
    return best


class Set:
    def __init__(self, root, dtype, case):
        self.dir, self.case = os.path.join(root, dtype), case
        with open(os.path.join(self.dir, case + "_metadata.json")) as f:
            self.meta = json.load(f)

    def tensor(self, op, name):
        return np.load(os.path.join(self.dir, f"{self.case}_{op}_{name}.npy")).astype(np.float64)

    def scale(self, op, name):
        s = self.meta["ops"][op]["scales"][name]
        assert s.get("partial_sums") == {"chunks": 32}, (self.case, op, name, s)
        return np.load(os.path.join(self.dir, s["file"])).astype(np.float64) * 2.0 ** s.get("unit_log2", 0)


def covered(need, have):
    """need / have, largest (0 / 0 counts as 0)."""
    return float(np.max(np.where(have > 0, need / np.where(have > 0, have, 1), np.where(need > 0, np.inf, 0))))


def check(root):
    ratios, climbing = {}, 0
    for dtype, ud in (("float32", U), ("bfloat16", 2.0 ** -8)):
        s = Set(root, dtype, "mm")
        a, b, y = s.tensor("matmul", "A"), s.tensor("matmul", "B"), s.tensor("matmul", "output")
        terms = a[:, None, :] * b.T[None, :, :]  # [m, n, k]
        peak = largest_partial_sum(terms, [[0]])
        climbing += int((peak > np.abs(y) + np.sqrt((terms ** 2).sum(-1))).sum())
        ratios[dtype, "matmul output"] = covered(peak, np.abs(y) + s.scale("matmul", "output"))
        dy = 2 * (y - s.tensor("matmul", "target")) / y.size
        for g, t in (("grad_A", dy[:, None, :] * b[None, :, :]), ("grad_B", np.moveaxis(a[:, :, None] * dy[:, None, :], 0, -1))):
            gv = s.tensor("matmul", g)
            n = max(1.0, np.ceil(y.size * a.shape[1] / gv.size))  # as compare counts it
            ratios[dtype, "matmul " + g] = covered(U * np.sqrt(n) * largest_partial_sum(t, [[0]]),
                                                   U * np.sqrt(n) * np.abs(gv) + ud * s.scale("matmul", g))
        for case in ("conv_kh", "conv_c"):
            s = Set(root, dtype, case)
            x, w, bias = (s.tensor("conv2d", t) for t in ("input", "weight", "bias"))
            y = s.tensor("conv2d", "output")
            xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)))
            kh_n, kw_n = w.shape[2:]
            oh, ow = y.shape[2:]
            win = np.stack([np.stack([xp[:, :, i:i + oh, j:j + ow] for j in range(kw_n)], -1) for i in range(kh_n)], -2)
            terms = np.einsum("ncijab,ocab->noijcab", win, w)  # output terms over (c, kh, kw)
            nest = [[0, 1, 2], [1, 2, 0]]
            peak = largest_partial_sum(terms, nest) + np.abs(bias)[None, :, None, None]  # the bias, first or last
            climbing += int((peak > np.abs(y) + np.sqrt((terms ** 2).sum((-1, -2, -3)) + bias[None, :, None, None] ** 2)).sum())
            ratios[dtype, case + " output"] = covered(peak, np.abs(y) + s.scale("conv2d", "output"))
            dy = 2 * (y - s.tensor("conv2d", "target")) / y.size
            gw = s.tensor("conv2d", "grad_weight")
            n = max(1.0, np.ceil(y.size * w[0].size / gw.size))
            tw = np.einsum("noij,ncijab->ocabnij", dy, win)  # grad_weight terms over (n, oh, ow)
            ratios[dtype, case + " grad_weight"] = covered(U * np.sqrt(n) * largest_partial_sum(tw, nest),
                                                           U * np.sqrt(n) * np.abs(gw) + ud * s.scale("conv2d", "grad_weight"))
        s = Set(root, dtype, "convt")  # stride (2, 1), padding (0, 1), dilation (2, 1)
        x, w, bias = (s.tensor("conv_transpose2d", t) for t in ("input", "weight", "bias"))
        y = s.tensor("conv_transpose2d", "output")
        terms = np.zeros(y.shape + w.shape[:1] + w.shape[2:])  # output terms over (i, kh, kw)
        for ih in range(x.shape[2]):
            for iw in range(x.shape[3]):
                for kh in range(w.shape[2]):
                    for kw in range(w.shape[3]):
                        oh, ow = 2 * ih + 2 * kh, iw - 1 + kw
                        if oh < y.shape[2] and 0 <= ow < y.shape[3]:
                            terms[:, :, oh, ow, :, kh, kw] += x[:, :, ih, iw][:, None, :] * w[:, :, kh, kw].T[None]
        assert np.abs(terms.sum((-1, -2, -3)) + bias[None, :, None, None] - y).max() <= 1e-2 * np.abs(y).max()
        peak = largest_partial_sum(terms, [[0, 1, 2], [1, 2, 0]]) + np.abs(bias)[None, :, None, None]
        climbing += int((peak > np.abs(y) + np.sqrt((terms ** 2).sum((-1, -2, -3)) + bias[None, :, None, None] ** 2)).sum())
        ratios[dtype, "convt output"] = covered(peak, np.abs(y) + s.scale("conv_transpose2d", "output"))
    for (dtype, what), r in sorted(ratios.items()):
        print(f"{dtype:9s} {what:22s} largest partial sum / what the bound covers: {r:.3f}")
    print(f"elements whose partial sums climb beyond |y| + sqrt(sum p^2): {climbing}")
    bad = {k: r for k, r in ratios.items() if r > 1}
    assert not bad, f"partial sums beyond the bound: {bad}"
    assert climbing > 0, "the data does not climb: this test could not fail"


def main():
    validate, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    make_set(validate, work)
    check(os.path.join(work, "ref"))
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
