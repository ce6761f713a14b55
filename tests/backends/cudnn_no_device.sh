#!/usr/bin/env bash
# backends.cudnn_no_device: `validate run --backend cudnn` on a machine without a usable GPU says so
# once — one line, "no usable CUDA device: <why>" exactly once — exits 2 and writes no --out.
# Skipped (77) where the binary has no cudnn module beside it or a GPU is there.
#   cudnn_no_device.sh VALIDATE SOURCE_DIR WORK_DIR
set -uo pipefail
bin=$1 src=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
[ -e "$(dirname "$bin")/lib/validate/libvalidate_cudnn.so" ] || { echo "SKIP: no cudnn module beside $bin"; exit 77; }
if nvidia-smi -L > /dev/null 2>&1; then echo "SKIP: a GPU is here"; exit 77; fi

for extra in "" "--layout fortran" "--device cuda:1 --repeat 2"; do
  # shellcheck disable=SC2086
  "$bin" run --backend cudnn --ref "$src/references/smoke" --out "$work/run" --progress 0 $extra > "$work/log" 2>&1
  rc=$?
  cat "$work/log"
  [ $rc -eq 2 ] || fail "run --backend cudnn $extra: exit $rc, expected 2"
  [ "$(grep -o 'no usable CUDA device' "$work/log" | wc -l)" -eq 1 ] || fail "run --backend cudnn $extra: 'no usable CUDA device' not said exactly once"
  [ "$(wc -l < "$work/log")" -eq 1 ] || fail "run --backend cudnn $extra: more than one line"
  grep -q '^validate run: --backend cudnn: no usable CUDA device: ' "$work/log" || fail "run --backend cudnn $extra: the line does not say which backend"
  [ ! -e "$work/run" ] || fail "run --backend cudnn $extra wrote its --out"
done
echo "cudnn_no_device: passed"
