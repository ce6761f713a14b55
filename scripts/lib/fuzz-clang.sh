# Sourced by scripts/fuzz.sh and scripts/test-sanitized.sh: both build the libFuzzer targets, so
# both must agree on when that is possible.
# fuzz_clang: sets cc and cxx to clang and clang++ and returns 0 when clang++ can link
# -fsanitize=fuzzer,address,undefined (Debian: clang and libclang-rt-dev); otherwise returns 1 with
# the reason in fuzz_clang_why.
fuzz_clang() {
  cxx=$(command -v clang++ || command -v clang++-14 || true)
  cc=$(command -v clang || command -v clang-14 || true)
  fuzz_clang_why=""
  if [ -z "$cxx" ] || [ -z "$cc" ]; then
    fuzz_clang_why="clang++ not found (install clang and libclang-rt-dev)"
    return 1
  fi
  local probe rc=0
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/p.cpp"
  if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" > "$probe/log" 2>&1; then
    fuzz_clang_why="$cxx cannot link -fsanitize=fuzzer (libclang-rt-dev missing?): $(head -3 "$probe/log")"
    rc=1
  fi
  rm -rf "$probe"
  return $rc
}
