#!/usr/bin/env bash
# The sets the oracle and scale attacks start from, made once for all of them (ctest fixture
# `smoke_sets`, test reliability.smoke_sets) in SETS_DIR:
#   ref/     a copy of references/smoke
#   oracle/  the float64 oracle's run of it
#   x2/      the oracle's run with every output and gradient doubled, its manifest rewritten
#   refrun/  the reference's own tensors handed back as a run
# and the controls every attack relies on: X2 fails, plain and against the oracle; REFRUN passes
# both ways; the copy verifies. The attacks read these sets and edit only copies of them.
# usage: smoke_sets.sh VALIDATE_BIN SETS_DIR SOURCE_DIR
set -uo pipefail
script=smoke_sets
. "$(dirname "$0")/attack_lib.sh"
smoke_attack_opening "$1" "$2" "$3" setup
v "$work/run.log" run --backend oracle --progress 0 --ref "$ref" --out "$orc" || fail "oracle run: $(tail -5 "$work/run.log")"
derive "$orc" "$x2" x2
derive "$orc" "$good" ref
v "$work/log" compare "$ref" "$x2" -q
expect 1 $? "$work/log" " 0 passed"
v "$work/log" compare "$ref" "$x2" -q --oracle "$orc"
expect 1 $? "$work/log" " 0 passed"
v "$work/log" compare "$ref" "$good" -q
expect 0 $? "$work/log" "70 passed, 0 failed"
v "$work/log" compare "$ref" "$good" -q --oracle "$orc"
expect 0 $? "$work/log" "70 passed, 0 failed"
v "$work/log" verify "$ref"
expect 0 $? "$work/log" "0 mismatch(es)"
rm -f "$work/log" "$work/run.log"
echo "$script: passed (sets in $work)"
