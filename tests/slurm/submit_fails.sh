#!/usr/bin/env bash
# ctest slurm.submit_fails: scripts/slurm-generate.sh when sbatch refuses a submission (a bad
# partition, an account over its limits). A fake sbatch on PATH refuses the array job, then accepts
# it and refuses the merge job; each time the script must exit 1, name the refusal, leave no
# OUT.shards/ directory (nor OUT), and in the second case cancel the array job it did submit. No
# Slurm needed.
#   submit_fails.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1 work=$2
rm -rf "$work" && mkdir -p "$work/bin" && work=$(cd "$work" && pwd)
fail() { echo "FAIL: $*"; exit 1; }

# sbatch: refuses the submission number $SBATCH_REFUSE (1: the array job, 2: the merge job); the
# others print a job id. scancel: records what it was asked to cancel.
cat > "$work/bin/sbatch" <<'SH'
#!/bin/sh
n=$(($(cat "$FAKE_SLURM/count" 2> /dev/null || echo 0) + 1))
echo $n > "$FAKE_SLURM/count"
echo "sbatch $*" >> "$FAKE_SLURM/calls"
if [ "$n" -eq "$SBATCH_REFUSE" ]; then
  echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2
  exit 1
fi
echo "$((4200 + n))"
SH
cat > "$work/bin/scancel" <<'SH'
#!/bin/sh
echo "scancel $*" >> "$FAKE_SLURM/calls"
SH
chmod +x "$work/bin/sbatch" "$work/bin/scancel"
# The script needs an executable validate; nothing runs it here (the jobs are never started).
printf '#!/bin/sh\nexit 0\n' > "$work/bin/validate"
chmod +x "$work/bin/validate"

for refuse in 1 2; do
  state=$work/state$refuse out=$work/ref$refuse
  mkdir -p "$state"
  (cd "$src" && PATH=$work/bin:$PATH FAKE_SLURM=$state SBATCH_REFUSE=$refuse VALIDATE_BIN=$work/bin/validate \
     scripts/slurm-generate.sh "$out" --cases cases/smoke.json --shards 3 --gpus-per-task 0) > "$state/log" 2>&1
  rc=$?
  cat "$state/log"
  [ $rc -eq 1 ] || fail "sbatch refusing submission $refuse: exit $rc, expected 1"
  [ ! -e "$out.shards" ] || fail "sbatch refusing submission $refuse left $out.shards behind"
  [ ! -e "$out" ] || fail "sbatch refusing submission $refuse left $out behind"
  [ "$(grep -c '^sbatch ' "$state/calls")" -eq "$refuse" ] || fail "sbatch was called $(grep -c '^sbatch ' "$state/calls") times"
  grep -q "sbatch refused the $([ $refuse = 1 ] && echo array || echo merge) job (exit 1)" "$state/log" ||
    fail "the refusal is not named"
  if [ $refuse = 2 ]; then
    grep -qx 'scancel 4201' "$state/calls" || fail "the array job 4201 was not cancelled: $(cat "$state/calls")"
  else
    ! grep -q '^scancel' "$state/calls" || fail "scancel called without a job to cancel"
  fi
done
echo "submit_fails: passed"
