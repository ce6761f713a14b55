#!/usr/bin/env python3
"""Detection power of `validate compare`'s gate: the smallest planted relative perturbation that fails.

For each case (dtype/case) a clean run is made by the float64 oracle (`validate run --backend
oracle --only`). Then, for each output and gradient of that case, the run's file is rewritten with
a relative perturbation eps planted into
  elem_max     the element of largest |reference| (the best-conditioned one),
  elem_median  an element of median |reference| (a typical one),
  row          the last-axis line through the largest element (a row of a matrix, a W line of an
               activation),
  tensor       every element,
each planted value being run * (1 + eps) rounded to the case dtype (so a run file never holds a
value its dtype cannot; the oracle keeps bfloat16 cases' results in float32, so there the baseline
is the exact value rounded to bfloat16, what a correct stack returns), the run's manifest entry
rehashed, and `compare --only '^ID$'` asked for
its verdict. eps is bisected on a log scale between 1e-9 (must pass) and 1 (must fail); the table
gives the smallest failing eps found (resolution: --steps halvings of the 9 decades).

The gate measured is that of the binary given with --validate, so the same command run with two
builds compares two gates.

With --declare OP:TENSOR=ALGORITHM (comma-separated), the clean run's record declares that algorithm
for those results (what an exec layout file's "algorithms" or the cuDNN runner records), so the bound
measured is the algorithm's model (docs/compare.md, "Algorithm-aware bounds"): how much a declared
Winograd, FFT or split-K computation costs in detection power. The values stay the oracle's.

usage: detection.py --validate BIN --ref SET --work DIR [--cases REGEX] [--tensors NAMES] [--steps N]
                    [--declare OP:TENSOR=ALGORITHM,...]
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

FORMATS = {"float32": (24, -126), "bfloat16": (8, -126), "float16": (11, -14)}
MODES = ("elem_max", "elem_median", "row", "tensor")


def spacing(x, dtype):
    """The spacing of the dtype's values at |x| (the larger one at a power of two; the subnormal
    spacing below the normal range)."""
    p, emin = FORMATS[dtype]
    x = np.asarray(x, dtype=np.float64)
    _, e = np.frexp(x)
    e = np.where(x == 0, emin + 1, e)  # frexp gives 0 an exponent of 0
    return np.ldexp(1.0, np.maximum(e - 1, emin) - (p - 1))


def round_to(x, dtype):
    """Nearest value of the dtype, ties to even (as tests/panel/panel_numpy.py)."""
    x = np.asarray(x, dtype=np.float64)
    q = spacing(x, dtype)
    return np.rint(x / q) * q


def die(message):
    print(f"detection.py: {message}", file=sys.stderr)
    sys.exit(2)


def sh(*argv, log):
    with open(log, "w") as f:
        return subprocess.run(list(argv), stdout=f, stderr=subprocess.STDOUT).returncode


def set_cells(ref, pattern):
    """The dtype/case cells of the reference set `ref` whose name matches `pattern`."""
    manifest = json.load(open(os.path.join(ref, "manifest.json")))
    cells = sorted({os.path.dirname(f) + "/" + re.sub(r"_metadata\.json$", "", os.path.basename(f))
                    for f in manifest["files"] if f.endswith("_metadata.json")})
    return [c for c in cells if re.search(pattern, c)]


def oracle_run(validate, ref, out, cell):
    """A clean run of one cell by the float64 oracle into `out` (replaced); dies naming its log."""
    shutil.rmtree(out, ignore_errors=True)
    if sh(validate, "run", "--backend", "oracle", "--progress", "0", "--ref", ref, "--out", out,
          "--only", f"^{cell}$", log=out + ".log"):
        die(f"oracle run of {cell} failed: {open(out + '.log').read()[-1500:]}")


def rehash(run, rel):
    p = os.path.join(run, "manifest.json")
    m = json.load(open(p))
    data = open(os.path.join(run, rel), "rb").read()
    m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    with open(p + ".tmp", "w") as f:
        json.dump(m, f, indent=2)
    os.replace(p + ".tmp", p)


def declare(run, rel, algorithms):
    """Writes `algorithms` ({op: {tensor: name}}) into the run record `rel` and rehashes it."""
    p = os.path.join(run, rel)
    record = json.load(open(p))
    for op, tensors in algorithms.items():
        if op in record["ops"]:
            record["ops"][op].setdefault("info", {}).setdefault("algorithms", {}).update(tensors)
    with open(p, "w") as f:
        json.dump(record, f)
    rehash(run, rel)


def parse_declare(text):
    out = {}
    for item in filter(None, (text or "").split(",")):
        m = re.fullmatch(r"(\w+):(\w+)=([\w:]+)", item.strip())
        if not m:
            die(f"--declare: {item!r} is not OP:TENSOR=ALGORITHM")
        out.setdefault(m.group(1), {})[m.group(2)] = m.group(3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--validate", required=True, help="the validate binary whose gate is measured")
    ap.add_argument("--ref", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cases", default=".", help="regex over dtype/case (default: every case)")
    ap.add_argument("--tensors", default="output,grad_input,grad_weight,grad_bias,grad_A,grad_B")
    ap.add_argument("--ops", default="conv2d,matmul")
    ap.add_argument("--steps", type=int, default=10, help="bisection steps over log10 eps in [-9, 0]")
    ap.add_argument("--declare", help="OP:TENSOR=ALGORITHM,...: the algorithms the clean run declares")
    args = ap.parse_args()
    algorithms = parse_declare(args.declare)
    tensors, ops = args.tensors.split(","), args.ops.split(",")
    cells = set_cells(args.ref, args.cases)
    if not cells:
        die(f"no case of {args.ref} matches {args.cases!r}")
    os.makedirs(args.work, exist_ok=True)
    print(f"# gate of {args.validate}; ref {args.ref}; eps resolution 10^(9/2^{args.steps})"
          + (f"; declared {args.declare}" if algorithms else ""))
    print("| dtype | case | K | op | tensor | numel | elem_max | elem_median | row | tensor |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---:|", flush=True)
    for cell in cells:
        dtype, case = cell.split("/")
        meta = json.load(open(os.path.join(args.ref, dtype, case + "_metadata.json")))
        run = os.path.join(args.work, "clean")
        oracle_run(args.validate, args.ref, run, cell)
        if algorithms:
            declare(run, f"{dtype}/{case}_run.json", algorithms)
        for op in ops:
            if op not in meta.get("ops", {}):
                continue
            for t in tensors:
                rel = f"{dtype}/{case}_{op}_{t}.npy"
                path = os.path.join(run, rel)
                if not os.path.exists(path):
                    continue
                tid = f"{dtype}/{case}/{op}/{t}"
                orig = np.load(path)
                ref = np.load(os.path.join(args.ref, rel)).astype(np.float64)
                flat = np.abs(ref).ravel()
                imax = int(np.argmax(flat))
                imed = int(np.argsort(flat, kind="stable")[flat.size // 2])
                row = np.zeros(orig.shape, dtype=bool)
                lead = np.unravel_index(imax, orig.shape)[:-1]
                row[lead] = True
                where = {"elem_max": np.eye(1, flat.size, imax, dtype=bool).reshape(orig.shape),
                         "elem_median": np.eye(1, flat.size, imed, dtype=bool).reshape(orig.shape),
                         "row": row, "tensor": np.ones(orig.shape, dtype=bool)}

                def fails(eps, mask):
                    v = orig.astype(np.float64)
                    v[mask] = round_to(v[mask] * (1 + eps), dtype)
                    np.save(path, v.astype(orig.dtype))
                    rehash(run, rel)
                    rc = sh(args.validate, "compare", args.ref, run, "-q", "--no-diagnose", "--only", f"^{tid}$",
                            log=os.path.join(args.work, "compare.log"))
                    if rc not in (0, 1):
                        die(f"compare {tid} exited {rc}: {open(os.path.join(args.work, 'compare.log')).read()[-1500:]}")
                    return rc == 1

                if fails(0.0, where["tensor"]):
                    # the exact values rounded to the case dtype fail: nothing to measure (the
                    # oracle stores bfloat16 cases' results as float32; planting rounds to bfloat16)
                    print(f"| {dtype} | {case} | {meta['ops'][op].get('K', '')} | {op} | {t} | {orig.size} | "
                          f"unperturbed, the oracle's values rounded to {dtype} already fail | | | |", flush=True)
                    continue
                found = {}
                for mode in MODES:
                    mask = where[mode]
                    if not fails(1.0, mask):
                        found[mode] = "> 1"
                        continue
                    lo, hi = -9.0, 0.0
                    for _ in range(args.steps):
                        mid = (lo + hi) / 2
                        if fails(10 ** mid, mask):
                            hi = mid
                        else:
                            lo = mid
                    found[mode] = f"{10 ** hi:.2g}"
                np.save(path, orig)
                rehash(run, rel)
                print(f"| {dtype} | {case} | {meta['ops'][op].get('K', '')} | {op} | {t} | {orig.size} | "
                      + " | ".join(found[m] for m in MODES) + " |", flush=True)
        shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    main()
