#!/usr/bin/env bash
# A write that fails part-way (here: RLIMIT_FSIZE, which makes write() fail with EFBIG exactly as a
# full disk makes it fail with ENOSPC) must give a clear error naming the file, exit 2, leave no
# manifest (the set is visibly incomplete) and no temporary files.
# usage: full_disk.sh VALIDATE_BIN WORK_DIR CASE_FILE
set -uo pipefail
bin=$1 work=$2 cases=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "full_disk: FAIL: $*"; exit 1; }
(ulimit -f 200; trap '' XFSZ; exec "$bin" generate --cases "$cases" --out "$work/ref" --progress 0) > "$work/log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "generate exited $rc, expected 2: $(cat "$work/log")"
grep -q "writing $work/ref/.*\.npy: File too large" "$work/log" || fail "error does not name the file: $(cat "$work/log")"
[ ! -e "$work/ref/manifest.json" ] || fail "a manifest was written for an incomplete set"
leftovers=$(find "$work/ref" -name '*.tmp.*' | wc -l)
[ "$leftovers" -eq 0 ] || fail "$leftovers temporary files left behind"
"$bin" verify "$work/ref" > /dev/null 2>&1
[ $? -eq 2 ] || fail "verify did not report the set incomplete"
rm -rf "$work"
echo "full_disk: passed"
