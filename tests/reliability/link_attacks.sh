#!/usr/bin/env bash
# Writes outside the output directory (docs/reliability.md):
# a symbolic link an exec program plants in the run directory, a detached child that outlives its
# program, a report path that is a link, a device or a FIFO. Each ATTACK below had validate write
# where it must not (or blame an innocent task) before its fix. One ctest per attack
# (reliability.link.<name>) on a copy of references/smoke; none needs LibTorch.
# usage: link_attacks.sh VALIDATE_BIN WORK_DIR SOURCE_DIR ATTACK
set -uo pipefail
script=link_attacks
. "$(dirname "$0")/attack_lib.sh"
smoke_attack_opening "$@"
run=$work/run
exec_run() { v "$work/log" run --backend exec --layout torch --progress 0 --ref "$ref" --out "$run" "$@"; }
# A digest of every file below a directory (names, bytes): what must not change.
digest() { (cd "$1" && find . -print0 | LC_ALL=C sort -z | xargs -0 -n 64 sh -c 'for f; do [ -f "$f" ] && sha256sum "$f" || echo "$f"; done' sh); }

case $attack in
dtype_dir_link)  # 5. RUN/float16 made a link by a program: later results were written through it
  cp -r "$ref/float16" "$work/victim"
  digest "$work/victim" > "$work/before"
  # The first task's program links the run's float16 directory to the copy; every task exits 0.
  cat > "$work/prog.sh" << 'SH'
run=$(cd "$1/../../../.." && pwd)
if [ ! -e "$2/planted" ]; then : > "$2/planted"; ln -s "$2/victim" "$run/float16"; fi
exit 0
SH
  exec_run --cmd "sh $work/prog.sh {dir} $work"
  expect 1 $? "$work/log" "$run/float16 (a symbolic link: removed, nothing was written through it)"
  digest "$work/victim" > "$work/after"
  cmp -s "$work/before" "$work/after" || fail "written through the link: $(diff "$work/before" "$work/after" | head -5)"
  [ -L "$run/float16" ] && fail "$run/float16 is still a link"
  [ -f "$run/float16/odd_n3_c5_h11_w6_run.json" ] || fail "the float16 case's record is missing from $run/float16"
  ok ;;

work_dir_link)  # 6. RUN/work/float32/<case> linked outside: the next work dir was made through it
  mkdir -p "$work/outside" && echo keep > "$work/outside/keep"
  cat > "$work/prog.sh" << 'SH'
run=$(cd "$1/../../../.." && pwd)
if [ ! -e "$2/planted" ]; then
  : > "$2/planted"
  for c in k0072_ic008 k0144_ic016 odd_n2_c6_h7_w9_g2 odd_n3_c5_h11_w6; do
    [ "$c" = "$VALIDATE_CASE" ] || [ -e "$run/work/float32/$c" ] || ln -s "$2/outside" "$run/work/float32/$c"
  done
fi
ln -s case.json "$1/own_link"  # a link in its own work directory is its business
exit 0
SH
  exec_run --only '^float32/' --cmd "sh $work/prog.sh {dir} $work"
  expect 1 $? "$work/log" "(a symbolic link: removed, nothing was written through it)"
  n=$(grep -c "a symbolic link: removed" "$work/log")
  [ "$n" -eq 1 ] || fail "$n tasks blamed for a link, expected the first only: $(grep "symbolic link" "$work/log" | head -c 1500)"
  [ "$(ls -A "$work/outside")" = keep ] || fail "written through the link: $(ls -A "$work/outside")"
  [ "$(cat "$work/outside/keep")" = keep ] || fail "$work/outside/keep was changed"
  ok ;;

detached_child)  # 7. a setsid'd child kept writing into the run dir; the next task was blamed
  cat > "$work/prog.sh" << 'SH'
run=$(cd "$1/../../../.." && pwd)
if [ ! -e "$2/planted" ]; then
  : > "$2/planted"
  setsid sh -c "sleep 1; echo x > $run/stray" > /dev/null 2>&1 < /dev/null &
  sleep 0.2  # the child has left the process group (setsid) before the program exits
  exit 0
fi
sleep 0.4
exit 0
SH
  exec_run --only '^float32/' --cmd "sh $work/prog.sh {dir} $work"
  expect 1 $? "$work/log" "FAILED float32/k0072_ic008 conv2d: the program exited but left 2 process(es) running outside its process group" \
    "(sh -c sleep 1; echo x > $run/stray)" "(sleep 1)"
  grep -F "wrote outside its work directory" "$work/log" && fail "an innocent task was blamed"
  sleep 1.5
  [ -e "$run/stray" ] && fail "the detached child outlived its task and wrote $run/stray"
  ok ;;

report_targets)  # 8. --md /dev/stdout printed nothing; a link or device was renamed over
  v "$work/runlog" run --backend oracle --progress 0 --ref "$ref" --out "$run" --only '^float32/k0072' ||
    fail "oracle run: $(tail -5 "$work/runlog")"
  # A link stays a link; its target gets the report.
  ln -s target.xml "$work/link.xml"
  v "$work/log" compare "$ref" "$run" -q --junit "$work/link.xml"
  expect 0 $? "$work/log"
  [ -L "$work/link.xml" ] || fail "the link $work/link.xml was replaced"
  grep -q "<testsuite" "$work/target.xml" || fail "the link's target holds no JUnit report"
  # A FIFO gets the report through it (a reader waits on it), and stays a FIFO.
  mkfifo "$work/fifo"
  timeout 60 cat "$work/fifo" > "$work/fifo.json" &
  v "$work/log" compare "$ref" "$run" -q --json "$work/fifo"
  expect 0 $? "$work/log"
  wait
  [ -p "$work/fifo" ] || fail "the FIFO was replaced"
  /usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))["summary"]' "$work/fifo.json" ||
    fail "no JSON report came through the FIFO: $(head -c 300 "$work/fifo.json")"
  # Only now the real /dev/stdout: a binary without the rule (run as root) fails above instead of
  # renaming a file over it.
  timeout -k 5 120 "$bin" compare "$ref" "$run" -q --md /dev/stdout > "$work/stdout.md" 2> "$work/log"
  expect 0 $? "$work/log"
  grep -q "passed" "$work/stdout.md" || fail "--md /dev/stdout printed no report: $(head -c 300 "$work/stdout.md")"
  # A link to a file in a missing directory is named; a full device fails the write, and stays a device.
  ln -s missing/x.html "$work/dangling.html"
  v "$work/log" compare "$ref" "$run" -q --html "$work/dangling.html"
  expect 2 $? "$work/log" "$work/dangling.html is a symbolic link to $work/missing/x.html"
  # A copy of /dev/full's node in the work dir (root can make one; CI runs as root), never the real one.
  if mknod "$work/full" c 1 7 2> /dev/null; then
    v "$work/log" compare "$ref" "$run" -q --md "$work/full"
    expect 2 $? "$work/log" "$work/full" "No space left on device"
    [ -c "$work/full" ] || fail "the device $work/full was replaced"
  fi
  ok ;;

*) fail "unknown attack" ;;
esac
