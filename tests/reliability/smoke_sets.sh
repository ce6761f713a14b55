#!/usr/bin/env bash
# The sets the oracle and scale attacks start from, made once for all of them (ctest fixture
# `smoke_sets`, test reliability.smoke_sets) in SETS_DIR:
#   ref/     a copy of references/smoke
#   oracle/  the float64 oracle's run of it
#   x2/      the oracle's run with every output and gradient doubled, its manifest rewritten
#   refrun/  the reference's own tensors handed back as a run
# and the controls every attack relies on: X2 fails, plain and against the oracle; REFRUN passes
# both ways; the copy verifies. The attacks read these sets and edit only copies of them.
# usage: smoke_sets.sh VALIDATE_BIN SETS_DIR SOURCE_DIR
set -uo pipefail
script=smoke_sets
. "$(dirname "$0")/attack_lib.sh"
smoke_attack_opening "$1" "$2" "$3" setup
# derive SRC DST MODE: a copy of run SRC whose produced tensors are doubled (x2) or the reference's
# own (ref), its manifest rewritten.
derive() {
  cp -r "$1" "$2" || fail "cannot copy $1"
  py "$2" "$ref" "$3" << 'PYEOF'
import hashlib, json, os, shutil, sys
import numpy as np
d, ref, mode = sys.argv[1:4]
m = json.load(open(os.path.join(d, "manifest.json")))
n = 0
for rel in sorted(m["files"]):
    if not rel.endswith(".npy"):
        continue
    path = os.path.join(d, rel)
    if mode == "ref":
        shutil.copyfile(os.path.join(ref, rel), path)
    else:
        a = np.load(path)
        np.save(path, (a * 2).astype(a.dtype))
    n += 1
    data = open(path, "rb").read()
    m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
assert n > 0
PYEOF
  [ $? -eq 0 ] || fail "derive $3 failed"
}
v "$work/run.log" run --backend oracle --progress 0 --ref "$ref" --out "$orc" || fail "oracle run: $(tail -5 "$work/run.log")"
derive "$orc" "$x2" x2
derive "$orc" "$good" ref
v "$work/log" compare "$ref" "$x2" -q
expect 1 $? "$work/log" " 0 passed"
v "$work/log" compare "$ref" "$x2" -q --oracle "$orc"
expect 1 $? "$work/log" " 0 passed"
v "$work/log" compare "$ref" "$good" -q
expect 0 $? "$work/log" "70 passed, 0 failed"
v "$work/log" compare "$ref" "$good" -q --oracle "$orc"
expect 0 $? "$work/log" "70 passed, 0 failed"
v "$work/log" verify "$ref"
expect 0 $? "$work/log" "0 mismatch(es)"
rm -f "$work/log" "$work/run.log"
echo "$script: passed (sets in $work)"
