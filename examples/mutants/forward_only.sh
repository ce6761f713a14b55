#!/bin/sh
# A forward-only program (mutant_runner.c with MUTANT forward_only) under a layout file that names
# no gradient: compare must pass, and call the gradients "not requested", never "not run".
#   forward_only.sh VALIDATE PROGRAM REF OUT
set -u
[ $# -eq 4 ] || { echo "usage: $0 VALIDATE PROGRAM REF OUT" >&2; exit 2; }
validate=$1 program=$2 ref=$3 out=$4
here=$(dirname "$0")
rm -rf "$out" "$out.json"
"$validate" run --backend exec --cmd "$program {dir} forward_only" \
  --layout "$here/layouts_forward_only.json" --ref "$ref" --out "$out" >/dev/null || exit 1
"$validate" compare "$ref" "$out" --json "$out.json" --html "$out.html" >"$out.txt" 2>&1
status=$?
tail -1 "$out.txt"
[ "$status" -eq 0 ] || { echo "forward_only.sh: compare exited $status, expected 0" >&2; cat "$out.txt" >&2; exit 1; }
grep -q '"not_requested": [1-9]' "$out.json" || { echo "forward_only.sh: no entry is 'not requested'" >&2; exit 1; }
grep -q '"not_run": 0' "$out.json" || { echo "forward_only.sh: gradients reported 'not run'" >&2; exit 1; }
grep -q 'not requested' "$out.txt" || { echo "forward_only.sh: the summary does not say 'not requested'" >&2; exit 1; }
# HTML: a neutral "not requested" card and rows, nothing amber ("not run" card at 0 is fine).
grep -q 'class="card notrequested"' "$out.html" || { echo "forward_only.sh: no neutral 'not requested' card in the HTML" >&2; exit 1; }
grep -q 'v-not-requested' "$out.html" || { echo "forward_only.sh: no 'not requested' row in the HTML" >&2; exit 1; }
if grep -q 'class="v-not-run"' "$out.html"; then echo "forward_only.sh: amber 'not run' rows in the HTML" >&2; exit 1; fi
echo "forward_only.sh: gradients not requested, not 'not run': as expected"
