# Sourced by the tests of scripts/gpu-acceptance.sh (gpu_acceptance_plan.sh, gpu_acceptance_v2.sh,
# gpu_acceptance_v2_stand_ins.sh) once they have set `repo` and `work`: the script under test, a
# fresh scratch folder, and the failure count that `checks_done` reports.
script=$repo/scripts/gpu-acceptance.sh
rm -rf "$work" && mkdir -p "$work" || exit 2
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# checks_done WHAT: removes the scratch folder, then exits 1 if any check failed.
checks_done() {
  rm -rf "$work"
  ((fails == 0)) || { echo "$fails check(s) failed"; exit 1; }
  echo "$1: every check passed"
}
