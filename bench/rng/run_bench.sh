#!/usr/bin/env bash
# The input RNG against numpy's float32 normals (the peer a user would write), side by side:
#   bench/rng/run_bench.sh [BUILD_DIR] [MIB]      defaults: build, 256 MiB of float32
# numpy: Generator(PCG64).standard_normal(n, dtype=float32) (ziggurat; a different stream, timed
# only as the speed a user gets from the usual tool).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
mib=${2:-256}
bench=$build/bench/rng/bench_rng
[[ -x $bench ]] || { echo "build bench_rng first: cmake --build $build --target bench_rng" >&2; exit 2; }
echo "uptime: $(uptime)"
"$bench" "$mib"
/usr/bin/python3 - "$mib" <<'PY'
import sys, time, numpy as np
n = int(sys.argv[1]) * (1 << 20) // 4
g = np.random.default_rng(0)
best = min((lambda t: (g.standard_normal(n, dtype=np.float32), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(3))
print(f"numpy standard_normal f32 {best:8.3f} s {n * 4 / 1e9 / best:6.2f} GB/s (one thread)")
PY
echo "uptime: $(uptime)"
