#!/usr/bin/env bash
# scripts/nightly.sh's GPU branch, run on a machine without a GPU: a stand-in `nvidia-smi` first on
# PATH lists an H100, so the script takes the branch a GPU runner takes, and runs it on the smoke set
# up to and past the first command that needs the device. Checked:
# - the branch is taken, gates float32, bfloat16 and float16 by default (the CPU branch keeps
#   float32,bfloat16: compared through --cache-key), and generates references that verify;
# - every `validate run` line fails on the missing device ("no usable CUDA device"), never on an
#   option; the fortran line has no --conv-mode, which cuDNN then takes from the layout;
# - every run and compare line the branch executed is accepted by validate's own parser and option
#   checks: run again against a reference set that does not exist, each fails on that set alone
#   (the check is shown to fail on a line with a contradicting --conv-mode);
# - nightly.sh probes its run lines itself before generating: a contradicting --conv-mode slipped
#   into the fortran line stops it at the inputs stage, exit 2, naming the option.
#   gpu_branch.sh VALIDATE_BIN WORK_DIR   (run from the source tree)
set -uo pipefail
real_bin=$1
work=$2
fail() { echo "FAIL: $*"; exit 1; }
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
  # There the runs would really run; nightly.gate (ctest -L nightly) is that machine's check.
  echo "skipped: this machine has a GPU (nvidia-smi -L lists one)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/gpu" "$work/nogpu"
export VALIDATE_SKIP_BUILD=1 VALIDATE_CASES=cases/smoke.json
unset VALIDATE_DTYPES VALIDATE_REF VALIDATE_REF_CACHE VALIDATE_POLICY VALIDATE_GATES

# Stand-ins for nvidia-smi: one that lists a GPU, one that answers as on a machine without a device.
cat > "$work/gpu/nvidia-smi" <<'SH'
#!/bin/sh
[ "$1" = -L ] && echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-1111-2222-3333-444444444444)"
exit 0
SH
cat > "$work/nogpu/nvidia-smi" <<'SH'
#!/bin/sh
echo "No devices were found"
exit 6
SH
chmod +x "$work/gpu/nvidia-smi" "$work/nogpu/nvidia-smi"
gpu_path=$work/gpu:$PATH
nogpu_path=$work/nogpu:$PATH

# A binary that records every command line (shell-quoted, one per line), so the test can run each
# again; `edit` appends arguments to some lines before running them (the last check).
cat > "$work/validate" <<SH
#!/usr/bin/env bash
printf '%q ' "\$@" >> "$work/calls.log"
echo >> "$work/calls.log"
args=("\$@")
if [ -n "\${EDIT_WHEN:-}" ] && [[ " \$* " == *" \$EDIT_WHEN "* ]]; then
  read -r -a more <<< "\$EDIT_ADD"
  args+=("\${more[@]}")
fi
exec "$real_bin" "\${args[@]}"
SH
chmod +x "$work/validate"
export VALIDATE_BIN=$work/validate

# --- the default dtypes of each branch, through the cache key (no work done) -----------------
key() { env PATH="$1" "${@:2}" scripts/nightly.sh --cache-key; }
k_gpu=$(key "$gpu_path") || fail "--cache-key with a GPU"
k_cpu=$(key "$nogpu_path") || fail "--cache-key without a GPU"
[ "$k_gpu" != "$k_cpu" ] || fail "the GPU and CPU branches default to the same dtypes"
[ "$k_gpu" = "$(key "$nogpu_path" VALIDATE_DTYPES=float32,bfloat16,float16)" ] ||
  fail "the GPU branch's default dtypes are not float32,bfloat16,float16"
[ "$k_cpu" = "$(key "$gpu_path" VALIDATE_DTYPES=float32,bfloat16)" ] ||
  fail "the CPU branch's default dtypes are not float32,bfloat16"
echo "ok: default dtypes (GPU float32,bfloat16,float16; CPU float32,bfloat16)"

# --- the GPU branch, for real -------------------------------------------------------------------
out=$work/out
: > "$work/calls.log"
start=$SECONDS
PATH=$gpu_path VALIDATE_OUT=$out scripts/nightly.sh > "$work/nightly.log" 2>&1
rc=$?
echo "nightly.sh (GPU branch): exit $rc in $((SECONDS - start)) s"
show() { cat "$work/nightly.log"; }
r=$out/reports
j=$r/nightly.junit.xml
grep -q '<testcase classname="nightly" name="inputs"></testcase>' "$j" || { show; fail "the inputs stage did not pass"; }
grep -q '<testcase classname="nightly" name="references"></testcase>' "$j" || { show; fail "the references stage did not pass"; }
grep -q "^nightly: GPU found: GPU 0: NVIDIA H100" "$work/nightly.log" || { show; fail "the GPU branch was not taken"; }
# The runs cannot start without a device, so the gate is red; what matters is why.
[ $rc -ne 0 ] || { show; fail "nightly.sh passed without a device"; }
# (printf %q writes a comma as \,)
grep -q -- '^generate --cases cases/smoke.json --dtype float32\\\?,bfloat16\\\?,float16 --out '"$out/ref " "$work/calls.log" ||
  { cat "$work/calls.log"; fail "the references were not generated for float32,bfloat16,float16"; }
"$real_bin" verify "$out/ref" > "$work/verify.txt" 2>&1 || { cat "$work/verify.txt"; fail "the generated references do not verify"; }
/usr/bin/python3 - "$out/ref/config.json" <<'PY' || fail "config.json does not list the three dtypes"
import json, sys
d = sorted(json.load(open(sys.argv[1]))["dtypes"])
sys.exit(0 if d == ["bfloat16", "float16", "float32"] else f"dtypes {d}")
PY
echo "ok: GPU branch taken; float32, bfloat16 and float16 references generated and verified"

# The run lines the gate executed (the probes ran against $out/reports/.input-check/no-such-ref).
mapfile -t run_lines < <(grep "^run .* --ref $out/ref " "$work/calls.log")
mapfile -t compare_lines < <(grep "^compare $out/ref " "$work/calls.log")
names=()
for line in "${run_lines[@]}"; do
  eval "a=($line)"
  for ((i = 0; i < ${#a[@]}; i++)); do [ "${a[i]}" = --out ] && names+=("${a[i + 1]#"$out/run-"}"); done
done
[ "${names[*]}" = "cudnn-torch cudnn-channels_last cudnn-fortran torch-cuda" ] ||
  { cat "$work/calls.log"; fail "runs: '${names[*]}'"; }
[ ${#compare_lines[@]} = 4 ] || { cat "$work/calls.log"; fail "${#compare_lines[@]} compare lines, expected 4"; }
# nightly.sh probed every run line before generating anything.
first_probe=$(grep -n "^run .* --ref $r/.input-check/no-such-ref " "$work/calls.log" | head -1 | cut -d: -f1)
generate_at=$(grep -n -- "^generate .* --out $out/ref " "$work/calls.log" | cut -d: -f1)
[ "$(grep -c "^run .* --ref $r/.input-check/no-such-ref " "$work/calls.log")" = 4 ] && [ "${first_probe:-0}" -gt 0 ] &&
  [ "$first_probe" -lt "${generate_at:-0}" ] || { cat "$work/calls.log"; fail "the run lines were not probed before generate"; }
for name in "${names[@]}"; do
  txt=$r/run-$name.txt
  grep -q "^validate run: .*no usable CUDA device: " "$txt" || { cat "$txt"; fail "run $name did not stop at the missing device"; }
  ! grep -Eqi "option|contradicts|--conv-mode|usage" "$txt" || { cat "$txt"; fail "run $name failed on an option"; }
  grep -q "<testcase classname=\"nightly\" name=\"run/$name\"><failure message=\"validate run exited 2\">" "$j" ||
    { cat "$j"; fail "run/$name is not a failure stage"; }
done
grep -q "^validate run: --backend cudnn: no usable CUDA device: " "$r/run-cudnn-torch.txt" ||
  { cat "$r/run-cudnn-torch.txt"; fail "the first cuDNN run does not say why it cannot start"; }
! grep -q -- "--conv-mode" <<< "${run_lines[*]}" || fail "a run line passes --conv-mode: ${run_lines[*]}"
echo "ok: every run stopped at the missing device (${names[*]})"

# --- every run and compare line through validate's own parser, independently of nightly.sh -----
nosuch=$work/no-such-ref
# accepted KIND LINE: the line with its reference set replaced by one that does not exist must fail
# on that set only (exit 2, the set named), which it reaches after every option has been checked.
accepted() {
  local kind=$1 line=$2 i msg rc
  eval "a=($line)"
  if [ "$kind" = run ]; then
    for ((i = 0; i < ${#a[@]}; i++)); do
      [ "${a[i]}" = --ref ] && a[i + 1]=$nosuch
      [ "${a[i]}" = --out ] && a[i + 1]=$work/probe-run
    done
  else
    a[1]=$nosuch  # compare REF RUN ...
    for ((i = 0; i < ${#a[@]}; i++)); do
      # one file per report: compare refuses two reports on one path
      case ${a[i]} in --junit | --html | --md | --json) a[i + 1]=$work/probe-report.${a[i]#--} ;; esac
    done
  fi
  msg=$("$real_bin" "${a[@]}" 2>&1)
  rc=$?
  [ $rc = 2 ] && grep -qF "$nosuch" <<< "$msg" && ! grep -q "unknown option\|contradicts" <<< "$msg" && return 0
  echo "  $kind line refused (exit $rc): $msg"
  return 1
}
for line in "${run_lines[@]}"; do accepted run "$line" || fail "validate run does not accept: $line"; done
for line in "${compare_lines[@]}"; do accepted compare "$line" || fail "validate compare does not accept: $line"; done
[ ! -e "$work/probe-run" ] || fail "a parse check created its --out"
# The check fails where it should: the fortran line with a contradicting mode, a misspelt option.
fortran_line=$(grep -- "--layout fortran " <<< "$(printf '%s\n' "${run_lines[@]}")")
! accepted run "$fortran_line --conv-mode xcorr" > "$work/refused.txt" || fail "--conv-mode xcorr with fortran was accepted"
grep -q "validate run: --conv-mode xcorr contradicts layout 'fortran'" "$work/refused.txt" ||
  { cat "$work/refused.txt"; fail "the contradiction is not named"; }
! accepted run "${run_lines[0]} --conv-mode conv" > /dev/null || fail "--conv-mode conv with torch was accepted"
! accepted run "${run_lines[0]} --algo-fwdd all" > /dev/null || fail "a misspelt option was accepted"
echo "ok: ${#run_lines[@]} run and ${#compare_lines[@]} compare lines accepted by validate; a contradicting --conv-mode and a misspelt option are not"

# --- nightly.sh's own probe stops a bad run line before any work --------------------------------
out=$work/refused
: > "$work/calls.log"
start=$SECONDS
PATH=$gpu_path VALIDATE_OUT=$out EDIT_WHEN="--layout fortran" EDIT_ADD="--conv-mode xcorr" \
  scripts/nightly.sh > "$work/refused.log" 2>&1
rc=$?
[ $rc = 2 ] || { cat "$work/refused.log"; fail "a contradicting --conv-mode: exit $rc, expected 2"; }
[ $((SECONDS - start)) -le 30 ] || fail "a contradicting --conv-mode took $((SECONDS - start)) s to refuse"
grep -q '<testcase classname="nightly" name="inputs"><error message="run/cudnn-fortran: validate run: --conv-mode xcorr contradicts layout' \
  "$out/reports/nightly.junit.xml" || { cat "$out/reports/nightly.junit.xml"; fail "the inputs error does not name --conv-mode"; }
[ ! -e "$out/ref" ] && ! grep -q -- "^generate .* --out $out/ref " "$work/calls.log" || fail "generated before refusing"
echo "ok: nightly.sh refuses a contradicting --conv-mode at its inputs stage, before generating"
echo "PASS"
