#!/usr/bin/env bash
# `validate verify` against one core of `openssl dgst -sha256` over the same bytes, side by side:
#   bench/verify/run_bench.sh [BUILD_DIR] [SET_DIR] [REPS]
# SET_DIR defaults to a fresh `generate --cases cases/default.json --dtype float32` (3.3 GB, made
# once and removed at the end). Both are timed warm (page cache), alternating, best of REPS
# (default 3). verify does more work than openssl: it also hashes every input's values (half the
# bytes of the default sweep) against the metadata.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
set=${2:-}
reps=${3:-3}
bin=$build/validate
[[ -x $bin ]] || { echo "build validate first: scripts/build.sh" >&2; exit 2; }
if [[ -z $set ]]; then
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/validate_verifybench.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  set=$tmp/ref
  "$bin" generate --cases "$root/cases/default.json" --dtype float32 --out "$set" --progress 0 > /dev/null
fi
mapfile -t files < <(cd "$set" && find . -type f ! -name manifest.json | sort)
bytes=$(cd "$set" && cat "${files[@]}" | wc -c)
(cd "$set" && cat "${files[@]}" > /dev/null)  # warm
best() { awk 'NR == 1 || $1 < m { m = $1 } END { print m }'; }
o=() v=()
for ((r = 0; r < reps; ++r)); do
  echo "uptime: $(uptime)"
  o+=("$( { /usr/bin/time -f %e bash -c 'cd "$1" && shift && openssl dgst -sha256 "$@" > /dev/null' _ "$set" "${files[@]}"; } 2>&1 | tail -1)")
  v+=("$( { /usr/bin/time -f %e "$bin" verify "$set" > /dev/null; } 2>&1 | tail -1)")
  echo "openssl ${o[-1]} s, verify ${v[-1]} s"
done
ob=$(printf '%s\n' "${o[@]}" | best)
vb=$(printf '%s\n' "${v[@]}" | best)
awk -v b="$bytes" -v o="$ob" -v v="$vb" 'BEGIN {
  printf "%.2f GB: openssl dgst -sha256 (one core) %.2f s (%.2f GB/s); validate verify %.2f s (%.2f GB/s of files, inputs hashed too); verify / openssl = %.2f\n", b / 1e9, o, b / 1e9 / o, v, b / 1e9 / v, v / o }'
