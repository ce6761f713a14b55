#!/usr/bin/env bash
# ctest docs.examples: the gate examples of the README and docs/, run as written against the smoke
# references, with the outcome the text promises.
#   doc_examples.sh VALIDATE_BIN SOURCE_DIR WORK_DIR
# - every VALIDATE_GATES="..." in README.md and docs/*.md, each word passed as `compare --gate` (as
#   scripts/nightly.sh passes them), and every concrete `--gate KEY=VALUE` in README.md: the float64
#   oracle run of references/smoke passes them (exit 0, 0 failed), and each override reaches the
#   report's resolved gates (so an example that silently gates nothing fails here);
# - every `--gate` of docs/reliability.md's "What validate cannot prove": an exact-fill smoke set's
#   oracle run passes it, and the random-fill oracle run (close, not exact) fails it.
set -euo pipefail
bin=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" run --backend oracle --ref "$src/references/smoke" --out "$work/run" --progress 0 >/dev/null
"$bin" generate --cases "$src/cases/smoke.json" --fill exact --out "$work/exact_ref" --progress 0 >/dev/null
"$bin" run --backend oracle --ref "$work/exact_ref" --out "$work/exact_run" --progress 0 >/dev/null

# Prints one line per example: FILE<TAB>GATE WORDS (space-separated).
extract() {
  python3 - "$src" "$1" <<'EOF'
import glob, os, re, sys
src, what = sys.argv[1], sys.argv[2]
concrete = re.compile(r"^[A-Za-z0-9_.]+=[A-Za-z0-9_.+-]+$")  # no KEY/VALUE/[...] placeholders
def text(p): return open(p, encoding="utf-8").read()
if what == "nightly":
    for p in [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md"))):
        for m in re.finditer(r'VALIDATE_GATES="([^"]*)"', text(p)):
            print(f"{os.path.relpath(p, src)}\t{m.group(1)}")
elif what == "readme":
    for g in re.findall(r"--gate[ =]([^`\s)]+)", text(os.path.join(src, "README.md"))):
        if concrete.match(g):
            print(f"README.md\t{g}")
elif what == "exact":
    t = text(os.path.join(src, "docs", "reliability.md"))
    start = t.index("## What validate cannot prove")
    section = t[start:t.index("\n## ", start + 1)]
    for g in re.findall(r"--gate[ =]([^`\s)]+)", section):
        if concrete.match(g):
            print(f"docs/reliability.md\t{g}")
EOF
}

# compare REF RUN with the gate words; prints "rc failed" and checks each word reached the report.
run_gates() {
  local ref=$1 run=$2 words=$3 args=() rc=0
  for g in $words; do args+=(--gate "$g"); done
  "$bin" compare "$ref" "$run" "${args[@]}" --json "$work/report.json" -q >/dev/null 2>"$work/err.txt" || rc=$?
  [ "$rc" -le 1 ] || fail "compare $ref $run ${args[*]}: exit $rc: $(cat "$work/err.txt")"
  python3 - "$work/report.json" "$rc" $words <<'EOF'
import json, sys
report, rc, words = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3:]
entries = report["entries"]
failed = sum(1 for e in entries if e["failed"])
for w in words:
    selector, value = w.split("=", 1)
    *scope, key = selector.split(".")
    want = None if value == "none" else float(value)
    hit = [e for e in entries
           if all(s in (e["dtype"], e["op"], e["role"], e["tensor"]) for s in scope)
           and key in e["gates"] and e["gates"][key] == want]
    if not hit:
        sys.exit(f"FAIL: --gate {w} reached no entry's gates (a selector or key that gates nothing)")
print(rc, failed)
EOF
}

n=0
for what in nightly readme; do
  while IFS=$'\t' read -r file words; do
    [ -n "$words" ] || continue
    read -r rc failed < <(run_gates "$src/references/smoke" "$work/run" "$words")
    [ "$rc" = 0 ] && [ "$failed" = 0 ] ||
      fail "$file: gates '$words' on the smoke set's oracle run: exit $rc, $failed failed (the text says it passes)"
    echo "ok: $file: '$words' passes the smoke set's oracle run"
    n=$((n + 1))
  done < <(extract $what)
done
while IFS=$'\t' read -r file words; do
  read -r rc failed < <(run_gates "$work/exact_ref" "$work/exact_run" "$words")
  [ "$rc" = 0 ] && [ "$failed" = 0 ] ||
    fail "$file: '$words' on an exact-fill set's oracle run: exit $rc, $failed failed (the text says it passes)"
  read -r rc failed < <(run_gates "$src/references/smoke" "$work/run" "$words")
  [ "$rc" = 1 ] && [ "$failed" -gt 0 ] ||
    fail "$file: '$words' on the random-fill oracle run: exit $rc, $failed failed (the text says a close result fails)"
  echo "ok: $file: '$words' passes the exact-fill run and fails the random-fill one ($failed failed)"
  n=$((n + 1))
done < <(extract exact)
[ "$n" -ge 4 ] || fail "only $n gate examples found in README.md and docs/ (expected at least 4): did the text move?"
echo "docs.examples: $n gate examples behave as documented"
