#!/usr/bin/env bash
# The nightly gate, the same locally and in CI: build, generate (or restore) CPU references, run
# the backends this machine has, compare each against the references with the policy, write
# JUnit/HTML/Markdown/JSON reports, and exit non-zero if any gate failed.
#
#   VALIDATE_CASES   case file (default cases/default.json; cases/smoke.json for a quick check)
#   VALIDATE_DTYPES  dtypes (default float32,bfloat16)
#   VALIDATE_POLICY  compare policy file (default: the built-in policy)
#   VALIDATE_OUT     where references, runs and reports go (default out/nightly)
#   VALIDATE_REF     an existing reference set to use instead of generating (verified first; if
#                    its config.json is not for VALIDATE_CASES/VALIDATE_DTYPES, regenerated)
#   VALIDATE_REF_CACHE  a directory of reference sets kept between runs, one per cache key (below):
#                    a set made for the same case file, dtypes and generator source is used in
#                    place, anything else is generated and stored there
#   VALIDATE_SKIP_BUILD=1  use an existing binary (VALIDATE_BIN, default build/validate)
#
#   scripts/nightly.sh --cache-key   prints the cache key for VALIDATE_CASES/VALIDATE_DTYPES
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
cases=${VALIDATE_CASES:-cases/default.json}
dtypes=${VALIDATE_DTYPES:-float32,bfloat16}
out=${VALIDATE_OUT:-out/nightly}
policy_args=()
[ -n "${VALIDATE_POLICY:-}" ] && policy_args=(--policy "$VALIDATE_POLICY")
bin=${VALIDATE_BIN:-build/validate}
log() { echo "nightly: $*"; }

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

[ "${VALIDATE_SKIP_BUILD:-0}" = 1 ] || scripts/build.sh > /dev/null || { log "build failed"; exit 2; }
mkdir -p "$out/reports"
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
    $bin verify "$ref" > "$out/reports/verify.txt" || { log "restored references $ref do not verify"; exit 2; }
    log "using restored references $ref"
  else
    log "restored references $VALIDATE_REF were not made for $cases ($dtypes): $why; regenerating"
  fi
fi
if [ -z "$ref" ]; then
  ref=$out/ref
  rm -rf "$ref"
  $bin generate --cases "$cases" --dtype "$dtypes" --out "$ref" --progress 1 > "$out/reports/generate.txt" \
    || { log "generate failed: $(tail -3 "$out/reports/generate.txt")"; exit 2; }
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

# name | run arguments
runs=()
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
  log "GPU found: $(nvidia-smi -L | head -1)"
  for layout in torch channels_last fortran; do runs+=("cudnn-$layout|--backend cudnn --layout $layout"); done
  runs+=("torch-cuda|--backend torch --device cuda")
else
  log "no GPU on this machine: running the float64 oracle and LibTorch on the CPU instead of cuDNN"
  runs+=("oracle-fortran|--backend oracle --layout fortran" "torch-cpu|--backend torch --device cpu")
fi

summary="$out/reports/summary.md"
echo "| run | run exit | compare exit |" > "$summary"
echo "|---|---|---|" >> "$summary"
for entry in "${runs[@]}"; do
  name=${entry%%|*}
  args=${entry#*|}
  # shellcheck disable=SC2086
  # --overwrite: a run directory of an earlier nightly is replaced whole, never mixed with this one
  # (before, a run that failed to start left the old results in place and compare passed them).
  $bin run $args --ref "$ref" --out "$out/run-$name" --overwrite --progress 1 > "$out/reports/run-$name.txt" 2>&1
  run_rc=$?
  $bin compare "$ref" "$out/run-$name" "${policy_args[@]}" --junit "$out/reports/$name.junit.xml" \
    --html "$out/reports/$name.html" --md "$out/reports/$name.md" --json "$out/reports/$name.json" \
    > "$out/reports/compare-$name.txt" 2>&1
  cmp_rc=$?
  echo "| $name | $run_rc | $cmp_rc |" >> "$summary"
  log "$name: run exit $run_rc, compare exit $cmp_rc — $(tail -1 "$out/reports/compare-$name.txt")"
  [ $run_rc -ne 0 ] && status=1
  [ $cmp_rc -ne 0 ] && status=$(( cmp_rc > status ? cmp_rc : status ))
done
log "reports in $out/reports (JUnit, HTML, Markdown, JSON); exit $status"
exit $status
