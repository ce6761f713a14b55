#!/usr/bin/env bash
# Side by side: memcpy, ours (bench_layout), LibTorch (bench_layout_torch, when built) and numpy
# (compare_peers.py) on the same >= 64 MB conversions; prints the markdown table of docs/layouts.md.
#
#   bench/layout/run_bench.sh [BUILD_DIR] [REPETITIONS]
# defaults: build-layout, 5 repetitions (medians are reported). Build first:
#   cmake -S . -B build-layout -DVALIDATE_TORCH=AUTO && cmake --build build-layout --target bench_layout bench_layout_torch
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build-layout}
reps=${2:-5}
py=/usr/bin/python3
ours=$build/bench/layout/bench_layout
torch=$build/bench/layout/bench_layout_torch
[[ -x $ours ]] || { echo "build bench_layout first: cmake --build $build --target bench_layout" >&2; exit 2; }
$py -c 'import numpy' 2>/dev/null || { echo "needs $py with numpy" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/validate_layout_bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
common=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true --benchmark_min_time=0.2)
echo "bench_layout ..." >&2
"$ours" "${common[@]}" --benchmark_format=json --benchmark_out="$tmp/ours.json" --benchmark_out_format=json >/dev/null
targs=()
if [[ -x $torch ]]; then
  echo "bench_layout_torch ..." >&2
  "$torch" "${common[@]}" --benchmark_format=json --benchmark_out="$tmp/torch.json" --benchmark_out_format=json >/dev/null
  targs=(--torch "$tmp/torch.json")
else
  echo "no $torch (configure with LibTorch to compare against it)" >&2
fi
echo "numpy ..." >&2
$py "$here/compare_peers.py" --ours "$tmp/ours.json" "${targs[@]}" --reps "$reps"
