#!/usr/bin/env bash
# A misspelt command, option, backend or layout preset is named, with the nearest valid one, exit 2
# (CLI11 alone said "A subcommand is required" or "The following argument was not expected" without
# the word); numeric backend options show their type in --help.
# usage: cli_words.sh VALIDATE_BIN
set -uo pipefail
bin=$1
fail() { echo "cli_words: FAIL: $*"; exit 1; }
check() {  # check "ARGS" NEEDLE: exit 2 and NEEDLE on stderr
  local args=$1 needle=$2 err rc
  # shellcheck disable=SC2086
  err=$("$bin" $args 2>&1 > /dev/null)
  rc=$?
  [ "$rc" -eq 2 ] || fail "validate $args: exit $rc, expected 2: $err"
  grep -qF -- "$needle" <<< "$err" || fail "validate $args: '$needle' missing from: $err"
}
check "comapre" "unknown command 'comapre'; did you mean 'compare'?"
check "--verison" "unknown option '--verison'; did you mean '--version'?"
check "compare --requre-all a b" "validate compare: unknown option '--requre-all'; did you mean '--require-all'?"
check "run --backend exec --timeot 3 --ref r" "validate run: unknown option '--timeot'; did you mean '--timeout'?"
check "generate --out=x --seeed=3" "validate generate: unknown option '--seeed'; did you mean '--seed'?"
check "frobnicate" "unknown command 'frobnicate' (commands: generate, verify, list, run, compare, probe, merge)"
# A known word with a bad value still gets its own message, not a guess.
check "run --backend nosuch --ref r" "--backend"
# A misspelt backend or layout preset: the value's message names the nearest one.
check "run --backend exce --ref r" "'exce' is not a backend (this build knows: "
check "run --backend exce --ref r" "; did you mean 'exec'?"
check "run --backend oracle --layout fortan --ref r" "layout 'fortan' is neither a preset"
check "run --backend oracle --layout fortan --ref r" "; did you mean 'fortran'?"
check "probe --layout chanels_last --tensor conv2d.input" "did you mean 'channels_last'?"
help=$("$bin" run --help) || fail "run --help failed"
for opt in "--timeout FLOAT" "--max-step-inputs-mb FLOAT" "--repeat INT"; do
  grep -qF -- "$opt" <<< "$help" || fail "run --help does not show '$opt'"
done
echo "cli_words: passed"
