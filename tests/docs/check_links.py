"""ctest docs.links: every relative link of README.md, docs/*.md and examples/**/README.md names a
file or directory that exists, and every #anchor a heading of the target page (GitHub's anchor
rule: lower case, punctuation other than '-' and '_' dropped, spaces to '-'); and that no
Markdown page of the repository links or points outside it (../shared).
check_links.py SOURCE_DIR"""
import glob
import os
import re
import sys

src = os.path.abspath(sys.argv[1])
pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md"))) \
    + sorted(glob.glob(os.path.join(src, "examples", "**", "README.md"), recursive=True))


def strip_code(text):
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def heading_anchors(path):
    # Headings keep their code spans' text: GitHub drops only the backticks.
    out = set()
    in_code = False
    for line in open(path, encoding="utf-8").read().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"#{1,6}\s+(.*)", line)
        if m:
            title = m.group(1).strip().lower().replace("`", "")
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


bad, checked = [], 0
for page in pages:
    text = strip_code(open(page, encoding="utf-8").read())
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        rel = os.path.relpath(page, src)
        checked += 1
        if not os.path.exists(full):
            bad.append(f"{rel}: ({target}): {os.path.relpath(full, src)} does not exist")
        elif anchor and (not full.endswith(".md") or anchor not in heading_anchors(full)):
            bad.append(f"{rel}: ({target}): no heading '#{anchor}' in {os.path.relpath(full, src)}")

# The repository documents itself: no page, code block included, may send a reader outside it
# (a contract in a sibling directory is not there for anyone who clones the repository).
skip = ("build", ".deps", ".git", "out", "third_party_carry")
every_md = [p for p in glob.glob(os.path.join(src, "**", "*.md"), recursive=True)
            if os.path.relpath(p, src).split(os.sep)[0] not in skip and not os.path.relpath(p, src).startswith("build")]
for page in sorted(every_md):
    rel = os.path.relpath(page, src)
    raw = open(page, encoding="utf-8").read()
    for n, line in enumerate(raw.splitlines(), 1):
        if "../shared" in line:
            bad.append(f"{rel}:{n}: points at ../shared, outside the repository: {line.strip()}")
    for target in re.findall(r"\]\(([^)\s]+)\)", strip_code(raw)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        full = os.path.normpath(os.path.join(os.path.dirname(page), target.partition("#")[0]))
        if os.path.relpath(full, src).startswith(".."):
            bad.append(f"{rel}: ({target}) points outside the repository")
for b in bad:
    print("FAIL:", b)
print(f"docs.links: {checked} relative links in {len(pages)} pages, {len(bad)} broken; "
      f"{len(every_md)} pages checked for links outside the repository")
sys.exit(1 if bad else 0)
