# The opening every attack script shares; sourced after it sets bin, work, attack and `script`
# (its own name, for the messages). fail/ok end the script; expect checks an exit code and
# needles in a log; v runs validate with a hard time limit (a hang is a failure, not a stuck CI).
fail() { echo "$script $attack: FAIL: $*"; exit 1; }
ok() {
  echo "$script $attack: passed${1:+ ($1)}"
  [ -n "${KEEP:-}" ] || rm -rf "$work"  # KEEP=1 leaves the work folder to look at
  exit 0
}
py() { /usr/bin/python3 - "$@"; }  # Debian's, with python3-numpy (install-deps.sh)
expect() {  # expect CODE RC LOG NEEDLE...
  local want=$1 rc=$2 log=$3
  shift 3
  [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $(tail -c 1500 "$log")"
  for needle in "$@"; do grep -qF -- "$needle" "$log" || fail "'$needle' missing from: $(tail -c 1500 "$log")"; done
}
v() {
  local log=$1
  shift
  timeout -k 5 120 "$bin" "$@" > "$log" 2>&1
}
