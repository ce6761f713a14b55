#!/usr/bin/env bash
# SIGKILLs `validate generate` at random points; after each kill `verify` must call the set
# incomplete (exit 2) and `generate --resume` must finish it to the same bytes as a clean run.
# usage: kill_resume.sh VALIDATE_BIN WORK_DIR CASE_FILE [ROUNDS]
set -uo pipefail
bin=$1 work=$2 cases=$3 rounds=${4:-3}
rm -rf "$work" && mkdir -p "$work"
fail() { echo "kill_resume: FAIL: $*"; exit 1; }
"$bin" generate --cases "$cases" --out "$work/clean" --progress 0 > /dev/null || fail "clean generate"
compare_sets() {  # every file but the timestamped ones must be byte-identical
  (cd "$work/clean" && find . -type f ! -name manifest.json ! -name system_info.json | sort) > "$work/clean.list"
  (cd "$1" && find . -type f ! -name manifest.json ! -name system_info.json | sort) > "$work/got.list"
  diff -q "$work/clean.list" "$work/got.list" > /dev/null || fail "$1 has different files: $(diff "$work/clean.list" "$work/got.list" | head -5)"
  while read -r f; do cmp -s "$work/clean/$f" "$1/$f" || fail "$1/$f differs from the clean run"; done < "$work/clean.list"
}
for round in $(seq 1 "$rounds"); do
  out="$work/killed$round"
  delay=$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.15 + rand() * 1.2 }')
  "$bin" generate --cases "$cases" --out "$out" --progress 0 > /dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  kill -KILL "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  if [ -f "$out/manifest.json" ]; then
    echo "round $round: generate finished before the kill at ${delay}s; nothing to check"
    continue
  fi
  "$bin" verify "$out" > "$work/verify.log" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "verify of a killed set exited $rc, expected 2: $(cat "$work/verify.log")"
  grep -q incomplete "$work/verify.log" || fail "verify did not say the set is incomplete"
  "$bin" generate --cases "$cases" --out "$out" --resume --progress 1 > "$work/resume.log" 2>&1 || fail "resume: $(tail -3 "$work/resume.log")"
  kept=$(grep -c "kept" "$work/resume.log" || true)
  "$bin" verify "$out" > /dev/null || fail "verify after resume"
  compare_sets "$out"
  echo "round $round: killed at ${delay}s, verify said incomplete, resume kept $kept case(s) and matched the clean run"
done
rm -rf "$work"
echo "kill_resume: passed"
