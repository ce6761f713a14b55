#!/usr/bin/env bash
# Attacks on the verdicts (docs/reliability.md "Verdicts that cannot be made to lie"):
# each ATTACK below was reproduced against the CLI before the fix (a false pass, an abort with a
# signal or a hang) and must now get the answer written next to it. One ctest per attack
# (reliability.attack.<name>), all on a copy of references/smoke through the float64 oracle, so
# they need no LibTorch except those that generate.
# usage: trust_attacks.sh VALIDATE_BIN WORK_DIR SOURCE_DIR ATTACK
set -uo pipefail
bin=$1 work=$2 src=$3 attack=$4
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
ref=$work/ref run=$work/run
fail() { echo "trust_attacks $attack: FAIL: $*"; exit 1; }
ok() {
  echo "trust_attacks $attack: passed${1:+ ($1)}"
  chmod -R u+rwx "$work" 2> /dev/null
  rm -rf "$work"
  exit 0
}
cp -r "$src/references/smoke" "$ref" || fail "cannot copy references/smoke"
py() { /usr/bin/python3 - "$@"; }  # Debian's, with python3-numpy (install-deps.sh)

# expect CODE LOG NEEDLE... : the last command's exit status and every needle in its output.
expect() {
  local want=$1 rc=$2 log=$3
  shift 3
  [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $(tail -c 1500 "$log")"
  for needle in "$@"; do grep -qF -- "$needle" "$log" || fail "'$needle' missing from: $(tail -c 1500 "$log")"; done
}
v() {  # v LOG ARGS...: run validate with a hard time limit (a hang is a failure, not a stuck CI)
  local log=$1
  shift
  timeout -k 5 60 "$bin" "$@" > "$log" 2>&1
}
oracle_run() { v "$work/run.log" run --backend oracle --progress 0 --ref "$ref" --out "$run" "$@" || fail "oracle run: $(tail -5 "$work/run.log")"; }
hash_of() { sha256sum "$1" | cut -d' ' -f1; }
# Rewrites a manifest entry's sha256/size so only the data (not the bookkeeping) is wrong.
rehash() {  # rehash SET REL
  py "$1" "$2" << 'EOF'
import hashlib, json, os, sys
d, rel = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(d, "manifest.json")))
data = open(os.path.join(d, rel), "rb").read()
m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
EOF
}

case $attack in
# --- false passes -------------------------------------------------------------------------------
run_out_is_ref)  # 1. run --out REF overwrote the references; verify and compare REF REF passed
  before=$(hash_of "$ref/manifest.json")
  for out in "$ref" "$ref/float32" "$ref/sub/run" "$work"; do
    v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$out"
    expect 2 $? "$work/log" "reference set"
  done
  [ "$(hash_of "$ref/manifest.json")" = "$before" ] || fail "the reference manifest changed"
  [ ! -e "$ref/sub" ] || fail "a directory was created inside the reference set"
  v "$work/log" verify "$ref"
  expect 0 $? "$work/log" "0 mismatch"
  # and an existing non-empty --out needs --overwrite, which replaces it whole
  mkdir -p "$run" && echo old > "$run/stale.txt"
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$run"
  expect 2 $? "$work/log" "exists and is not empty" "--overwrite"
  oracle_run --overwrite
  [ ! -e "$run/stale.txt" ] || fail "--overwrite kept an old file"
  mkdir -p "$work/m1"
  echo x > "$work/m1/x"
  v "$work/log" merge "$work/m1" "$run"
  expect 2 $? "$work/log" "not empty"
  v "$work/log" merge "$run/inside" "$run"
  expect 2 $? "$work/log" "inside"
  ok ;;

stale_run_cases)  # 2. run --out OLD_RUN --only x kept the old run's cases: compare passed 65 checks
  oracle_run
  oracle_run --overwrite --only '^float32/k0072'
  [ ! -e "$run/bfloat16" ] || fail "--overwrite kept the old run's bfloat16 cases"
  v "$work/log" compare "$ref" "$run" -q
  expect 0 $? "$work/log" "9 passed, 0 failed, 61 not run"
  # Files planted beside a run (an older run's case) are never read: not listed, not paired.
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$work/full" || fail "full run"
  mkdir -p "$run/bfloat16" && cp "$work/full/bfloat16/"* "$run/bfloat16/"
  v "$work/log" compare "$ref" "$run" -q
  expect 0 $? "$work/log" "9 passed, 0 failed, 61 not run"
  v "$work/log" verify "$run"
  expect 1 $? "$work/log" "not listed in the manifest"
  ok ;;

stale_generate_cases)  # 2. generate --out OLD_SET with another seed kept 7 stale cases; --resume too
  cases=$src/cases/smoke.json
  v "$work/log" generate --cases "$cases" --out "$work/set" --progress 0 --dtype float32
  expect 0 $? "$work/log"
  v "$work/log" generate --cases "$cases" --out "$work/set" --progress 0 --dtype float32 --seed 7 --only k0072
  expect 2 $? "$work/log" "exists and is not empty" "--overwrite"
  v "$work/log" generate --cases "$cases" --out "$work/set" --progress 0 --dtype float32 --seed 7 --only k0072 --resume
  expect 2 $? "$work/log" "--resume" "seed" "7"
  v "$work/log" generate --cases "$cases" --out "$work/set" --progress 0 --dtype float32 --fill exact --resume
  expect 2 $? "$work/log" "--resume" "fill"
  v "$work/log" generate --cases "$cases" --out "$work/set" --progress 0 --dtype float32 --seed 7 --only k0072 --overwrite
  expect 0 $? "$work/log"
  v "$work/log" list "$work/set"
  n=$(grep -c "k0144\|odd_" "$work/log")
  [ "$n" -eq 0 ] || fail "list shows cases of the old set after --overwrite"
  v "$work/log" verify "$work/set"
  expect 0 $? "$work/log" "0 mismatch"
  # a stale metadata file planted beside the set is not listed: verify fails, list ignores it
  cp "$ref/float32/k0144_ic016_metadata.json" "$work/set/float32/"
  v "$work/log" verify "$work/set"
  expect 1 $? "$work/log" "k0144_ic016_metadata.json: regular file not listed in the manifest"
  v "$work/log" list "$work/set"
  grep -q k0144 "$work/log" && fail "list read an unlisted metadata file"
  ok ;;

empty_manifest)  # 3. a manifest with an empty files object verified ("0 files checked")
  py "$ref" << 'EOF'
import json, sys, os
p = os.path.join(sys.argv[1], "manifest.json"); m = json.load(open(p)); m["files"] = {}; json.dump(m, open(p, "w"))
EOF
  v "$work/log" verify "$ref"
  expect 2 $? "$work/log" "lists nothing"
  cp -r "$src/references/smoke" "$work/ref2"
  # a manifest that omits a file metadata refers to (and the file itself removed)
  py "$work/ref2" << 'EOF'
import json, sys, os
p = os.path.join(sys.argv[1], "manifest.json"); m = json.load(open(p))
del m["files"]["float32/k0072_ic008_conv2d_output.npy"]; json.dump(m, open(p, "w"))
os.remove(os.path.join(sys.argv[1], "float32/k0072_ic008_conv2d_output.npy"))
EOF
  v "$work/log" verify "$work/ref2"
  expect 1 $? "$work/log" "k0072_ic008_conv2d_output.npy, which the set's manifest does not list"
  v "$work/log" compare "$work/ref2" "$work/ref2"
  expect 2 $? "$work/log" "does not list"
  ok ;;

metadata_paths)  # 4. tensors.<t>.file = ../x or /abs (hashes rewritten) verified; compare opened it
  mkdir -p "$work/outside"
  cp "$ref/float32/k0072_ic008_conv2d_output.npy" "$work/outside/evil.npy"
  for target in "../../outside/evil.npy" "$work/outside/evil.npy"; do
    rm -rf "$work/ref2" && cp -r "$src/references/smoke" "$work/ref2"
    py "$work/ref2" "$target" << 'EOF'
import hashlib, json, os, sys
d, target = sys.argv[1], sys.argv[2]
p = os.path.join(d, "float32/k0072_ic008_metadata.json"); meta = json.load(open(p))
meta["ops"]["conv2d"]["tensors"]["output"]["file"] = target
json.dump(meta, open(p, "w"), indent=2)
m = json.load(open(os.path.join(d, "manifest.json")))
data = open(p, "rb").read(); m["files"]["float32/k0072_ic008_metadata.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
EOF
    v "$work/log" verify "$work/ref2"
    expect 1 $? "$work/log" "tensors.output.file is" "plain name inside"
    v "$work/log" compare "$work/ref2" "$work/ref2"
    expect 2 $? "$work/log" "plain name inside"
  done
  ok ;;

metadata_max_abs)  # 4. max_abs = 1e30 made compare pass a run off by 0.3 everywhere
  oracle_run
  py "$ref" "$run" << 'EOF'
import hashlib, json, os, sys
import numpy as np
ref, run = sys.argv[1], sys.argv[2]
p = os.path.join(ref, "float32/k0072_ic008_metadata.json"); meta = json.load(open(p))
meta["ops"]["conv2d"]["tensors"]["output"]["max_abs"] = 1e30
json.dump(meta, open(p, "w"), indent=2)
m = json.load(open(os.path.join(ref, "manifest.json")))
data = open(p, "rb").read(); m["files"]["float32/k0072_ic008_metadata.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(ref, "manifest.json"), "w"), indent=2)
# the run's output off by 0.3 everywhere, its own manifest rewritten to match (a consistent liar)
q = os.path.join(run, "float32/k0072_ic008_conv2d_output.npy"); a = np.load(q); np.save(q, a + np.float32(0.3))
m = json.load(open(os.path.join(run, "manifest.json")))
data = open(q, "rb").read(); m["files"]["float32/k0072_ic008_conv2d_output.npy"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(run, "manifest.json"), "w"), indent=2)
EOF
  v "$work/log" verify "$ref"
  expect 1 $? "$work/log" "metadata max_abs 1e+30 but the data's is"
  v "$work/log" compare "$ref" "$run" --only 'float32/k0072_ic008/conv2d/output'
  expect 2 $? "$work/log" "records max_abs 1e+30"
  ok ;;

tampered_run_file)  # 5. compare did not check the run's files against the run's manifest
  oracle_run
  # swap in another case's (numerically plausible) grad: a tiny edit, manifest untouched
  py "$run" << 'EOF'
import os, sys
import numpy as np
q = os.path.join(sys.argv[1], "float32/k0072_ic008_conv2d_grad_weight.npy"); a = np.load(q)
a.flat[3] = np.nextafter(a.flat[3], np.float32(np.inf)); np.save(q, a)
EOF
  v "$work/log" compare "$ref" "$run"
  expect 1 $? "$work/log" "k0072_ic008_conv2d_grad_weight.npy: tampered" "run's manifest"
  # an edited case file of the run (claiming another outcome) is refused before it is trusted
  py "$run" << 'EOF'
import json, os, sys
p = os.path.join(sys.argv[1], "float32/k0144_ic016_run.json"); d = json.load(open(p)); d["ops"]["conv2d"]["message"] = "edited"; json.dump(d, open(p, "w"))
EOF
  v "$work/log" compare "$ref" "$run"
  expect 2 $? "$work/log" "k0144_ic016_run.json: tampered"
  ok ;;

gate_tensor_names)  # 6. --gate grad_wieght.max_ulp=0 was accepted and gated nothing (exit 0)
  oracle_run
  v "$work/log" compare "$ref" "$run" --gate grad_wieght.max_ulp=0
  expect 2 $? "$work/log" "grad_wieght" "neither a dtype, op or role nor a tensor name" "grad_weight"
  printf '{"format": "validate-policy/1", "rules": [{"tensor": "grad_wieght", "max_ulp": 0}]}' > "$work/p.json"
  v "$work/log" compare "$ref" "$run" --policy "$work/p.json"
  expect 2 $? "$work/log" "unknown tensor 'grad_wieght'"
  # a well-spelt rule that matches nothing of these sets is named as a warning
  v "$work/log" compare "$ref" "$run" --only '^float32/k0072_ic008/matmul/' --gate conv2d.grad_bias.max_ulp=0
  expect 0 $? "$work/log" "matched no tensor of the compared sets"
  ok ;;

nan_both_sides)  # 7. both sides all-NaN passed
  oracle_run
  py "$ref" "$run" << 'EOF'
import hashlib, json, os, sys
import numpy as np
def rehash(d, rel):
    m = json.load(open(os.path.join(d, "manifest.json")))
    data = open(os.path.join(d, rel), "rb").read()
    m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
for d in sys.argv[1:]:
    rel = "float32/k0072_ic008_matmul_output.npy"
    q = os.path.join(d, rel); a = np.load(q); a[:] = np.nan; np.save(q, a); rehash(d, rel)
d = sys.argv[1]
rel = "float32/k0072_ic008_metadata.json"
p = os.path.join(d, rel); meta = json.load(open(p))
meta["ops"]["matmul"]["tensors"]["output"]["max_abs"] = 0.0
json.dump(meta, open(p, "w"), indent=2); rehash(d, rel)
EOF
  v "$work/log" compare "$ref" "$run" --only 'float32/k0072_ic008/matmul/output'
  expect 2 $? "$work/log" "NaN reference is a broken reference"
  v "$work/log" verify "$ref"
  expect 1 $? "$work/log" "NaN value(s): a broken reference"
  ok ;;

require_all)  # 8. deleted cases, omitted tensors and unsupported ops gave exit 0 ("not run")
  oracle_run --only '^float32/'
  v "$work/log" compare "$ref" "$run" -q
  expect 0 $? "$work/log" "not run"
  v "$work/log" compare "$ref" "$run" -q --require-all
  expect 1 $? "$work/log" "--require-all" "not checked"
  ok ;;

# --- crashes and hangs -------------------------------------------------------------------------
symlink_loop)  # 9. ln -s loopy loopy inside a set aborted verify, run and generate --resume (134)
  ln -s loopy "$ref/float32/loopy"
  v "$work/log" verify "$ref"
  expect 1 $? "$work/log" "loopy: symbolic link not listed"
  oracle_run
  v "$work/log" compare "$ref" "$run" -q
  expect 0 $? "$work/log" "70 passed"
  # a program that leaves a loop in its work dir
  v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/run2" --keep-work \
    --cmd 'ln -s loopy {dir}/loopy; exit 3'
  expect 1 $? "$work/log" "exited with status 3"
  mkdir -p "$work/gen" && ln -s loopy "$work/gen/loopy"
  v "$work/log" generate --cases "$src/cases/smoke.json" --dtype float32 --only k0072 --out "$work/gen" --resume --progress 0
  rc=$?
  [ $rc -eq 2 ] || [ $rc -eq 0 ] || fail "generate --resume exited $rc: $(tail -5 "$work/log")"
  ok ;;

unreadable_dirs)  # 10. as non-root, a mode-000 directory left by a program aborted run (134)
  as_user=()
  if [ "$(id -u)" -eq 0 ]; then
    command -v setpriv > /dev/null || ok "skipped: setpriv missing"
    chmod 755 "$work" && chmod -R a+rwX "$work" && chmod 777 "$work"
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  fi
  chmod -R a+rX "$ref" 2> /dev/null
  timeout -k 5 120 "${as_user[@]}" "$bin" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/r" \
    --cmd 'mkdir -p {dir}/locked && chmod 000 {dir}/locked; chmod 000 {dir}' > "$work/log" 2>&1
  expect 1 $? "$work/log" "error"
  mkdir -p "$work/r/float32/hidden" && chmod 000 "$work/r/float32/hidden" 2> /dev/null
  timeout -k 5 60 "${as_user[@]}" "$bin" verify "$work/r" > "$work/log" 2>&1
  rc=$?
  [ $rc -eq 1 ] || [ $rc -eq 2 ] || fail "verify exited $rc: $(tail -5 "$work/log")"
  chmod -R u+rwx "$work/r" 2> /dev/null
  ok ;;

fifo)  # 11. a FIFO in place of a listed file or a .npy blocked verify, compare and run forever
  oracle_run
  rm "$ref/float32/k0072_ic008_conv2d_output.npy" && mkfifo "$ref/float32/k0072_ic008_conv2d_output.npy"
  v "$work/log" verify "$ref"
  expect 1 $? "$work/log" "k0072_ic008_conv2d_output.npy: is a special file"
  v "$work/log" compare "$ref" "$run"
  expect 2 $? "$work/log" "k0072_ic008_conv2d_output.npy is not a regular file"
  rm "$ref/float32/k0072_ic008_conv2d_input.npy" && mkfifo "$ref/float32/k0072_ic008_conv2d_input.npy"
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$work/r2"
  expect 1 $? "$work/log" "k0072_ic008_conv2d_input.npy is not a regular file"
  # a program that leaves a FIFO as its output
  v "$work/log" run --backend exec --layout torch --progress 0 --ref "$src/references/smoke" --out "$work/r3" \
    --only '^float32/k0072' --cmd 'mkfifo {dir}/output.bin'
  expect 1 $? "$work/log" "output.bin: a FIFO"
  ok ;;

timeout_overflow)  # 12. --timeout 1e10 killed every program at once (overflow)
  for t in 1e10 1e300 inf nan -1 0; do
    v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/r_$t" --timeout "$t" --cmd 'true'
    expect 2 $? "$work/log" "--timeout"
    [ ! -e "$work/r_$t" ] || fail "--timeout $t left a run directory behind"
  done
  ok ;;

sigterm_forwarded)  # 13. SIGTERM to validate run left the user's program running forever
  marker=$work/still_running
  started=$work/started
  cat > "$work/prog.sh" << EOF
trap 'echo got TERM >&2; exit 143' TERM
touch "$started"
i=0; while [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done
touch "$marker"
EOF
  "$bin" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$run" --cmd "sh $work/prog.sh" > "$work/log" 2>&1 &
  pid=$!
  # Signal once the program runs (validate installs its handlers before it starts any): a fixed
  # sleep raced a loaded machine, where the signal could arrive before the first case began. Not
  # `pgrep -f prog.sh`: validate's own command line holds that name.
  for _ in $(seq 300); do [ -e "$started" ] && break; sleep 0.1; done
  kill -TERM $pid
  t0=$(date +%s)
  wait $pid
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  [ $rc -eq 143 ] || fail "validate run exited $rc after SIGTERM, expected 143: $(tail -5 "$work/log")"
  [ $secs -lt 20 ] || fail "validate run took ${secs}s to stop"
  pgrep -f "$work/prog.sh" > /dev/null && fail "the program is still running after validate stopped"
  sleep 1
  [ ! -e "$marker" ] || fail "the program ran to completion"
  [ ! -e "$run/manifest.json" ] || fail "an interrupted run wrote a manifest"
  grep -q "interrupted" "$work/log" || fail "no 'interrupted' in: $(tail -5 "$work/log")"
  grep -q 'interrupted: validate received SIGTERM' "$run/float32/"*_run.json || fail "the interrupted case is not recorded as interrupted"
  grep -q '"interrupted"' "$run/run_info.json" || fail "run_info.json does not say the run was interrupted"
  v "$work/log" compare "$ref" "$run"
  expect 2 $? "$work/log" "incomplete"
  ok ;;

out_symlinks)  # 14. an --out holding symlinks: results went into the targets; remove_all deleted outside
  mkdir -p "$work/victim" && echo precious > "$work/victim/keep.txt"
  mkdir -p "$run" && ln -s "$work/victim" "$run/float32" && ln -s "$work/victim/keep.txt" "$run/manifest.json"
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$run"
  expect 2 $? "$work/log" "not empty"
  oracle_run --overwrite
  [ "$(cat "$work/victim/keep.txt")" = precious ] || fail "a file outside --out was changed"
  [ "$(ls "$work/victim")" = keep.txt ] || fail "files were written outside --out: $(ls "$work/victim")"
  [ ! -L "$run/float32" ] || fail "--overwrite kept the symlink"
  # a program that replaces its work dir with a link elsewhere
  v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/r2" --only '^float32/k0072' \
    --cmd "rm -rf {dir} && ln -s $work/victim {dir}"
  expect 1 $? "$work/log" "removed or replaced its work directory"
  [ "$(ls "$work/victim")" = keep.txt ] || fail "files were written into the link target: $(ls "$work/victim")"
  ok ;;

concurrent_writers)  # 15. two generates into one --out both exited 0; 1 in 3 sets failed verify
  v "$work/log0" generate --cases "$src/cases/smoke.json" --dtype float32 --out "$work/set" --progress 0 &
  p0=$!
  v "$work/log1" generate --cases "$src/cases/smoke.json" --dtype float32 --out "$work/set" --progress 0 &
  p1=$!
  wait $p0; r0=$?
  wait $p1; r1=$?
  # exactly one wins; the other is refused (exit 2), naming the holder or the non-empty directory
  # (or, where /proc/locks cannot tell, the process that has it open: lock_holder.hpp)
  [ $((r0 + r1)) -eq 2 ] && { [ $r0 -eq 0 ] || [ $r1 -eq 0 ]; } || fail "exits $r0 and $r1, expected 0 and 2"
  loser=$work/log0; [ $r0 -eq 2 ] || loser=$work/log1
  grep -qE "is being written by (another process \()?pid [0-9]+ |not empty" "$loser" || fail "no holder named: $(cat "$loser")"
  v "$work/log" verify "$work/set"
  expect 0 $? "$work/log" "0 mismatch"
  # the same for run, whose lock is taken before any case runs
  "$bin" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$run" --cmd 'sleep 3; exit 1' --only '^float32/k0072' > "$work/log0" 2>&1 &
  p1=$!
  # Once its first case runs (its work dir exists) the lock is held; a fixed sleep raced load.
  for _ in $(seq 300); do [ -d "$run/work" ] && break; sleep 0.1; done
  v "$work/log1" run --backend oracle --progress 0 --ref "$ref" --out "$run"
  expect 2 $? "$work/log1"
  grep -qE "is being written by (another process \()?pid $p1 " "$work/log1" || fail "holder $p1 not named: $(cat "$work/log1")"
  wait $p1
  ok ;;

junk_not_hashed)  # 16. a run --out's unrelated files were hashed; a 10 GB sparse junk file too
  v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$run" --keep-work --only '^float32/k0072' \
    --cmd 'truncate -s 4G {dir}/junk.bin; exit 1'
  expect 1 $? "$work/log" "exited with status 1"
  grep -q junk "$run/manifest.json" && fail "the junk file is in the run's manifest"
  n=$(py "$run" << 'EOF'
import json, os, sys
print(sum(1 for k in json.load(open(os.path.join(sys.argv[1], "manifest.json")))["files"] if k.startswith("work/")))
EOF
)
  [ "$n" -eq 0 ] || fail "$n work files listed in the manifest"
  # peak memory stays far below the junk's size (the file is never read)
  if command -v /usr/bin/time > /dev/null; then
    /usr/bin/time -f '%M' -o "$work/rss" "$bin" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/r2" \
      --only '^float32/k0072' --cmd 'truncate -s 4G {dir}/junk.bin; exit 1' > /dev/null 2>&1
    kb=$(tail -1 "$work/rss")
    [ "$kb" -lt 500000 ] || fail "peak RSS ${kb} kB with a 4 GB junk file in the work dir"
  fi
  ok ;;

quoted_placeholder)  # 17. a quoted '{dir}' with $(...) in the path ran the command
  mkdir -p "$work/\$(touch pwned)"
  for cmd in "cat '{dir}/case.json'" 'cat "{dir}/case.json"' "cat \"x{case}\""; do
    v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/\$(touch pwned)/r" --cmd "$cmd"
    expect 2 $? "$work/log" "inside quotes"
  done
  (cd "$work" && timeout 60 "$bin" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/\$(touch pwned)/r" \
    --only '^float32/k0072' --cmd 'test -f {dir}/case.json' > "$work/log" 2>&1)
  [ ! -e "$work/pwned" ] || fail "the path's \$(...) was run"
  ok ;;

*) fail "unknown attack" ;;
esac
