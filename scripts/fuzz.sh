#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan + libFuzzer coverage, in
# build-fuzz/) and runs each for SECONDS against its committed corpus, reporting per target the
# executions, the coverage reached and any crash, leak or timeout (exit 1 on any).
#   usage: scripts/fuzz.sh [SECONDS] [TARGET...]          (default 60 s, every target built)
# Exit 77 (skip) when clang with the libFuzzer runtime is not installed (Debian: clang-14 and
# libclang-rt-14-dev). Environment: VALIDATE_FUZZ_BUILD (build dir, default build-fuzz),
# VALIDATE_FUZZ_JOBS (build jobs, default 2). New inputs go to $build/tests/fuzz/scratch/<target>;
# crashing inputs to $build/tests/fuzz/scratch/<target>-crash-* (add them to tests/fuzz/corpus/).
# Two runs on one build directory take turns (flock on $build.lock): a second one would rebuild the
# fuzzers under the first and write over its logs. The ctest `fuzz.script` uses a directory inside
# its own build tree for that reason.
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
seconds=${1:-60}
shift || true
build=${VALIDATE_FUZZ_BUILD:-build-fuzz}
jobs=${VALIDATE_FUZZ_JOBS:-2}
all_targets="npy case_file metadata manifest layout policy"
targets=${*:-$all_targets}

. "$src/scripts/lib/fuzz-clang.sh"
if ! fuzz_clang; then
  echo "fuzz.sh: SKIP: $fuzz_clang_why"
  exit 77
fi

mkdir -p "$(dirname "$build")"
exec 9> "$build.lock"
if ! flock -n 9; then
  echo "fuzz.sh: another fuzz.sh is using $build; waiting for it"
  flock 9
fi

flags='-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1'
if [ ! -f "$build/CMakeCache.txt" ] || ! grep -q "^VALIDATE_FUZZ:BOOL=ON" "$build/CMakeCache.txt"; then
  CC=$cc CXX=$cxx cmake -S . -B "$build" -DVALIDATE_FUZZ=ON -DVALIDATE_TORCH=OFF -DVALIDATE_CUDA=OFF -DVALIDATE_PCH=OFF \
    -DVALIDATE_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS=$flags" > "$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; echo "fuzz.sh: configure failed"; exit 1; }
else
  cmake "$build" > /dev/null 2>&1 || { cmake "$build"; echo "fuzz.sh: configure failed"; exit 1; }
fi
t0=$(date +%s)
if ! cmake --build "$build" --target fuzz_all -j"$jobs" > "$build/fuzz-build.log" 2>&1; then
  tail -40 "$build/fuzz-build.log"
  echo "fuzz.sh: build failed (log: $build/fuzz-build.log)"
  exit 1
fi
echo "fuzz.sh: built in $(( $(date +%s) - t0 )) s"

max_len() { case $1 in metadata|manifest) echo 8192 ;; *) echo 4096 ;; esac; }
dict() { case $1 in npy) echo "$src/tests/fuzz/npy.dict" ;; *) echo "$src/tests/fuzz/json.dict" ;; esac; }

failed=0
scratch="$build/tests/fuzz/scratch"
printf '%-10s %8s %12s %10s %8s %8s  %s\n' target seconds executions exec/s cov ft result
for t in $targets; do
  bin="$build/tests/fuzz/fuzz_$t"
  if [ ! -x "$bin" ]; then
    printf '%-10s %s\n' "$t" "not built (its module or header is missing in this tree)"
    continue
  fi
  mkdir -p "$scratch/$t"
  log="$scratch/$t.log"
  "$bin" -max_total_time="$seconds" -max_len="$(max_len "$t")" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -dict="$(dict "$t")" -artifact_prefix="$scratch/$t-" \
    "$scratch/$t" "$src/tests/fuzz/corpus/$t" > "$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  # -a: inputs echoed into the log (a crash's bytes) make grep call it binary and print nothing.
  cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  ft=$(grep -ao 'ft: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  if [ $rc -eq 0 ]; then result=ok; else result="FAILED (exit $rc)"; failed=1; fi
  printf '%-10s %8s %12s %10s %8s %8s  %s\n' "$t" "$seconds" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$result"
  if [ $rc -ne 0 ]; then
    grep -aE 'ERROR: |runtime error|invariant broken|SUMMARY|Test unit written' "$log" | head -20
    echo "  full log: $log"
  fi
done
exit $failed
