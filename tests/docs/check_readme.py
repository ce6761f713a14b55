"""ctest docs.readme_workflows and docs.sweep_size: the README's workflows can be followed one after
the other, and every page gives the default sweep the size it has.

check_readme.py SOURCE_DIR workflows
  Every workflow of README.md's "## Workflows" (a paragraph that starts with a bold title, with
  the code blocks and inline commands that follow it up to the next title) uses reference and run
  folders of its own (ref-sweep/, run-train/, ...): `generate --out` and `run --out` refuse a
  folder that is not empty, so a folder one workflow fills makes the next one that names it fail.
check_readme.py SOURCE_DIR sizes
  Every place that states the size of the whole default sweep (cases/default.json, bfloat16 and
  float32) states the size docs/performance.md measured ("30 cases, N GB"), rounded to 0.1 GB."""
import glob
import os
import re
import sys

src, what = os.path.abspath(sys.argv[1]), sys.argv[2]


def read(rel):
    return open(os.path.join(src, rel), encoding="utf-8").read()


def workflows():
    text = read("README.md")
    start = text.index("\n## Workflows\n")
    section = text[start:text.index("\n## ", start + 1)]
    # Blocks: fenced code kept whole, prose split at blank lines.
    blocks = re.split(r"(```.*?```)", section, flags=re.S)
    flows, current = [], None
    for b in blocks:
        if b.startswith("```"):
            if current is not None:
                current["code"].append(b)
            continue
        for para in re.split(r"\n\s*\n", b):
            title = re.match(r"\s*\*\*([^*]+)\*\*", para)
            if title:
                current = {"title": title.group(1).strip(), "code": []}
                flows.append(current)
            if current is not None:
                current["code"] += re.findall(r"`([^`]+)`", para)
    # A folder: ref.../ or run.../ standing alone (not inside another path, not a file name).
    folder = re.compile(r"(?<![\w./-])((?:ref|run)[\w-]*)/(?=[\s`'\"]|$)")
    users = {}
    for f in flows:
        for d in sorted({m for c in f["code"] for m in folder.findall(c)}):
            users.setdefault(d, []).append(f["title"])
    bad = [f"{d}/ is used by {len(t)} workflows: " + "; ".join(t) for d, t in sorted(users.items()) if len(t) > 1]
    if len(flows) < 5 or not users:
        bad.append(f"found {len(flows)} workflows and {len(users)} folders in README.md: did the section move?")
    for b in bad:
        print("FAIL:", b)
    print(f"docs.readme_workflows: {len(flows)} workflows, folders "
          + ", ".join(f"{d}/ ({t[0]})" for d, t in sorted(users.items())))
    return 1 if bad else 0


# Where a page states the whole default sweep's size: (file, pattern whose group is the figure).
SIZE_CLAIMS = [
    ("README.md", r"--cases cases/default\.json --out \S+ --direct-io\s+# machine A \(about [\d.]+ s, ([\d.]+) GB\)"),
    ("README.md", r"--cases\s+cases/default\.json --out \S+` \(about ([\d.]+) GB;"),
    ("docs/cli.md", r"cases named `k\{K:04d\}_ic\{ic:03d\}`\); it writes about ([\d.]+) GB"),
    ("docs/performance.md", r"The whole default sweep \(`cases/default\.json`, bfloat16 and float32: 30 cases, ([\d.]+) GB"),
    ("docs/python.md", r"needs about \*\*([\d.]+) GB\*\* of disk"),
    ("docs/python.md", r"--cases cases/default\.json --out \S+\s+# 30 cases, about ([\d.]+) GB"),
    ("docs/workflows.md", r"generating costs more than keeping ([\d.]+) GB"),
    ("docs/evidence.md", r"the sweep has no float16; ([\d.]+) GB\s+with scales"),
    ("examples/ci/gitlab-ci.yml", r"float32 and\n# bfloat16, ([\d.]+) GB\) takes about"),
    ("examples/ci/gitlab-ci.yml", r"restore those ([\d.]+) GB around every job"),
]


def sizes():
    measured = re.search(r"--out /tmp/ref --progress 0`:\s+30 cases, ([\d.]+) GB", read("docs/performance.md"))
    if not measured:
        print("FAIL: docs/performance.md has no measured size of the default sweep (\"30 cases, N GB\")")
        return 1
    want = f"{float(measured.group(1)):.1f}"
    bad = []
    for rel, pattern in SIZE_CLAIMS:
        m = re.search(pattern, read(rel))
        if not m:
            bad.append(f"{rel}: the statement of the sweep's size ({pattern}) is gone: update this list")
        elif f"{float(m.group(1)):.1f}" != want:
            bad.append(f"{rel}: says the default sweep is {m.group(1)} GB; it is {want} GB (docs/performance.md)")
    # The size before the error-bound scales were stored, given as the whole sweep's anywhere else.
    pages = ["README.md", "examples/ci/gitlab-ci.yml"] + [os.path.relpath(p, src) for p in sorted(glob.glob(os.path.join(src, "docs", "*.md")))]
    for rel in pages:
        for n, line in enumerate(read(rel).splitlines(), 1):
            if re.search(r"(?<![\d.])6\.6 GB", line):
                bad.append(f"{rel}:{n}: 6.6 GB is the sweep without its error-bound scales: {line.strip()}")
    for b in bad:
        print("FAIL:", b)
    print(f"docs.sweep_size: {len(SIZE_CLAIMS)} statements of the default sweep's size, {len(bad)} wrong (it is {want} GB)")
    return 1 if bad else 0


sys.exit({"workflows": workflows, "sizes": sizes}[what]())
