#!/usr/bin/env bash
# `validate generate` of two builds on the same case file, alternating, and the second build again
# with --direct-io: what a change to generate costs (docs/evidence.md, "Cost of the error bounds", was
# measured with the build before error-bound scales as BEFORE):
#   bench/generate/compare_builds.sh BEFORE_BIN AFTER_BIN [CASE_FILE] [REPS]
# e.g. git worktree add /tmp/before 9a30b59 && cmake -S /tmp/before -B /tmp/before/build \
#        -DCMAKE_BUILD_TYPE=Release -DVALIDATE_BUILD_TESTS=OFF -DVALIDATE_BUILD_BENCH=OFF \
#        && cmake --build /tmp/before/build -j"$(nproc)" --target validate
#      bench/generate/compare_builds.sh /tmp/before/build/validate build/validate
# defaults: cases/default.json (both dtypes, 8.2 GB with scales), 3 reps. The previous set is
# removed before each run (not the page cache: drop it yourself to measure cold). Prints each run
# (wall s, peak RSS KB, user s, system s, generate's own split), then the medians and their ratios.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ $# -ge 2 ]] || { sed -n 2,12p "$0" >&2; exit 2; }
before=$1 after=$2
cases=${3:-$root/cases/default.json}
reps=${4:-3}
for b in "$before" "$after"; do [[ -x $b ]] || { echo "not an executable: $b" >&2; exit 2; }; done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/validate_genbuilds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
declare -A walls
for ((r = 1; r <= reps; ++r)); do
  for spec in "before|$before|" "after|$after|" "after--direct-io|$after|--direct-io"; do
    IFS='|' read -r label bin extra <<< "$spec"
    rm -rf "$tmp/set"
    sync
    /usr/bin/time -f "%e %M %U %S" -o "$tmp/time" "$bin" generate --cases "$cases" --out "$tmp/set" --progress 0 \
      $extra > "$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
    read -r wall rss user sys < "$tmp/time"
    echo "$label rep $r: wall ${wall} s, peak RSS ${rss} KB, user ${user} s, system ${sys} s | $(tail -1 "$tmp/log" | sed 's/.*MB, //')"
    walls[$label]="${walls[$label]:-} $wall"
  done
done
median() { tr ' ' '\n' <<< "$1" | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
mb=$(median "${walls[before]}") ma=$(median "${walls[after]}") md=$(median "${walls[after--direct-io]}")
awk -v b="$mb" -v a="$ma" -v d="$md" 'BEGIN {
  printf "median wall: before %.2f s, after %.2f s (%.2fx), after --direct-io %.2f s (%.2fx)\n", b, a, a / b, d, d / b }'
