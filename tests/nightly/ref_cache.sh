#!/usr/bin/env bash
# scripts/nightly.sh's reference cache on the smoke set (float32): the key changes with the case
# file and the dtypes and nothing else; a miss generates and stores, a hit is used in place; a
# restored set made for something else, or a cached set that no longer verifies, is regenerated
# with a message instead of being compared against.
#   ref_cache.sh VALIDATE_BIN WORK_DIR   (run from the source tree)
set -uo pipefail
bin=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
export VALIDATE_SKIP_BUILD=1 VALIDATE_BIN=$bin VALIDATE_CASES=cases/smoke.json VALIDATE_DTYPES=float32
export VALIDATE_OUT=$work/out
unset VALIDATE_REF VALIDATE_REF_CACHE VALIDATE_POLICY
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect LOG TEXT: the nightly log must contain TEXT
  grep -qF -- "$2" "$1" || { cat "$1"; fail "the log lacks: $2"; }
}
reject() {
  ! grep -qF -- "$2" "$1" || { cat "$1"; fail "the log must not say: $2"; }
}

# The key: stable, and different for other dtypes or another case file.
k1=$(scripts/nightly.sh --cache-key) || fail "--cache-key failed"
k2=$(scripts/nightly.sh --cache-key)
[ "$k1" = "$k2" ] || fail "the key is not stable: $k1 vs $k2"
[[ "$k1" =~ ^[0-9a-f]{16}$ ]] || fail "the key is not 16 hex digits: $k1"
k_dt=$(VALIDATE_DTYPES=float32,bfloat16 scripts/nightly.sh --cache-key)
[ "$k_dt" != "$k1" ] || fail "the key ignores the dtypes"
sed 's/"seed": 42/"seed": 43/' cases/smoke.json > "$work/smoke43.json"
cmp -s cases/smoke.json "$work/smoke43.json" && fail "could not make a changed case file"
k_cf=$(VALIDATE_CASES=$work/smoke43.json scripts/nightly.sh --cache-key)
[ "$k_cf" != "$k1" ] || fail "the key ignores the case file"

cache=$work/cache
entry=$cache/$k1
# 1. Miss: generate, store under the key.
VALIDATE_REF_CACHE=$cache scripts/nightly.sh > "$work/1.log" 2>&1 || { cat "$work/1.log"; fail "run 1 exit $?"; }
expect "$work/1.log" "generated CPU references for cases/smoke.json (float32)"
expect "$work/1.log" "stored the references in the cache as $entry"
[ -f "$entry/manifest.json" ] || fail "no manifest in $entry"

# 2. Hit: used in place, nothing generated.
VALIDATE_REF_CACHE=$cache scripts/nightly.sh > "$work/2.log" 2>&1 || { cat "$work/2.log"; fail "run 2 exit $?"; }
expect "$work/2.log" "using cached references $entry"
reject "$work/2.log" "generated CPU references"
grep -q "\"path\": \"$entry\"" "$work/out/run-oracle-fortran/run_info.json" \
  || fail "the oracle run did not use the cached set $entry"

# 3. A restored set made with another seed is not what was asked: regenerated, with the reason.
cp -r "$entry" "$work/seed43"
sed -i 's/"seed": 42/"seed": 43/' "$work/seed43/config.json"
VALIDATE_REF=$work/seed43 scripts/nightly.sh > "$work/3.log" 2>&1 || { cat "$work/3.log"; fail "run 3 exit $?"; }
expect "$work/3.log" "restored references $work/seed43 were not made for cases/smoke.json (float32): seed 43, not 42; regenerating"
expect "$work/3.log" "generated CPU references"

# 4. A cached set that no longer verifies is regenerated and stored again, not trusted.
victims=("$entry"/float32/*_conv2d_output.npy)
victim=${victims[0]}
printf '\x01' | dd of="$victim" bs=1 seek=200 conv=notrunc status=none
VALIDATE_REF_CACHE=$cache scripts/nightly.sh > "$work/4.log" 2>&1 || { cat "$work/4.log"; fail "run 4 exit $?"; }
expect "$work/4.log" "cached references $entry are unusable (they do not verify"
expect "$work/4.log" "stored the references in the cache as $entry"
"$bin" verify "$entry" > /dev/null || fail "the re-stored $entry does not verify"
echo "ref_cache: ok"
rm -rf "$work"
