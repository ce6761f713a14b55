#!/usr/bin/env python3
"""The smallest one-element perturbation any sound gate can catch in a bfloat16/float16 gradient.

detection.py plants run * (1 + eps), rounded to the case dtype, into the element of largest
|reference| and bisects eps. A run file holds values of the case dtype, so eps only matters through
how many ULPs it moves that element. A gate that passes every correct stack must pass every value a
correct stack can store there, and it sees two stored values, not the float32 sums behind them:

  - the reference stores round(r), r its float32 gradient;
  - a correct stack stores round(x) with |x - r| <= Z, Z the element's stored dL/dy choice term
    (dL/dy kept or rounded: compare.md, "dL/dy's rounding, stored"; the float32 accumulation's
    share is below a bfloat16 ULP by orders and is left out).

Where r sits in its ULP is not stored, so round(x) may be any of the values within
reach = floor(Z / ULP) + 1 ULPs of round(r) (with Z < 1 ULP: the neighbour, where r lies near a
rounding boundary). The smallest eps a sound gate can fail on that element is therefore the one that
plants a value more than `reach` ULPs from the reference, planted as detection.py plants it:
round(clean * (1 + eps)), clean the oracle's value of the element. This script prints
that floor per tensor, beside detection.py's measured figure when its table is given.

usage: detection_floor.py --validate BIN --ref SET --work DIR [--table detection_table.md]
                          [--cases REGEX] [--steps N]
"""
import argparse
import json
import math
import os
import shutil
import sys

import numpy as np

from detection import FORMATS, oracle_run, round_to, set_cells, spacing

GRADIENTS = ("grad_input", "grad_weight", "grad_bias", "grad_A", "grad_B")


def floor_eps(clean, ref, reach, dtype, steps):
    """The smallest eps of detection.py's grid (10^(-9 + 9 k / 2^steps)) whose planted value
    round(clean * (1 + eps)) lies more than `reach` ULPs of ref from ref."""
    u = float(spacing(ref, dtype))
    n = 2 ** steps
    for k in range(n + 1):
        eps = 10 ** (-9 + 9 * k / n)
        if abs(float(round_to(clean * (1 + eps), dtype)) - ref) > reach * u * (1 + 1e-9):
            return eps
    return None


def measured(table):
    """detection.py's elem_max column, keyed by (dtype, case, op, tensor)."""
    out = {}
    for line in open(table):
        c = [x.strip() for x in line.split("|")]
        if len(c) > 8 and c[1] in FORMATS and c[5] in GRADIENTS:
            out[(c[1], c[2], c[4], c[5])] = c[7]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--validate", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--table", help="detection.py's table of the same set: its elem_max column is printed beside")
    ap.add_argument("--cases", default="^(bfloat16|float16)/", help="regex over dtype/case")
    ap.add_argument("--steps", type=int, default=8, help="detection.py's bisection steps (its eps grid)")
    args = ap.parse_args()
    seen = measured(args.table) if args.table else {}
    cells = [c for c in set_cells(args.ref, args.cases) if c.split("/")[0] in ("bfloat16", "float16")]
    if not cells:
        sys.exit(f"detection_floor.py: no bfloat16 or float16 case of {args.ref} matches {args.cases!r}")
    os.makedirs(args.work, exist_ok=True)
    print(f"# one-element floor of a sound gate on {args.ref}; eps grid 10^(9/2^{args.steps})")
    print("| dtype | case | op | tensor | ref (largest) | ULP / |ref| | Z / ULP | reach (ULP) | floor eps | measured |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for cell in cells:
        dtype, case = cell.split("/")
        meta = json.load(open(os.path.join(args.ref, dtype, case + "_metadata.json")))
        run = os.path.join(args.work, "clean")
        oracle_run(args.validate, args.ref, run, cell)
        for op, entry in sorted(meta.get("ops", {}).items()):
            for t in GRADIENTS:
                choice = entry.get("scales", {}).get(t, {}).get("choice")
                if not choice:
                    continue
                ref = np.load(os.path.join(args.ref, dtype, f"{case}_{op}_{t}.npy")).astype(np.float64).ravel()
                clean = np.load(os.path.join(run, dtype, f"{case}_{op}_{t}.npy")).astype(np.float64).ravel()
                z = np.load(os.path.join(args.ref, dtype, choice["file"])).astype(np.float64).ravel()
                i = int(np.argmax(np.abs(ref)))
                u = float(spacing(ref[i], dtype))
                zi = float(z[i]) * 2.0 ** choice["unit_log2"]
                reach = math.floor(zi / u) + 1
                eps = floor_eps(float(clean[i]), ref[i], reach, dtype, args.steps)
                shown = f"{eps:.2g}" if eps is not None else "> 1"  # no eps up to 1 plants beyond the reach
                rel = f"{u / abs(ref[i]):.4f}" if ref[i] != 0 else "-"
                print(f"| {dtype} | {case} | {op} | {t} | {ref[i]:.4g} | {rel} | {zi / u:.2f} | "
                      f"{reach} | {shown} | {seen.get((dtype, case, op, t), '')} |", flush=True)
        shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    main()
