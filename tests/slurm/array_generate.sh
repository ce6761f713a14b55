#!/usr/bin/env bash
# ctest slurm.array_generate: the README's Slurm workflow on a real single-node Slurm cluster
# (scripts/slurm-cluster.sh: Debian's slurmctld, slurmd and munge, localhost only, stopped at the
# end whatever happens). scripts/slurm-generate.sh submits the smoke set as a 4-task job array and
# the merge as an afterok dependency; the merged set must be byte-identical to an unsharded
# `validate generate` and verify. A second submission whose tasks all fail must leave the merge
# job cancelled and no set written.
#   array_generate.sh VALIDATE_BIN WORK_DIR   (run from the source tree)
set -uo pipefail
bin=$(realpath "$1")
work=$2
rm -rf "$work" && mkdir -p "$work" && work=$(cd "$work" && pwd)
fail() { echo "FAIL: $*"; exit 1; }

start=$SECONDS
"$bin" generate --cases cases/smoke.json --out "$work/unsharded" --progress 0 > "$work/unsharded.log" 2>&1 ||
  { cat "$work/unsharded.log"; fail "unsharded generate"; }

cat > "$work/jobs.sh" <<SH
set -u
export VALIDATE_BIN=$bin
cd $(pwd)
timeout 240 scripts/slurm-generate.sh "$work/ref" --cases cases/smoke.json --shards 4 --gpus-per-task 0 --wait
echo "good-rc=\$?"
# Every task fails (a case file generate refuses): afterok never holds.
echo '{"format": "validate-cases/1", "sweep": {"in_channels": [8]}, "bogus": 1}' > "$work/broken.json"
timeout 120 scripts/slurm-generate.sh "$work/broken" --cases "$work/broken.json" --shards 2 --gpus-per-task 0 --wait
echo "broken-rc=\$?"
squeue -h -o '%i %T' > "$work/squeue.txt"
SH
# In the background, so that a TERM to this test (ctest's timeout) reaches the cluster script,
# which then stops its daemons.
scripts/slurm-cluster.sh run "$work/cluster" -- bash "$work/jobs.sh" > "$work/jobs.log" 2>&1 &
cluster=$!
trap 'kill -TERM $cluster 2> /dev/null; wait $cluster; exit 143' TERM INT
wait $cluster
rc=$?
trap - TERM INT
cat "$work/jobs.log"
[ $rc -eq 77 ] && { echo "SKIP: no Slurm cluster can run here"; exit 77; }
[ $rc -eq 0 ] || fail "the cluster run exited $rc (logs in $work/cluster/log)"
# No daemon of ours outlives the test.
[ "$(wc -l < "$work/cluster/daemons.pids")" -eq 3 ] || fail "the cluster did not record its three daemons"
while read -r pid; do
  ! kill -0 "$pid" 2> /dev/null || fail "daemon $pid still runs after the cluster stopped"
done < "$work/cluster/daemons.pids"
grep -q '^good-rc=0$' "$work/jobs.log" || fail "the array + merge submission did not succeed"
grep -q '^broken-rc=0$' "$work/jobs.log" && fail "a merge whose shards all failed reported success"
grep -q '^broken-rc=' "$work/jobs.log" || fail "the broken submission did not finish"
[ ! -e "$work/broken/manifest.json" ] || fail "the merge ran although its afterok dependency failed"
[ -s "$work/squeue.txt" ] && fail "jobs left in the queue: $(cat "$work/squeue.txt")"

# Each shard ran as its own array task, and the merge after them.
for i in 0 1 2 3; do
  ls "$work/ref.shards/"slurm-*_"$i".out > /dev/null 2>&1 || fail "no log of array task $i"
  grep -q "^shard $i/4 of job " "$work/ref.shards/"slurm-*_"$i".out || fail "task $i did not run shard $i/4"
  grep -q "\"shard\": \"$i/4\"" "$work/ref.shards/$i/config.json" || fail "shard $i's config.json does not record $i/4"
done
grep -q "^merge job [0-9]* after array job" "$work/ref.shards/"merge-*.out || fail "no merge job log"

# The merged set: the same files as the unsharded run, every case file byte-identical, config.json
# equal but for "selection" (which records the merge), and it verifies.
(cd "$work/unsharded" && find . -type f | sort) > "$work/unsharded.files"
(cd "$work/ref" && find . -type f | sort) > "$work/ref.files"
diff "$work/unsharded.files" "$work/ref.files" || fail "the merged set's files differ from the unsharded set's"
n=0
while read -r f; do
  case $f in ./manifest.json | ./config.json | ./system_info.json | ./README.md) continue ;; esac
  cmp -s "$work/unsharded/$f" "$work/ref/$f" || fail "$f differs from the unsharded run's"
  n=$((n + 1))
done < "$work/ref.files"
[ $n -gt 100 ] || fail "only $n case files compared"
/usr/bin/python3 - "$work/unsharded/config.json" "$work/ref/config.json" <<'PY' || fail "config.json differs beyond selection"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
a.pop("selection", None), b.pop("selection", None)
assert a == b, sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
PY
"$bin" verify "$work/ref" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "the merged set does not verify"; }
echo "slurm.array_generate: $n case files byte-identical to the unsharded run, merged set verifies ($((SECONDS - start)) s)"
