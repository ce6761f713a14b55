#!/usr/bin/env bash
# Attacks through `compare --oracle` and the report paths (docs/reliability.md, "The oracle and the
# reports"): each ATTACK below made a wrong run pass, or destroyed a file compare reads, and must now
# get the answer written next to it. One ctest per attack (reliability.attack.<name>), all on a copy
# of references/smoke through the float64 oracle; oracle_seed7 generates and needs LibTorch.
#
# The wrong run throughout is X2: the oracle's run with every output and gradient doubled and its
# manifest rewritten (on its own it fails). The right run is REFRUN: the reference's own tensors
# handed back as a run (it passes, plain and against the oracle). The oracle's run, X2 and REFRUN
# are made once, and those controls checked, by smoke_sets.sh in SETS_DIR.
# usage: oracle_attacks.sh VALIDATE_BIN WORK_DIR SOURCE_DIR ATTACK SETS_DIR
set -uo pipefail
script=oracle_attacks
. "$(dirname "$0")/attack_lib.sh"
smoke_attack_opening "$@"  # orc, x2 and good from SETS_DIR
hash_of() { sha256sum "$1" | cut -d' ' -f1; }
# edit_json SET REL PY_STATEMENTS: edit a JSON file of a run (as `j`) and its manifest entry.
edit_json() {
  py "$@" << 'PYEOF'
import hashlib, json, os, sys
d, rel, stmt = sys.argv[1:4]
j = json.load(open(os.path.join(d, rel)))
exec(stmt)
data = json.dumps(j, indent=2).encode()
open(os.path.join(d, rel), "wb").write(data)
m = json.load(open(os.path.join(d, "manifest.json")))
m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
PYEOF
}
case $attack in
oracle_is_run)  # 1. compare REF X2 --oracle X2 (or a copy of X2): every tensor passed, "run closer"
  v "$work/log" compare "$ref" "$x2" --oracle "$x2"
  expect 2 $? "$work/log" "--oracle $x2" "is the run being judged"
  ln -s "$x2" "$work/x2link"
  v "$work/log" compare "$ref" "$x2" --oracle "$work/x2link/"
  expect 2 $? "$work/log" "is the run being judged"
  cp -r "$x2" "$work/x2copy"
  v "$work/log" compare "$ref" "$x2" --oracle "$work/x2copy"
  expect 2 $? "$work/log" "$work/x2copy" "byte-identical" "$x2"
  # a copy whose run_info.json names it otherwise still holds the run's tensors, byte for byte
  edit_json "$work/x2copy" run_info.json 'j["created_at"] = "2001-01-01T00:00:00Z"'
  v "$work/log" compare "$ref" "$x2" --oracle "$work/x2copy"
  expect 2 $? "$work/log" "byte-identical"
  # a partial copy (one tensor the real oracle's): every copied tensor is judged two-way, and fails
  rm -rf "$work/x2copy" && cp -r "$x2" "$work/x2copy"
  cp "$orc/float32/k0072_ic008_conv2d_output.npy" "$work/x2copy/float32/"
  py "$work/x2copy" << 'PYEOF'
import hashlib, json, os, sys
d = sys.argv[1]; rel = "float32/k0072_ic008_conv2d_output.npy"
m = json.load(open(os.path.join(d, "manifest.json"))); data = open(os.path.join(d, rel), "rb").read()
m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
PYEOF
  v "$work/log" compare "$ref" "$x2" --oracle "$work/x2copy"
  expect 1 $? "$work/log" "69 compared tensor(s) are not covered by the oracle" "byte-identical to the run's: 69" \
    "validate: 0 passed"
  ok ;;

oracle_tampered)  # 2. the oracle's tensors replaced by X2's, its manifest left as it was: passed
  cp -r "$orc" "$work/o2"
  for f in "$x2"/*/*.npy; do cp "$f" "$work/o2/${f#"$x2"/}"; done
  v "$work/log" verify "$work/o2"
  expect 1 $? "$work/log" "mismatch"
  v "$work/log" compare "$ref" "$x2" --oracle "$work/o2"
  expect 2 $? "$work/log" "$work/o2/float32/k0072_ic008_conv2d_output.npy: tampered" "oracle"
  ok ;;

oracle_nan)  # 3. an oracle of NaNs (hashes rewritten): X2 passed (error_bound 0, closer "tie")
  derive "$orc" "$work/onan" nan
  v "$work/log" compare "$ref" "$x2" --oracle "$work/onan"
  expect 2 $? "$work/log" "$work/onan/float32/k0072_ic008_conv2d_output.npy" "NaN" "oracle" "validate: 0 passed"
  v "$work/log" compare "$ref" "$good" --oracle "$work/onan"
  expect 2 $? "$work/log" "NaN"
  ok ;;

oracle_other_inputs)  # 3. an oracle that consumed other inputs (its input hashes differ): accepted
  cp -r "$orc" "$work/oin"
  edit_json "$work/oin" float32/k0072_ic008_run.json \
    'j["ops"]["conv2d"]["input_hashes"]["weight"] = "0" * 64'
  v "$work/log" compare "$ref" "$good" --oracle "$work/oin"
  expect 2 $? "$work/log" "$work/oin/float32/k0072_ic008_run.json" "weight" "different"
  # an oracle that recorded no input hashes cannot show what it consumed
  cp -r "$orc" "$work/onone"
  edit_json "$work/onone" float32/k0072_ic008_run.json 'del j["ops"]["matmul"]["input_hashes"]'
  v "$work/log" compare "$ref" "$good" --oracle "$work/onone"
  expect 2 $? "$work/log" "$work/onone/float32/k0072_ic008_run.json" "no hash"
  ok ;;

oracle_seed7)  # 3. the oracle's run of `generate --seed 7`: accepted; the right run then failed
  v "$work/gen.log" generate --cases "$src/cases/smoke.json" --progress 0 --seed 7 --out "$work/ref7"
  expect 0 $? "$work/gen.log"
  v "$work/log" run --backend oracle --progress 0 --ref "$work/ref7" --out "$work/o7"
  expect 0 $? "$work/log"
  v "$work/log" compare "$ref" "$good" --oracle "$work/o7"
  expect 2 $? "$work/log" "--oracle $work/o7" "different" "input"
  ok ;;

oracle_backend)  # 3. an oracle made by another backend (torch) was accepted as the exact values
  cp -r "$orc" "$work/otorch"
  edit_json "$work/otorch" run_info.json 'j["backend"] = "torch"; j["math"] = "float32"'
  v "$work/log" compare "$ref" "$good" --oracle "$work/otorch"
  expect 2 $? "$work/log" "$work/otorch/run_info.json" "torch" "--backend oracle"
  # a plain run directory in the torch format without run_info.json says nothing about its backend
  cp -r "$orc" "$work/onoinfo"
  py "$work/onoinfo" << 'PYEOF'
import json, os, sys
d = sys.argv[1]
os.remove(os.path.join(d, "run_info.json"))
m = json.load(open(os.path.join(d, "manifest.json"))); del m["files"]["run_info.json"]
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
PYEOF
  v "$work/log" compare "$ref" "$good" --oracle "$work/onoinfo"
  expect 2 $? "$work/log" "$work/onoinfo" "--backend oracle"
  ok ;;

oracle_uncovered)  # 3. an oracle of one dtype: the rest fell back to two-way without a word
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$work/o32" --only '^float32/'
  expect 0 $? "$work/log"
  v "$work/log" compare "$ref" "$x2" -q --oracle "$work/o32"
  expect 1 $? "$work/log" " 0 passed"
  v "$work/log" compare "$ref" "$good" --oracle "$work/o32" --json "$work/r.json" --md "$work/r.md" \
    --junit "$work/r.xml" --html "$work/r.html"
  expect 0 $? "$work/log" "70 passed" "not covered by the oracle" "bfloat16/k0072_ic008/conv2d/output"
  for f in r.json r.md r.xml r.html; do
    grep -qF "not covered by the oracle" "$work/$f" || fail "$f does not say what the oracle does not cover"
  done
  ok ;;

report_paths)  # 11. --json REF/manifest.json destroyed the set; --json F --md F lost the JSON
  before=$(hash_of "$ref/manifest.json")
  v "$work/log" compare "$ref" "$good" --json "$ref/manifest.json"
  expect 2 $? "$work/log" "--json $ref/manifest.json" "inside the reference set"
  [ "$(hash_of "$ref/manifest.json")" = "$before" ] || fail "the reference manifest changed"
  t=$good/float32/k0072_ic008_conv2d_output.npy
  tb=$(hash_of "$t")
  v "$work/log" compare "$ref" "$good" --md "$t"
  expect 2 $? "$work/log" "--md $t" "inside the run directory"
  [ "$(hash_of "$t")" = "$tb" ] || fail "a run file changed"
  v "$work/log" compare "$ref" "$good" --oracle "$orc" --html "$orc/report.html"
  expect 2 $? "$work/log" "--html $orc/report.html" "inside the oracle"
  [ ! -e "$orc/report.html" ] || fail "a report was written into the oracle"
  ln -s "$ref/manifest.json" "$work/innocent.json"
  v "$work/log" compare "$ref" "$good" --junit "$work/innocent.json"
  expect 2 $? "$work/log" "inside the reference set"
  [ "$(hash_of "$ref/manifest.json")" = "$before" ] || fail "the reference manifest changed through a link"
  v "$work/log" compare "$ref" "$good" --json "$work/r.out" --md "$work/./r.out"
  expect 2 $? "$work/log" "--json" "--md" "$work/r.out" "same file"
  [ ! -e "$work/r.out" ] || fail "a refused compare wrote a report"
  v "$work/log" verify "$ref"
  expect 0 $? "$work/log" "0 mismatch"
  # devices take any number of reports; distinct files outside the sets are written
  v "$work/log" compare "$ref" "$good" -q --json /dev/null --md /dev/null
  expect 0 $? "$work/log" "70 passed"
  v "$work/log" compare "$ref" "$good" -q --json "$work/a.json" --md "$work/a.md"
  expect 0 $? "$work/log" "70 passed"
  [ -s "$work/a.json" ] && [ -s "$work/a.md" ] || fail "the reports were not written"
  ok ;;

*) fail "unknown attack" ;;
esac
