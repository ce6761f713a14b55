#!/usr/bin/env python3
"""The figures a GPU report's NOTES.md states, checked against the raw files beside it.

    gpu_report_claims.py REPORTS_DIR      (reports/gpu: every <date>-<gpu>/NOTES.md under it)
    gpu_report_claims.py --self-test

A NOTES.md carries a table under a heading "## Figures and their sources", one row per figure:

    | id | figure | value | file | how |
    | c1 | call 1 wall time, seconds | 218 | call1/summary.md | `wall` |

and its text marks each figure it states with the row's id in brackets, `[c1]`. For every row this
script computes `how` on `file` and requires the result to equal `value`; for every mark, the row
must exist and the paragraph holding the mark must contain the row's value exactly as written; every
row must be marked somewhere. A report whose NOTES.md has no such table fails.

`file` is a path in the report folder, or ARCHIVE:GLOB for the members of a .tar.gz that match GLOB.
`how` (in backticks; a regex may not hold a '|', write \\x7c):
    wall                      the "Wall time of this invocation: N s" of a summary.md
    rows [COL=V|COL~RE]...    the number of command lines of a verdicts.tsv matching every filter
    cell STEP COLUMN          one cell of a verdicts.tsv
    passed STEP / failed STEP a compare's count from summary.md's "- `STEP`: validate: ..." lines
    md-cell ROW N             column N (1 = the first) of the Markdown table row whose first cell is ROW
    re-first REGEX            group 1 of the first match (a string)
    re-count REGEX            the number of distinct group-1 values of all matches
    re-range REGEX            min–max of group 1 over all matches, as numbers ("a" when min = max)
    ulp-range REGEX           min–max of the float32 ULP distance between groups 1 and 2
Regexes are matched line by line. A numeric value is compared after rounding the computed number to
the significant digits the value is written with; a range is written "a–b" (an en dash).
"""
import fnmatch
import math
import os
import re
import struct
import sys
import tarfile

HEADING = "## Figures and their sources"
MARK = re.compile(r"\[(c\d+)\]")
CMD_ROW = re.compile(r"^\| ([^|]+) \| `(.*)` \| ([^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \|$")


class ClaimError(Exception):
    pass


def read_texts(report, spec):
    """[(name, text)] for a file spec: PATH or ARCHIVE:GLOB."""
    if ":" in spec:
        archive, pattern = spec.split(":", 1)
        path = os.path.join(report, archive)
        if not os.path.isfile(path):
            raise ClaimError(f"no file {archive}")
        out = []
        with tarfile.open(path, "r:gz") as tar:
            for m in tar.getmembers():
                if m.isfile() and fnmatch.fnmatch(m.name, pattern):
                    out.append((m.name, tar.extractfile(m).read().decode("utf-8", "replace")))
        if not out:
            raise ClaimError(f"no member of {archive} matches {pattern}")
        return sorted(out)
    path = os.path.join(report, spec)
    if not os.path.isfile(path):
        raise ClaimError(f"no file {spec}")
    with open(path, encoding="utf-8", errors="replace") as f:
        return [(spec, f.read())]


def tsv_rows(text):
    lines = text.splitlines()
    if not lines or lines[0].split("\t") != ["step", "command", "expect", "exit", "verdict", "seconds"]:
        raise ClaimError("not a verdicts.tsv (header step, command, expect, exit, verdict, seconds)")
    rows = []
    for n, line in enumerate(lines[1:], 2):
        cells = line.split("\t")
        if len(cells) != 6:
            raise ClaimError(f"verdicts.tsv line {n} has {len(cells)} columns, not 6")
        rows.append(dict(zip(["step", "command", "expect", "exit", "verdict", "seconds"], cells)))
    return rows


def f32_bits(x):
    i = struct.unpack("<i", struct.pack("<f", float(x)))[0]
    return i if i >= 0 else -(i & 0x7FFFFFFF)


def fmt_range(values):
    lo, hi = min(values), max(values)
    return (lo, hi)


def compute(report, spec, how):
    texts = read_texts(report, spec)
    op, _, rest = how.partition(" ")
    rest = rest.strip()
    if op == "wall":
        m = re.search(r"Wall time of this invocation: (\d+) s", texts[0][1])
        if not m:
            raise ClaimError("no wall time")
        return float(m.group(1))
    if op in ("rows", "cell"):
        rows = tsv_rows(texts[0][1])
        if op == "cell":
            step, column = rest.split()
            hits = [r for r in rows if r["step"] == step]
            if len(hits) != 1:
                raise ClaimError(f"{len(hits)} rows for step {step}")
            return hits[0][column]
        for flt in rest.split():
            if "~" in flt:
                col, rx = flt.split("~", 1)
                rows = [r for r in rows if re.search(rx, r[col])]
            else:
                col, v = flt.split("=", 1)
                rows = [r for r in rows if r[col] == v]
        return float(len(rows))
    if op in ("passed", "failed"):
        m = re.search(r"^- `" + re.escape(rest) + r"`: validate: (\d+) passed, (\d+) failed", texts[0][1], re.M)
        if not m:
            raise ClaimError(f"no compare line for {rest}")
        return float(m.group(1 if op == "passed" else 2))
    if op == "md-cell":
        key, col = rest.rsplit(" ", 1)
        for _, text in texts:
            for line in text.splitlines():
                if line.startswith("| "):
                    cells = [c.strip() for c in line.strip().strip("|").split("|")]
                    if cells[0] == key:
                        return cells[int(col) - 1]
        raise ClaimError(f"no table row {key}")
    if op in ("re-first", "re-count", "re-range", "ulp-range"):
        rx = re.compile(rest)
        groups = [m.groups() for _, text in texts for line in text.splitlines() for m in [rx.search(line)] if m]
        if not groups:
            raise ClaimError(f"nothing matches {rest}")
        if op == "re-first":
            return groups[0][0]
        if op == "re-count":
            return float(len({g[0] for g in groups}))
        if op == "re-range":
            return fmt_range([float(g[0]) for g in groups])
        return fmt_range([float(abs(f32_bits(g[0]) - f32_bits(g[1]))) for g in groups])
    raise ClaimError(f"unknown how '{op}'")


def sig_round(x, sig):
    if x == 0:
        return 0.0
    return round(x, sig - 1 - int(math.floor(math.log10(abs(x)))))


def number_matches(written, x):
    w = written.strip().replace("−", "-")
    try:
        v = float(w)
    except ValueError:
        return None
    mant = re.sub(r"[eE].*$", "", w).lstrip("+-").replace(".", "").lstrip("0") or "0"
    return math.isclose(sig_round(x, max(len(mant), 1)), v, rel_tol=1e-12, abs_tol=0.0)


def value_matches(written, got):
    if isinstance(got, tuple):
        lo, hi = got
        parts = written.split("–")
        if len(parts) == 1:
            return lo == hi and bool(number_matches(parts[0], lo))
        return len(parts) == 2 and bool(number_matches(parts[0], lo)) and bool(number_matches(parts[1], hi))
    if isinstance(got, float):
        return bool(number_matches(written, got))
    return written.strip() == got.strip()


def shown(got):
    if isinstance(got, tuple):
        return f"{got[0]:g}–{got[1]:g}"
    if isinstance(got, float):
        return f"{got:g}"
    return got


def parse_notes(text):
    """(claims {id: (figure, value, file, how)}, body text before the table)."""
    if HEADING not in text:
        raise ClaimError(f"no '{HEADING}' section")
    body, table = text.split(HEADING, 1)
    claims = {}
    for line in table.splitlines():
        if not line.startswith("| c"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 5:
            raise ClaimError(f"a claims row needs 5 cells: {line}")
        cid, figure, value, spec, how = cells
        if cid in claims:
            raise ClaimError(f"{cid} twice")
        claims[cid] = (figure, value.strip("`"), spec.strip("`"), how.strip("`"))
    if not claims:
        raise ClaimError("the claims table is empty")
    return claims, body


def states(para, value):
    """The paragraph states VALUE as a whole word ("16" is not stated by "bfloat16")."""
    text = re.sub(r"\s+", " ", para)
    return re.search(r"(?<![\w.])" + re.escape(value) + r"(?!\w)", text) is not None


def paragraphs(body):
    return [p for p in re.split(r"\n\s*\n|\n(?=\s*(?:- |\d+\. ))", body) if p.strip()]


def check_report(report):
    fails = []
    notes = os.path.join(report, "NOTES.md")
    with open(notes, encoding="utf-8") as f:
        text = f.read()
    try:
        claims, body = parse_notes(text)
    except ClaimError as e:
        return [f"{notes}: {e}"], 0
    for cid, (figure, value, spec, how) in claims.items():
        try:
            got = compute(report, spec, how)
        except (ClaimError, ValueError, KeyError, re.error) as e:
            fails.append(f"{cid} ({figure}): {spec} `{how}`: {e}")
            continue
        if value_matches(value, got):
            print(f"ok: {cid} {figure}: {value} ({spec})")
        else:
            fails.append(f"{cid} ({figure}): NOTES.md says {value}, {spec} gives {shown(got)}")
    marked = set()
    for para in paragraphs(body):
        for cid in MARK.findall(para):
            marked.add(cid)
            if cid not in claims:
                fails.append(f"[{cid}] marks a figure that the table does not list")
            elif not states(para, claims[cid][1]):
                fails.append(f"[{cid}]: its paragraph does not state the value {claims[cid][1]}")
    for cid in claims:
        if cid not in marked:
            fails.append(f"{cid} is never marked in the text")
    return fails, len(claims)


def self_test():
    assert number_matches("1.04", 1.0449) and not number_matches("1.04", 1.046)
    assert number_matches("6.1e-5", 6.1e-05) and number_matches("3.9e-3", 0.00391)
    assert number_matches("34842", 34841.9102) and number_matches("295.7", 295.709717)
    assert not number_matches("300", 295.709717)
    assert value_matches("1.04–1.23", (1.04, 1.23)) and not value_matches("1.09–1.23", (1.04, 1.23))
    assert value_matches("53", (53.0, 53.0)) and not value_matches("53", (52.0, 53.0))
    assert value_matches("conv_transpose2d", "conv_transpose2d") and not value_matches("Adam", "conv_transpose2d")
    assert f32_bits(295.709717) - f32_bits(295.709656) == 2
    assert states("in 4 [c1] of 15", "4") and not states("bfloat16 [c1]", "16") and not states("1.5", "5")
    assert paragraphs("a [c1]\nb\n\n- x [c2]\n- y") == ["a [c1]\nb", "- x [c2]", "- y"]
    print("self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    reports = sorted(os.path.join(root, d) for d in os.listdir(root)
                     if os.path.isfile(os.path.join(root, d, "NOTES.md")))
    if not reports:
        print(f"no report folder with a NOTES.md under {root}")
        return 1
    total_fail = 0
    for report in reports:
        fails, n = check_report(report)
        for f in fails:
            print(f"FAIL: {os.path.basename(report)}: {f}")
        print(f"{os.path.basename(report)}: {n} figure(s), {len(fails)} failure(s)")
        total_fail += len(fails)
    self_test()
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
