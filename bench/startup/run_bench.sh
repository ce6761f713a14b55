#!/usr/bin/env bash
# Start-up cost of the commands that need neither LibTorch nor CUDA: the same commands
# run through two validate binaries, alternating, each N times on the smoke set:
#   bench/startup/run_bench.sh BEFORE_BIN [AFTER_BIN] [N]
# AFTER_BIN defaults to build/validate, N to 20. BEFORE_BIN is a build from before the modules
# split, e.g. the 621f67f commit (it linked LibTorch, CUDA, cuDNN and cuBLASLt into every command):
#   git worktree add /tmp/before 621f67f && (cd /tmp/before && scripts/build.sh) && \
#     bench/startup/run_bench.sh /tmp/before/build/validate
# Per command: the median wall time (including GNU time's own start, about 1 ms, on both sides) and
# the median peak resident memory (GNU time's %M), and the ratios before / after. The page cache is warm (one untimed run first): this
# is the cost a user pays on every call, not the first call after boot. The run and merge inputs
# are made by AFTER_BIN into a temporary directory, removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
before=${1:?usage: run_bench.sh BEFORE_BIN [AFTER_BIN] [N]}
after=${2:-$root/build/validate}
n=${3:-20}
for b in "$before" "$after"; do [[ -x $b ]] || { echo "not an executable: $b" >&2; exit 2; }; done
ref=$root/references/smoke
tmp=$(mktemp -d "${TMPDIR:-/tmp}/validate_startup.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A run of two cases for compare and merge (both binaries read the same run format).
"$after" run --backend oracle --ref "$ref" --out "$tmp/run" --only '^float32/k0(072|144)_' --progress 0 >/dev/null
echo "before: $before ($("$before" --version))"
echo "after:  $after ($("$after" --version))"
echo "runs per command: $n, alternating; uptime: $(uptime)"
python3 - "$before" "$after" "$n" "$ref" "$tmp" <<'EOF'
import os, shutil, statistics, subprocess, sys, time  # noqa: E401

before, after, n, ref, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
commands = [
    ("--version", ["--version"]),
    ("--help", ["--help"]),
    ("list", ["list", ref]),
    ("verify", ["verify", ref]),
    ("probe", ["probe", "--layout", "CHWN:F", "--shape", "2,3,4,5", "--out", "{out}"]),
    ("compare", ["compare", ref, tmp + "/run", "--only", "^float32/k0(072|144)_"]),
    ("merge", ["merge", "{out}", tmp + "/run", "--allow-partial"]),
]

def once(binary, args):
    out = os.path.join(tmp, "out")
    shutil.rmtree(out, ignore_errors=True)
    argv = [binary] + [a.replace("{out}", out) for a in args]
    # Peak RSS from GNU time, whose child is forked from a small process: a child forked from this
    # python would count python's pages until its exec (about 14 MiB).
    rss_file = os.path.join(tmp, "rss")
    t0 = time.perf_counter()
    rc = subprocess.call(["/usr/bin/time", "-f", "%M", "-o", rss_file] + argv,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if rc != 0:
        sys.exit(f"{' '.join(argv)} exited {rc}")
    with open(rss_file) as f:
        return wall, int(f.read().split()[-1]) / 1024.0  # MiB

print(f"{'command':<10} {'before ms':>10} {'after ms':>9} {'time ratio':>10} {'before MiB':>10} {'after MiB':>9} {'RSS ratio':>9}")
for name, args in commands:
    once(before, args), once(after, args)  # warm the page cache
    res = {before: [], after: []}
    for _ in range(n):
        for b in (before, after):
            res[b].append(once(b, args))
    tb = statistics.median(w for w, _ in res[before]) * 1e3
    ta = statistics.median(w for w, _ in res[after]) * 1e3
    rb = statistics.median(r for _, r in res[before])
    ra = statistics.median(r for _, r in res[after])
    print(f"{name:<10} {tb:>10.1f} {ta:>9.1f} {tb / ta:>9.1f}x {rb:>10.1f} {ra:>9.1f} {rb / ra:>8.1f}x")
EOF
echo "uptime after: $(uptime)"
