#!/usr/bin/env bash
# Attacks through text and structure (docs/reliability.md): bytes that are not UTF-8, JSON nested
# 10^5 deep, reports that must parse whatever a program printed, a regex that backtracks without
# end, Markdown that must not turn a message into HTML. Each ATTACK was reproduced against the CLI
# before the fix (an abort, a segfault, an unparsable report, a hang, a raw tag) and must now get
# the answer written next to it. One ctest per attack (reliability.text.<name>), on a copy of
# references/smoke; only those that generate need LibTorch.
# usage: text_attacks.sh VALIDATE_BIN WORK_DIR SOURCE_DIR ATTACK
set -uo pipefail
bin=$1 work=$2 src=$3 attack=$4
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
ref=$work/ref run=$work/run
fail() { echo "text_attacks $attack: FAIL: $*"; exit 1; }
ok() {
  echo "text_attacks $attack: passed${1:+ ($1)}"
  rm -rf "$work"
  exit 0
}
cp -r "$src/references/smoke" "$ref" || fail "cannot copy references/smoke"
py() { /usr/bin/python3 - "$@"; }  # Debian's, with python3-numpy (install-deps.sh)
e9=$(printf '\351')                 # Latin-1 'é': one byte that is not UTF-8

# expect CODE RC LOG NEEDLE...: the exit status and every needle in the output.
expect() {
  local want=$1 rc=$2 log=$3
  shift 3
  [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $(tail -c 1500 "$log")"
  for needle in "$@"; do grep -qF -- "$needle" "$log" || fail "'$needle' missing from: $(tail -c 1500 "$log")"; done
}
v() {  # v LOG ARGS...: validate with a hard time limit (a hang is a failure, not a stuck CI)
  local log=$1
  shift
  timeout -k 5 60 "$bin" "$@" > "$log" 2>&1
}
# json_has FILE PYEXPR: FILE parses as JSON (Python's strict UTF-8 decoding) and PYEXPR over it, d, holds.
json_has() {
  py "$1" "$2" << 'EOF' || fail "$1: $2 does not hold"
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}
# A program that answers every case with the reference's own results (the `torch` preset is the
# canonical layout; an .npy 1.0 file is 10 bytes, a header of the length at bytes 8-9, the data).
cat > "$work/copy.sh" << 'EOF'
dir=$1 case=$2 op=$3 dtype=$4 ref=$5
raw() { hlen=$(od -An -tu2 -j8 -N2 "$1" | tr -d ' '); tail -c +$((hlen + 11)) "$1" > "$2"; }
for t in output loss grad_input grad_weight grad_bias grad_A grad_B; do
  f="$ref/$dtype/${case}_${op}_$t.npy"
  if [ -f "$f" ]; then raw "$f" "$dir/$t.bin"; fi
done
EOF
# deepen SET FILE [DEPTH]: FILE of SET gets a key "deep" holding arrays nested DEPTH (10^5) deep,
# with the manifest's hash rewritten so only the structure, not the bookkeeping, is wrong.
deepen() {
  py "$1" "$2" "${3:-100000}" << 'EOF'
import hashlib, json, os, sys
d, rel, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = os.path.join(d, rel)
text = open(p).read().rstrip().rstrip("}")
open(p, "w").write(text + ', "deep": ' + "[" * n + "]" * n + "}")
m = json.load(open(os.path.join(d, "manifest.json")))
data = open(p, "rb").read()
m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
EOF
}
copy_cmd="sh '$work/copy.sh' {dir} {case} {op} {dtype} '$ref'"

case $attack in
non_utf8)  # 9. one Latin-1 byte in stderr, --cmd, --only, --ref or a merged shard's path: SIGABRT (134)
  # a program that succeeds but says 'caf\351' on stderr
  v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$run" --only '^float32/k0072' \
    --cmd "$copy_cmd; printf 'caf\\351' >&2"
  expect 0 $? "$work/log" "2 ok, 0 error"
  v "$work/log" compare "$ref" "$run" -q
  expect 0 $? "$work/log" "passed, 0 failed"
  # one that fails: its stderr is kept with the byte as \xNN
  v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/r2" --only '^float32/k0072' \
    --cmd "printf 'caf\\351' >&2; exit 3"
  expect 1 $? "$work/log" "exited with status 3"
  json_has "$work/r2/float32/k0072_ic008_run.json" "d['ops']['conv2d']['message'].endswith('stderr: caf\\\\xe9')"
  v "$work/log" verify "$work/r2"
  expect 0 $? "$work/log" "0 mismatch"
  # the byte in --cmd
  v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/r3" --only '^float32/k0072' \
    --cmd "$copy_cmd # caf$e9"
  expect 0 $? "$work/log" "2 ok"
  json_has "$work/r3/run_info.json" "d['runner']['cmd'].endswith('# caf\\\\xe9')"
  # in --ref: the run records the path with the byte as \xNN
  cp -r "$ref" "$work/ref$e9"
  v "$work/log" run --backend oracle --progress 0 --ref "$work/ref$e9" --out "$work/r4"
  expect 0 $? "$work/log" "16 ok"
  json_has "$work/r4/run_info.json" "d['reference']['path'].endswith('/ref\\\\xe9')"
  v "$work/log" compare "$work/ref$e9" "$work/r4" -q --json "$work/r4.json"
  expect 0 $? "$work/log" "70 passed"
  json_has "$work/r4.json" "d['reference'].endswith('/ref\\\\xe9')"
  # in a shard's path given to merge
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$work/s$e9" --shard 0/2
  expect 0 $? "$work/log"
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$work/s1" --shard 1/2
  expect 0 $? "$work/log"
  v "$work/log" merge "$work/m" "$work/s$e9" "$work/s1"
  expect 0 $? "$work/log" "2 shards"
  json_has "$work/m/run_info.json" "d['merged_from'][0].endswith('/s\\\\xe9')"
  v "$work/log" compare "$ref" "$work/m" -q
  expect 0 $? "$work/log" "70 passed"
  # in --only (run): RE2 reads patterns as UTF-8 and refuses it, named (case names are ASCII)
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$work/r5" --only "^float32/k0072|caf$e9"
  expect 2 $? "$work/log" "--only '^float32/k0072|caf\\xe9' is not a regular expression RE2 accepts: invalid UTF-8"
  [ ! -e "$work/r5" ] || fail "run --only with a Latin-1 byte left $work/r5"
  ok ;;

non_utf8_generate)  # 9. the byte in generate --only: SIGABRT
  v "$work/log" generate --cases "$src/cases/smoke.json" --dtype float32 --only "k0072|caf$e9" --out "$work/g" --progress 0
  expect 2 $? "$work/log" "--only 'k0072|caf\\xe9' is not a regular expression RE2 accepts: invalid UTF-8"
  [ ! -e "$work/g" ] || fail "generate --only with a Latin-1 byte left $work/g"
  ok ;;

deep_json)  # 10. a 10^5-deep array in run_info.json / a reference's config.json: SIGSEGV (139)
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$run"
  expect 0 $? "$work/log"
  cp -r "$run" "$work/run_shallow"
  deepen "$run" run_info.json
  v "$work/log" compare "$ref" "$run" -q --json "$work/report.json"
  expect 2 $? "$work/log" "run_info.json: JSON nested more than 64 levels deep"
  [ ! -e "$work/report.json" ] || fail "a report was written for a run that could not be read"
  v "$work/log" merge "$work/m" "$run"
  expect 2 $? "$work/log" "run_info.json: JSON nested more than 64 levels deep"
  deepen "$ref" config.json
  v "$work/log" merge "$work/m2" "$ref"
  expect 2 $? "$work/log" "config.json: JSON nested more than 64 levels deep"
  # 64 levels are still read (a run_info.json that deep compares as usual)
  deepen "$work/run_shallow" run_info.json 63
  cp -r "$src/references/smoke" "$work/ref_ok"
  v "$work/log" compare "$work/ref_ok" "$work/run_shallow" -q --json "$work/report.json"
  expect 0 $? "$work/log" "70 passed"
  ok ;;

deep_json_generate)  # 10. a case file whose description is 10^5 deep crashed generate (139)
  py "$src/cases/smoke.json" "$work/deep.json" << 'EOF'
import json, sys
text = open(sys.argv[1]).read().rstrip().rstrip("}")
open(sys.argv[2], "w").write(text + ', "description": ' + "[" * 100000 + "]" * 100000 + "}")
EOF
  v "$work/log" generate --cases "$work/deep.json" --dtype float32 --only k0072 --out "$work/g" --progress 0
  expect 2 $? "$work/log" "deep.json: JSON nested more than 64 levels deep"
  [ ! -e "$work/g" ] || fail "generate left $work/g behind"
  ok ;;

reports_parse)  # 13. a program printing U+FFFE, or a run path with a Latin-1 byte: JUnit "not well-formed"
  # stderr: U+FFFE and U+FFFF (UTF-8, but not XML characters), C0 controls, an ANSI colour, a
  # Latin-1 byte, a lone surrogate, a CDATA end and markup; the run's path holds a Latin-1 byte.
  bad="printf 'bad \\357\\277\\276 \\357\\277\\277 \\001\\010\\033[31m caf\\351 \\355\\240\\200 ]]> <b a=\"x\">&amp;\\r\\n' >&2; exit 3"
  v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/run$e9" --only '^float32/k0072' \
    --cmd "$bad"
  expect 1 $? "$work/log" "exited with status 3"
  v "$work/log" compare "$ref" "$work/run$e9" -q --json "$work/r.json" --junit "$work/r.xml" --md "$work/r.md" --html "$work/r.html"
  expect 1 $? "$work/log" "failed"
  py "$work" << 'EOF' || fail "a report does not parse"
import html.parser, json, sys, xml.etree.ElementTree as ET
w = sys.argv[1]
def text(name):  # strict UTF-8: a byte that is not UTF-8 raises
    return open(f"{w}/{name}", encoding="utf-8").read()
report = json.loads(text("r.json"))
assert report["run"].endswith("/run\\xe9"), report["run"]
root = ET.parse(f"{w}/r.xml").getroot()  # "not well-formed" raised here before
failures = [f for f in root.iter() if f.tag in ("failure", "error")]
assert failures, "no failure in the JUnit report"
msgs = " ".join((f.get("message") or "") + (f.text or "") for f in failures)
for want in ("caf\\xe9", "]]>", '<b a="x">&amp;', "/run\\xe9/"):
    assert want in msgs, f"{want!r} missing from the JUnit failures: {msgs[:400]!r}"
for c in ("\ufffe", "\uffff", "\x01", "\x08", "\x1b"):
    assert c not in msgs, f"{c!r} in the JUnit report"
html.parser.HTMLParser().feed(text("r.html"))
md = text("r.md")
assert "caf\\\\xe9" in md and "\ufffe" not in md  # the backslash itself escaped
EOF
  ok ;;

markdown_html)  # 15. '\<img …\>' in a message became '\\<img …>' in the Markdown report: a raw HTML tag
  tag='\<img src=x onerror=alert(1)\>'
  v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$work/run$tag" --only '^float32/k0072' \
    --cmd "printf '%s' '$tag' >&2; exit 3"
  expect 1 $? "$work/log" "exited with status 3"
  v "$work/log" compare "$ref" "$work/run$tag" -q --md "$work/r.md"
  expect 1 $? "$work/log" "failed"
  # Outside code spans every '<' must be escaped: preceded by an odd number of backslashes.
  py "$work/r.md" << 'EOF' || fail "an unescaped '<' in the Markdown report"
import re, sys
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    if line.startswith("<details>") or line.startswith("</details>"):
        continue  # the report's own fold
    # drop code spans (a run of N backticks up to the next run of exactly N)
    line = re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", line)
    for m in re.finditer(r"(\\*)<", line):
        if len(m.group(1)) % 2 == 0:
            print(f"line {n}: unescaped '<': {line.strip()[:300]}")
            sys.exit(1)
EOF
  # and through a CommonMark renderer, raw HTML let through (--unsafe): no tag, the text intact
  if command -v cmark > /dev/null; then
    cmark --unsafe "$work/r.md" > "$work/r.html" || fail "cmark failed"
    grep -q '<img' "$work/r.html" && fail "cmark rendered a tag: $(grep -m1 '<img' "$work/r.html")"
    grep -qF '\&lt;img src=x onerror=alert(1)\&gt;' "$work/r.html" || fail "the message's text was not kept: $(grep -m1 'img' "$work/r.html")"
  elif [ -n "${CI:-}" ]; then
    fail "no cmark under CI: scripts/install-deps.sh should have installed it"
  fi
  ok ;;

regex_redos)  # 14. compare --only '^(.*)*x$' burnt CPU without end (std::regex backtracking)
  v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$run"
  expect 0 $? "$work/log"
  t0=$(date +%s%N)
  # 20 s of a 2-core CI is three orders of magnitude above what RE2 takes (~10 ms for the whole compare)
  timeout -k 2 20 "$bin" compare "$ref" "$run" -q --only '^(.*)*x$' > "$work/log" 2>&1
  expect 1 $? "$work/log" "nothing was compared"
  timeout -k 2 20 "$bin" compare "$ref" "$run" -q --only '^(.*)*(float32/k0072_ic008/conv2d/output)$' > "$work/log" 2>&1
  expect 0 $? "$work/log" "1 passed"
  timeout -k 2 20 "$bin" run --backend oracle --progress 0 --ref "$ref" --out "$work/r2" --only '^(.*)*k0072_ic008$' > "$work/log" 2>&1
  expect 0 $? "$work/log" "(4 ok, 0 error"  # k0072_ic008 in float32 and bfloat16, two ops each
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  # what RE2 cannot take is refused, named, with its reason: a backreference, lookahead, a bad group
  for p in '(a)\1' '^(?=float32)' '(' '[z-a]'; do
    v "$work/log" compare "$ref" "$run" -q --only "$p"
    expect 2 $? "$work/log" "--only '$p' is not a regular expression RE2 accepts: "
    v "$work/log" run --backend oracle --progress 0 --ref "$ref" --out "$work/r3" --only "$p"
    expect 2 $? "$work/log" "--only '$p' is not a regular expression RE2 accepts: "
  done
  v "$work/log" compare "$ref" "$run" -q --variant '(a)\1'
  expect 2 $? "$work/log" "--variant '(a)\1' is not a regular expression RE2 accepts: invalid escape sequence"
  ok "three catastrophic patterns in $ms ms" ;;

regex_redos_generate)  # 14. the same pattern in generate --only
  timeout -k 2 20 "$bin" generate --cases "$src/cases/smoke.json" --dtype float32 --only '^(.*)*(k0072_ic008)$' --out "$work/g" \
    --progress 0 > "$work/log" 2>&1
  expect 0 $? "$work/log" "1 case(s) written"
  v "$work/log" generate --cases "$src/cases/smoke.json" --dtype float32 --only '(k)\1' --out "$work/g2" --progress 0
  expect 2 $? "$work/log" "--only '(k)\1' is not a regular expression RE2 accepts: invalid escape sequence: \1"
  ok ;;

*) fail "unknown attack $attack" ;;
esac
