#!/usr/bin/env bash
# backends.light_commands: the commands that need neither LibTorch nor CUDA never load them
#. The binary must not list them as NEEDED (readelf), and at run time the dynamic
# loader must not open them (LD_DEBUG=files names every object it loads) for --version, --help,
# list, verify, probe, merge, compare, run --help and run --backend oracle. `validate --version`
# must stay under 60 MB resident (skipped under the sanitizers, whose shadow memory counts).
#   light_commands.sh VALIDATE SOURCE_DIR WORK_DIR SANITIZED(0|1)
set -uo pipefail
bin=$1 src=$2 work=$3 sanitized=${4:-0}
heavy='lib(torch|c10|cudnn|cublas|cublasLt|cudart|cuda|nvrtc|caffe2)[._-]'
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
ref=$src/references/smoke

needed=$(readelf -d "$bin" | grep NEEDED) || fail "readelf -d $bin found no NEEDED entries"
if grep -Eq "$heavy" <<<"$needed"; then fail "$bin needs a LibTorch/CUDA library:"$'\n'"$needed"; fi

# light NAME EXPECTED_RC ARGS...: run under LD_DEBUG=files, check exit code and loaded objects.
light() {
  local name=$1 want=$2; shift 2
  LD_DEBUG=files LD_DEBUG_OUTPUT="$work/ld.$name" "$bin" "$@" >"$work/out.$name" 2>&1
  local rc=$?
  [ "$rc" = "$want" ] || fail "validate $* exited $rc, expected $want:"$'\n'"$(cat "$work/out.$name")"
  local loaded
  loaded=$(cat "$work"/ld."$name".* 2>/dev/null | grep -E 'file=.*\[0\];  (needed|dynamically loaded)' ) \
    || fail "LD_DEBUG=files recorded nothing for validate $* (is the loader's debug output supported?)"
  if grep -Eq "$heavy" <<<"$loaded"; then
    fail "validate $* loaded a LibTorch/CUDA library:"$'\n'"$(grep -E "$heavy" <<<"$loaded")"
  fi
  echo "ok: validate $* ($(grep -c 'file=' <<<"$loaded") objects)"
}

light version 0 --version
light help 0 --help
light run_help 0 run --help
light list 0 list "$ref"
light verify 0 verify "$ref"
light probe 0 probe --layout 'NHWC' --shape 2,3,4,5 --out "$work/probe"
light oracle 0 run --backend oracle --ref "$ref" --out "$work/run" --only '^float32/k0072' --progress 0
light compare 0 compare "$ref" "$work/run" --only '^float32/k0072'
light merge 0 merge "$work/merged" "$work/run" --allow-partial

if [ "$sanitized" != 1 ]; then
  rss=$( { /usr/bin/time -f '%M' "$bin" --version >/dev/null; } 2>&1 | tail -1)
  [ "$rss" -lt 61440 ] || fail "validate --version: ${rss} KiB resident, the limit is 60 MB"
  echo "ok: validate --version: ${rss} KiB resident"
fi
echo PASS
