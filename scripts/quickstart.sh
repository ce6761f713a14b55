#!/usr/bin/env bash
# The README's first command: dependencies, build, then the main job on the smoke case set —
# generate LibTorch references, run them through the float64 oracle in the fortran layouts, and
# compare. Ends with a summary of what was written.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Only the CLI and the backend modules it loads at run time; scripts/test.sh builds the tests.
scripts/build.sh --runtime
out=${VALIDATE_OUT:-out/smoke}
rm -rf "$out"
mkdir -p "$out"
build/validate generate --cases cases/smoke.json --out "$out/ref"
build/validate verify "$out/ref"
build/validate run --backend oracle --layout fortran --ref "$out/ref" --out "$out/run-oracle"
build/validate compare "$out/ref" "$out/run-oracle" --json "$out/compare.json" --md "$out/compare.md" \
  --html "$out/compare.html" --junit "$out/compare.xml"
echo
echo "quickstart: references in $out/ref ($(du -sh "$out/ref" | cut -f1)), oracle run in $out/run-oracle,"
echo "            reports: $out/compare.{json,md,html,xml}"
