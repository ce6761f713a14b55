#!/usr/bin/env bash
# Attacks on the CLI's verdicts (docs/reliability.md): each ATTACK below gets a false pass, a silent
# success, a wrapped number or a wrong refusal from a CLI without the rule it tests, and must get the
# answer written next to it. One ctest per attack (reliability.verdict.<name>), on a
# copy of references/smoke through the float64 oracle; those that generate need LibTorch.
# usage: verdict_attacks.sh VALIDATE_BIN WORK_DIR SOURCE_DIR ATTACK
set -uo pipefail
script=verdict_attacks
. "$(dirname "$0")/attack_lib.sh"
smoke_attack_opening "$@"
run=$work/run
oracle_run() { v "$work/run.log" run --backend oracle --progress 0 --ref "$ref" --out "$run" "$@" || fail "oracle run: $(tail -5 "$work/run.log")"; }
# Rewrites run tensors through numpy (PY_EXPR of `a`, saved with SAVE_DTYPE) and their manifest
# entries, so only the data, not the bookkeeping, is wrong.
rewrite() {  # rewrite SET GLOB PY_EXPR SAVE_DTYPE
  py "$@" << 'PYEOF'
import glob, hashlib, json, os, sys
import numpy as np
d, pattern, expr, save = sys.argv[1:5]
m = json.load(open(os.path.join(d, "manifest.json")))
hits = sorted(glob.glob(os.path.join(d, pattern)))
assert hits, pattern
for path in hits:
    a = np.load(path)
    b = np.ascontiguousarray(eval(expr)).astype(save)
    np.save(path, b)
    rel = os.path.relpath(path, d)
    data = open(path, "rb").read()
    m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
PYEOF
}
gen() { v "$work/gen.log" generate --cases "$src/cases/smoke.json" --progress 0 "$@"; }

case $attack in
policy_gates_nothing)  # 1. a policy gating only the loss passed a float32 output flipped along W
  oracle_run --only '^float32/'
  rewrite "$run" 'float32/k0072_ic008_conv2d_output.npy' 'a[..., ::-1]' '<f4'
  echo '{"inherit": false, "rules": [{"role": "loss", "loss_abs": 1e-4}]}' > "$work/loss_only.json"
  v "$work/log" compare "$ref" "$run" --policy "$work/loss_only.json"
  expect 1 $? "$work/log" "no gate for output" "float32.output" "--gate float32.output.rtol="
  grep -q "passed, 0 failed" "$work/log" && fail "nothing failed: $(tail -3 "$work/log")"
  # the same policy with the outputs and gradients gated is a clean pass on the untouched run
  oracle_run --only '^float32/' --overwrite
  echo '{"inherit": false, "rules": [{"role": "loss", "loss_abs": 1e-4}, {"rtol": 5e-4}, {"role": "loss_curve", "loss_rel": 1e-6}]}' > "$work/all.json"
  v "$work/log" compare "$ref" "$run" -q --policy "$work/all.json"
  expect 0 $? "$work/log" " 0 failed"
  ok ;;

run_dtype_mismatch)  # 3. float32 outputs saved as float16 (<f2, hashes rewritten) passed
  oracle_run --only '^float32/'
  rewrite "$run" 'float32/*_output.npy' 'a' '<f2'
  v "$work/log" compare "$ref" "$run"
  expect 2 $? "$work/log" "k0072_ic008_conv2d_output.npy is stored as float16 (<f2)" "stored as float32 (<f4)"
  ok ;;

partial_set)  # 4. a set merged with --allow-partial verified silently; compare --require-all passed
  gen --dtype float32 --shard 0/2 --out "$work/s0"
  expect 0 $? "$work/gen.log"
  v "$work/log" merge "$work/m" "$work/s0" --allow-partial
  expect 0 $? "$work/log"
  v "$work/log" verify "$work/m"
  expect 0 $? "$work/log" "PARTIAL" "missing shards [\"1/2\"]"
  ref=$work/m
  oracle_run
  v "$work/log" compare "$ref" "$run"
  expect 0 $? "$work/log" "is partial"
  v "$work/log" compare "$ref" "$run" -q --require-all
  expect 1 $? "$work/log" "--require-all" "is partial"
  ok ;;

mixed_shards)  # 2. shard 0/2 of --dtype float32 merged with shard 1/2 of --dtype bfloat16: exit 0
  gen --dtype float32 --shard 0/2 --out "$work/s0"
  expect 0 $? "$work/gen.log"
  gen --dtype bfloat16 --shard 1/2 --out "$work/s1"
  expect 0 $? "$work/gen.log"
  v "$work/log" merge "$work/m" "$work/s0" "$work/s1"
  expect 2 $? "$work/log" "$work/s1/config.json" "$work/s0/config.json" "--dtype [\"bfloat16\"]" "[\"float32\"]"
  [ ! -e "$work/m" ] || fail "a refused merge created its output"
  gen --dtype float32 --shard 1/2 --out "$work/s1b"
  expect 0 $? "$work/gen.log"
  v "$work/log" merge "$work/m" "$work/s0" "$work/s1b"
  expect 0 $? "$work/log"
  ok ;;

shape_overflow)  # 11. probe --shape 65536,65536,65536,65536 wrapped to 0 elements and exited 0
  v "$work/log" probe --layout NHWC --shape 65536,65536,65536,65536 --out "$work/p"
  expect 2 $? "$work/log" "[65536, 65536, 65536, 65536]" "overflows"
  [ ! -e "$work/p" ] || fail "probe wrote $work/p"
  v "$work/log" probe --layout NHWC --shape 100000,100000,100000,100000 --out "$work/p"
  expect 2 $? "$work/log" "[100000, 100000, 100000, 100000]" "overflows"
  [ ! -e "$work/p" ] || fail "probe wrote $work/p"
  v "$work/log" probe --layout NHWC --shape 2,3,4,5 --out "$work/p"
  expect 0 $? "$work/log"
  ok ;;

max_ulp_huge)  # 12. --gate max_ulp=1e20 (or inf) on a clean run gave 46 failures (0 ULP after the cast)
  oracle_run
  v "$work/log" compare "$ref" "$run" -q
  expect 0 $? "$work/log" "70 passed, 0 failed"
  for g in 1e20 inf 18446744073709551616 4294967296; do
    v "$work/log" compare "$ref" "$run" -q --gate max_ulp=$g
    expect 0 $? "$work/log" "70 passed, 0 failed"
  done
  for g in nan -1; do
    v "$work/log" compare "$ref" "$run" -q --gate max_ulp=$g
    expect 2 $? "$work/log" "max_ulp"
  done
  ok ;;

resume_threads)  # 16. generate --resume --threads 2 on a set begun with --threads 1 was accepted
  gen --dtype float32 --only k0072 --threads 1 --out "$work/set"
  expect 0 $? "$work/gen.log"
  gen --dtype float32 --only k0072 --threads 2 --out "$work/set" --resume
  expect 2 $? "$work/gen.log" "--resume" "1 thread(s)" "would use 2" "OpenBLAS"
  gen --dtype float32 --only k0072 --threads 1 --out "$work/set" --resume
  expect 0 $? "$work/gen.log"
  ok ;;

*) fail "unknown attack" ;;
esac
