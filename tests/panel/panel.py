#!/usr/bin/env python3
"""Runs the correct-stack panel through `validate run --backend exec` and `validate compare`.

  panel.py check VARIANT  --validate BIN --panel-c BIN --ref SET --work DIR [--known FILE]
      One correct variant: `compare` (plain, and with --oracle, the float64 oracle's run of the
      same set) must fail exactly the (mode, check) pairs FILE lists for it — none for most. A
      failure that appears or one that disappears both fail the test: the file is the record of
      what the default gate gets wrong, checked on every run.
  panel.py wrong VARIANT  (same options)
      One deliberately wrong variant: it must fail where its mistake shows (see WRONG).
  panel.py sweep [VARIANT...] --ref SET --work DIR ... [--keep]
      Every variant (or those named) on SET, plain and with --oracle: a table of variant x dtype
      with the checks passed and failed and the failing tensors, and each variant's seconds.

A "check" is a compare entry id (dtype/case/op/tensor) with the names of its failed gates.
"""
import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# name: (program, argument). numpy_* run panel_numpy.py (layouts_numpy.json), c_* the C program,
# "algo" panel_algorithms.py with layouts_<argument>.json.
CORRECT = {
    "numpy_blas": ("numpy", "blas"),
    "numpy_blas_dyround": ("numpy", "blas_dyround"),
    "numpy_bias_after": ("numpy", "bias_after"),
    "numpy_f64": ("numpy", "f64"),
    "c_naive": ("c", "naive"),
    "c_reversed": ("c", "reversed"),
    "c_pairwise": ("c", "pairwise"),
    "c_blocked": ("c", "blocked"),
    # Other algorithms (panel_algorithms.py, layouts_<algorithm>.json declares them).
    "numpy_winograd_f2": ("algo", "winograd_f2"),
    "numpy_winograd_f4": ("algo", "winograd_f4"),
    "numpy_winograd_f6": ("algo", "winograd_f6"),
    "numpy_fft": ("algo", "fft"),
    "numpy_split_k": ("algo", "split_k"),
}
# What must fail: TF32 operands every float32 output (and so at least one tensor of every float32
# op); the misread weight every output of every dtype.
WRONG = {
    "numpy_tf32": (("numpy", "tf32"), ("float32",)),
    "numpy_wtrans": (("numpy", "wtrans"), ("float32", "bfloat16", "float16")),
    # TF32 operands declared "any" for every conv2d tensor (layouts_tf32_any.json): the loosest
    # algorithm model (the max over Winograd F(2..6, 3) and FFT where the geometry admits them)
    # must still fail every float32 output.
    "numpy_tf32_any": (("numpy:layouts_tf32_any.json", "tf32"), ("float32",)),
}
# Wrong in the gradients only (the outputs are right): each named gradient must fail on every case
# of the dtypes, plain and with --oracle (docs/compare.md, "dL/dy's rounding, stored"), and carry
# the named diagnosis code when there is one — also where the failure is rounding-sized (at most
# 0.1% of the elements over their bound, all within the worst case of rounding: compare then
# searches the narrow arithmetic alone, harness/compare/src/compare_bound.cpp).
WRONG_GRADIENT = {
    # matmul's grad_A summed in a bfloat16 accumulator: named as one (narrow_accumulation)
    "numpy_grad_a_bf16acc": (("numpy", "grad_a_acc"), ("bfloat16",), ("matmul/grad_A",), "narrow_accumulation"),
    # conv2d's grad_weight (over n, oh, ow) and grad_input (im2col + GEMM + col2im) summed in the
    # case dtype's accumulator, bfloat16 and float16: named as one, with its format and order
    "numpy_grad_conv_acc": (("numpy", "grad_conv_acc"), ("bfloat16", "float16"),
                            ("conv2d/grad_weight", "conv2d/grad_input"), "narrow_accumulation"),
    # dL/dy rounded to an 8-bit float (E4M3) before the backward pass: every gradient moves
    "numpy_dy_fp8": (("numpy", "dy_fp8"), ("bfloat16",), ("matmul/grad_A",), None),
    # conv2d's sum truncated to the case dtype before the bias is added: the output of every case
    # with a bias fails element by element, against the stored bias-after term ("The bias added
    # after the sum, stored"; the noise model's term passed every element, the rounding-bias test
    # alone caught the tensor)
    "numpy_bias_trunc": (("numpy", "bias_trunc"), ("bfloat16", "float16"), ("conv2d/output",), None),
}
WRONG.update({k: (v[0], v[1]) for k, v in WRONG_GRADIENT.items()})
# A policy that must accept a wrong variant's float32 checks: policies/tf32.json is how a user says
# "TF32 is intended", so TF32 operands must pass it (and still fail the default).
ACCEPTED_BY = {"numpy_tf32": os.path.join(os.path.dirname(os.path.dirname(HERE)), "policies", "tf32.json")}
MODES = ("plain", "oracle")


def command(args, program, arg):
    if program.split(":")[0] == "numpy":  # "numpy:FILE": panel_numpy.py with another layout file
        cmd = f"{shlex.quote(args.python)} {shlex.quote(os.path.join(HERE, 'panel_numpy.py'))} {{dir}} {arg}"
        return cmd, os.path.join(HERE, program.split(":")[1] if ":" in program else "layouts_numpy.json")
    if program == "algo":
        cmd = f"{shlex.quote(args.python)} {shlex.quote(os.path.join(HERE, 'panel_algorithms.py'))} {{dir}} {arg}"
        return cmd, args.layouts or os.path.join(HERE, f"layouts_{arg}.json")
    return f"{shlex.quote(args.panel_c)} {{dir}} {arg}", os.path.join(HERE, "layouts_c.json")


def validate(args, *argv, log):
    with open(log, "w") as f:
        return subprocess.run([args.validate, *argv], stdout=f, stderr=subprocess.STDOUT).returncode


def die(message):
    print(f"panel.py: FAIL: {message}")
    sys.exit(1)


def oracle_run(args):
    """The float64 oracle's run of the set, made once per work directory (or --oracle-dir) and
    reference manifest."""
    out = args.oracle_dir or os.path.join(args.work, "oracle")
    want = hashlib.sha256(open(os.path.join(args.ref, "manifest.json"), "rb").read()).hexdigest()
    try:
        made_from = json.load(open(os.path.join(out, "run_info.json")))["reference"]["manifest_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        made_from = None
    if made_from != want or not os.path.exists(os.path.join(out, "manifest.json")):
        shutil.rmtree(out, ignore_errors=True)
        log = out + ".log"
        if validate(args, "run", "--backend", "oracle", "--progress", "0", "--ref", args.ref, "--out", out, log=log):
            die(f"the oracle run failed: {open(log).read()[-2000:]}")
    return out


def run_variant(args, name, program, arg, policy=None):
    """Runs one variant; returns {mode: (exit status, report)} and the run's seconds. With `policy`,
    one more mode, "policy": the float32 checks compared under that policy file."""
    out = os.path.join(args.work, name)
    shutil.rmtree(out, ignore_errors=True)
    cmd, layouts = command(args, program, arg)
    t0 = time.monotonic()
    timeout = ["--timeout", str(args.timeout)] if args.timeout else []
    rc = validate(args, "run", "--backend", "exec", "--progress", "0", "--cmd", cmd, "--layout", layouts,
                  "--ref", args.ref, "--out", out, *timeout, log=out + ".run.log")
    seconds = time.monotonic() - t0
    if rc != 0:
        die(f"{name}: validate run exited {rc}: {open(out + '.run.log').read()[-2000:]}")
    oracle = oracle_run(args)
    reports = {}
    for mode in MODES:
        js = f"{out}.{mode}.json"
        extra = ["--oracle", oracle] if mode == "oracle" else []
        rc = validate(args, "compare", args.ref, out, "-q", "--json", js, *extra, log=f"{out}.{mode}.log")
        if rc not in (0, 1):
            die(f"{name} ({mode}): validate compare exited {rc}: {open(out + '.' + mode + '.log').read()[-2000:]}")
        report = json.load(open(js))
        if report["summary"]["exit_code"] != rc:
            die(f"{name} ({mode}): exit {rc} but the report's exit_code is {report['summary']['exit_code']}")
        reports[mode] = (rc, report)
    if policy:
        js = f"{out}.policy.json"
        rc = validate(args, "compare", args.ref, out, "-q", "--only", "^float32/", "--policy", policy, "--json", js,
                      log=f"{out}.policy.log")
        reports["policy"] = (rc, json.load(open(js)) if os.path.exists(js) else {"summary": {"line": "no report"}})
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return reports, seconds


def failures(report):
    """The failed checks: {id: 'gate,gate'} (a runner error or a failed case counts as 'error')."""
    out = {}
    for e in report["entries"]:
        if e.get("failed"):
            gates = sorted(c["name"] for c in e.get("checks", []) if not c.get("passed", True))
            out[e["id"]] = ",".join(gates) or (e.get("verdict") or "failed")
    return out


def read_known(path, variant):
    """Lines 'VARIANT MODE ID GATES  # why' -> {(mode, id): gates} for this variant."""
    known = {}
    if path and os.path.exists(path):
        for raw in open(path):
            line = raw.split("#", 1)[0].split()
            if len(line) == 4 and line[0] == variant:
                if line[1] not in MODES:
                    die(f"{path}: mode {line[1]!r} is not plain or oracle: {raw.strip()}")
                known[(line[1], line[2])] = line[3]
            elif line:
                if len(line) != 4:
                    die(f"{path}: expected 'VARIANT MODE ID GATES': {raw.strip()}")
    return known


def check(args):
    program, arg = CORRECT[args.variant]
    reports, seconds = run_variant(args, args.variant, program, arg)
    known = read_known(args.known, args.variant)
    got = {}
    for mode, (rc, report) in reports.items():
        s = report["summary"]
        if s["runner_errors"] or s["not_run"] or s["passed"] == 0:
            die(f"{args.variant} ({mode}): {s['line']} — every check must run")
        print(f"{args.variant} ({mode}): exit {rc}: {s['line']}")
        for i, gates in failures(report).items():
            got[(mode, i)] = gates
    new = {k: v for k, v in got.items() if known.get(k) != v}
    gone = {k: v for k, v in known.items() if k not in got or got[k] != v}
    for (mode, i), gates in sorted(got.items()):
        print(f"  failed ({mode}): {i} [{gates}]{'  (known: ' + os.path.basename(args.known) + ')' if (mode, i) in known else ''}")
    if new or gone:
        for (mode, i), gates in sorted(new.items()):
            print(f"  NEW failure of a correct stack ({mode}): {args.variant} {mode} {i} {gates}")
        for (mode, i), gates in sorted(gone.items()):
            print(f"  listed in {args.known} but passed now ({mode}): {args.variant} {mode} {i} {gates} "
                  "— the gate improved: remove the line")
        die(f"{args.variant}: the failures of this correct stack differ from {args.known}")
    print(f"panel.py: {args.variant}: as expected ({len(got)} known failure(s)); run {seconds:.1f} s")


def wrong(args):
    (program, arg), dtypes = WRONG[args.variant]
    policy = ACCEPTED_BY.get(args.variant)
    reports, _ = run_variant(args, args.variant, program, arg, policy)
    if policy:
        rc, report = reports.pop("policy")
        if rc != 0:
            die(f"{args.variant}: compare --policy {policy} exited {rc}, expected 0 (the policy accepts it): "
                f"{report['summary']['line']}")
        print(f"{args.variant} (--policy {os.path.basename(policy)}): {report['summary']['line']}")
    if args.variant in WRONG_GRADIENT:
        return wrong_gradient(args, reports)
    for mode, (rc, report) in reports.items():
        if rc != 1:
            die(f"{args.variant} ({mode}): compare exited {rc}, expected 1: {report['summary']['line']}")
        failed = failures(report)
        ops, missed = set(), []
        for e in report["entries"]:
            if e["dtype"] in dtypes:
                ops.add((e["dtype"], e["case"], e["op"]))
                if e.get("tensor") == "output" and e["id"] not in failed:
                    missed.append(e["id"])
        if missed or not ops:
            die(f"{args.variant} ({mode}): these outputs passed: {missed or 'no entry of ' + str(dtypes)}")
        quiet = [o for o in ops if not any(i.startswith("/".join(o) + "/") for i in failed)]
        if quiet:
            die(f"{args.variant} ({mode}): ops with no failed tensor: {sorted(quiet)}")
        print(f"{args.variant} ({mode}): {report['summary']['line']}; all {len(ops)} ops of {'/'.join(dtypes)} fail")
    print(f"panel.py: {args.variant}: fails as it must")


def has_bias(ref, entry):
    """Whether the entry's op adds a bias (its case's metadata lists one)."""
    meta = json.load(open(os.path.join(ref, entry["dtype"], entry["case"] + "_metadata.json")))
    return "bias" in meta["ops"][entry["op"]]["tensors"]


def wrong_gradient(args, reports):
    _, dtypes, tensors, named = WRONG_GRADIENT[args.variant]
    for mode, (rc, report) in reports.items():
        failed = failures(report)
        ids = []
        for tensor in tensors:
            these = [e["id"] for e in report["entries"] if e["dtype"] in dtypes and e["id"].endswith("/" + tensor)
                     and (e["role"] != "output" or has_bias(args.ref, e))]
            # Each must fail its element gate: a tensor-wide test alone does not show where.
            missed = [i for i in these if "error_bound" not in failed.get(i, "").split(",")]
            print(f"{args.variant} ({mode}): {report['summary']['line']}; {tensor} failed on "
                  f"{len(these) - len(missed)} of {len(these)} cases of {'/'.join(dtypes)}")
            if missed or not these:
                die(f"{args.variant} ({mode}): {tensor} passed on {missed or 'no case of ' + str(dtypes)}")
            ids += these
        # A precision mistake must never read as rounding-sized ("no layout or precision mistake"),
        # on any failing gradient of any dtype, and the named one is named where the variant has it.
        for e in report["entries"]:
            said = (e.get("diagnosis") or {}).get("summary", "")
            cleared = "no layout or precision mistake" in said
            if e["id"] in failed and e["role"] in ("grad", "output") and cleared:
                die(f"{args.variant} ({mode}): {e['id']}'s diagnosis clears the mistake: {said}")
            profile = (e.get("diagnosis") or {}).get("profile") or {}
            if e["id"] in failed and profile.get("max_over_worst_case", 0) > 1 and "choice" not in profile \
                    and "not rounding" not in said:
                die(f"{args.variant} ({mode}): {e['id']} is beyond the worst case of rounding and its diagnosis "
                    f"does not say so: {said}")
            code = (e.get("diagnosis") or {}).get("code")
            if named and e["id"] in ids and code != named:
                die(f"{args.variant} ({mode}): {e['id']}'s diagnosis is {code!r}, not {named!r}: {said}")
            if named and e["id"] in ids:
                p = (e.get("diagnosis") or {}).get("params") or {}
                print(f"  {e['id']} ({mode}): {code} {p.get('format')} {p.get('order')}")
    print(f"panel.py: {args.variant}: fails as it must")


def bound_use(entries, role):
    """The largest error_bound check value (error / bound) over the entries of `role`: how close the
    stack came to its gate; '-' when none has one."""
    vals = [c["value"] for e in entries if e.get("role") == role
            for c in e.get("checks", []) if c.get("name") == "error_bound"]
    return f"{max(vals):.3g}" if vals else "-"


def sweep(args):
    """Rows are printed as each variant finishes, so a long sweep's table grows as it goes."""
    names = args.variants or list(CORRECT) + list(WRONG)
    print("| variant | mode | dtype | passed | failed | largest error / bound (outputs, gradients) | failing checks |")
    print("|---|---|---|---:|---:|---|---|", flush=True)
    cells, seconds_of = [], {}
    for name in names:
        program, arg = CORRECT[name] if name in CORRECT else WRONG[name][0]
        reports, seconds_of[name] = run_variant(args, name, program, arg)
        for mode, (rc, report) in reports.items():
            failed = failures(report)
            for dtype in sorted({e["dtype"] for e in report["entries"]}):
                entries = [e for e in report["entries"] if e["dtype"] == dtype]
                bad = [e["id"] for e in entries if e["id"] in failed]
                text = "; ".join(f"{'/'.join(i.split('/')[1:])} [{failed[i]}]" for i in bad)
                if len(text) > 400:
                    text = text[:400] + " …"
                print(f"| {name} | {mode} | {dtype} | {len(entries) - len(bad)} | {len(bad)} | "
                      f"{bound_use(entries, 'output')}, {bound_use(entries, 'grad')} | {text} |", flush=True)
                if name in CORRECT and bad:
                    cells.append((name, mode, dtype))
    print()
    for name, seconds in seconds_of.items():
        print(f"# {name}: validate run {seconds:.1f} s")
    print(f"panel.py: {len(cells)} (variant, mode, dtype) cells of correct stacks with failures")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("check", "wrong", "sweep"))
    p.add_argument("variants", nargs="*")
    p.add_argument("--validate", required=True)
    p.add_argument("--panel-c", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--ref", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--known", default=os.path.join(HERE, "known_failures.txt"))
    p.add_argument("--layouts", help="the layout file of the panel_algorithms.py variants instead of their own "
                   "(layouts_numpy.json declares no algorithm: each run judged under the direct model)")
    p.add_argument("--oracle-dir", help="the float64 oracle's run of --ref, used as it is when it was made from "
                   "that set (ctest's panel.oracle_run makes it once for every test); made there otherwise")
    p.add_argument("--keep", action="store_true", help="keep the runs (the default deletes each after comparing)")
    p.add_argument("--timeout", type=int, default=0,
                   help="seconds one program may take (validate run --timeout; default: run's own, 600 s): the "
                        "C variants' naive loops take longer on the default sweep's largest cases")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    args.work = os.path.abspath(args.work)
    if args.what == "sweep":
        bad = [v for v in args.variants if v not in CORRECT and v not in WRONG]
        if bad:
            p.error(f"unknown variant(s) {bad}; known: {list(CORRECT) + list(WRONG)}")
        return sweep(args)
    if len(args.variants) != 1:
        p.error("check and wrong take one variant")
    args.variant = args.variants[0]
    table = CORRECT if args.what == "check" else WRONG
    if args.variant not in table:
        p.error(f"{args.variant} is not a {'correct' if args.what == 'check' else 'wrong'} variant: {list(table)}")
    return check(args) if args.what == "check" else wrong(args)


if __name__ == "__main__":
    main()
