#!/usr/bin/python3
"""The peer of `validate generate`: what a user would write instead, the way the original
reference script works -- PyTorch eager (conv2d / matmul, MSE loss, autograd), numpy.save for
every tensor, hashlib.sha256 of every file for a manifest and of every input's values for the
metadata. Same cases (the sweep and defaults of a validate case file), same shapes, float32, on
every core (torch.set_num_threads(os.cpu_count())), run by run_bench.sh on the same PyTorch as
the build links (the same LibTorch and BLAS). Its RNG is torch's, so its numbers differ from ours;
only the work is the same.

    peer_generate.py --cases cases/default.json --out DIR
prints one line: seconds in total and split into inputs, compute, save+hash.
"""
import argparse, hashlib, json, math, os, time

import numpy as np
import torch
import torch.nn.functional as F


def expand(case_file):
    d = json.load(open(case_file))
    base = dict(d.get("defaults", {}))
    cases = []
    for key, values in d.get("sweep", {}).items():
        for v in values:
            c = dict(base)
            c[key] = v
            cases.append(c)
    for c in d.get("cases", []):
        cc = dict(base)
        cc.update(c)
        cases.append(cc)
    return d.get("seed", 42), cases


def save(path, t, manifest, values=None):
    a = t.detach().contiguous().numpy()
    np.save(path, a)
    with open(path, "rb") as f:
        manifest[os.path.basename(path)] = hashlib.sha256(f.read()).hexdigest()
    if values is not None:
        values[os.path.basename(path)] = hashlib.sha256(a.tobytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="cases/default.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    seed, cases = expand(args.cases)
    os.makedirs(args.out, exist_ok=True)
    manifest, values = {}, {}
    t_in = t_comp = t_io = 0.0
    t0 = time.perf_counter()
    g = torch.Generator().manual_seed(seed)
    for c in cases:
        n, ic, h, w = c.get("batch", 1), c["in_channels"], c["height"], c["width"]
        oc, (kh, kw) = c["out_channels"], c["kernel"]
        stride, pad, dil, groups = c["stride"], c["padding"], c["dilation"], c.get("groups", 1)
        k = ic // groups * kh * kw
        name = f"k{k:04d}_ic{ic:03d}"
        ho = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
        wo = (w + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
        # conv2d
        t = time.perf_counter()
        x = torch.randn(n, ic, h, w, generator=g)
        wt = torch.randn(oc, ic // groups, kh, kw, generator=g) / math.sqrt(k)
        b = torch.randn(oc, generator=g) * 0.1 if c.get("bias", True) else None
        tg = torch.randn(n, oc, ho, wo, generator=g)
        t_in += time.perf_counter() - t
        t = time.perf_counter()
        xs, ws = x.clone().requires_grad_(), wt.clone().requires_grad_()
        bs = b.clone().requires_grad_() if b is not None else None
        y = F.conv2d(xs, ws, bs, stride, pad, dil, groups)
        loss = F.mse_loss(y, tg)
        loss.backward()
        t_comp += time.perf_counter() - t
        t = time.perf_counter()
        p = os.path.join(args.out, name + "_conv2d_")
        save(p + "input.npy", x, manifest, values)
        save(p + "weight.npy", wt, manifest, values)
        if b is not None:
            save(p + "bias.npy", b, manifest, values)
        save(p + "target.npy", tg, manifest, values)
        save(p + "output.npy", y, manifest)
        save(p + "loss.npy", loss, manifest)
        save(p + "grad_input.npy", xs.grad, manifest)
        save(p + "grad_weight.npy", ws.grad, manifest)
        if bs is not None:
            save(p + "grad_bias.npy", bs.grad, manifest)
        del x, xs, y
        t_io += time.perf_counter() - t
        # matmul: the im2col GEMM of the same convolution
        m, kk, nn = n * ho * wo, k, oc
        t = time.perf_counter()
        a = torch.randn(m, kk, generator=g)
        bm = torch.randn(kk, nn, generator=g) / math.sqrt(kk)
        tg = torch.randn(m, nn, generator=g)
        t_in += time.perf_counter() - t
        t = time.perf_counter()
        As, Bs = a.clone().requires_grad_(), bm.clone().requires_grad_()
        y = As @ Bs
        loss = F.mse_loss(y, tg)
        loss.backward()
        t_comp += time.perf_counter() - t
        t = time.perf_counter()
        p = os.path.join(args.out, name + "_matmul_")
        save(p + "A.npy", a, manifest, values)
        save(p + "B.npy", bm, manifest, values)
        save(p + "target.npy", tg, manifest, values)
        save(p + "output.npy", y, manifest)
        save(p + "loss.npy", loss, manifest)
        save(p + "grad_A.npy", As.grad, manifest)
        save(p + "grad_B.npy", Bs.grad, manifest)
        del a, As, y
        t_io += time.perf_counter() - t
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump({"files": manifest, "input_values": values}, f, indent=1)
    total = time.perf_counter() - t0
    print(f"peer: {len(cases)} cases, {total:.1f}s: inputs {t_in:.1f}s, compute {t_comp:.1f}s, "
          f"save+hash {t_io:.1f}s, threads {torch.get_num_threads()}")


if __name__ == "__main__":
    main()
