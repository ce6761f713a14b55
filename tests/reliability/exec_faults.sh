#!/usr/bin/env bash
# Runner faults end to end (docs/reliability.md): `validate run --backend exec` over a copy
# of references/smoke with a program that answers every case correctly (it copies the reference's
# own results into its work dir) except six, each broken in one way:
#   float32/k0072_ic008 conv2d          crashes (SIGSEGV)
#   float32/k0144_ic016 conv2d          hangs (killed by --timeout 2)
#   float32/odd_n2_c6_h7_w9_g2 matmul   writes a NaN into output (a value: run says ok, compare fails it)
#   bfloat16/k0072_ic008 matmul         writes an output file of the wrong size
#   bfloat16/odd_n2_c6_h7_w9_g2 conv2d  writes a file into the reference set
#   float16/odd_n3_c5_h11_w6 matmul     writes its (correct) output into the run directory itself
# Checks: run exits 1 with one FAILED line per failing case naming it and what happened, the other
# 11 ops ok; compare exits 1 and fails exactly the six by name while every tensor of the other ten
# passes.
# usage: exec_faults.sh VALIDATE_BIN WORK_DIR SOURCE_DIR
set -uo pipefail
bin=$1 work=$2 src=$3
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
ref=$work/ref run=$work/run
fail() { echo "exec_faults: FAIL: $*"; exit 1; }
cp -r "$src/references/smoke" "$ref" || fail "cannot copy references/smoke"

cat > "$work/prog.sh" << 'EOF'
dir=$1 case=$2 op=$3 dtype=$4 ref=$5
# The reference's own results as raw little-endian data (the `torch` preset is canonical layout):
# an .npy 1.0 file is 10 bytes, a header of the length stored at bytes 8-9, then the data.
raw() { hlen=$(od -An -tu2 -j8 -N2 "$1" | tr -d ' '); tail -c +$((hlen + 11)) "$1" > "$2"; }
for t in output loss grad_input grad_weight grad_bias grad_A grad_B; do
  f="$ref/$dtype/${case}_${op}_$t.npy"
  if [ -f "$f" ]; then raw "$f" "$dir/$t.bin"; fi
done
case "$dtype/$case/$op" in
  float32/k0072_ic008/conv2d) echo "crashing on purpose" >&2; kill -SEGV $$ ;;
  float32/k0144_ic016/conv2d) echo "hanging on purpose" >&2; sleep 60 ;;
  float32/odd_n2_c6_h7_w9_g2/matmul)  # output[0, 5] = NaN
    printf '\000\000\300\177' | dd of="$dir/output.bin" bs=4 seek=5 conv=notrunc status=none ;;
  bfloat16/k0072_ic008/matmul) head -c 100 "$dir/output.bin" > "$dir/short"; mv "$dir/short" "$dir/output.bin" ;;
  bfloat16/odd_n2_c6_h7_w9_g2/conv2d) echo scratch > "$ref/bfloat16/scratch.txt" ;;
  float16/odd_n3_c5_h11_w6/matmul) cp "$ref/$dtype/${case}_${op}_output.npy" "$dir/../../../../$dtype/" ;;
esac
exit 0
EOF

t0=$(date +%s)
"$bin" run --backend exec --layout torch --timeout 2 --progress 0 --ref "$ref" --out "$run" \
  --cmd "sh '$work/prog.sh' {dir} {case} {op} {dtype} '$ref'" > "$work/run.log" 2>&1
rc=$?
secs=$(( $(date +%s) - t0 ))
[ $rc -eq 1 ] || fail "run exited $rc, expected 1: $(cat "$work/run.log")"
[ "$secs" -lt 120 ] || fail "run took ${secs}s: the hang was not cut at --timeout 2"
expect_run() {  # LINE-PREFIX TEXT...: a FAILED line for the op that contains every TEXT
  local line
  line=$(grep -F "FAILED $1: " "$work/run.log") || fail "no 'FAILED $1' line in: $(cat "$work/run.log")"
  shift
  for needle in "$@"; do
    case "$line" in *"$needle"*) ;; *) fail "'$needle' missing from: $line" ;; esac
  done
}
expect_run "float32/k0072_ic008 conv2d" "exited with status 139" "SIGSEGV" "stderr: crashing on purpose"
expect_run "float32/k0144_ic016 conv2d" "timed out after 2 s" "stderr: hanging on purpose"
expect_run "bfloat16/k0072_ic008 matmul" "output.bin: 100 bytes, expected 131072 bytes (float32 [1024, 32] in layout MN)"
expect_run "bfloat16/odd_n2_c6_h7_w9_g2 conv2d" \
  "the program wrote outside its work directory: $ref/bfloat16/scratch.txt (created)"
expect_run "float16/odd_n3_c5_h11_w6 matmul" \
  "the program wrote outside its work directory: $run/float16/odd_n3_c5_h11_w6_matmul_output.npy (created)"
nfailed=$(grep -c '^FAILED ' "$work/run.log")
[ "$nfailed" -eq 5 ] || fail "$nfailed FAILED lines, expected 5: $(cat "$work/run.log")"
grep -q "(11 ok, 5 error, 0 skipped, 0 unsupported)" "$work/run.log" ||
  fail "run summary is not 11 ok / 5 error: $(tail -1 "$work/run.log")"

"$bin" compare "$ref" "$run" > "$work/compare.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "compare exited $rc, expected 1: $(tail -20 "$work/compare.log")"
# The verdict table: a dtype heading, then rows "case op tensor max-ULP max-abs verdict".
awk '/^(float32|bfloat16|float16)$/ { dt = $1; next }
     dt != "" && NF == 6 && ($2 == "conv2d" || $2 == "matmul") { print dt "/" $1 "/" $2, $3, $6 }' \
  "$work/compare.log" > "$work/verdicts"
bad="float32/k0072_ic008/conv2d float32/k0144_ic016/conv2d bfloat16/k0072_ic008/matmul
     bfloat16/odd_n2_c6_h7_w9_g2/conv2d float16/odd_n3_c5_h11_w6/matmul"
for op in $bad; do
  grep -qx "$op (op) error" "$work/verdicts" || fail "compare does not report $op as an error: $(grep "^$op " "$work/verdicts")"
  grep -q "^ERROR $op$" "$work/compare.log" || fail "no 'ERROR $op' line in the compare report"
done
nan=float32/odd_n2_c6_h7_w9_g2/matmul
grep -qx "$nan output failed" "$work/verdicts" || fail "compare does not fail the NaN output of $nan"
grep -q "^FAILED $nan/output$" "$work/compare.log" || fail "no 'FAILED $nan/output' line in the compare report"
grep -A2 "^FAILED $nan/output$" "$work/compare.log" | grep -q "NaN/Inf position mismatch" ||
  fail "the report of $nan/output does not mention the NaN"
# Exactly those: every other row passed -- the ten good ops and the NaN op's loss and gradients --
# and all of them are there: 70 tensors in the smoke set, less 22 of the five failed ops, less 1.
others=$(grep -v -e "^$nan output " $(for op in $bad; do printf -- '-e ^%s ' "$op"; done) "$work/verdicts")
notpassed=$(echo "$others" | awk '$3 != "passed"')
[ -z "$notpassed" ] || fail "cases that should pass did not: $notpassed"
nops=$(echo "$others" | awk '{print $1}' | sort -u | wc -l)
[ "$nops" -eq 11 ] || fail "$nops ops with passing tensors in the compare report, expected 11"
ngood=$(grep -c " passed$" "$work/verdicts")
[ "$ngood" -eq 47 ] || fail "$ngood tensors passed, expected 47"
echo "exec_faults: run took ${secs}s; 5 FAILED in run, 6 ops failed in compare, $ngood tensors passed"
rm -rf "$work"
echo "exec_faults: passed"
