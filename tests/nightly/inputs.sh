#!/usr/bin/env bash
# scripts/nightly.sh's input checks, JUnit file, VALIDATE_GATES and labels, on the smoke set:
# - a missing policy, case file or binary, an unknown dtype, a malformed or unknown gate, a policy
#   validate cannot read: exit 2 at once, nothing generated or run, and nightly.junit.xml holds an
#   <error> testcase naming the problem (before this, a missing policy ran every backend and left
#   no JUnit file);
# - VALIDATE_GATES reaches compare as --gate options, compare gets --require-all, and the
#   LibTorch-on-CPU run is labelled a self-check in nightly.junit.xml, summary.md and every compare
#   report, while the oracle run is not;
# - with a gate forced red (float32 max_ulp=0), every failure appears once across the JUnit files a
#   CI tab reads: the failing tensors in oracle-fortran.junit.xml (suites compare/oracle-fortran.*),
#   the compare stage of nightly.junit.xml pointing there without a failure of its own.
#   inputs.sh VALIDATE_BIN WORK_DIR   (run from the source tree)
set -uo pipefail
real_bin=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
export VALIDATE_SKIP_BUILD=1 VALIDATE_CASES=cases/smoke.json VALIDATE_DTYPES=float32
unset VALIDATE_REF VALIDATE_REF_CACHE VALIDATE_POLICY VALIDATE_GATES
fail() { echo "FAIL: $*"; exit 1; }
# A binary that records every command line, so the test sees what nightly.sh passed.
cat > "$work/validate" <<SH
#!/bin/sh
echo "\$*" >> "$work/calls.log"
exec "$real_bin" "\$@"
SH
chmod +x "$work/validate"
export VALIDATE_BIN=$work/validate

# expect_input_error NAME TEXT [VAR=VALUE...]: exit 2 quickly, an <error> naming TEXT, no work done.
expect_input_error() {
  local name=$1 text=$2
  shift 2
  local out=$work/$name
  : > "$work/calls.log"
  local start=$SECONDS
  env "$@" VALIDATE_OUT="$out" scripts/nightly.sh > "$work/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 2 ] || { cat "$work/$name.log"; fail "$name: exit $rc, expected 2"; }
  [ $((SECONDS - start)) -le 20 ] || fail "$name: took $((SECONDS - start)) s to refuse its input"
  local junit=$out/reports/nightly.junit.xml
  [ -f "$junit" ] || { cat "$work/$name.log"; fail "$name: no $junit"; }
  grep -q '<testcase classname="nightly" name="inputs"><error message=' "$junit" || { cat "$junit"; fail "$name: no <error> testcase"; }
  grep -qF -- "$text" "$junit" || { cat "$junit"; fail "$name: the JUnit error does not say: $text"; }
  grep -qF -- "$text" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: the log does not say: $text"; }
  /usr/bin/python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$junit" || fail "$name: $junit is not XML"
  [ ! -e "$out/ref" ] && ! ls -d "$out"/run-* > /dev/null 2>&1 || fail "$name: generated or ran before refusing"
  ! grep -Eq '^(generate --cases [^ ]+ --dtype [^ ]+ --out|run )' "$work/calls.log" || fail "$name: generated or ran: $(cat "$work/calls.log")"
  echo "ok: $name"
}
expect_input_error missing_policy "policy (VALIDATE_POLICY) $work/nope.json does not exist" VALIDATE_POLICY="$work/nope.json"
echo '{"format": "validate-policy/1", "rules": [{"rtol": "tight"}]}' > "$work/bad_policy.json"
expect_input_error unreadable_policy "rule 0: 'rtol' must be a number" VALIDATE_POLICY="$work/bad_policy.json"
expect_input_error missing_cases "case file (VALIDATE_CASES) $work/nope_cases.json does not exist" VALIDATE_CASES="$work/nope_cases.json"
sed 's/"seed": 42/"seed": 42, "sede": 1/' cases/smoke.json > "$work/typo_cases.json"
expect_input_error bad_case_key "unknown key 'sede'" VALIDATE_CASES="$work/typo_cases.json"
expect_input_error bad_dtype "VALIDATE_DTYPES 'float32,float64'" VALIDATE_DTYPES=float32,float64
expect_input_error gate_syntax "VALIDATE_GATES: 'rtol' is not" VALIDATE_GATES="float32.rtol=1e-3 rtol"
expect_input_error gate_key "unknown gate key 'rtoll'" VALIDATE_GATES="float32.rtoll=1e-3"
expect_input_error missing_binary "is not an executable" VALIDATE_BIN="$work/no-such-validate"

# A real gate: float32 with a zero relative tolerance and zero ULPs. The float64 oracle (rounded
# to float32) then fails against the LibTorch references; LibTorch on the CPU is bit-identical to
# them (the self-check) and passes.
out=$work/gated
: > "$work/calls.log"
VALIDATE_OUT=$out VALIDATE_GATES="float32.rtol=0  float32.max_ulp=0" scripts/nightly.sh > "$work/gated.log" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$work/gated.log"; fail "gated: exit $rc, expected 1"; }
grep -q -- "compare .*run-oracle-fortran --require-all .*--gate float32.rtol=0 --gate float32.max_ulp=0" "$work/calls.log" ||
  { cat "$work/calls.log"; fail "compare did not get --require-all and the VALIDATE_GATES options"; }
r=$out/reports
j=$r/nightly.junit.xml
# Each failure once across the JUnit files a CI tab reads (reports/*.junit.xml): the oracle's
# failing tensors are testcases of oracle-fortran.junit.xml, in suites named after the stage, and
# the stage testcase only points there. Independent count: compare's JSON summary.
/usr/bin/python3 - "$r" <<'PY' || fail "JUnit failures are not counted once each"
import glob, json, os, sys
import xml.etree.ElementTree as ET
r = sys.argv[1]
failing = []  # (file, suite, classname, name) of every <failure>/<error>
for path in sorted(glob.glob(os.path.join(r, "*.junit.xml"))):
    for suite in ET.parse(path).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failing.append((os.path.basename(path), suite.get("name"), case.get("classname"), case.get("name")))
want = 0
for run in ("oracle-fortran", "torch-cpu"):
    want += json.load(open(os.path.join(r, run + ".json")))["summary"]["failed"]
print(f"JUnit failures across {r}/*.junit.xml: {len(failing)}; failing tensors in the JSON reports: {want}")
assert want > 0, "the forced gate failed no tensor"
assert len(failing) == want, failing
assert len(set((c, n) for _, _, c, n in failing)) == len(failing), "a failure is listed twice"
assert all(f == "oracle-fortran.junit.xml" and s.startswith("compare/oracle-fortran.") for f, s, _, _ in failing), failing
# Every suite of a compare file is named after its stage.
for run in ("oracle-fortran", "torch-cpu"):
    names = [s.get("name") for s in ET.parse(os.path.join(r, run + ".junit.xml")).getroot().iter("testsuite")]
    assert names and all(n.startswith(f"compare/{run}.") for n in names), names
PY
grep -q '<testcase classname="nightly" name="compare/oracle-fortran"><system-out>.*failing tensor(s), each a testcase of suite compare/oracle-fortran\.\*' "$j" ||
  { cat "$j"; fail "the oracle's compare stage does not point to its per-tensor suite"; }
grep -q '<testsuite name="validate nightly" tests="[0-9]*" failures="0" errors="0">' "$j" || { cat "$j"; fail "nightly.junit.xml counts a failure of its own"; }
grep -q '<testcase classname="nightly" name="compare/torch-cpu (self-check)"></testcase>' "$j" || { cat "$j"; fail "torch-cpu is not a passing self-check testcase"; }
grep -q '| torch-cpu | 0 | 0 | self-check' "$r/summary.md" || { cat "$r/summary.md"; fail "summary.md does not label the self-check"; }
grep -q 'SELF-CHECK: LibTorch' "$r/compare-torch-cpu.txt" || fail "terminal report lacks SELF-CHECK"
grep -q 'self-check' "$r/torch-cpu.junit.xml" || fail "torch-cpu.junit.xml lacks the self-check label"
grep -q 'class="selfcheck"' "$r/torch-cpu.html" || fail "torch-cpu.html lacks the self-check banner"
grep -q 'Self-check' "$r/torch-cpu.md" || fail "torch-cpu.md lacks the self-check line"
/usr/bin/python3 -c "import json, sys; assert json.load(open(sys.argv[1]))['self_check']" "$r/torch-cpu.json" || fail "torch-cpu.json: no self_check"
/usr/bin/python3 -c "import json, sys; assert json.load(open(sys.argv[1]))['self_check'] is None" "$r/oracle-fortran.json" || fail "the oracle run is labelled a self-check"
! grep -q 'self-check' "$r/oracle-fortran.junit.xml" "$r/compare-oracle-fortran.txt" || fail "the oracle run is labelled a self-check"
grep -q 'oracle-fortran: run exit 0, compare exit 1' "$work/gated.log" || { cat "$work/gated.log"; fail "log"; }
echo "nightly inputs: all checks passed"
