#!/bin/sh
# The Fortran example in training mode through the harness (exec protocol 2, docs/runners.md):
# generate a training reference from CASES (LibTorch's torch::optim::SGD trajectory), run the
# program on it with `validate run --backend exec`, compare.
#   train_example.sh clean        VALIDATE_BIN EXAMPLE_BIN CASES LAYOUTS WORK
#   train_example.sh wrong_update VALIDATE_BIN EXAMPLE_BIN CASES LAYOUTS WORK
#   train_example.sh mixed        VALIDATE_BIN EXAMPLE_BIN CASES LAYOUTS WORK   (cases/train_mixed.json)
#   train_example.sh adam         VALIDATE_BIN EXAMPLE_BIN CASES LAYOUTS WORK   (cases/train_adam.json)
# clean: the trajectory passes `compare --require-all`; the same program made to ignore protocol 2
#   (VALIDATE_PROTOCOL unset: it writes only the single-step results) fails its cases, and compare
#   fails them too.
# wrong_update: CONV_RUNNER_BUG=update_dw_krsc (each update applies dW in the KRSC filter layout
#   to weights stored OIHW) fails compare, at step 1: step 0 still passes, train_loss and
#   step1_weight fail.
# mixed: bfloat16 and float16 trajectories in mixed precision (docs/training.md): the clean program
#   passes; with CONV_RUNNER_BUG=update_dw_krsc step 0 passes and step 1 fails in both dtypes, the
#   first update named as applied with dW in the filter layout; with CONV_RUNNER_BUG=narrow_masters
#   (masters kept in the case dtype) step 1's checkpoints fail in both dtypes, named narrow_master;
#   with CONV_RUNNER_BUG=no_weight_decay step 1 fails in both ops and dtypes, named optimizer_settings.
#   wrong_update also plants CONV_RUNNER_BUG=no_momentum (named momentum missing at step 2) and
#   CONV_RUNNER_BUG=no_zero_grad (named gradients accumulated across steps at step 1).
# adam: the same with torch.optim.Adam, in float32 and bfloat16.
# Exit 0 when every expectation holds, 1 with a FAIL line otherwise.
set -eu
if [ $# -ne 6 ]; then
  echo "usage: $0 clean|wrong_update|mixed|adam VALIDATE_BIN EXAMPLE_BIN CASES LAYOUTS WORK" >&2
  exit 2
fi
mode=$1 validate=$2 example=$3 cases=$4 layouts=$5 work=$6
fail() { echo "train_example ($mode): FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
only=.  # the program trains conv2d and matmul: the mixed and Adam sets' conv_transpose2d cases it answers
        # "not supported" (unsupported.txt), which compare --require-all below would fail
[ "$mode" = mixed ] && only=tmixed_conv
[ "$mode" = adam ] && only=tadam_conv
"$validate" generate --cases "$cases" --only "$only" --out "$work/ref" --progress 0 > "$work/gen.log" 2>&1 ||
  fail "generate: $(tail -3 "$work/gen.log")"
ls "$work/ref/"*/*_conv2d_step1_weight.npy > /dev/null 2>&1 || fail "the reference has no step-1 checkpoint"

run() {  # run OUT CMD [VAR=VALUE...] [-- run options...]: validate run --backend exec --cmd CMD
  out=$1 cmd=$2
  shift 2
  vars=""
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars="$vars $1"; shift; done
  [ $# -gt 0 ] && shift
  set +e
  # $vars: VAR=VALUE words without blanks, split on purpose
  env $vars "$validate" run --backend exec --cmd "$cmd" --layout "$layouts" --ref "$work/ref" \
    --out "$work/$out" --progress 0 "$@" > "$work/$out.log" 2>&1
  rc=$?
  set -e
  return $rc
}
compare() {  # compare OUT [ONLY]: the exit status of validate compare --require-all, its report in OUT.txt
  set +e
  "$validate" compare "$work/ref" "$work/$1" --require-all --only "${2:-.}" > "$work/$1.txt" 2>&1
  rc=$?
  set -e
  return $rc
}
# verdict OUT CASE OP TENSOR: the verdict column of that tensor's row in the compare report
exit_ok() {
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
  echo "train_example ($mode): passed"
  exit 0
}
verdict() { awk -v c="$2" -v op="$3" -v t="$4" '$1 == c && $2 == op && $3 == t { print $NF; exit }' "$work/$1.txt"; }
# expect_verdict OUT CASE OP VERDICT TENSOR...: each tensor's verdict, or a FAIL line with the report
expect_verdict() {
  ev_out=$1 ev_case=$2 ev_op=$3 ev_want=$4
  shift 4
  for ev_t in "$@"; do
    [ "$(verdict "$ev_out" "$ev_case" "$ev_op" "$ev_t")" = "$ev_want" ] ||
      fail "$ev_out: $ev_case $ev_op $ev_t should be $ev_want: $(cat "$work/$ev_out.txt")"
  done
}
wd=texec_wd_n2_c6_h7_w9_o4_g2 nesterov=texec_nesterov_n2_c5_h6_w8_o3

case $mode in
clean)
  run clean "$example {dir}" || fail "validate run: $(tail -5 "$work/clean.log")"
  compare clean || fail "compare of the clean trajectory: $(tail -20 "$work/clean.txt")"
  for c in "$wd 9" "$nesterov 5"; do
    set -- $c
    for op in conv2d matmul; do
      for t in train_loss step0_grad_weight step1_weight "step$2_weight"; do
        [ "$op" = matmul ] && t=$(echo "$t" | sed 's/weight/B/')
        [ "$(verdict clean "$1" $op "$t")" = passed ] || fail "$1 $op $t was not compared and passed: $(cat "$work/clean.txt")"
      done
    done
  done
  # A program that ignores protocol 2: the harness fails each case, naming why, and so does compare.
  if run v1 "env -u VALIDATE_PROTOCOL $example {dir}"; then fail "validate run passed a program that wrote no trajectory"; fi
  grep -q "wrote none of its trajectory" "$work/v1.log" || fail "the run does not say the trajectory is missing: $(cat "$work/v1.log")"
  if compare v1; then fail "compare passed a program that wrote no trajectory: $(cat "$work/v1.txt")"; fi
  # The cap on steps/ (--max-step-inputs-mb): above it the case fails naming the figures; a
  # value that is not a number is a usage error (exit 2).
  if run cap "$example {dir}" -- --max-step-inputs-mb 0.01; then fail "a run above the step-input cap passed"; fi
  grep -q "trains 10 steps and each batch is .* bytes (steps x input bytes), above the exec runner's cap of 10485 bytes" \
    "$work/cap.log" || fail "the cap is not stated: $(cat "$work/cap.log")"
  set +e
  "$validate" run --backend exec --cmd "$example {dir}" --layout "$layouts" --ref "$work/ref" --out "$work/badcap" \
    --max-step-inputs-mb lots > "$work/badcap.log" 2>&1
  rc=$?
  set -e
  [ $rc = 2 ] && grep -q "max-step-inputs-mb 'lots' is not a number" "$work/badcap.log" ||
    fail "--max-step-inputs-mb lots: exit $rc: $(cat "$work/badcap.log")"
  ;;
wrong_update)
  run bug "$example {dir}" CONV_RUNNER_BUG=update_dw_krsc || fail "validate run: $(tail -5 "$work/bug.log")"
  if compare bug; then
    fail "compare PASSED the planted wrong-layout update (dW in KRSC applied to OIHW weights): a false pass — compare must gate train_loss and the checkpoints (docs/training.md); report: $(cat "$work/bug.txt")"
  fi
  for c in "$wd" "$nesterov"; do
    expect_verdict bug "$c" conv2d passed step0_weight step0_grad_weight output grad_weight  # step 0
    expect_verdict bug "$c" conv2d failed train_loss step1_weight
    # matmul has no filter layout: its trajectory is untouched by the switch.
    expect_verdict bug "$c" matmul passed train_loss
    grep -Eq "float32/$c/conv2d +FAILED at step 1 \(mistake\)" "$work/bug.txt" ||
      fail "$c: compare does not say the trajectory parts at step 1 as a mistake: $(cat "$work/bug.txt")"
  done
  # The first update undone ((w0 - w1) / lr(1 + mu if Nesterov) - wd w0) is the gradient the
  # program applied, the reference's read in the KRSC order: compare names it (diagnosis
  # update_layout) at the first bad checkpoint of both cases, with weight decay and with Nesterov.
  n=$(grep -Ec "first bad checkpoint step1_weight \(step 1\): update applied with dW in OHWI" "$work/bug.txt" || true)
  [ "$n" -ge 2 ] ||
    fail "compare does not name the update applied with dW in the filter layout in both cases ($n): $(cat "$work/bug.txt")"
  # Momentum ignored (plain SGD on a case with momentum 0.9): the first update is the same, the
  # second is named from the run's own steps 0 and 1 (check_own_update). The Nesterov case's first
  # update already differs (lr (1 + mu) g): named at step 1 as Nesterov momentum missing.
  run nomom "$example {dir}" CONV_RUNNER_BUG=no_momentum || fail "validate run: $(tail -5 "$work/nomom.log")"
  if compare nomom; then fail "compare PASSED a program that ignores the momentum: a false pass; report: $(cat "$work/nomom.txt")"; fi
  expect_verdict nomom "$wd" conv2d passed step0_weight step1_weight
  expect_verdict nomom "$wd" conv2d failed step2_weight
  for op in conv2d matmul; do
    grep -A1 -E "^  float32/$wd/$op +FAILED at " "$work/nomom.txt" |
      grep -Eq "first bad checkpoint step2_[a-zA-Z]+ \(step 2\): momentum missing" ||
      fail "compare does not name the missing momentum of $wd $op at step 2: $(cat "$work/nomom.txt")"
    grep -A1 -E "^  float32/$nesterov/$op +FAILED at " "$work/nomom.txt" |
      grep -Eq "first bad checkpoint step1_[a-zA-Z]+ \(step 1\): .*Nesterov momentum missing" ||
      fail "compare does not name the missing Nesterov momentum of $nesterov $op at step 1: $(cat "$work/nomom.txt")"
  done
  # Gradients never zeroed (no zero_grad): step 1's gradient is g0 + g1, written and applied; the
  # first update (g0 alone) is right. Named on step1_grad_<param>, never read as a layout.
  run acc "$example {dir}" CONV_RUNNER_BUG=no_zero_grad || fail "validate run: $(tail -5 "$work/acc.log")"
  if compare acc; then fail "compare PASSED a program that never zeroes its gradients: a false pass; report: $(cat "$work/acc.txt")"; fi
  for c in "$wd" "$nesterov"; do
    expect_verdict acc "$c" conv2d passed step0_grad_weight step1_weight
    expect_verdict acc "$c" conv2d failed step1_grad_weight
    for op in conv2d matmul; do
      grep -A1 -E "^  float32/$c/$op +FAILED at " "$work/acc.txt" |
        grep -Eq "first bad checkpoint step1_grad_[a-zA-Z]+ \(step 1\): gradients accumulated across steps" ||
        fail "compare does not name the gradients accumulated across steps of $c $op at step 1: $(cat "$work/acc.txt")"
    done
  done
  if grep -E "swapped|flipped" "$work/acc.txt" "$work/nomom.txt" | grep -v "^ *$" | grep -q "step[0-9]"; then
    fail "a layout is offered for an optimizer-state mistake: $(grep -E "swapped|flipped" "$work/acc.txt" "$work/nomom.txt")"
  fi
  ;;
mixed | adam)
  if [ "$mode" = mixed ]; then c=tmixed_conv_n2_c6_h7_w9_o4_g2 dtypes="bfloat16 float16"; else c=tadam_conv_n2_c6_h7_w9_o4_g2 dtypes="float32 bfloat16"; fi
  run clean "$example {dir}" || fail "validate run: $(tail -5 "$work/clean.log")"
  compare clean || fail "compare of the clean mixed-precision trajectory: $(tail -30 "$work/clean.txt")"
  run bug "$example {dir}" CONV_RUNNER_BUG=update_dw_krsc || fail "validate run: $(tail -5 "$work/bug.log")"
  for dt in $dtypes; do
    if compare bug "^$dt/"; then
      fail "$dt: compare PASSED the planted wrong-layout update ($mode): a false pass; report: $(cat "$work/bug.txt")"
    fi
    expect_verdict bug "$c" conv2d passed step0_weight step0_grad_weight output grad_weight  # step 0
    expect_verdict bug "$c" conv2d failed step1_weight train_loss
    expect_verdict bug "$c" matmul passed train_loss
    grep -Eq "$dt/$c/conv2d +FAILED at step 1 \(mistake\)" "$work/bug.txt" ||
      fail "$dt: compare does not say the trajectory parts at step 1 as a mistake: $(cat "$work/bug.txt")"
    grep -Eq "first bad checkpoint step1_weight \(step 1\): update applied with dW in OHWI" "$work/bug.txt" ||
      fail "$dt: compare does not name the update applied with dW in the filter layout ($mode): $(cat "$work/bug.txt")"
  done
  [ "$mode" = mixed ] || exit_ok
  # Masters kept in the case dtype (the pure-bfloat16 optimizer): its loss curve stays inside the
  # gate (docs/training.md), so the checkpoints must fail it, from step 1 on, and name it.
  run narrow "$example {dir}" CONV_RUNNER_BUG=narrow_masters || fail "validate run: $(tail -5 "$work/narrow.log")"
  for dt in $dtypes; do
    if compare narrow "^$dt/"; then
      fail "$dt: compare PASSED a program that keeps its masters in $dt: a false pass; report: $(cat "$work/narrow.txt")"
    fi
    expect_verdict narrow "$c" conv2d passed step0_weight output grad_weight  # step 0
    expect_verdict narrow "$c" conv2d failed step1_weight step29_weight
    expect_verdict narrow "$c" matmul passed train_loss
    grep -A1 -E "^  $dt/$c/conv2d +FAILED at checkpoint step 1" "$work/narrow.txt" |
      grep -Eq "first bad checkpoint step1_(weight|bias) \(step 1\): master (weight|bias) kept in $dt" ||
      fail "$dt: compare does not name the masters kept in $dt at step 1: $(cat "$work/narrow.txt")"
  done
  # Weight decay ignored: against the reference its first update is inside the narrow dtypes'
  # checkpoint gate (the gradients' own difference); against the run's own step-0 weight and
  # gradient it is not, and the fit names the missing decay (check_own_first_update).
  run nowd "$example {dir}" CONV_RUNNER_BUG=no_weight_decay || fail "validate run: $(tail -5 "$work/nowd.log")"
  for dt in $dtypes; do
    if compare nowd "^$dt/"; then
      fail "$dt: compare PASSED a program that ignores the weight decay: a false pass; report: $(cat "$work/nowd.txt")"
    fi
    expect_verdict nowd "$c" conv2d passed step0_weight output grad_weight  # step 0
    expect_verdict nowd "$c" conv2d failed step1_weight
    expect_verdict nowd "$c" matmul failed step1_B
    for op in conv2d matmul; do
      grep -A1 -E "^  $dt/$c/$op +FAILED at " "$work/nowd.txt" |
        grep -Eq "first bad checkpoint step1_[a-zA-Z]+ \(step 1\): the first update of [a-zA-Z]+ is an SGD step with other settings: weight decay missing" ||
        fail "$dt: compare does not name the missing weight decay of $op at step 1: $(cat "$work/nowd.txt")"
    done
  done
  ;;
*)
  echo "train_example.sh: unknown mode '$mode' (clean, wrong_update, mixed, adam)" >&2
  exit 2
  ;;
esac
exit_ok
