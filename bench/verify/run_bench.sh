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
# Each timing is "wall cpu" (cpu = user + system): on a machine loaded by other jobs the wall ratio
# mostly measures the scheduler, the CPU-time ratio does not; `validate --version` is the start-up.
timed() { { /usr/bin/time -f '%e %U %S' "$@" > /dev/null; } 2>&1 | tail -1 | awk '{ print $1, $2 + $3 }'; }
o=() v=() oc=() vc=()
for ((r = 0; r < reps; ++r)); do
  echo "uptime: $(uptime)"
  read -r w c < <(timed bash -c 'cd "$1" && shift && openssl dgst -sha256 "$@"' _ "$set" "${files[@]}")
  o+=("$w") oc+=("$c")
  read -r w c < <(timed "$bin" verify "$set")
  v+=("$w") vc+=("$c")
  echo "openssl ${o[-1]} s (cpu ${oc[-1]} s), verify ${v[-1]} s (cpu ${vc[-1]} s)"
done
read -r sw sc < <(timed "$bin" --version)
ob=$(printf '%s\n' "${o[@]}" | best)
vb=$(printf '%s\n' "${v[@]}" | best)
ocb=$(printf '%s\n' "${oc[@]}" | best)
vcb=$(printf '%s\n' "${vc[@]}" | best)
awk -v b="$bytes" -v o="$ob" -v v="$vb" -v oc="$ocb" -v vc="$vcb" -v sc="$sc" 'BEGIN {
  printf "%.2f GB: openssl dgst -sha256 (one core) %.2f s (%.2f GB/s); validate verify %.2f s (%.2f GB/s of files, inputs hashed too); verify / openssl = %.2f\n", b / 1e9, o, b / 1e9 / o, v, b / 1e9 / v, v / o
  printf "CPU time (best): openssl %.2f s, verify %.2f s of which start-up %.2f s; verify / openssl = %.2f, without start-up %.2f\n", oc, vc, sc, vc / oc, (vc - sc) / oc }'
