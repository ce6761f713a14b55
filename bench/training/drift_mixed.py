"""Mixed precision: how far bfloat16/float16 SGD trajectories trained as torch.autocast
trains them (float32 master parameters and optimizer; the forward on the parameters cast to the
narrow dtype; output, dL/dy and gradients rounded to it) drift from the same recipe in float64
arithmetic (the oracle: casts of the parameters, the output and the gradients only), and how far a
planted "dW applied in the filter layout" update is off. The basis of the bfloat16/float16
`loss_curve` r0 in policies/default.json (docs/training.md, "The loss curve").

    /usr/bin/python3 bench/training/drift_mixed.py      # about a minute on 2 cores

Columns: the worst relative loss error over 100 steps divided by sqrt(1 + step) (what the gate
r0 * sqrt(1 + step) is compared with), for the autocast-style stack ("ref"), a float32 stack that
sums the channels in another order ("reorder") and a stack whose masters are themselves narrow
("pure": every update rounded to the dtype); then the planted update's error at steps 1 and 2.
"""
import math
import torch

torch.set_num_threads(1)
F = torch.nn.functional


class RoundForwardOnly(torch.autograd.Function):
    """Rounds to the narrow dtype in the forward; passes dL/dy through unrounded (the oracle)."""

    @staticmethod
    def forward(ctx, t, dt):
        return t.to(dt).to(t.dtype)

    @staticmethod
    def backward(ctx, g):
        return g, None


def narrow(t, dt):  # differentiable cast: its backward rounds the incoming gradient too
    return t.to(dt).to(t.dtype)


def trajectory(stack, dt, seed, lr, steps=100, bug=False, mom=0.9, wd=1e-4,
               N=2, C=6, H=7, W=9, O=8, KH=3, KW=2, G=2):
    comp = torch.float64 if stack == "oracle" else torch.float32
    g = torch.Generator().manual_seed(seed)
    w = (torch.randn(O, C // G, KH, KW, generator=g, dtype=torch.float64) * 0.3).to(dt).to(comp).requires_grad_()
    b = (torch.randn(O, generator=g, dtype=torch.float64) * 0.1).to(dt).to(comp).requires_grad_()
    opt = torch.optim.SGD([w, b], lr=lr, momentum=mom, weight_decay=wd)
    losses = []
    for s in range(steps):
        gs = torch.Generator().manual_seed(seed * 1000 + s)
        x = torch.randn(N, C, H, W, generator=gs, dtype=torch.float64).to(dt).to(comp)
        wr, br = narrow(w, dt), narrow(b, dt)
        if stack == "reorder":  # input channels reversed within each group: another summation order
            cg = C // G
            p = torch.cat([torch.arange(cg).flip(0) + k * cg for k in range(G)])
            y = F.conv2d(x[:, p], wr[:, torch.arange(cg).flip(0)], br, 1, 1, 1, G)
        else:
            y = F.conv2d(x, wr, br, 1, 1, 1, G)
        y = RoundForwardOnly.apply(y, dt) if stack == "oracle" else narrow(y, dt)
        t = torch.randn(y.shape, generator=gs, dtype=torch.float64).to(comp)
        loss = F.mse_loss(y, t)
        opt.zero_grad()
        loss.backward()
        if bug:  # dW held in KRSC (O, KH, KW, I) bytes, applied to OIHW weights
            w.grad.copy_(w.grad.permute(0, 2, 3, 1).contiguous().view(w.shape))
        opt.step()
        if stack == "pure":
            with torch.no_grad():
                w.copy_(w.to(dt).to(comp))
                b.copy_(b.to(dt).to(comp))
        losses.append(loss.item())
    return losses


def rel(a, r):
    return [abs(x - y) / abs(y) for x, y in zip(a, r)]


def over_sqrt(e):
    return max(v / math.sqrt(1 + i) for i, v in enumerate(e))


for dt in (torch.bfloat16, torch.float16):
    print(f"=== {dt}")
    for lr in (0.01, 0.05, 0.2, 0.5):
        for seed in (1, 2, 3):
            o = trajectory("oracle", dt, seed, lr)
            cols = {k: over_sqrt(rel(trajectory(k, dt, seed, lr), o)) for k in ("ref", "reorder", "pure")}
            bad = rel(trajectory("ref", dt, seed, lr, bug=True), o)
            print(f"lr {lr:.2f} seed {seed}  " + "  ".join(f"{k} {v:.1e}" for k, v in cols.items()) +
                  f"  | planted step1 {bad[1]:.1e} step2 {bad[2]:.1e}")
