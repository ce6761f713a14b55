#!/bin/sh
# Run a reference set through the C example with one layout bug switched on, compare, and check
# that compare fails the way it should and names the mistake.
#   run_example.sh VALIDATE_BIN EXAMPLE_BIN REF OUT LAYOUTS BUG EXPECTED_STATUS [REGEX]
# BUG: none | transpose_B | fortran_order.  EXPECTED_STATUS: the exit status `validate compare`
# must give (1 for a bug: a gate failed).  REGEX (extended, case-insensitive) must occur in its
# output.  Exit 0 when all of that holds.
set -u
if [ $# -lt 7 ]; then
  echo "usage: $0 VALIDATE_BIN EXAMPLE_BIN REF OUT LAYOUTS BUG EXPECTED_STATUS [REGEX]" >&2
  exit 2
fi
validate=$1 example=$2 ref=$3 out=$4 layouts=$5 bug=$6 want=$7 regex=${8:-}
rm -rf "$out"
mkdir -p "$(dirname "$out")"
# The bug is passed as the program's second argument, so it does not depend on the harness
# passing its environment through.
echo "+ $validate run --backend exec --cmd '$example {dir} $bug' --layout $layouts --ref $ref --out $out"
"$validate" run --backend exec --cmd "$example {dir} $bug" --layout "$layouts" --ref "$ref" --out "$out" || {
  echo "run_example.sh: validate run failed (status $?); the program itself must run cleanly" >&2
  exit 1
}
echo "+ $validate compare $ref $out"
"$validate" compare "$ref" "$out" >"$out.compare.txt" 2>&1
got=$?
cat "$out.compare.txt"
if [ "$got" -ne "$want" ]; then
  echo "run_example.sh: validate compare exited $got, expected $want" >&2
  exit 1
fi
if [ -n "$regex" ] && ! grep -qiE "$regex" "$out.compare.txt"; then
  echo "run_example.sh: compare's output does not mention /$regex/" >&2
  exit 1
fi
echo "run_example.sh: BUG=$bug -> compare exit $got${regex:+, output names /$regex/}: as expected"
