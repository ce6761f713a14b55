#!/usr/bin/env python3
"""What the `rounding_bias` check of `validate compare` catches, on a reference set.

The float64 oracle's run of SET (`validate run --backend oracle`) is compared as it is (no
rounding_bias check may fail), then
  trunc   with every bfloat16 output and gradient stored by truncation (round toward zero to
          bfloat16, the low 16 bits of the float32 value dropped): each tensor's z and threshold;
  sweep   with every gradient (or, --role outputs, every output) times (1 - eps), for eps on a grid
          of 1, 1.5, 2, 3, 5, 7 per decade from 1e-6 to 7e-2: the smallest eps whose rounding_bias
          check fails, per tensor ("-" when none up to 7e-2).
Each rewritten file's manifest entry is rehashed.

usage: bias_floor.py --validate BIN --ref SET --work DIR [--role gradients|outputs]
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess

import numpy as np

GRID = [m * 10.0 ** d for d in range(-6, -1) for m in (1, 1.5, 2, 3, 5, 7)]


def plant(src, dst, role, edit):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    m = json.load(open(os.path.join(dst, "manifest.json")))
    for rel in sorted(r for r in m["files"] if r.endswith(".npy")):
        base = rel.split("/")[-1]
        if not (("_grad_" in base) if role == "gradients" else base.endswith("_output.npy")):
            continue
        path = os.path.join(dst, rel)
        a = edit(rel, np.load(path))
        if a is None:
            continue
        np.save(path, a)
        data = open(path, "rb").read()
        m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    json.dump(m, open(os.path.join(dst, "manifest.json"), "w"), indent=2)


def checks(args, run):
    out = os.path.join(args.work, "report.json")
    subprocess.run([args.validate, "compare", args.ref, run, "--json", out], capture_output=True)
    for e in json.load(open(out))["entries"]:
        if not (e["tensor"].startswith("grad_") if args.role == "gradients" else e["tensor"] == "output"):
            continue
        for c in e.get("checks", []):
            if c["name"] == "rounding_bias":
                yield e["id"], c


def truncate(rel, a):
    if not rel.startswith("bfloat16/"):
        return None
    return (a.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(a.dtype)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--validate", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--role", default="gradients", choices=("gradients", "outputs"))
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    oracle = os.path.join(args.work, "oracle")
    shutil.rmtree(oracle, ignore_errors=True)
    subprocess.run([args.validate, "run", "--backend", "oracle", "--progress", "0", "--ref", args.ref, "--out", oracle],
                   check=True, capture_output=True)
    failed = [i for i, c in checks(args, oracle) if not c["passed"]]  # of the role
    print(f"oracle: {len(failed)} rounding_bias failures {failed}")
    run = os.path.join(args.work, "planted")
    plant(oracle, run, args.role, truncate)
    print("| tensor (bfloat16 truncated) | z | threshold | verdict |\n|---|---:|---:|---|")
    for i, c in checks(args, run):
        if i.startswith("bfloat16/"):
            print(f"| {i} | {c['value']:.1f} | {c['limit']:.3g} | {'pass' if c['passed'] else 'FAIL'} |")
    first = {}
    for eps in GRID:
        plant(oracle, run, args.role, lambda rel, a: (a.astype(np.float64) * (1 - eps)).astype(a.dtype))
        for i, c in checks(args, run):
            first.setdefault(i, None)
            if not c["passed"] and first[i] is None:
                first[i] = eps
    print(f"| tensor | smallest bias caught (x (1 - eps)) |\n|---|---:|")
    for i in sorted(first):
        print(f"| {i} | {first[i]:.2g} |" if first[i] else f"| {i} | - |")


if __name__ == "__main__":
    main()
