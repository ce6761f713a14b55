# The opening every attack script shares; sourced after it sets `script`
# (its own name, for the messages). fail/ok end the script; expect checks an exit code and
# needles in a log; v runs validate with a hard time limit (a hang is a failure, not a stuck CI).
fail() { echo "$script $attack: FAIL: $*"; exit 1; }
ok() {
  echo "$script $attack: passed${1:+ ($1)}"
  [ -n "${KEEP:-}" ] || rm -rf "$work"  # KEEP=1 leaves the work folder to look at
  exit 0
}
py() { /usr/bin/python3 - "$@"; }  # Debian's, with python3-numpy (install-deps.sh)
expect() {  # expect CODE RC LOG NEEDLE...
  local want=$1 rc=$2 log=$3
  shift 3
  [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $(tail -c 1500 "$log")"
  for needle in "$@"; do grep -qF -- "$needle" "$log" || fail "'$needle' missing from: $(tail -c 1500 "$log")"; done
}
v() {
  local log=$1
  shift
  timeout -k 5 120 "$bin" "$@" > "$log" 2>&1
}
# derive SRC DST MODE: a copy of run SRC whose produced tensors are doubled (x2), all NaN (nan) or
# the reference set $ref's own (ref), its manifest rewritten to match.
derive() {
  cp -r "$1" "$2" || fail "cannot copy $1"
  py "$2" "$ref" "$3" << 'PYEOF'
import hashlib, json, os, shutil, sys
import numpy as np
d, ref, mode = sys.argv[1:4]
m = json.load(open(os.path.join(d, "manifest.json")))
n = 0
for rel in sorted(r for r in m["files"] if r.endswith(".npy")):
    path = os.path.join(d, rel)
    if mode == "ref":
        shutil.copyfile(os.path.join(ref, rel), path)
    else:
        a = np.load(path)
        np.save(path, (a * 2).astype(a.dtype) if mode == "x2" else np.full_like(a, np.nan))
    n += 1
    data = open(path, "rb").read()
    m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
assert n > 0
PYEOF
  [ $? -eq 0 ] || fail "derive $3 failed"
}
# smoke_attack_opening VALIDATE_BIN WORK_DIR SOURCE_DIR ATTACK [SETS_DIR]: the arguments of a script
# that attacks a copy of references/smoke, a fresh work folder, and the names of its sets: ref (the
# copy, the attack's own to edit), orc (the float64 oracle's run), x2 (a wrong run), good (a right
# one). With SETS_DIR, orc, x2 and good are the ones smoke_sets.sh made there once for every attack
# (read only: an attack edits copies); without it they are names in the work folder.
smoke_attack_opening() {
  bin=$1 work=$2 src=$3 attack=$4
  rm -rf "$work" && mkdir -p "$work"
  work=$(cd "$work" && pwd)
  ref=$work/ref orc=$work/oracle x2=$work/x2 good=$work/refrun
  if [ -n "${5:-}" ]; then
    orc=$5/oracle x2=$5/x2 good=$5/refrun
    for s in "$orc" "$x2" "$good"; do
      [ -f "$s/manifest.json" ] || fail "no $s: the test reliability.smoke_sets makes it (ctest runs it first)"
    done
  fi
  cp -r "$src/references/smoke" "$ref" || fail "cannot copy references/smoke"
}
