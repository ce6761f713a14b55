#!/usr/bin/env python3
"""The committed reference set is in the format generate writes today.

Usage: committed_set_current.py VALIDATE CASE_FILE COMMITTED_SET WORK_DIR

Generates CASE_FILE (the committed set's) again with this build, on one thread, and
compares what each set holds, never the values (another BLAS or LibTorch rounds differently):
the files the manifest lists, and the structure of every JSON file (keys, value types, and the
values of keys that name a format, a quantity, a role, a layout or a dtype). A set written by an
older generate lacks what the new one writes (error-bound scales, new metadata keys) and fails
here with each difference named. Exit 0: same format; 1: differences; 2: cannot run.
"""
import json
import os
import shutil
import subprocess
import sys

# Keys whose values are part of the format rather than of the data.
FORMAT_KEYS = {"format", "quantity", "role", "layout", "dtype", "file", "unit", "kind", "compute_dtype"}
# Keys that describe the machine or the moment a set was made.
VOLATILE_KEYS = {"created_at", "git_commit", "os", "cpu", "compiler", "hardware_threads", "libtorch_version",
                 "libtorch_cuda", "blas", "version"}


def signature(value, key=None):
    if isinstance(value, dict):
        return {k: signature(v, k) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        kinds = sorted({json.dumps(signature(v)) for v in value})
        return ["list", kinds]
    if key in FORMAT_KEYS and isinstance(value, str):
        return value
    return type(value).__name__


def diff(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}/{k}: written by generate now, missing from the committed set")
            elif k not in b:
                out.append(f"{path}/{k}: in the committed set, no longer written by generate")
            else:
                diff(a[k], b[k], f"{path}/{k}", out)
    elif a != b:
        out.append(f"{path}: committed {json.dumps(a)[:120]}, generate writes {json.dumps(b)[:120]}")


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    validate, case_file, committed, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fresh = os.path.join(work, "set")
    cmd = [validate, "generate", "--cases", case_file, "--threads", "1", "--out", fresh, "--progress", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"cannot generate: {' '.join(cmd)}\n{r.stdout}{r.stderr}", file=sys.stderr)
        return 2
    problems = []
    files = lambda d: set(json.load(open(os.path.join(d, "manifest.json")))["files"])
    old, new = files(committed), files(fresh)
    for f in sorted(new - old):
        problems.append(f"{f}: written by generate now, missing from the committed set")
    for f in sorted(old - new):
        problems.append(f"{f}: in the committed set, no longer written by generate")
    for f in sorted(old & new):
        if f.endswith(".json"):
            diff(signature(json.load(open(os.path.join(committed, f)))),
                 signature(json.load(open(os.path.join(fresh, f)))), f, problems)
    for name in ("manifest.json",):
        diff(signature(json.load(open(os.path.join(committed, name)))),
             signature(json.load(open(os.path.join(fresh, name)))), name, problems)
    if problems:
        print(f"{committed} is not what generate writes for {case_file} now ({len(problems)} differences); "
              f"regenerate it: {validate} generate --cases {case_file} --threads 1 --out {committed} --overwrite")
        for p in problems[:40]:
            print("  " + p)
        return 1
    print(f"{committed}: same format as generate writes ({len(new)} files)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
