"""How far a clean float32 SGD trajectory drifts from float64, and how far a
planted "dW applied in the filter layout" update is off at step 1. Python + PyTorch (eager), as a
user would check it; the numbers are the basis of docs/training.md's tolerance model.

    /usr/bin/python3 bench/training/drift.py
"""
import torch, sys, math
torch.set_num_threads(1)
def traj(dtype, seed, steps=100, bug=False, lr=0.05, mom=0.9, wd=1e-4, N=2,C=6,H=7,W=9,O=8,KH=3,KW=2,G=2, stride=1, pad=1):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(O, C//G, KH, KW, generator=g, dtype=torch.float64) * 0.3
    b = torch.randn(O, generator=g, dtype=torch.float64) * 0.1
    w = w.to(dtype).requires_grad_(); b = b.to(dtype).requires_grad_()
    opt = torch.optim.SGD([w,b], lr=lr, momentum=mom, weight_decay=wd)
    losses=[]
    for s in range(steps):
        gs = torch.Generator().manual_seed(seed*1000+s)
        x = torch.randn(N,C,H,W, generator=gs, dtype=torch.float64).to(dtype)
        y = torch.nn.functional.conv2d(x, w, b, stride, pad, 1, G)
        t = torch.randn(y.shape, generator=gs, dtype=torch.float64).to(dtype)
        loss = torch.nn.functional.mse_loss(y, t)
        opt.zero_grad(); loss.backward()
        if bug:
            # dW returned in filter layout KRSC (O,KH,KW,I) bytes, applied as OIHW
            gw = w.grad.permute(0,2,3,1).contiguous().view(w.shape)
            w.grad.copy_(gw)
        opt.step()
        losses.append(loss.item())
    return losses
for seed in [1,2,3]:
    r = traj(torch.float64, seed); a = traj(torch.float32, seed); bad = traj(torch.float32, seed, bug=True)
    rel = [abs(x-y)/abs(y) for x,y in zip(a,r)]
    relb = [abs(x-y)/abs(y) for x,y in zip(bad,r)]
    print("seed",seed,"clean f32 rel err at steps 0,1,10,50,99:", ["%.1e"%rel[i] for i in (0,1,10,50,99)], "max", "%.1e"%max(rel))
    print("        bug rel err at steps 0,1,2,10,99:", ["%.1e"%relb[i] for i in (0,1,2,10,99)])
print("--- lr sweep: max clean f32 rel loss err over 100 steps, and at step 99; bug at step 1")
for lr in [0.01, 0.05, 0.2, 0.5]:
    r = traj(torch.float64, 1, lr=lr); a = traj(torch.float32, 1, lr=lr); bad = traj(torch.float32, 1, lr=lr, bug=True)
    rel = [abs(x-y)/max(abs(y),1e-30) for x,y in zip(a,r)]
    print("lr", lr, "clean max %.1e last %.1e  loss0 %.3f loss99 %.3g   bug step1 %.1e" % (max(rel), rel[-1], r[0], r[-1], abs(bad[1]-r[1])/abs(r[1])))
