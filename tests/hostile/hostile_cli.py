#!/usr/bin/env python3
"""Hostile files through the CLI (docs/reliability.md).

usage: hostile_cli.py VALIDATE_BIN SOURCE_DIR WORK_DIR GROUP
GROUP: manifest | metadata | npy | cases (one ctest entry each, so ctest -j runs them side by side;
every process that links LibTorch spends about a second in its static initialisers).

Copies the committed smoke set (references/smoke), breaks one file at a time and runs
`validate verify`, `validate list`, `validate generate --cases` and `validate run --ref` on it.
Every structural problem (manifest, metadata, case file) must give exit 2 and a message naming the
file and the problem; a broken .npy is a per-file mismatch (verify) or a per-case error (run): exit 1,
same message rules. No command may crash, hang, or take more memory than the file it was given:
peak RSS (wait4) must stay within a small margin of a clean `verify` on the same set, and files that
claim terabytes or are 100 MB long must not move it.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time

BIN, SRC, WORK, GROUP = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
SMOKE = os.path.join(SRC, "references", "smoke")
INPUT = "float32/k0072_ic008_conv2d_input.npy"
META = "float32/k0072_ic008_metadata.json"

failures = []
checks = 0


def run(args, timeout=120):
    """Runs the CLI; returns (exit code, stdout+stderr, peak RSS in MB of that child)."""
    start = time.time()
    p = subprocess.Popen([BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = b""
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return -999, out.decode(errors="replace") + f"\n[killed after {time.time() - start:.0f}s]", 0.0
    # communicate() reaped it; the children's rusage accumulates, so measure with wait4 where we can.
    return p.returncode, out.decode(errors="replace"), p.maxrss_mb


class Popen(subprocess.Popen):
    maxrss_mb = 0.0

    def _try_wait(self, wait_flags):
        try:
            pid, sts, ru = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            return (self.pid, 0)
        if pid == self.pid:
            self.maxrss_mb = ru.ru_maxrss / 1024.0
        return (pid, sts)


subprocess.Popen = Popen


def check(name, args, rc, needles, rss_margin_mb=None, timeout=120):
    global checks
    checks += 1
    got_rc, out, rss = run(args, timeout)
    problems = []
    if got_rc != rc:
        problems.append(f"exit {got_rc}, expected {rc}")
    for n in needles:
        if n not in out:
            problems.append(f"output lacks {n!r}")
    base = BASELINE.get(args[0], 0.0)
    if rss_margin_mb is not None and rss > base + rss_margin_mb:
        problems.append(f"peak RSS {rss:.0f} MB > {args[0]} on the clean set {base:.0f} MB + {rss_margin_mb} MB")
    status = "ok" if not problems else "FAIL"
    print(f"[{status}] {name}: exit {got_rc}, {rss:.0f} MB")
    if problems:
        failures.append(name)
        print("    " + "; ".join(problems))
        print("    " + out.strip().replace("\n", "\n    ")[:2000])


def fresh(name):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(SMOKE, d, symlinks=True)
    return d


def load(path):
    with open(path) as f:
        return json.load(f)


def save(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)


def sparse(path, size, head=b"{"):
    os.remove(path) if os.path.lexists(path) else None
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def npy(dict_text, data=b"", version=1):
    h = dict_text.encode() + b"\n"
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(h)) + h + data


def rehash(d, rel):
    """Makes the manifest agree with a file we rewrote, so only the content check can object."""
    m = load(os.path.join(d, "manifest.json"))
    with open(os.path.join(d, rel), "rb") as f:
        b = f.read()
    m["files"][rel] = {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()}
    save(os.path.join(d, "manifest.json"), m)


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

help_rc, help_out, _ = run(["--help"])
# Subcommands whose module is not in this build are stubs described "(not available: ...)".
has_generate = "generate (not available" not in help_out
has_run = "run (not available" not in help_out

good = fresh("good")
rc, out, _ = run(["verify", good])
if rc != 0:
    print("the untouched smoke set does not verify:\n" + out)
    sys.exit(1)
# Peak RSS of each command on the clean set (the largest of two runs): a hostile file may not raise it
# by more than MARGIN, whatever size it claims or is.
BASELINE = {}


def baseline(cmd, args):
    BASELINE[cmd] = max(run(args)[2], run(args)[2])


MARGIN = 24  # MB
print(f"generate: {'yes' if has_generate else 'no'}, run: {'yes' if has_run else 'no'}")
# ---------------------------------------------------------------------------------------------
# Manifests: exit 2, message names manifest.json and the problem.
if GROUP == "manifest":
    baseline("verify", ["verify", good])
    baseline("list", ["list", good])
    for tag, key, problem, cmds in [
        ("dotdot", "../outside.npy", "leaves the directory", ["verify", "list", "run", "merge"]),
        ("dotdot_deep", "float32/../../outside.npy", "leaves the directory", ["verify"]),
        ("absolute", "/etc/passwd", "absolute path", ["verify"]),
        ("nul", "float32/a\u0000/../../x", "NUL byte", ["verify"]),
    ]:
        d = fresh("manifest_" + tag)
        m = load(os.path.join(d, "manifest.json"))
        m["files"][key] = {"size": 1, "sha256": "00"}
        save(os.path.join(d, "manifest.json"), m)
        for cmd in cmds:
            if cmd == "run":
                if has_run:
                    check(f"run: manifest name {tag}", ["run", "--backend", "oracle", "--ref", d, "--out", d + "_run"], 2,
                          [os.path.join(d, "manifest.json"), problem])
            elif cmd == "merge":
                check(f"merge: manifest name {tag}", ["merge", d + "_merged", d], 2,
                      [os.path.join(d, "manifest.json"), problem])
            else:
                check(f"{cmd}: manifest name {tag}", [cmd, d], 2, [os.path.join(d, "manifest.json"), problem], MARGIN)

    for tag, text, problem, cmds in [
        ("array", "[]", 'no "files" object', ["verify", "list"]),
        ("files_list", '{"files": []}', 'no "files" object', ["verify"]),
        # `validate list` used to throw on this one (value("size", 0) on a string): terminate, exit 134.
        ("size_string", None, '"size" is not a non-negative integer', ["verify", "list"]),
        ("entry_string", None, "has no sha256 string", ["verify"]),
        ("number_overflow", '{"files": {}, "x": 1e400}', "invalid JSON", ["verify"]),
        ("truncated", '{"files": {"a": ', "invalid JSON", ["verify"]),
    ]:
        d = fresh("manifest_" + tag)
        path = os.path.join(d, "manifest.json")
        if text is None:
            m = load(path)
            if tag == "size_string":
                m["files"][INPUT]["size"] = "big"
            else:
                m["files"][INPUT] = "deadbeef"
            save(path, m)
        else:
            with open(path, "w") as f:
                f.write(text)
        for cmd in cmds:
            check(f"{cmd}: manifest {tag}", [cmd, d], 2, [path, problem], MARGIN)

    d = fresh("manifest_100mb")
    sparse(os.path.join(d, "manifest.json"), 100 << 20)
    for cmd in ["verify", "list"]:
        check(f"{cmd}: 100 MB manifest", [cmd, d], 2, [os.path.join(d, "manifest.json"), "larger than"], MARGIN)

    d = fresh("manifest_devzero")
    os.remove(os.path.join(d, "manifest.json"))
    os.symlink("/dev/zero", os.path.join(d, "manifest.json"))
    check("verify: manifest -> /dev/zero", ["verify", d], 2, [os.path.join(d, "manifest.json"), "not a regular file"],
          MARGIN, timeout=60)

# ---------------------------------------------------------------------------------------------
# Metadata: exit 2 from verify, list and run, naming the metadata file.
def meta_case(tag, mutate, problem, cmds=("verify",)):
    d = fresh("meta_" + tag)
    path = os.path.join(d, META)
    m = mutate(load(path))
    with open(path, "w") as f:
        f.write(m if isinstance(m, str) else json.dumps(m))
    rehash(d, META)
    for cmd in cmds:
        if cmd == "run":
            if has_run:
                check(f"run: metadata {tag}", ["run", "--backend", "oracle", "--ref", d, "--out", d + "_run"], 2,
                      [path, problem])
        else:
            check(f"{cmd}: metadata {tag}", [cmd, d], 2, [path, problem], MARGIN)


def setp(m, path, v):
    o = m
    for k in path[:-1]:
        o = o[k]
    o[path[-1]] = v
    return m


if GROUP == "metadata":
    baseline("verify", ["verify", good])
    baseline("list", ["list", good])
    meta_case("not_object", lambda m: "[1, 2, 3]", "must be a JSON object", ("verify", "list"))
    # Was SIGFPE (division by zero in hout()) in verify, list and run.
    meta_case("stride0", lambda m: setp(m, ["ops", "conv2d", "params", "stride"], [0, 1]),
              "stride and dilation must be >= 1", ("verify", "list", "run"))
    meta_case("groups_string", lambda m: setp(m, ["ops", "conv2d", "params", "groups"], "1"), "groups must be an integer")
    meta_case("float_dim", lambda m: setp(m, ["ops", "conv2d", "tensors", "input", "shape"], [1, 8, 32, 1e300]),
              "must hold integers")
    meta_case("huge_padding", lambda m: setp(m, ["ops", "conv2d", "params", "padding"], [4611686018427387904, 1]),
              "too large", ("verify", "list"))
    meta_case("negative_M", lambda m: setp(m, ["ops", "matmul", "params", "M"], -5), "must be >= 1")
    # Was a path traversal: verify and run read <set>/float32/../../outside_conv2d_input.npy.
    meta_case("name_dotdot", lambda m: setp(m, ["case"], "../../outside"), "no paths", ("verify", "list", "run"))
    meta_case("name_absolute", lambda m: setp(m, ["case"], "/tmp/x"), "no paths")
    meta_case("name_nul", lambda m: setp(m, ["case"], "k0072\u0000/../x"), "no paths")

    # 100 MB of metadata (its manifest entry left as it was): refused by its size. (Left out of the
    # manifest, it is never read at all: a set is exactly what its manifest lists.)
    d = fresh("meta_100mb")
    sparse(os.path.join(d, META), 100 << 20)
    for cmd in ["verify", "list"]:
        check(f"{cmd}: 100 MB metadata", [cmd, d], 2, [os.path.join(d, META), "larger than"], MARGIN)

# ---------------------------------------------------------------------------------------------
# .npy inputs: verify reports a MISMATCH naming the file and the problem (exit 1); run reports the
# case as an error naming the file and the problem (exit 1). Nothing is allocated from the header.
if GROUP == "npy":
    baseline("verify", ["verify", good])
    if has_run:
        baseline("run", ["run", "--backend", "oracle", "--ref", good, "--out", good + "_run", "--progress", "0"])
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"
    good_input = open(os.path.join(SMOKE, INPUT), "rb").read()
    data = good_input[10 + struct.unpack("<H", good_input[8:10])[0]:]
    npy_cases = [
        ("header_past_eof", good_input[:8] + b"\xff\x7f" + good_input[10:200], "runs past the end of the file", True),
        ("huge_shape", npy(header % ("<f4", "False", "(1099511627776,)"), data), "truncated data", True),
        ("overflow_shape", npy(header % ("<f4", "False", "(4294967296, 4294967296, 4294967296)"), data),
         "more elements than can be addressed", True),
        ("negative_dim", npy(header % ("<f4", "False", "(1, -8, 32, 32)"), data), "negative dimension", False),
        ("float_dim", npy(header % ("<f4", "False", "(1, 8.0, 32, 32)"), data), "non-integer dimension", False),
        ("big_endian", npy(header % (">f4", "False", "(1, 8, 32, 32)"), data), "big-endian dtype '>f4'", False),
        ("object", npy(header % ("|O", "False", "(1, 8, 32, 32)"), data), "unsupported dtype '|O'", True),
        ("unknown_descr", npy(header % ("<i8", "False", "(1, 8, 32, 32)"), data), "unsupported dtype '<i8'", False),
        ("truncated", good_input[:-3], "truncated data", False),
        ("trailing", good_input + b"\0" * 5, "5 trailing bytes", False),
        ("not_npy", b"hello", "not a .npy file", False),
    ]
    for tag, blob, problem, through_run in npy_cases:
        d = fresh("npy_" + tag)
        path = os.path.join(d, INPUT)
        with open(path, "wb") as f:
            f.write(blob)
        rehash(d, INPUT)
        check(f"verify: npy {tag}", ["verify", d], 1, ["MISMATCH " + path, problem], MARGIN)
        if has_run and through_run:
            check(f"run: npy {tag}", ["run", "--backend", "oracle", "--ref", d, "--out", d + "_run", "--progress", "0"],
                  1, ["FAILED float32/k0072_ic008 conv2d", path, problem], MARGIN)

    # Fortran order is read, not refused: the same values stored column-major verify clean.
    d = fresh("npy_fortran")
    n, c, h, w = 1, 8, 32, 32
    vals = struct.unpack("<%df" % (len(data) // 4), data)
    fdata = bytearray(len(data))
    for i, v in enumerate(vals):
        ww, hh, cc, nn = i % w, (i // w) % h, (i // (w * h)) % c, i // (w * h * c)
        off = nn + n * (cc + c * (hh + h * ww))
        fdata[off * 4:off * 4 + 4] = struct.pack("<f", v)
    with open(os.path.join(d, INPUT), "wb") as f:
        f.write(npy(header % ("<f4", "True", "(1, 8, 32, 32)"), bytes(fdata)))
    rehash(d, INPUT)
    check("verify: Fortran-order input with the same values", ["verify", d], 0, ["0 mismatch(es)"], MARGIN)

# ---------------------------------------------------------------------------------------------
# Case files through generate (LibTorch builds only): exit 2, message names the case file.
if GROUP == "cases":
    if not has_generate:
        print("hostile_cli: SKIP: this build has no `validate generate` (no LibTorch)")
        sys.exit(77)
    cdir = os.path.join(WORK, "cases")
    os.makedirs(cdir, exist_ok=True)
    tiny = os.path.join(cdir, "tiny_bad.json")
    with open(tiny, "w") as f:
        f.write("[]")
    baseline("generate", ["generate", "--cases", tiny, "--out", os.path.join(WORK, "gen_tiny")])

    def case_file(tag, text, problem):
        path = os.path.join(cdir, tag + ".json")
        with open(path, "w") as f:
            f.write(text)
        check(f"generate: case file {tag}", ["generate", "--cases", path, "--out", os.path.join(WORK, "gen_" + tag),
                                             "--progress", "0"], 2, [path, problem], MARGIN)

    case_file("not_object", "[1]", "must be a JSON object")
    case_file("wrong_type", '{"cases": [{"batch": "2"}]}', "'batch' must be an integer")
    # Was SIGFPE: the sweep named its cases (K = C/groups*KH*KW) before checking groups.
    case_file("groups0_sweep", '{"defaults": {"groups": 0}, "sweep": {"in_channels": [8]}}', "groups=0 must divide")
    case_file("stride0", '{"cases": [{"stride": [0, 1]}]}', "stride and dilation must be >= 1")
    case_file("overflow", '{"cases": [{"padding": 4611686018427387904}]}', "too large")
    case_file("huge_tensor", '{"cases": [{"batch": 2147483647, "in_channels": 2147483647}]}', "more than 2^36 elements")
    case_file("name_dotdot", '{"cases": [{"name": "../../outside"}]}', "no paths")
    case_file("name_absolute", '{"cases": [{"name": "/tmp/x"}]}', "no paths")
    case_file("name_nul", '{"cases": [{"name": "a\\u0000b"}]}', "no paths")
    case_file("number_overflow", '{"seed": 1e400, "cases": [{}]}', "invalid JSON")
    big = os.path.join(cdir, "big.json")
    sparse(big, 100 << 20)
    check("generate: 100 MB case file", ["generate", "--cases", big, "--out", os.path.join(WORK, "gen_big")], 2,
          [big, "larger than"], MARGIN)
    zero = os.path.join(cdir, "zero.json")
    os.symlink("/dev/zero", zero)
    check("generate: case file -> /dev/zero", ["generate", "--cases", zero, "--out", os.path.join(WORK, "gen_zero")], 2,
          [zero, "not a regular file"], MARGIN, timeout=60)

print(f"hostile_cli {GROUP}: {checks - len(failures)}/{checks} checks passed")
if failures:
    print("FAILED: " + ", ".join(failures))
    sys.exit(1)
shutil.rmtree(WORK, ignore_errors=True)
