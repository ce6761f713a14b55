#!/usr/bin/env bash
# The nightly gate, the same locally and in CI: build, generate (or restore) CPU references, run
# the backends this machine has, compare each against the references with the policy, write
# JUnit/HTML/Markdown/JSON reports, and exit non-zero if any gate failed.
#
#   VALIDATE_CASES   case file (default cases/default.json; cases/smoke.json for a quick check)
#   VALIDATE_DTYPES  dtypes (default float32,bfloat16,float16 on a machine with a GPU, where cuDNN
#                    and LibTorch on CUDA run; float32,bfloat16 without one)
#   VALIDATE_POLICY  compare policy file (default: the built-in policy)
#   VALIDATE_OUT     where references, runs and reports go (default out/nightly)
#   VALIDATE_REF     an existing reference set to use instead of generating (verified first; if
#                    its config.json is not for VALIDATE_CASES/VALIDATE_DTYPES, regenerated)
#   VALIDATE_REF_CACHE  a directory of reference sets kept between runs, one per cache key (below):
#                    a set made for the same case file, dtypes and generator source is used in
#                    place, anything else is generated and stored there
#   VALIDATE_GATES   extra gate overrides, whitespace-separated, each passed as `compare --gate`
#                    (e.g. "float32.loss.loss_abs=1e-7 bfloat16.rtol=3e-2")
#   VALIDATE_SKIP_BUILD=1  use an existing binary instead of building (scripts/build.sh --runtime)
#   VALIDATE_BIN     the validate binary to run (default build/validate, what the build makes); with
#                    VALIDATE_SKIP_BUILD=1 a build tree's or an installed one, whose modules
#                    (lib/validate/ beside it, or ../lib/validate/) are from the same build
#
#   scripts/nightly.sh --cache-key   prints the cache key for VALIDATE_CASES/VALIDATE_DTYPES
#
# A machine has a GPU when `nvidia-smi -L` lists one: it then runs cuDNN in the torch, channels_last
# and fortran layouts and LibTorch on CUDA; otherwise the float64 oracle and LibTorch on the CPU.
#
# Inputs are checked before any work (a missing or malformed case file, policy or gate, an unknown
# dtype: exit 2 at once); the case file, policy and gates are checked again by validate's own
# parsers right after the build, before anything is generated or run, and so is every `validate
# run` and `validate compare` command line the gate will execute (each is run once against a
# reference set that does not exist, and must fail on that and nothing else: a wrong option stops
# the gate in seconds instead of after the references are made). Every exit leaves
# $VALIDATE_OUT/reports/nightly.junit.xml, one testcase per stage, with an <error> naming what
# stopped the gate, so a CI page never shows nothing. Compare runs with --require-all: a reference
# tensor that no backend produced fails the gate instead of being listed as "not run".
# Each failure is counted once across the JUnit files: a failing tensor is a testcase of
# <run>.junit.xml, whose suites are named after the stage (compare/<run>.<dtype>), and the stage's
# testcase in nightly.junit.xml then only points to them; a stage is a failure there itself only
# when no per-tensor testcase carries it (a run that exited non-zero, a compare red for something
# not checked).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
cases=${VALIDATE_CASES:-cases/default.json}
# Looked for first: the default dtypes depend on it. float16 is a dtype cuDNN and LibTorch on CUDA
# compute in tensor-core kernels of their own, so the GPU branch gates it too.
have_gpu=0
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
  have_gpu=1
  dtypes=${VALIDATE_DTYPES:-float32,bfloat16,float16}
else
  dtypes=${VALIDATE_DTYPES:-float32,bfloat16}
fi
out=${VALIDATE_OUT:-out/nightly}
policy=${VALIDATE_POLICY:-}
policy_args=()
[ -n "$policy" ] && policy_args=(--policy "$policy")
read -r -a gates <<< "${VALIDATE_GATES:-}"
gate_args=()
for g in "${gates[@]}"; do gate_args+=(--gate "$g"); done
bin=${VALIDATE_BIN:-build/validate}
log() { echo "nightly: $*"; }

# name | run arguments. No --conv-mode: cuDNN takes the mode each layout's conv2d weight declares
# (fortran's WHIO:F+flip=HW is pre-flipped for CUDNN_CONVOLUTION, the others are cross-correlation).
runs=()
if [ $have_gpu = 1 ]; then
  for layout in torch channels_last fortran; do runs+=("cudnn-$layout|--backend cudnn --layout $layout"); done
  runs+=("torch-cuda|--backend torch --device cuda")
else
  runs+=("oracle-fortran|--backend oracle --layout fortran" "torch-cpu|--backend torch --device cpu")
fi
# The command line of a run and of its compare, into cmd: the probe after the build and the gate
# itself execute the same options.
run_cmd() {  # run_cmd ARGS REF OUT
  local -a a
  read -r -a a <<< "$1"
  # --overwrite: a run directory of an earlier nightly is replaced whole, never mixed with this one
  # (a run that failed to start would otherwise leave the old results for compare to pass).
  cmd=("$bin" run "${a[@]}" --ref "$2" --out "$3" --overwrite --progress 1)
}
compare_cmd() {  # compare_cmd NAME REF RUN REPORTS
  cmd=("$bin" compare "$2" "$3" --require-all "${policy_args[@]}" "${gate_args[@]}"
       --junit "$4/$1.junit.xml" --junit-suite "compare/$1" --html "$4/$1.html" --md "$4/$1.md"
       --json "$4/$1.json")
}

# --- the JUnit file of the gate itself: one testcase per stage --------------------------------
junit=$out/reports/nightly.junit.xml
stage_xml=()
stage_failures=0
stage_errors=0
junit_written=0
# XML-escaped, without the control characters XML 1.0 forbids (a tool's output may hold some).
xml() {
  local s
  s=$(printf '%s' "$1" | tr -d '\000-\010\013\014\016-\037')
  s=${s//&/&amp;}; s=${s//</&lt;}; s=${s//>/&gt;}; s=${s//\"/&quot;}
  printf '%s' "$s"
}
stage() {  # stage NAME ok|reported|failure|error [MESSAGE [DETAIL]]
  local body=""
  case $2 in
    # The stage's failures are testcases of another JUnit file: it is not counted again here.
    reported) body="<system-out>$(xml "$3")</system-out>" ;;
    failure) body="<failure message=\"$(xml "$3")\">$(xml "${4:-$3}")</failure>"; stage_failures=$((stage_failures + 1)) ;;
    error) body="<error message=\"$(xml "$3")\">$(xml "${4:-$3}")</error>"; stage_errors=$((stage_errors + 1)) ;;
  esac
  stage_xml+=("  <testcase classname=\"nightly\" name=\"$(xml "$1")\">$body</testcase>")
}
# The failures + errors a compare JUnit file counts (its <testsuites> attributes); 0 when absent.
junit_failures() {
  local head f e
  head=$(grep -m1 -o '<testsuites [^>]*>' "$1" 2> /dev/null) || { echo 0; return; }
  f=$(printf '%s' "$head" | sed -n 's/.* failures="\([0-9]*\)".*/\1/p')
  e=$(printf '%s' "$head" | sed -n 's/.* errors="\([0-9]*\)".*/\1/p')
  echo $(( ${f:-0} + ${e:-0} ))
}
write_junit() {
  mkdir -p "$(dirname "$junit")" 2> /dev/null || return 1
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuite name=\"validate nightly\" tests=\"${#stage_xml[@]}\" failures=\"$stage_failures\" errors=\"$stage_errors\">"
    printf '%s\n' "${stage_xml[@]}"
    echo "</testsuite>"
  } > "$junit.tmp" && mv "$junit.tmp" "$junit" && junit_written=1
}
# Stop the gate: an <error> testcase for the stage that could not run, exit 2.
die() {  # die STAGE MESSAGE [DETAIL]
  log "ERROR: $2"
  stage "$1" error "$2" "${3:-}"
  write_junit || log "could not write $junit"
  exit 2
}
# Whatever ends the script (a signal, a bug), CI still gets a JUnit file that says so.
on_exit() {
  local rc=$?
  if [ $junit_written = 0 ] && [ "${cache_key_only:-0}" = 0 ]; then
    stage "nightly.sh" error "scripts/nightly.sh ended before writing its report (exit $rc)"
    write_junit
  fi
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# References are deterministic, so a set is reusable exactly when what made it is unchanged: the
# case file, the dtypes, and the source of the generator and of what it depends on (the RNG, case
# expansion, metadata). A restored set keyed on the case files alone would survive a generator
# fix and be compared against for months.
cache_key() {
  {
    echo "validate-ref-cache/1 dtypes=$dtypes"
    cat "$cases"
    find harness/core harness/cases harness/generate cmake/ValidateTorch.cmake -type f -print0 \
      | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}
if [ "${1:-}" = --cache-key ]; then
  cache_key_only=1
  [ -f "$cases" ] || { log "no case file $cases"; exit 2; }
  cache_key
  exit 0
fi

# Whether the set in $1 was generated from $cases for $dtypes (whole, random fill, no --only):
# prints what differs and fails otherwise. Its config.json is the case file as generate read it,
# plus seed, fill, selection, dtypes and expanded_cases.
ref_matches() {
  python3 - "$1/config.json" "$cases" "$dtypes" <<'PY'
import json, sys
cfg_path, cases_path, dtypes = sys.argv[1:]
try:
    cfg = json.load(open(cfg_path))
    case_file = json.load(open(cases_path))
except (OSError, ValueError) as e:
    sys.exit(f"cannot read {e}")
problems = []
added = {"seed", "fill", "selection", "dtypes", "expanded_cases"}  # written by generate
for key in sorted(set(case_file) | set(cfg) - added):
    if key in ("dtypes", "seed"):
        continue
    if cfg.get(key) != case_file.get(key):
        problems.append(f'"{key}" differs from {cases_path}')
seed = case_file.get("seed", 42)  # 42: the case file default (harness/cases/case_file.hpp)
if cfg.get("seed") != seed:
    problems.append(f"seed {cfg.get('seed')}, not {seed}")
if cfg.get("fill", "random") != "random":
    problems.append(f"fill {cfg.get('fill')}")
sel = cfg.get("selection", {})
if sel.get("only"):
    problems.append(f"--only {sel['only']!r}")
if sel.get("shard", "0/1") != "0/1" or sel.get("partial"):
    problems.append(f"only part of the sweep (shard {sel.get('shard')}, partial {sel.get('partial', False)})")
want = sorted(d for d in dtypes.split(",") if d)
if sorted(cfg.get("dtypes", [])) != want:
    problems.append(f"dtypes {','.join(cfg.get('dtypes', []))}, not {','.join(want)}")
if problems:
    sys.exit("; ".join(problems))
PY
}

# --- inputs, before any work --------------------------------------------------------------
mkdir -p "$out/reports" 2> /dev/null || { log "ERROR: cannot create $out/reports (VALIDATE_OUT)"; exit 2; }
check_inputs() {  # prints one line per problem
  python3 - "$cases" "$dtypes" "$policy" "${gates[@]}" <<'PY'
import json, re, sys
cases, dtypes, policy, gates = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def read_object(what, path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        return print(f"{what} {path} does not exist")
    except (OSError, UnicodeDecodeError) as e:
        return print(f"{what} {path} cannot be read: {e}")
    except ValueError as e:
        return print(f"{what} {path} is not JSON: {e}")
    if not isinstance(doc, dict):
        return print(f"{what} {path} is not a JSON object")
    return doc
doc = read_object("case file (VALIDATE_CASES)", cases)
if doc is not None and doc.get("format") != "validate-cases/1":
    print(f"case file (VALIDATE_CASES) {cases}: format {doc.get('format')!r}, expected 'validate-cases/1'")
known = ("float32", "bfloat16", "float16")
names = dtypes.split(",")
if not dtypes or any(d not in known for d in names):
    print(f"VALIDATE_DTYPES {dtypes!r}: a comma list of {', '.join(known)} expected")
elif len(set(names)) != len(names):
    print(f"VALIDATE_DTYPES {dtypes!r} repeats a dtype")
if policy:
    doc = read_object("policy (VALIDATE_POLICY)", policy)
    if doc is not None and not str(doc.get("format", "")).startswith("validate-policy/"):
        print(f"policy (VALIDATE_POLICY) {policy}: format {doc.get('format')!r}, expected 'validate-policy/1'")
for g in gates:
    if not re.fullmatch(r"([A-Za-z0-9_]+\.){0,3}[A-Za-z0-9_]+=[^=\s]+", g):
        print(f"VALIDATE_GATES: {g!r} is not [DTYPE.][OP.][ROLE|TENSOR.]KEY=VALUE")
PY
}
problems=$(check_inputs 2>&1)
[ -z "$problems" ] || die inputs "$(head -1 <<< "$problems")" "$problems"
if [ "${VALIDATE_SKIP_BUILD:-0}" = 1 ]; then
  [ -x "$bin" ] || die inputs "VALIDATE_SKIP_BUILD=1 but $bin (VALIDATE_BIN) is not an executable"
fi

[ "${VALIDATE_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh --runtime > "$out/reports/build.txt" 2>&1 \
  || die build "build failed (scripts/build.sh)" "$(tail -20 "$out/reports/build.txt")"

# The same inputs through validate's own parsers, still before anything is generated or run:
# generate with a selection that matches nothing reads the case file and the dtypes and writes
# nothing; compare reads the policy and the gates before it opens the (absent) directories.
probe=$out/reports/.input-check
msg=$($bin generate --cases "$cases" --dtype "$dtypes" --only '^$' --out "$probe" --progress 0 2>&1)
grep -q "matches the selection" <<< "$msg" || die inputs "$(head -1 <<< "$msg")" "$msg"
msg=$($bin compare "$probe/no-such-ref" "$probe/no-such-run" "${policy_args[@]}" "${gate_args[@]}" 2>&1)
grep -qF "$probe/no-such-ref" <<< "$msg" || die inputs "$(head -1 <<< "$msg")" "$msg"
# Without --require-all, results no backend produced would be listed as "not run" and pass.
$bin compare --help 2>&1 | grep -q -- --require-all ||
  die inputs "$bin has no 'compare --require-all': this gate must fail on anything not run"
# Every run and compare line the gate executes, against a reference set that does not exist: the
# command line, the backend's module and options (cuDNN's conv mode against the layout included)
# are checked before that directory is opened, so only the missing set may be reported.
for entry in "${runs[@]}"; do
  name=${entry%%|*}
  run_cmd "${entry#*|}" "$probe/no-such-ref" "$probe/run-$name"
  msg=$("${cmd[@]}" 2>&1)
  grep -qF "reference set $probe/no-such-ref:" <<< "$msg" ||
    die inputs "run/$name: $(head -1 <<< "$msg")" "$(printf '%q ' "${cmd[@]}")"$'\n'"$msg"
  compare_cmd "$name" "$probe/no-such-ref" "$probe/run-$name" "$probe"
  msg=$("${cmd[@]}" 2>&1)
  grep -qF "$probe/no-such-ref" <<< "$msg" ||
    die inputs "compare/$name: $(head -1 <<< "$msg")" "$(printf '%q ' "${cmd[@]}")"$'\n'"$msg"
done
rm -rf "$probe"
stage inputs ok
status=0

ref=
cache_dir=
if [ -n "${VALIDATE_REF_CACHE:-}" ]; then
  key=$(cache_key)
  if [[ "$key" =~ ^[0-9a-f]{16}$ ]]; then
    cache_dir=$VALIDATE_REF_CACHE/$key
  else
    log "WARNING: could not compute the cache key ('$key'); not using $VALIDATE_REF_CACHE"
  fi
  if [ -n "$cache_dir" ] && [ -f "$cache_dir/manifest.json" ] && [ -z "${VALIDATE_REF:-}" ]; then
    if why=$(ref_matches "$cache_dir" 2>&1) && $bin verify "$cache_dir" > "$out/reports/verify.txt" 2>&1; then
      ref=$cache_dir
      touch "$cache_dir"  # most recently used: kept by the pruning below
      log "using cached references $ref"
    else
      log "cached references $cache_dir are unusable (${why:-they do not verify, see $out/reports/verify.txt}); regenerating"
    fi
  fi
fi
if [ -z "$ref" ] && [ -n "${VALIDATE_REF:-}" ]; then
  if why=$(ref_matches "$VALIDATE_REF" 2>&1); then
    ref=$VALIDATE_REF
    $bin verify "$ref" > "$out/reports/verify.txt" 2>&1 ||
      die references "restored references $ref do not verify" "$(tail -20 "$out/reports/verify.txt")"
    log "using restored references $ref"
  else
    log "restored references $VALIDATE_REF were not made for $cases ($dtypes): $why; regenerating"
  fi
fi
if [ -z "$ref" ]; then
  ref=$out/ref
  rm -rf "$ref"
  $bin generate --cases "$cases" --dtype "$dtypes" --out "$ref" --progress 1 > "$out/reports/generate.txt" 2>&1 \
    || die references "generate failed: $(tail -1 "$out/reports/generate.txt")" "$(tail -20 "$out/reports/generate.txt")"
  log "generated CPU references for $cases ($dtypes) in $ref"
  if [ -n "$cache_dir" ]; then
    # Copy, then rename into place: a set interrupted while being stored is never found as a hit.
    tmp=
    if mkdir -p "$VALIDATE_REF_CACHE" && tmp=$(mktemp -d "$VALIDATE_REF_CACHE/.incoming.XXXXXX") \
      && chmod 755 "$tmp" && cp -r "$ref/." "$tmp/" && rm -rf "$cache_dir" && mv "$tmp" "$cache_dir"; then
      log "stored the references in the cache as $cache_dir"
      # Keep the four most recently used keys (e.g. two case files x two dtype lists), and drop
      # what a killed run left half-copied more than a day ago.
      find "$VALIDATE_REF_CACHE" -mindepth 1 -maxdepth 1 -type d ! -name '.incoming.*' -printf '%T@ %p\n' \
        | sort -rn | tail -n +5 | cut -d' ' -f2- | while read -r old; do rm -rf "$old"; done
      find "$VALIDATE_REF_CACHE" -mindepth 1 -maxdepth 1 -type d -name '.incoming.*' -mmin +1440 \
        -exec rm -rf {} +
    else
      [ -n "$tmp" ] && rm -rf "$tmp"
      log "WARNING: could not store the references in $VALIDATE_REF_CACHE"
    fi
  fi
fi

stage references ok
if [ $have_gpu = 1 ]; then
  log "GPU found: $(nvidia-smi -L | head -1)"
else
  log "no GPU on this machine: running the float64 oracle and LibTorch on the CPU instead of cuDNN"
fi

summary="$out/reports/summary.md"
echo "| run | run exit | compare exit | |" > "$summary"
echo "|---|---|---|---|" >> "$summary"
for entry in "${runs[@]}"; do
  name=${entry%%|*}
  args=${entry#*|}
  run_cmd "$args" "$ref" "$out/run-$name"
  "${cmd[@]}" > "$out/reports/run-$name.txt" 2>&1
  run_rc=$?
  compare_cmd "$name" "$ref" "$out/run-$name" "$out/reports"
  "${cmd[@]}" > "$out/reports/compare-$name.txt" 2>&1
  cmp_rc=$?
  last=$(tail -1 "$out/reports/compare-$name.txt")
  # compare labels a run by the stack that made the references (LibTorch on the CPU) a self-check:
  # bit-identical by construction, it proves the plumbing, not agreement between two stacks.
  note=
  grep -q "SELF-CHECK" "$out/reports/compare-$name.txt" && note="self-check: same stack as the references"
  echo "| $name | $run_rc | $cmp_rc | $note |" >> "$summary"
  log "$name: run exit $run_rc, compare exit $cmp_rc${note:+ ($note)} — $last"
  # A task the runner failed is a testcase of $name.junit.xml too (<failure type="runner-error">).
  runner_errors=$(grep -c 'type="runner-error"' "$out/reports/$name.junit.xml" 2> /dev/null)
  if [ $run_rc -ne 0 ] && [ "${runner_errors:-0}" -gt 0 ]; then
    stage "run/$name" reported "validate run exited $run_rc: $runner_errors task(s) failed, each a testcase of suite compare/$name.* ($name.junit.xml)"
    status=$(( status > 1 ? status : 1 ))
  elif [ $run_rc -ne 0 ]; then
    stage "run/$name" failure "validate run exited $run_rc" "$(tail -20 "$out/reports/run-$name.txt")"
    status=$(( status > 1 ? status : 1 ))
  else
    stage "run/$name" ok
  fi
  case $cmp_rc in
    0) stage "compare/$name${note:+ (self-check)}" ok ;;
    1) # Each failure once on a CI page: the failing tensors are testcases of $name.junit.xml (suites
       # compare/$name.<dtype>), so this stage only points there. A gate red with no failing tensor
       # (--require-all: something not checked, a <skipped> there) is this stage's own failure.
       tensor_failures=$(junit_failures "$out/reports/$name.junit.xml")
       if [ "$tensor_failures" -gt 0 ]; then
         stage "compare/$name${note:+ (self-check)}" reported \
           "$last: $tensor_failures failing tensor(s), each a testcase of suite compare/$name.* ($name.junit.xml, $name.html)"
       else
         stage "compare/$name${note:+ (self-check)}" failure "$last" "see $name.junit.xml / $name.html"
       fi
       status=$(( status > 1 ? status : 1 )) ;;
    *) stage "compare/$name${note:+ (self-check)}" error "validate compare exited $cmp_rc: $last" \
         "$(tail -20 "$out/reports/compare-$name.txt")"
       status=2 ;;
  esac
done
write_junit || log "WARNING: could not write $junit"
log "reports in $out/reports (JUnit, HTML, Markdown, JSON); exit $status"
exit $status
