#!/usr/bin/env bash
# Generates a reference set on a Slurm cluster: a job array with one `validate generate --shard i/N`
# per task, and a merge job that runs only once every task has succeeded (afterok), then verifies
# the merged set. The result is byte-identical to an unsharded `validate generate` (tested on a
# real Slurm cluster by tests/slurm/array_generate.sh).
#
#   scripts/slurm-generate.sh OUT [options] [-- extra sbatch options for every job]
#     --cases FILE         case file (default cases/default.json)
#     --dtype LIST         dtypes (default: the case file's)
#     --shards N           array tasks (default 8)
#     --gpus-per-task G    GPUs per task (default 1: --gpus=1 and --device cuda; 0: CPU only)
#     --wait               block until the merge job ends; exit with its status
#   VALIDATE_BIN         the validate binary, on a path every node sees (default build/validate)
#
# Shards go to OUT.shards/<i> (kept: delete them once OUT verifies), job logs to
# OUT.shards/slurm-<job>_<task>.out and OUT.shards/merge-<job>.out. Without --wait it prints the
# two job ids and returns at once. A failed task leaves the merge job's dependency unsatisfiable:
# Slurm cancels it (--kill-on-invalid-dep) and OUT is not written. A submission sbatch refuses
# (either job) exits 1 and leaves no OUT.shards/ behind (an array without its merge is cancelled).
set -euo pipefail

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] && [ "${1#-}" = "$1" ] || usage
out=$1
shift
cases=cases/default.json dtype='' shards=8 gpus=1 wait=0
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --cases) cases=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --gpus-per-task) gpus=$2; shift 2 ;;
    --wait) wait=1; shift ;;
    --) shift; extra=("$@"); break ;;
    *) usage ;;
  esac
done
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "slurm-generate: --shards must be a positive integer" >&2; exit 2; }
[[ $gpus =~ ^[0-9]+$ ]] || { echo "slurm-generate: --gpus-per-task must be an integer" >&2; exit 2; }
[ -f "$cases" ] || { echo "slurm-generate: no case file $cases" >&2; exit 2; }
bin=$(realpath "${VALIDATE_BIN:-build/validate}")
[ -x "$bin" ] || { echo "slurm-generate: $bin is not executable (build it, or set VALIDATE_BIN)" >&2; exit 2; }
out=$(realpath -m "$out")
cases=$(realpath "$cases")
[ ! -e "$out" ] || [ -z "$(ls -A "$out")" ] || { echo "slurm-generate: $out exists and is not empty" >&2; exit 2; }
shard_dir=$out.shards
rm -rf "$shard_dir" && mkdir -p "$shard_dir"

q() { printf '%q' "$1"; }
device=cpu
gpu_opts=()
if [ "$gpus" -gt 0 ]; then device=cuda; gpu_opts=(--gpus="$gpus"); fi
gen="$(q "$bin") generate --cases $(q "$cases") --device $device ${dtype:+--dtype $(q "$dtype")} --progress 0"
gen+=" --shard \$SLURM_ARRAY_TASK_ID/$shards --out $(q "$shard_dir")/\$SLURM_ARRAY_TASK_ID"

# A submission sbatch refuses leaves nothing behind: no job writes into the shard directory then,
# and a stale OUT.shards/ would only be mistaken for a sweep in progress.
abandon() {
  rm -rf "$shard_dir"
  echo "slurm-generate: $1; removed $shard_dir" >&2
  exit 1
}

# One shard per array task.
set +e
array_id=$(sbatch --parsable --job-name=validate-generate --array=0-$((shards - 1)) "${gpu_opts[@]}" \
  --output="$shard_dir/slurm-%A_%a.out" "${extra[@]}" \
  --wrap "echo \"shard \$SLURM_ARRAY_TASK_ID/$shards of job \$SLURM_ARRAY_JOB_ID on \$(hostname)\"; exec $gen")
rc=$?
set -e
array_id=${array_id%%;*}
[ $rc -eq 0 ] && [ -n "$array_id" ] || abandon "sbatch refused the array job (exit $rc)"
# The merge, once every task has exited 0.
merge="$(q "$bin") merge $(q "$out") $(for i in $(seq 0 $((shards - 1))); do printf '%s ' "$(q "$shard_dir/$i")"; done)"
merge_opts=(--parsable --job-name=validate-merge --dependency=afterok:"$array_id" --kill-on-invalid-dep=yes
            --output="$shard_dir/merge-%j.out")
echo "slurm-generate: array job $array_id ($shards shards of $cases on $device) -> $shard_dir" >&2
set +e
merge_id=$(sbatch "${merge_opts[@]}" "${extra[@]}" \
  --wrap "echo \"merge job \$SLURM_JOB_ID after array job $array_id\"; $merge && exec $(q "$bin") verify $(q "$out")")
rc=$?
set -e
if [ $rc -ne 0 ] || [ -z "${merge_id%%;*}" ]; then
  # Without its merge the array's shards would never become OUT: cancel it before removing the
  # directory its tasks write into.
  scancel "$array_id" 2> /dev/null || echo "slurm-generate: scancel $array_id failed: cancel it by hand" >&2
  abandon "sbatch refused the merge job (exit $rc); array job $array_id cancelled"
fi
echo "slurm-generate: merge job ${merge_id%%;*} (afterok:$array_id) -> $out" >&2
if [ $wait = 1 ]; then
  # Polled here rather than with sbatch --wait, which backs off to 30 s between polls and exits 0
  # for a job Slurm cancelled before it started (a failed afterok dependency). Once the job has
  # left the queue, only a merged set that is there counts.
  merge_id=${merge_id%%;*}
  state=
  while [ $rc -eq 0 ]; do
    state=$(scontrol -o show job "$merge_id" 2> /dev/null | grep -o 'JobState=[A-Z_]*' || true)
    case $state in
      JobState=PENDING | JobState=CONFIGURING | JobState=RUNNING | JobState=COMPLETING | JobState=SUSPENDED) sleep 1 ;;
      *) break ;;
    esac
  done
  if [ $rc -eq 0 ] && [ "${state:-JobState=COMPLETED}" = JobState=COMPLETED ] && [ -f "$out/manifest.json" ]; then
    echo "slurm-generate: $out merged and verified" >&2
    exit 0
  fi
  echo "slurm-generate: the merge job did not succeed (sbatch exit $rc, ${state:-state unknown}); see $shard_dir/*.out" >&2
  exit 1
fi
echo "$array_id ${merge_id%%;*}"
