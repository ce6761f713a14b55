#!/usr/bin/env python3
"""How a run's output errors move with K against their bound, over a whole sweep and windows of it.

For each dtype and op of a `validate compare --json` report, M = the largest |error|/bound of each
output (the `error_bound` check's value) divided by sqrt(2 ln N), fitted as log M against log K by
least squares over every case and over windows of consecutive K: the slope compare's K-trend fits
(harness/compare/src/compare_k_trend.cpp), here for passing tensors too and per window, which is
how the spread of correct stacks' slopes in docs/evidence.md ("Rounding-sized failures") was
measured.

usage: k_slopes.py REPORT.json [--window N] [--dtype D] [--op OP]
"""
import argparse
import json
import math

import numpy as np


def fit(points):
    x = np.log([k for k, _ in points])
    y = np.log([m for _, m in points])
    slope, icept = np.polyfit(x, y, 1)
    r = y - (slope * x + icept)
    se = math.sqrt((r @ r) / (len(x) - 2) / ((x - x.mean()) @ (x - x.mean())))
    return slope, se


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report")
    ap.add_argument("--window", type=int, default=6, help="consecutive K per window (default 6)")
    ap.add_argument("--dtype")
    ap.add_argument("--op")
    args = ap.parse_args()
    groups = {}
    for e in json.load(open(args.report))["entries"]:
        if e["role"] != "output" or (args.dtype and e["dtype"] != args.dtype) or (args.op and e["op"] != args.op):
            continue
        value = next((c["value"] for c in e["checks"] if c["name"] == "error_bound"), None)
        n = math.prod(e["shape"])
        if value and value > 0 and n > 1 and e.get("K", 0) > 0:
            groups.setdefault((e["dtype"], e["op"]), []).append((e["K"], value / math.sqrt(2 * math.log(n))))
    print("| dtype | op | K | slope | se |")
    print("|---|---|---|---:|---:|")
    for (dtype, op), pts in sorted(groups.items()):
        pts.sort()
        if len({k for k, _ in pts}) < 3:
            continue
        spans = [(0, len(pts))] + [(i, i + args.window) for i in range(0, len(pts) - args.window + 1)]
        for lo, hi in spans:
            s, se = fit(pts[lo:hi])
            print(f"| {dtype} | {op} | {pts[lo][0]:g}..{pts[hi - 1][0]:g} ({hi - lo}) | {s:+.2f} | {se:.2f} |")


if __name__ == "__main__":
    main()
