#!/usr/bin/python3
"""numpy on the conversions bench_layout times, and the side-by-side table.

Run with Debian's /usr/bin/python3 (it has numpy; the python3 first on PATH may not):

  /usr/bin/python3 bench/layout/compare_peers.py                 # numpy timings only
  /usr/bin/python3 bench/layout/compare_peers.py --ours ours.json [--torch torch.json] [--markdown]

--ours / --torch take Google Benchmark JSON (bench_layout / bench_layout_torch with
--benchmark_format=json, ideally --benchmark_repetitions=N: the median is used). run_bench.sh
runs all three and prints the table that docs/layouts.md quotes.

numpy is timed two ways: `view.copy()` (the idiom: allocates, so page faults are paid each time,
like LibTorch's contiguous()) and `np.copyto(out, view)` into a buffer allocated once (the same
work as ours). Each is the best of --reps runs after one warm-up. numpy copies on one thread.
GB/s is 1e9 bytes of tensor per second, each tensor counted once, as for memcpy.
"""
import argparse
import json
import sys
import time

import numpy as np

# Mirrors bench/layout/bench_cases.hpp: (id, canonical axes, canonical shape, spec, to_layout, elem size).
CASES = [
    ("act_f32/NCHW->NHWC", "NCHW", (8, 64, 256, 128), "NHWC", True, 4),
    ("act_f32/NHWC->NCHW", "NCHW", (8, 64, 256, 128), "NHWC", False, 4),
    ("act_f32/NCHW->CHWN:F", "NCHW", (8, 64, 256, 128), "CHWN:F", True, 4),
    ("act_f32/CHWN:F->NCHW", "NCHW", (8, 64, 256, 128), "CHWN:F", False, 4),
    ("act_f32/NCHW->NCHW+flip=HW", "NCHW", (8, 64, 256, 128), "NCHW+flip=HW", True, 4),
    ("wgt_f32/OIHW->WHIO:F+flip=HW", "OIHW", (2048, 1024, 3, 3), "WHIO:F+flip=HW", True, 4),
    ("wgt_f32/OIHW->HWIO:F+flip=HW", "OIHW", (2048, 1024, 3, 3), "HWIO:F+flip=HW", True, 4),
    ("wgt_f32/OIHW->OHWI", "OIHW", (2048, 1024, 3, 3), "OHWI", True, 4),
    ("mat_f32/151936x896 MK->KM", "MK", (151936, 896), "KM", True, 4),
    ("act_bf16/NCHW->NHWC", "NCHW", (8, 64, 256, 256), "NHWC", True, 2),
    ("act_f64/NCHW->NHWC", "NCHW", (8, 64, 128, 128), "NHWC", True, 8),
]
DTYPES = {2: np.uint16, 4: np.float32, 8: np.float64}  # numpy has no bfloat16: the same 2 bytes


def placement(spec, axes):
    """(memory_axes, flipped canonical axes) of a spec, by the definition in docs/layouts.md."""
    head, _, flip = spec.partition("+flip=")
    letters, _, order = head.partition(":")
    perm = [axes.index(c) for c in letters]
    memory = perm[::-1] if order == "F" else perm
    return memory, [axes.index(c) for c in flip]


def view_of(case, x):
    """The strided numpy view whose C-order copy is the conversion's output."""
    _, axes, _, spec, to_layout, _ = case
    memory, flips = placement(spec, axes)
    if to_layout:
        v = x[tuple(slice(None, None, -1) if a in flips else slice(None) for a in range(x.ndim))]
        return v.transpose(memory)
    inverse = [memory.index(a) for a in range(len(memory))]
    v = x.transpose(inverse)
    return v[tuple(slice(None, None, -1) if a in flips else slice(None) for a in range(v.ndim))]


def best_of(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def numpy_timings(reps, only):
    out = {}
    memcpy_done = {}
    for case in CASES:
        cid, axes, shape, spec, to_layout, es = case
        if only and only not in cid:
            continue
        memory, _ = placement(spec, axes)
        src_shape = shape if to_layout else tuple(shape[a] for a in memory)
        x = np.arange(int(np.prod(shape)), dtype=np.int64).astype(DTYPES[es]).reshape(src_shape)
        v = view_of(case, x)
        dst = np.empty(v.shape, dtype=x.dtype)
        nbytes = x.nbytes
        t_copy = best_of(lambda: v.copy(), reps)
        t_into = best_of(lambda: np.copyto(dst, v), reps)
        if nbytes not in memcpy_done:
            flat = np.empty_like(x)
            memcpy_done[nbytes] = best_of(lambda: np.copyto(flat, x), reps)
        out[cid] = {"bytes": nbytes, "copy": nbytes / t_copy / 1e9, "copyto": nbytes / t_into / 1e9,
                    "memcpy": nbytes / memcpy_done[nbytes] / 1e9}
        print(f"numpy {cid:34s} copy() {out[cid]['copy']:6.2f} GB/s  copyto {out[cid]['copyto']:6.2f} GB/s  "
              f"(np.copyto of the same bytes {out[cid]['memcpy']:6.2f} GB/s)", file=sys.stderr)
    return out


def gbench(path):
    """name -> GB/s from Google Benchmark JSON (median when repeated, else the single run)."""
    with open(path) as f:
        doc = json.load(f)
    rates = {}
    for b in doc["benchmarks"]:
        name = b.get("run_name", b["name"]).replace("/real_time", "")
        agg = b.get("aggregate_name")
        if agg not in (None, "", "median"):
            continue
        if agg == "median" or name not in rates:
            rates[name] = b["bytes_per_second"] / 1e9
    return rates, doc.get("context", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", help="bench_layout JSON")
    ap.add_argument("--torch", help="bench_layout_torch JSON")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="", help="substring of the case ids to run")
    args = ap.parse_args()

    npy = numpy_timings(args.reps, args.only)
    if not args.ours:
        return 0
    ours, ctx = gbench(args.ours)
    torch = gbench(args.torch)[0] if args.torch else {}
    print(f"machine: {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz, "
          f"{ctx.get('date', '')}; GB/s = 1e9 bytes of tensor per second (median of repetitions); "
          f"each 'ours' is against memcpy on the same number of threads (1, and every core)\n")
    print("| conversion | size | memcpy, 1 thread | ours, 1 thread | ours / memcpy | memcpy, all cores | "
          "ours, all cores | ours / memcpy | LibTorch | numpy .copy() | numpy copyto | ours / numpy .copy() | "
          "ours / LibTorch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for case in CASES:
        cid, *_ = case
        if cid not in npy:
            continue
        nb = npy[cid]["bytes"]
        mc1, mca = ours.get(f"memcpy/{nb}/1thread"), ours.get(f"memcpy/{nb}/allthreads")
        o, o1 = ours.get(f"{cid}/ours"), ours.get(f"{cid}/ours_1thread")
        t = torch.get(f"{cid}/torch")
        fmt = lambda v: f"{v:.2f}" if v else "–"
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "–"
        pct = lambda a, b: f"{100 * a / b:.0f}%" if a and b else "–"
        print(f"| {cid} | {nb / 2**20:.0f} MiB | {fmt(mc1)} | {fmt(o1)} | {pct(o1, mc1)} | {fmt(mca)} | {fmt(o)} | "
              f"{pct(o, mca)} | {fmt(t)} | {fmt(npy[cid]['copy'])} | {fmt(npy[cid]['copyto'])} | "
              f"{ratio(o, npy[cid]['copy'])} | {ratio(o, t)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
