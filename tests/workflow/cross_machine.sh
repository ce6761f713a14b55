#!/usr/bin/env bash
# The cross-machine workflow of the README, on one machine: "machine A" generates with one LibTorch
# thread, the set travels as a tarball to "machine B" (another absolute path), where it must still
# verify, and a regeneration there with another thread count must give the same input hashes.
# Then B runs the moved set through LibTorch and compares it against A's references.
# usage: cross_machine.sh VALIDATE_BIN WORK_DIR CASE_FILE
set -euo pipefail
bin=$1 work=$2 cases=$3
rm -rf "$work" && mkdir -p "$work/machine-a" "$work/elsewhere/machine-b"
fail() { echo "cross_machine: FAIL: $*"; exit 1; }
OMP_NUM_THREADS=1 "$bin" generate --cases "$cases" --out "$work/machine-a/ref" --progress 0 > /dev/null
grep -q '"threads": 1' "$work/machine-a/ref/system_info.json" || fail "machine A did not run with 1 thread"
tar -C "$work/machine-a" -czf "$work/ref.tgz" ref
rm -rf "$work/machine-a"  # nothing may still point at A's path
tar -C "$work/elsewhere/machine-b" -xzf "$work/ref.tgz"
moved="$work/elsewhere/machine-b/ref"
"$bin" verify "$moved" || fail "the moved set does not verify"
OMP_NUM_THREADS=2 "$bin" generate --cases "$cases" --out "$work/elsewhere/machine-b/regen" --progress 0 > /dev/null
grep -q '"threads": 2' "$work/elsewhere/machine-b/regen/system_info.json" || fail "machine B did not run with 2 threads"
# Inputs never come from LibTorch: their hashes must be identical whatever the thread count or path.
for meta in "$moved"/*/*_metadata.json; do
  rel=${meta#"$moved"/}
  a=$(grep -A0 '"input_hashes"' -A20 "$meta" | tr -d ' \n')
  b=$(grep -A0 '"input_hashes"' -A20 "$work/elsewhere/machine-b/regen/$rel" | tr -d ' \n')
  [ "$a" = "$b" ] || fail "$rel: input hashes differ between machine A and machine B"
done
# Machine B runs the moved references through a backend and compares: the last step of the workflow.
"$bin" run --backend torch --device cpu --ref "$moved" --out "$work/elsewhere/machine-b/run" --progress 0 > "$work/run.log" 2>&1 \
  || fail "run on machine B: $(tail -3 "$work/run.log")"
"$bin" compare "$moved" "$work/elsewhere/machine-b/run" > "$work/compare.log" 2>&1 \
  || fail "compare on machine B: $(tail -5 "$work/compare.log")"
rm -rf "$work"
echo "cross_machine: passed"
