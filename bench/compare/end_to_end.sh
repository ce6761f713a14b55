#!/usr/bin/env bash
# `validate compare REF RUN` end to end against `cat` of the files it reads, warm page cache.
#
#   bench/compare/end_to_end.sh BUILD_DIR REF RUN [REPS]
#
# The files: those compare opens, as strace sees them on one untimed run (every reference tensor,
# scale and choice file, the op inputs its scale checks read, every run tensor, the manifests and
# metadata); without strace, every file under REF and RUN but REF's README.md and config.json
# (the same set on a set made by `validate generate`). Each is counted once: cat reads each once.
#
# Beside them, what compare cannot go below: one read of the files outside RUN (cat of them) while
# SHA-256 of the files under RUN runs on every core (`validate verify RUN`, which hashes each of
# them against the run's manifest, largest first, two files at a time per core), the two at once.
# compare does both (every run file's digest is checked against the manifest) and more: its ratio
# to that floor is what its metrics, bounds and checks cost on top.
#
# The three run once untimed (the page cache warm), then alternate REPS times (default 5), so that
# whatever else loads the machine loads all three; each line gives the load average before them.
# The best of each is the figure; compare runs with its default threads (every core).
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 BUILD_DIR REF RUN [REPS]" >&2; exit 2; }
build=$1 ref=$2 run=$3 reps=${4:-5}
validate=$build/validate
[[ -x $validate ]] || { echo "no $validate: cmake --build $build --target validate" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/validate_e2e.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
list=$tmp/files
if command -v strace > /dev/null; then
  strace -f -qq -e trace=openat -o "$tmp/strace" "$validate" compare "$ref" "$run" -q > /dev/null || true
  # openat(AT_FDCWD, "path", ...) of regular files under REF or RUN (a call another thread
  # interrupts is split over two lines, "<unfinished ...>" and "<... openat resumed>": the path is
  # on the first; a file that exists was opened).
  sed -n 's/^[0-9]* *openat([^"]*"\([^"]*\)".*$/\1/p' "$tmp/strace" |
    while IFS= read -r f; do [[ -f $f ]] && realpath "$f"; done | sort -u |
    grep -E "^($(realpath "$ref")|$(realpath "$run"))/" > "$list" || true
  how="opened by compare (strace)"
fi
if [[ ! -s $list ]]; then
  { find "$(realpath "$ref")" -type f ! -path '*/README.md' ! -name config.json
    find "$(realpath "$run")" -type f; } | sort > "$list"
  how="every file of REF (but README.md, config.json) and RUN"
fi
mapfile -t files < "$list"
run_real=$(realpath "$run")
mapfile -t outside < <(grep -v -E "^$run_real/" "$list" || true)
bytes=$(awk '{ print }' "$list" | xargs -d '\n' stat -c %s | awk '{ s += $1 } END { printf "%.0f", s }')
echo "files: ${#files[@]} $how, $(awk -v b="$bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }')"
# The binary's own version line (its commit as of its build's configure step) and this script's tree.
echo "binary: $("$validate" --version), script's tree: $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown), kernel: $(uname -r), cores: $(nproc)"

do_cat() { cat "${files[@]}" > /dev/null; }
do_floor() {
  cat "${outside[@]}" > /dev/null &
  local reader=$!
  "$validate" verify "$run" > "$tmp/verify" || { echo "validate verify $run failed:" >&2; cat "$tmp/verify" >&2; exit 1; }
  wait "$reader"
}
do_compare() {
  local rc=0
  "$validate" compare "$ref" "$run" -q > "$tmp/out" || rc=$?
  # 0 all passed, 1 some failed: both are a finished comparison; anything else is not a figure.
  [[ $rc -le 1 ]] || { echo "compare exited $rc:" >&2; cat "$tmp/out" >&2; exit 1; }
}
secs() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

do_cat; do_compare; do_floor  # warm
best_cat="" best_cmp="" best_floor="" loads=()
for ((k = 1; k <= reps; ++k)); do
  l=$(load); loads+=("$l")
  tc=$(secs do_cat)
  tv=$(secs do_compare)
  tf=$(secs do_floor)
  echo "rep $k: load $l  cat ${tc} s  compare ${tv} s  floor ${tf} s"
  best_cat=$(awk -v a="$tc" -v m="$best_cat" 'BEGIN { print (m == "" || a < m) ? a : m }')
  best_cmp=$(awk -v a="$tv" -v m="$best_cmp" 'BEGIN { print (m == "" || a < m) ? a : m }')
  best_floor=$(awk -v a="$tf" -v m="$best_floor" 'BEGIN { print (m == "" || a < m) ? a : m }')
done
echo "compare says: $(tail -1 "$tmp/out")"
echo "load average (1, 5, 15 min) at the first and last rep: ${loads[0]} / ${loads[-1]}"
awk -v c="$best_cat" -v v="$best_cmp" -v b="$bytes" -v n="$reps" 'BEGIN {
  printf "cat %.3f s (%.2f GB/s), compare %.3f s (%.2f GB/s), best of %d: compare / cat = %.2fx\n",
         c, b / c / 1e9, v, b / v / 1e9, n, v / c }'
awk -v c="$best_cat" -v v="$best_cmp" -v f="$best_floor" -v n="$reps" 'BEGIN {
  printf "floor (cat of the files outside RUN beside validate verify RUN) %.3f s, best of %d: floor / cat = %.2fx, compare / floor = %.2fx\n",
         f, n, f / c, v / f }'
