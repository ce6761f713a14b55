#!/usr/bin/env bash
# find_cudnn (scripts/gpu-acceptance.sh) on fake directory trees: the header and the library must
# come from the same root and the same major version (the old search paired the
# toolkit's cudnn.h with whichever libcudnn `ls` listed first, /usr/lib/x86_64-linux-gnu included).
#   gpu_acceptance_find_cudnn.sh REPO SCRATCH
set -u
repo=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 2
fails=0
check() {  # check WHAT EXPECTED ACTUAL
  if [[ $2 == "$3" ]]; then echo "ok: $1"; else echo "FAIL: $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}
header() {  # header ROOT MAJOR
  mkdir -p "$1/include"
  echo "/* fake */" >"$1/include/cudnn.h"
  printf '#define CUDNN_MAJOR %s\n#define CUDNN_MINOR 1\n' "$2" >"$1/include/cudnn_version.h"
}
lib() {  # lib DIR MAJOR
  mkdir -p "$1"
  : >"$1/libcudnn.so.$2.1.0"
  ln -sf "libcudnn.so.$2.1.0" "$1/libcudnn.so.$2"
}
# A python that has no `nvidia` package, or one whose package lives in $work/site/nvidia.
printf '#!/bin/sh\nexit 1\n' >"$work/nopython" && chmod +x "$work/nopython"
mkdir -p "$work/site/nvidia"
printf '#!/bin/sh\necho %s\n' "$work/site/nvidia" >"$work/wheelpython" && chmod +x "$work/wheelpython"

# shellcheck source=../../scripts/gpu-acceptance.sh
VALIDATE_ACCEPTANCE_LIB=1 source "$repo/scripts/gpu-acceptance.sh"

# 1. The toolkit root has cudnn 9 in lib64; another cuDNN (8) sits in a system folder listed
#    earlier by ls: the toolkit's own library is chosen.
header "$work/t1/cuda" 9
lib "$work/t1/cuda/lib64" 9
lib "$work/t1/aaa-system" 8
CUDNN_SEARCH_ROOTS="$work/t1/cuda" PYTHON=$work/nopython find_cudnn
check "toolkit header with the toolkit's library" "$work/t1/cuda/include|$work/t1/cuda/lib64/libcudnn.so.9" "$CUDNN_INCLUDE|$CUDNN_LIBRARY"

# 2. A root whose header has no library beside it is skipped, not paired with a stranger; the next
#    root that has both wins.
header "$work/t2/cuda" 9
header "$work/t2/usr" 9
lib "$work/t2/usr/lib/x86_64-linux-gnu" 9
CUDNN_SEARCH_ROOTS="$work/t2/cuda $work/t2/usr" PYTHON=$work/nopython find_cudnn
check "header without a library is skipped" "$work/t2/usr/include|$work/t2/usr/lib/x86_64-linux-gnu/libcudnn.so.9" "$CUDNN_INCLUDE|$CUDNN_LIBRARY"

# 3. Same root but another major (header 9, library 8 only): not a pair.
header "$work/t3/cuda" 9
lib "$work/t3/cuda/lib64" 8
if CUDNN_SEARCH_ROOTS="$work/t3/cuda" PYTHON=$work/nopython find_cudnn; then rc=0; else rc=1; fi
check "major mismatch is refused" "1|" "$rc|$CUDNN_LIBRARY"

# 4. An unversioned libcudnn.so leading to the header's major is accepted (lib/ when no lib64/).
header "$work/t4/opt" 9
mkdir -p "$work/t4/opt/lib" && : >"$work/t4/opt/lib/libcudnn.so.9.2.0" && ln -s libcudnn.so.9.2.0 "$work/t4/opt/lib/libcudnn.so"
CUDNN_SEARCH_ROOTS="$work/t4/opt" PYTHON=$work/nopython find_cudnn
check "unversioned link of the same major" "$work/t4/opt/lib/libcudnn.so" "$CUDNN_LIBRARY"

# 5. No root has cuDNN: python's wheel folder (nvidia/<name>/include + lib) is one root.
header "$work/site/nvidia/cudnn" 9
lib "$work/site/nvidia/cudnn/lib" 9
CUDNN_SEARCH_ROOTS="$work/none" PYTHON=$work/wheelpython find_cudnn
check "wheel header with the wheel's library" "$work/site/nvidia/cudnn/include|$work/site/nvidia/cudnn/lib/libcudnn.so.9" "$CUDNN_INCLUDE|$CUDNN_LIBRARY"

# 6. Nothing anywhere: fails, both empty.
if CUDNN_SEARCH_ROOTS="$work/none" PYTHON=$work/nopython find_cudnn; then rc=0; else rc=1; fi
check "nothing found" "1||" "$rc|$CUDNN_INCLUDE|$CUDNN_LIBRARY"

rm -rf "$work"
((fails == 0)) || { echo "$fails check(s) failed"; exit 1; }
echo "find_cudnn: every pairing as expected"
