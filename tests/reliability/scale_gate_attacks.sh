#!/usr/bin/env bash
# Attacks on the error-bound scales a reference set stores, on the gate keys and on the limits
# (docs/reliability.md, "Scales, gates and limits"): each ATTACK below passed a wrong run, failed a
# right one and blamed the program, or ended in std::bad_alloc, and must now get the answer written
# next to it. One ctest per attack (reliability.scale.<name>), on a copy of references/smoke through
# the float64 oracle; huge_case generates and needs LibTorch.
#
# The runs: X2, the oracle's run with every output and gradient doubled and its manifest rewritten
# (it fails under the built-in policy); REFRUN, the reference's own tensors handed back as a run (it
# passes); and runs derived from REFRUN with one tensor edited. The oracle's run, X2 and REFRUN are
# made once, and their controls checked, by smoke_sets.sh in SETS_DIR; each attack edits its own
# copy of the reference set.
# usage: scale_gate_attacks.sh VALIDATE_BIN WORK_DIR SOURCE_DIR ATTACK SETS_DIR
set -uo pipefail
script=scale_gate_attacks
. "$(dirname "$0")/attack_lib.sh"
smoke_attack_opening "$@"
case32=float32/k0072_ic008

# edit SET PY_STATEMENTS: runs the statements with `d` (the set), numpy as np and helpers, then
# rewrites the manifest entry of every file they touched (so only the content is wrong):
#   load(rel) / save(rel, array)          a tensor of the set
#   meta(rel) / put(rel, json)            a JSON file of the set
#   scale_hash(rel)                       sha256 of a .npy data section (a scale's metadata hash)
edit() {
  py "$@" << 'PYEOF'
import hashlib, json, os, sys
import numpy as np
d, stmt = sys.argv[1:3]
touched = set()
def load(rel): return np.load(os.path.join(d, rel))
def save(rel, a):
    np.save(os.path.join(d, rel), np.ascontiguousarray(a)); touched.add(rel)
def meta(rel): return json.load(open(os.path.join(d, rel)))
def put(rel, j):
    open(os.path.join(d, rel), "w").write(json.dumps(j, indent=2)); touched.add(rel)
def scale_hash(rel):
    raw = open(os.path.join(d, rel), "rb").read()
    hl = int.from_bytes(raw[8:10], "little")
    return hashlib.sha256(raw[10 + hl:]).hexdigest()
exec(stmt)
m = json.load(open(os.path.join(d, "manifest.json")))
for rel in touched:
    if os.path.exists(os.path.join(d, rel)):
        data = open(os.path.join(d, rel), "rb").read()
        m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    else:
        del m["files"][rel]
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
PYEOF
  [ $? -eq 0 ] || fail "edit of $1 failed"
}
# rescale REL FUNC: the float16 scale file REL of the reference set replaced by FUNC(values), its
# metadata hash and the manifest rewritten (a consistent set whose scale is wrong).
rescale() {
  local rel=$1 expr=$2
  local tensor=${rel#"$case32"_conv2d_}
  tensor=${tensor%_scale.npy}
  edit "$ref" "
s = load('$rel'); save('$rel', np.asarray($expr).astype(s.dtype))
mj = meta('${case32}_metadata.json')
mj['ops']['conv2d']['scales']['$tensor']['sha256'] = scale_hash('$rel')
put('${case32}_metadata.json', mj)"
}
# A run 1% off on one float32 output: it fails while the set is intact.
off_run() {
  cp -r "$good" "$work/off"
  edit "$work/off" "save('${case32}_conv2d_output.npy', (load('${case32}_conv2d_output.npy') * np.float32(1.01)).astype(np.float32))"
  v "$work/log" compare "$ref" "$work/off" -q
  expect 1 $? "$work/log" "69 passed, 1 failed"
}

case $attack in
scale_raised)  # 4. unit_log2 + 20 (manifest rewritten): verify 0 mismatches, a run 1% off passed
  off_run
  for t in output grad_weight; do
    edit "$ref" "
mj = meta('${case32}_metadata.json'); mj['ops']['conv2d']['scales']['$t']['unit_log2'] += 20
put('${case32}_metadata.json', mj)"
  done
  v "$work/log" verify "$ref"
  expect 1 $? "$work/log" "$ref/${case32}_conv2d_output_scale.npy" "$ref/${case32}_conv2d_grad_weight_scale.npy" \
    "the largest this tensor's scale can be" "2 mismatch(es)"
  v "$work/log" compare "$ref" "$work/off"
  expect 2 $? "$work/log" "$ref/${case32}_conv2d_output_scale.npy" "invalid error-bound scale" \
    "the largest this tensor's scale can be"
  ok ;;

bad_scales)  # 8. scales of NaN, inf, -1 or 0 (consistent): verify exit 0, compare blamed the run
  cp -r "$ref" "$work/clean"
  rel=${case32}_conv2d_output_scale.npy
  for bad in "np.nan:is NaN" "np.inf:is +inf" "-1.0:never negative" "0.0:(a zero scale)"; do
    rm -rf "$ref" && cp -r "$work/clean" "$ref"
    rescale "$rel" "np.full_like(s, ${bad%%:*})"
    v "$work/log" verify "$ref"
    expect 1 $? "$work/log" "$ref/$rel" "${bad#*:}" "an invalid reference set"
    v "$work/log" compare "$ref" "$good"
    expect 2 $? "$work/log" "$ref/$rel" "${bad#*:}" "the reference set is invalid"
  done
  # one element of the scale zeroed where the reference is not zero: the floor finds it too
  rm -rf "$ref" && cp -r "$work/clean" "$ref"
  rescale "$rel" "np.where(np.arange(s.size).reshape(s.shape) == 5, 0, s)"
  v "$work/log" verify "$ref"
  expect 1 $? "$work/log" "$ref/$rel" "element 5 is 0 where the reference is"
  ok ;;

scale_removed)  # 9. one scale deleted: a 3e-4 bias passed as "made before validate stored them"
  cp -r "$good" "$work/bias"
  edit "$work/bias" "save('${case32}_conv2d_grad_weight.npy', (load('${case32}_conv2d_grad_weight.npy') + np.float32(3e-4)).astype(np.float32))"
  v "$work/log" compare "$ref" "$work/bias" -q
  expect 1 $? "$work/log" "69 passed, 1 failed"
  cp -r "$ref" "$work/clean"
  rel=${case32}_conv2d_grad_weight_scale.npy
  edit "$ref" "
os.remove(os.path.join(d, '$rel')); touched.add('$rel')
mj = meta('${case32}_metadata.json'); del mj['ops']['conv2d']['scales']['grad_weight']
put('${case32}_metadata.json', mj)"
  v "$work/log" verify "$ref"
  expect 1 $? "$work/log" "${case32}_metadata.json (ops.conv2d.scales.grad_weight) lists no error-bound scale"
  v "$work/log" compare "$ref" "$work/bias"
  expect 2 $? "$work/log" "ops.conv2d.scales.grad_weight) lists no error-bound scale" "is invalid"
  grep -qF "made before validate stored them" "$work/log" && fail "still reads the set as made before scales"
  # the same gradient's scale relabelled rss_products (the older gradient quantity): a 1e-4 bias
  rm -rf "$ref" && cp -r "$work/clean" "$ref"
  edit "$work/bias" "save('${case32}_conv2d_grad_weight.npy', (np.load(os.path.join('$ref', '${case32}_conv2d_grad_weight.npy')) + np.float32(1e-4)).astype(np.float32))"
  edit "$ref" "
mj = meta('${case32}_metadata.json'); mj['ops']['conv2d']['scales']['grad_weight']['quantity'] = 'rss_products'
put('${case32}_metadata.json', mj)"
  v "$work/log" verify "$ref"
  expect 1 $? "$work/log" "gradient scale quantity \"rss_products\"" "a set is of one format as a whole"
  v "$work/log" compare "$ref" "$work/bias"
  expect 2 $? "$work/log" "gradient scale quantity" "is invalid"
  # every gradient scale of the set relabelled: a consistent set of the older kind, compared with a
  # warning that its gradients are held to that kind's looser bound
  rm -rf "$ref" && cp -r "$work/clean" "$ref"
  edit "$ref" "
import glob
for p in glob.glob(os.path.join(d, '*', '*_metadata.json')):
    rel = os.path.relpath(p, d); mj = meta(rel)
    for op in mj.get('ops', {}).values():
        for name, sc in op.get('scales', {}).items():
            if name.startswith('grad_'): sc['quantity'] = 'rss_products'
    put(rel, mj)"
  v "$work/log" compare "$ref" "$good"
  expect 0 $? "$work/log" "gradient scales are of the older kind" "looser bound"
  ok ;;

scale_shape)  # 10. a scale of another shape (hashes consistent): verify 0 mismatches
  rel=${case32}_conv2d_output_scale.npy
  rescale "$rel" "s.reshape(-1)"
  v "$work/log" verify "$ref"
  expect 1 $? "$work/log" "$ref/$rel" "shape [32768] but its tensor is [1, 32, 32, 32]"
  v "$work/log" compare "$ref" "$good"
  expect 2 $? "$work/log" "$ref/$rel" "expected float16 or float32 [1, 32, 32, 32]"
  ok ;;

gate_none)  # 5. --gate bound=none / bound=inf / "bound": null left min_pcc alone: X2 passed
  for g in bound=none bound=inf float32.bound=none; do
    v "$work/log" compare "$ref" "$x2" -q --gate "$g"
    expect 2 $? "$work/log" "validate compare:"
    grep -qE "min_pcc alone|must be finite" "$work/log" || fail "--gate $g: $(tail -3 "$work/log")"
  done
  # max_ulp at 2^32 or more is "any distance": beside bound=none it checks nothing either
  v "$work/log" compare "$ref" "$x2" -q --gate bound=none --gate max_ulp=inf
  expect 2 $? "$work/log" "min_pcc alone" "any distance"
  echo '{"rules": [{"role": ["output", "grad"], "bound": null}]}' > "$work/null.json"
  v "$work/log" compare "$ref" "$x2" -q --policy "$work/null.json"
  expect 2 $? "$work/log" "min_pcc alone" "no element of it is checked by value"
  # bound off with an element test of its own is a policy that checks elements: X2 fails it
  v "$work/log" compare "$ref" "$x2" -q --gate bound=none --gate rtol=5e-4
  expect 1 $? "$work/log" " 0 passed"
  # what only the data shows: max_ulp alone, every element of one tensor below the near-zero floor
  # (float32 subnormals), the run doubled there: passed, now marked in every report format
  edit "$ref" "
x = load('${case32}_conv2d_grad_bias.npy').astype(np.float64); a = (x / np.abs(x).max() * 1e-40).astype(np.float32)
save('${case32}_conv2d_grad_bias.npy', a)
mj = meta('${case32}_metadata.json'); mj['ops']['conv2d']['tensors']['grad_bias']['max_abs'] = float(np.abs(a).max())
put('${case32}_metadata.json', mj)"
  cp -r "$good" "$work/sub"
  edit "$work/sub" "save('${case32}_conv2d_grad_bias.npy', (np.load(os.path.join('$ref', '${case32}_conv2d_grad_bias.npy')) * 2).astype(np.float32))"
  echo '{"inherit": false, "rules": [{"role": ["output", "grad"], "max_ulp": 0}, {"role": "loss", "loss_abs": 0}]}' > "$work/ulp.json"
  v "$work/log" compare "$ref" "$work/sub" --policy "$work/ulp.json" --only '^float32/k0072_ic008' \
    --json "$work/r.json" --md "$work/r.md" --junit "$work/r.xml" --html "$work/r.html"
  expect 0 $? "$work/log" "1 mistrusted" "not checked by value" "float32/k0072_ic008/conv2d/grad_bias"
  for f in r.json r.md r.xml r.html; do
    grep -qF "not checked by value" "$work/$f" || fail "$f does not say the tensor was not checked by value"
  done
  ok ;;

near_zero)  # 6. rtol 1e-6 with near_zero 1e30 passed X2; bitwise.json never checked small elements
  echo '{"rules": [{"rtol": 1e-6, "near_zero": 1e30}]}' > "$work/nz.json"
  v "$work/log" compare "$ref" "$x2" -q --policy "$work/nz.json"
  expect 2 $? "$work/log" "$work/nz.json" "'near_zero' must be below 1"
  v "$work/log" compare "$ref" "$x2" -q --gate near_zero=1
  expect 2 $? "$work/log" "'near_zero' must be below 1"
  v "$work/log" compare "$ref" "$good" -q --policy "$src/policies/bitwise.json"
  expect 0 $? "$work/log" "70 passed, 0 failed"
  # every float32 output element below 1% of max|ref| zeroed: thousands of ULPs off, and exit 0 before
  cp -r "$good" "$work/small"
  edit "$work/small" "
import glob
for path in sorted(glob.glob(os.path.join(d, 'float32', '*_output.npy'))):
    rel = os.path.relpath(path, d); a = load(rel)
    save(rel, np.where(np.abs(a) < 0.01 * np.abs(a).max(), np.float32(0), a).astype(np.float32))"
  v "$work/log" compare "$ref" "$work/small" --policy "$src/policies/bitwise.json"
  expect 1 $? "$work/log" "beyond tolerance"
  # what the atol adds: the same policy with max_ulp 0 alone passes that run (exit 0)
  echo '{"inherit": false, "rules": [{"role": ["output", "grad"], "max_ulp": 0}, {"role": "loss", "loss_abs": 0}]}' \
    > "$work/ulp_only.json"
  v "$work/log" compare "$ref" "$work/small" -q --policy "$work/ulp_only.json"
  expect 0 $? "$work/log" "70 passed, 0 failed"
  ok ;;

inf_reference)  # 7. a reference output of +inf everywhere against an all-+inf run: "1 passed"
  t=${case32}_conv2d_output.npy
  edit "$ref" "
save('$t', np.full_like(load('$t'), np.inf))
mj = meta('${case32}_metadata.json'); mj['ops']['conv2d']['tensors']['output'].pop('max_abs', None)
put('${case32}_metadata.json', mj)"
  cp -r "$good" "$work/inf"
  edit "$work/inf" "save('$t', np.full_like(load('$t'), np.inf))"
  v "$work/log" compare "$ref" "$work/inf" --only '^float32/k0072_ic008'
  expect 2 $? "$work/log" "$ref/$t" "holds no finite value"
  # the loss alike: a +inf reference loss against a +inf run loss
  l=${case32}_conv2d_loss.npy
  cp -r "$src/references/smoke" "$work/ref_loss"
  # (np.save directly: save() makes arrays contiguous, which turns the 0-d loss into shape [1])
  inf0="a = load('$l'); np.save(os.path.join(d, '$l'), np.full(a.shape, np.inf, a.dtype)); touched.add('$l')"
  edit "$work/ref_loss" "$inf0"
  cp -r "$good" "$work/infloss"
  edit "$work/infloss" "$inf0"
  v "$work/log" compare "$work/ref_loss" "$work/infloss" --only '^float32/k0072_ic008'
  expect 2 $? "$work/log" "$work/ref_loss/$l" "is infinite"
  ok ;;

huge_case)  # 12. a 65536x65536 weight ended in std::bad_alloc; a sweep of 10^6 values ran 42 s to 5.3 GB
  start=$(date +%s)
  # 2^17 x 2^17 (64 GiB of weight, under the 2^36-element cap): more than any machine CI runs on
  cat > "$work/huge.json" << 'EOF'
{"format": "validate-cases/1", "seed": 1, "loss": "mse", "dtypes": ["float32"],
 "cases": [{"name": "huge", "op": "matmul", "M": 131072, "K": 131072, "N": 1}]}
EOF
  v "$work/log" generate --cases "$work/huge.json" --progress 0 --out "$work/hset"
  expect 2 $? "$work/log" "$work/huge.json" "float32/huge (matmul) needs at least" "A [131072, 131072]: 64.0 GiB" \
    "this machine has"
  grep -qF "bad_alloc" "$work/log" && fail "bad_alloc: $(tail -3 "$work/log")"
  # the 65536x65536 conv weight itself where it cannot fit (two 16 GiB tensors: weight and gradient)
  avail=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
  if [ "$avail" -lt $((32 * 1024 * 1024)) ]; then
    cat > "$work/conv.json" << 'EOF'
{"format": "validate-cases/1", "seed": 1, "loss": "mse", "dtypes": ["float32"],
 "cases": [{"name": "wide", "batch": 1, "in_channels": 65536, "out_channels": 65536, "height": 1, "width": 1,
            "kernel": [1, 1], "padding": [0, 0], "stride": [1, 1], "dilation": [1, 1], "groups": 1, "bias": false}]}
EOF
    v "$work/log" generate --cases "$work/conv.json" --progress 0 --out "$work/cset"
    expect 2 $? "$work/log" "float32/wide (conv2d) needs at least" "weight [65536, 65536, 1, 1]: 16.0 GiB"
  fi
  py "$work/sweep.json" << 'PYEOF'
import json, sys
json.dump({"format": "validate-cases/1", "seed": 1, "loss": "mse", "dtypes": ["float32"],
           "sweep": {"in_channels": list(range(1, 10**6 + 1))}}, open(sys.argv[1], "w"))
PYEOF
  v "$work/log" generate --cases "$work/sweep.json" --progress 0 --out "$work/sset"
  expect 2 $? "$work/log" "$work/sweep.json: 1000000 cases" "more than the 10000 a case file may hold"
  took=$(($(date +%s) - start))
  [ "$took" -le 30 ] || fail "the refusals took $took s"
  ok "refused in $took s" ;;

*) fail "unknown attack" ;;
esac
