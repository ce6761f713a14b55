#!/bin/sh
# Run a reference set through the Fortran example with `validate run --backend exec`, then compare.
#   run_example.sh VALIDATE_BIN EXAMPLE_BIN REF OUT LAYOUTS [extra `validate run` options...]
# Exit status: that of `validate compare` (0 all gates pass, 1 a gate failed, 2 bad input), or the
# failing `validate run`'s.
set -eu
if [ $# -lt 5 ]; then
  echo "usage: $0 VALIDATE_BIN EXAMPLE_BIN REF OUT LAYOUTS [validate run options...]" >&2
  exit 2
fi
validate=$1 example=$2 ref=$3 out=$4 layouts=$5
shift 5
rm -rf "$out"   # a run directory is written whole; never mix with an earlier run
set -x
"$validate" run --backend exec --cmd "$example {dir}" --layout "$layouts" --ref "$ref" --out "$out" "$@"
"$validate" compare "$ref" "$out"
