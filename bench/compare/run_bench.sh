#!/usr/bin/env bash
# Side-by-side timing of the comparison's metric pass (docs/evidence.md, "Speed of the metric pass"):
#   (a) cat FILES > /dev/null              the machine's read bandwidth from the page cache
#   (b) bench/compare/numpy_metrics.py     the same metrics with numpy (memory-mapped)
#   (c) bench_compare                      our engine, as `validate compare` runs it
# on >= 2 GB of float32 .npy pairs written to a temporary directory (removed at the end).
# Everything is timed warm (each measurement is run once before the timed runs) as the best of
# REPS runs (default 3; numpy once, it takes long enough not to be noisy).
#
#   bench/compare/run_bench.sh [BUILD_DIR] [PAIRS] [ELEMENTS_PER_FILE]
# defaults: build-compare, 4 pairs, 64Mi elements (256 MiB) per file -> 2 GiB in total.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build-compare}
pairs=${2:-4}
elems=${3:-67108864}
bench=$build/bench/compare/bench_compare
py=/usr/bin/python3
[[ -x $bench ]] || { echo "build bench_compare first: cmake --build $build --target bench_compare" >&2; exit 2; }
$py -c 'import numpy' 2>/dev/null || { echo "needs $py with numpy" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/validate_bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "writing $pairs pairs of $elems float32 elements to $tmp ..."
$py - "$tmp" "$pairs" "$elems" <<'PY'
import sys, numpy as np
d, pairs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
for p in range(pairs):
    ref = rng.standard_normal(n, dtype=np.float32)
    # A plausible second stack: a few float32 ULPs of reordering noise, a few elements further off.
    run = ref * (1 + rng.standard_normal(n, dtype=np.float32) * np.float32(2e-7))
    run[:: 997] += np.float32(1e-3)
    np.save(f"{d}/ref{p}.npy", ref.astype(np.float32))
    np.save(f"{d}/run{p}.npy", run.astype(np.float32))
PY
files=()
for ((p = 0; p < pairs; ++p)); do files+=("$tmp/ref$p.npy" "$tmp/run$p.npy"); done
bytes=$(cat "${files[@]}" | wc -c)
gb=$(awk -v b="$bytes" 'BEGIN { printf "%.2f", b / 1e9 }')
# timeit OUT CMD...: runs CMD $reps times with stdout to OUT, prints the best wall seconds.
reps=${REPS:-3}
timeit() {
  local out=$1 t0 t1 best=""
  shift
  for ((k = 0; k < reps; ++k)); do
    t0=$(date +%s.%N); "$@" > "$out" || { echo "run_bench: '$*' failed" >&2; exit 1; }; t1=$(date +%s.%N)
    best=$(awk -v a="$t0" -v b="$t1" -v m="$best" 'BEGIN { t = b - a; if (m == "" || t < m) m = t; printf "%.3f", m }')
  done
  echo "$best"
}

echo "cores: $(nproc), data: $gb GB in ${#files[@]} files, kernel: $("$bench" "${files[0]}" "${files[1]}" | tail -1 | sed 's/.*kernel \([a-z0-9]*\).*/\1/')"
cat "${files[@]}" > /dev/null
t_cat=$(timeit /dev/null cat "${files[@]}")
$py "$here/numpy_metrics.py" "${files[0]}" "${files[1]}" > /dev/null
t_np=$(reps=1 timeit "$tmp/numpy.txt" $py "$here/numpy_metrics.py" "${files[@]}")
"$bench" "${files[@]}" > /dev/null
t_1=$(timeit /dev/null "$bench" --threads 1 "${files[@]}")
t_ours=$(timeit "$tmp/ours.txt" "$bench" "${files[@]}")
t_avx2=$(VALIDATE_COMPARE_ISA=avx2 timeit /dev/null "$bench" "${files[@]}")
# The max|ref| handed over is computed inside the program before its clock starts, so this row
# takes the program's own total rather than the process wall time.
t_known=$("$bench" --repeat "$reps" --known-max "${files[@]}" | awk '/^total/ { print $2 }')

rate() { awk -v b="$bytes" -v t="$1" 'BEGIN { printf "%.2f", b / t / 1e9 }'; }
echo
printf '| %-44s | %8s | %8s | %s |\n' "what (warm page cache, $gb GB)" "seconds" "GB/s" "vs numpy"
printf '|%s|%s|%s|%s|\n' "----------------------------------------------" "---------:" "---------:" "---------:"
printf '| %-44s | %8s | %8s | %s |\n' "(a) cat files > /dev/null" "$t_cat" "$(rate "$t_cat")" ""
printf '| %-44s | %8s | %8s | %s |\n' "(b) numpy_metrics.py (abs, rel, ULP, PCC)" "$t_np" "$(rate "$t_np")" "1.0x"
printf '| %-44s | %8s | %8s | %s |\n' "(c) bench_compare, 1 thread" "$t_1" "$(rate "$t_1")" "$(awk -v a="$t_np" -v b="$t_1" 'BEGIN { printf "%.1fx", a / b }')"
printf '| %-44s | %8s | %8s | %s |\n' "(c) bench_compare, all cores ($(nproc))" "$t_ours" "$(rate "$t_ours")" "$(awk -v a="$t_np" -v b="$t_ours" 'BEGIN { printf "%.1fx", a / b }')"
printf '| %-44s | %8s | %8s | %s |\n' "(c) same, kernel capped at AVX2" "$t_avx2" "$(rate "$t_avx2")" "$(awk -v a="$t_np" -v b="$t_avx2" 'BEGIN { printf "%.1fx", a / b }')"
printf '| %-44s | %8s | %8s | %s |\n' "(c) all cores, max|ref| from metadata" "$t_known" "$(rate "$t_known")" "$(awk -v a="$t_np" -v b="$t_known" 'BEGIN { printf "%.1fx", a / b }')"
echo
echo "our engine runs at $(awk -v c="$t_cat" -v o="$t_ours" 'BEGIN { printf "%.0f%%", 100 * c / o }') of cat's read bandwidth (reading each reference twice: the max|ref| pre-pass),"
echo "$(awk -v c="$t_cat" -v o="$t_known" 'BEGIN { printf "%.0f%%", 100 * c / o }') when the metadata carries max|ref| (one read of each file, like cat)"
echo
echo "numpy:"; sed 's/^/  /' "$tmp/numpy.txt"
echo "ours:"; sed 's/^/  /' "$tmp/ours.txt"
