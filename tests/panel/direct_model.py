#!/usr/bin/env python3
"""A correct Winograd run judged under the direct model tells no false story.

  direct_model.py VARIANT --validate BIN --python PY --ref SET --work DIR

Runs panel_algorithms.py VARIANT (a float32 Winograd or FFT convolution, correct) with the layout
file of the direct stacks (layouts_numpy.json: no "algorithms", so compare assumes direct sums),
then compares it plain and with the float64 oracle's run. Passing or failing is allowed; what is
checked is the story: every failing entry's diagnosis names no mistake (code "none") and says the
failure is rounding-sized ("no layout or precision mistake explains"), and no layout hypothesis is
named anywhere. Exit 0 when that holds, 1 with the offending entries otherwise.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, log):
    with open(log, "w") as f:
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode


def story_problems(report):
    bad = []
    failed = 0
    for e in report["entries"]:
        if e.get("verdict") != "failed":
            continue
        failed += 1
        dx = e.get("diagnosis") or {}
        summary = dx.get("summary", "")
        if dx.get("code", "none") != "none" or dx.get("matches"):
            bad.append(f"{e['id']}: names a mistake: {dx.get('code')}: {summary[:200]}")
        elif not summary.startswith("no layout or precision mistake explains"):
            bad.append(f"{e['id']}: not called rounding-sized: {summary[:200]}")
    return failed, bad


def main():
    p = argparse.ArgumentParser()
    p.add_argument("variant")
    p.add_argument("--validate", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--oracle-dir", help="the float64 oracle's run of --ref, made beforehand (ctest's "
                   "panel.oracle_run); without it the run is made in --work")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    out = os.path.join(a.work, "run")
    cmd = f"{shlex.quote(a.python)} {shlex.quote(os.path.join(HERE, 'panel_algorithms.py'))} {{dir}} {a.variant}"
    if run([a.validate, "run", "--backend", "exec", "--progress", "0", "--overwrite", "--cmd", cmd, "--layout",
            os.path.join(HERE, "layouts_numpy.json"), "--ref", a.ref, "--out", out], out + ".log"):
        sys.exit(f"direct_model.py: the {a.variant} run failed: {open(out + '.log').read()[-2000:]}")
    oracle = a.oracle_dir or os.path.join(a.work, "oracle")
    if not a.oracle_dir and run([a.validate, "run", "--backend", "oracle", "--progress", "0", "--overwrite", "--ref", a.ref, "--out",
            oracle], oracle + ".log"):
        sys.exit(f"direct_model.py: the oracle run failed: {open(oracle + '.log').read()[-2000:]}")
    problems, total = [], 0
    for mode, extra in (("plain", []), ("oracle", ["--oracle", oracle])):
        js = os.path.join(a.work, f"{mode}.json")
        rc = run([a.validate, "compare", a.ref, out, *extra, "--json", js], os.path.join(a.work, f"{mode}.log"))
        if rc not in (0, 1):
            sys.exit(f"direct_model.py: compare ({mode}) exited {rc}: {open(os.path.join(a.work, mode + '.log')).read()[-2000:]}")
        failed, bad = story_problems(json.load(open(js)))
        total += failed
        problems += [f"({mode}) {b}" for b in bad]
    for b in problems:
        print(b)
    print(f"direct_model.py: {a.variant}: {total} failing entries under the direct model, {len(problems)} with a false story")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
