#!/usr/bin/env bash
# `validate generate` against the peer a user would write (peer_generate.py: PyTorch eager +
# numpy.save + hashlib), side by side on the same machine, BLAS and case file, alternating:
#   bench/generate/run_bench.sh [BUILD_DIR] [CASE_FILE] [REPS]
# defaults: build, cases/default.json (float32 only: 15 cases, 3.3 GB), 1 rep. Prints each run
# (wall seconds, peak RSS in KB, CPU seconds, and the split each reports), then the ratio peer /
# ours and ours / our LibTorch compute alone, and the same in CPU time (what carries over from a
# machine loaded by other jobs). Output goes to a temporary directory, removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
cases=${2:-$root/cases/default.json}
reps=${3:-1}
bin=$build/validate
[[ -x $bin ]] || { echo "build validate first: scripts/build.sh" >&2; exit 2; }
# The peer runs on the PyTorch the build links (PyPI's, in .deps/torch-2.11; PEER_PYTHON to pick
# another), with numpy added to it if missing (bench only: the harness does not need numpy there).
peer_python=${PEER_PYTHON:-$root/.deps/torch-2.11/bin/python}
[[ -x $peer_python ]] || { echo "no $peer_python: scripts/install-deps.sh, or set PEER_PYTHON" >&2; exit 2; }
if ! "$peer_python" -c 'import numpy' 2>/dev/null; then
  echo "installing numpy into $peer_python's environment (bench only)"
  "$peer_python" -m pip install -q numpy
fi
"$peer_python" -c 'import torch; print("peer: torch", torch.__version__)'
tmp=$(mktemp -d "${TMPDIR:-/tmp}/validate_genbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
blas=$(readlink -f "/usr/lib/$(gcc -print-multiarch)/libblas.so.3")
echo "BLAS: $blas; cores: $(nproc)"
timed() {  # timed LABEL CMD...: prints "LABEL wall_s rss_kb cpu_s" then the command's last line
  local label=$1; shift
  local log=$tmp/$label.log
  /usr/bin/time -f "%e %M %U %S" -o "$tmp/$label.time" "$@" > "$log" 2>&1
  read -r wall rss user sys < "$tmp/$label.time"
  echo "$label $wall $rss $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') $(tail -1 "$log")"
}
ours_best=1e9 peer_best=1e9 compute_best=1e9 ours_cpu=1e9 peer_cpu=1e9
for ((r = 0; r < reps; ++r)); do
  echo "uptime: $(uptime)"
  rm -rf "$tmp/ours" "$tmp/peer"
  line=$(timed ours "$bin" generate --cases "$cases" --dtype float32 --out "$tmp/ours" --progress 0)
  echo "$line"
  wall=$(echo "$line" | awk '{print $2}')
  ocpu=$(echo "$line" | awk '{print $4}')
  comp=$(echo "$line" | sed -n 's/.*LibTorch \([0-9.]*\)s.*/\1/p')
  rm -rf "$tmp/ours"
  line=$(timed peer "$peer_python" "$here/peer_generate.py" --cases "$cases" --out "$tmp/peer")
  echo "$line"
  pwall=$(echo "$line" | awk '{print $2}')
  pcpu=$(echo "$line" | awk '{print $4}')
  rm -rf "$tmp/peer"
  ours_best=$(echo "$ours_best $wall" | awk '{print ($2 < $1) ? $2 : $1}')
  peer_best=$(echo "$peer_best $pwall" | awk '{print ($2 < $1) ? $2 : $1}')
  compute_best=$(echo "$compute_best $comp" | awk '{print ($2 < $1) ? $2 : $1}')
  ours_cpu=$(echo "$ours_cpu $ocpu" | awk '{print ($2 < $1) ? $2 : $1}')
  peer_cpu=$(echo "$peer_cpu $pcpu" | awk '{print ($2 < $1) ? $2 : $1}')
done
echo "uptime: $(uptime)"
awk -v o="$ours_best" -v p="$peer_best" -v c="$compute_best" -v oc="$ours_cpu" -v pc="$peer_cpu" 'BEGIN {
  printf "best of %s: ours %.1f s, peer %.1f s: peer / ours = %.2fx; ours / our LibTorch compute (%.1f s) = %.2fx\n", "'"$reps"'", o, p, p / o, c, o / c
  printf "CPU time (user + system, best): ours %.1f s, peer %.1f s: peer / ours = %.2fx; two cores cannot run ours in under %.1f s\n", oc, pc, pc / oc, oc / 2 }'
