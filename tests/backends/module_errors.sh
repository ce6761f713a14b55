#!/usr/bin/env bash
# backends.module_errors: what a user sees when a module is absent or does not belong to the binary.
# A copy of the validate binary in a directory of its own has no modules beside it, like an
# installation built without LibTorch/CUDA: `generate` and `run --backend torch|cudnn` must say
# "not built into this installation" (exit 2, nothing written), while --help, list and the oracle
# keep working. Then fake modules (fake_module.cpp built three ways) from another commit, of
# another interface version, and without the entry point must each be refused with exit 2 and
# the reason.
#   module_errors.sh VALIDATE SOURCE_DIR WORK_DIR FAKE_COMMIT_SO FAKE_ABI_SO FAKE_NOENTRY_SO
set -uo pipefail
bin=$1 src=$2 work=$3 fake_commit=$4 fake_abi=$5 fake_noentry=$6
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work/bin" || exit 1
cp "$bin" "$work/bin/validate" || exit 1
v=$work/bin/validate
ref=$src/references/smoke

# expect RC NEEDLE ARGS...: exit code RC and NEEDLE in stderr/stdout.
expect() {
  local want=$1 needle=$2; shift 2
  "$v" "$@" >"$work/log" 2>&1
  local rc=$?
  [ "$rc" = "$want" ] || fail "validate $* exited $rc, expected $want:"$'\n'"$(cat "$work/log")"
  grep -qF -- "$needle" "$work/log" || fail "validate $*: no '$needle' in:"$'\n'"$(cat "$work/log")"
  echo "ok: validate $* -> $rc: $(grep -F -- "$needle" "$work/log" | head -1)"
}

expect 2 "backend torch: not built into this installation (libvalidate_torch.so not found in $work/bin/lib/validate" \
  run --backend torch --ref "$ref" --out "$work/torch_run" --progress 0
[ ! -e "$work/torch_run" ] || fail "run --backend torch without its module created its --out"
expect 2 "backend cudnn: not built into this installation (libvalidate_cudnn.so" \
  run --backend cudnn --ref "$ref" --out "$work/cudnn_run" --progress 0
expect 2 "VALIDATE_CUDA=ON" run --backend cudnn --ref "$ref" --out "$work/cudnn_run" --progress 0
[ ! -e "$work/cudnn_run" ] || fail "run --backend cudnn without its module created its --out"
expect 2 "validate generate: not built into this installation (libvalidate_torch.so" \
  generate --cases "$src/cases/smoke.json" --out "$work/gen"
[ ! -e "$work/gen" ] || fail "generate without its module created its --out"
expect 0 "cudnn" run --help
expect 0 "generate" --help
expect 0 "float32" list "$ref"
expect 0 "backend oracle wrote" run --backend oracle --ref "$ref" --out "$work/oracle_run" --only '^float32/k0072' --progress 0
expect 2 "--conv-mode is an option of --backend cudnn, not of --backend oracle" \
  run --backend oracle --conv-mode conv --ref "$ref" --out "$work/r2" --progress 0

mkdir -p "$work/bin/lib/validate"
install_fake() { cp "$1" "$work/bin/lib/validate/libvalidate_torch.so" || exit 1; }
install_fake "$fake_commit"
expect 2 "it was built from validate 0.0.0+0123456789ab-fake, this binary is" \
  generate --cases "$src/cases/smoke.json" --out "$work/gen"
expect 2 "rebuild both" run --backend torch --ref "$ref" --out "$work/torch_run" --progress 0
install_fake "$fake_abi"
expect 2 "module interface version 999" generate --cases "$src/cases/smoke.json" --out "$work/gen"
install_fake "$fake_noentry"
expect 2 "no validate_module_entry symbol: not a validate module" generate --cases "$src/cases/smoke.json" --out "$work/gen"
[ ! -e "$work/gen" ] && [ ! -e "$work/torch_run" ] || fail "a refused module left an output directory"
echo PASS
