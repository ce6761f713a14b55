#!/usr/bin/python3
"""The metrics of `validate compare` computed with numpy, for the side-by-side benchmark.

Same definitions as docs/compare.md: absolute error, relative error guarded by the near-zero floor
(1% of max|ref|), ULP distance on the ordered float32 bit patterns (+0 == -0) with max / mean /
p50 / p99 / p99.9 split at the floor, Pearson correlation in float64, and the count beyond the
float32 default tolerance (rtol 5e-4 of max(|ref|, floor)). Files are memory-mapped like ours.

usage: numpy_metrics.py REF.npy RUN.npy [REF2.npy RUN2.npy ...]
"""
import sys
import time

import numpy as np


def ordered(a):
    bits = a.view(np.int32).astype(np.int64)
    mag = bits & 0x7FFFFFFF
    return np.where(bits < 0, -mag, mag)


def metrics(ref_path, run_path):
    ref = np.load(ref_path, mmap_mode="r")
    run = np.load(run_path, mmap_mode="r")
    r = np.asarray(ref, dtype=np.float32).ravel()
    x = np.asarray(run, dtype=np.float32).ravel()
    finite = np.isfinite(r) & np.isfinite(x)
    ar = np.abs(r)
    floor = max(0.01 * float(ar[np.isfinite(ar)].max()), float(np.finfo(np.float32).tiny))
    d = np.abs(x - r)
    g = np.maximum(ar, np.float32(floor))
    rel = d / g
    ulp = np.abs(ordered(x) - ordered(r))
    nz = ar < floor
    reg, near = ulp[~nz & finite], ulp[nz & finite]
    out = {
        "max_abs": float(d[finite].max()),
        "mean_abs": float(d[finite].mean(dtype=np.float64)),
        "max_rel": float(rel[finite].max()),
        "mean_rel": float(rel[finite].mean(dtype=np.float64)),
        "max_ulp": int(reg.max()) if reg.size else 0,
        "mean_ulp": float(reg.mean()) if reg.size else 0.0,
        "p50_p99_p999": [float(v) for v in np.percentile(reg, [50, 99, 99.9])] if reg.size else [0, 0, 0],
        "max_ulp_near_zero": int(near.max()) if near.size else 0,
        "pcc": float(np.corrcoef(r[finite].astype(np.float64), x[finite].astype(np.float64))[0, 1]),
        "beyond": int((d > np.float32(5e-4) * g).sum()),
        "nan_mismatch": int((np.isnan(r) != np.isnan(x)).sum()),
    }
    return out


def main():
    files = sys.argv[1:]
    if not files or len(files) % 2:
        print(__doc__)
        return 2
    total = 0.0
    for i in range(0, len(files), 2):
        t0 = time.perf_counter()
        m = metrics(files[i], files[i + 1])
        s = time.perf_counter() - t0
        total += s
        print(f"{files[i + 1]:40s} {s:8.3f} s  max_abs {m['max_abs']:.3g}  max_ulp {m['max_ulp']}  "
              f"p99 {m['p50_p99_p999'][1]:.0f}  pcc {m['pcc']:.9f}  beyond {m['beyond']}")
    print(f"total {total:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
