#!/usr/bin/env bash
# The correct-stack panel (tests/panel) on the default sweep: every variant through
# `validate run --backend exec`, compared plain and with --oracle (the float64 oracle's run), and a
# table of variant x mode x dtype with the checks passed and failed and the failing tensors.
# Heavy (a 6.6 GB reference set, ~3 GB per run, deleted after each comparison): a bench script,
# not a ctest. docs/evidence.md "Correct-stack panel" has the figures.
#
# usage: bench/panel/run.sh [VARIANT...]      (default: every variant of tests/panel/panel.py)
# env:   VALIDATE_BIN  validate binary (default build/validate)
#        PANEL_C       the C program (default build/tests/panel/validate_panel_c)
#        PANEL_REF     an existing reference set of cases/default.json (default: generated)
#        PANEL_CASES   the case file when generating (default cases/default.json)
#        PANEL_TIMEOUT seconds one program may take (default 3600: the C variants' loops need more
#                      than validate run's 600 s on the K = 73728 cases of a shared 2-core box)
#        PANEL_WORK    scratch directory (default build/panel_bench; removed at the end unless
#                      PANEL_KEEP=1)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=${VALIDATE_BIN:-build/validate}
panel_c=${PANEL_C:-build/tests/panel/validate_panel_c}
work=${PANEL_WORK:-build/panel_bench}
cases=${PANEL_CASES:-cases/default.json}
python=/usr/bin/python3  # Debian's, with python3-numpy (scripts/install-deps.sh)
for f in "$bin" "$panel_c"; do
  [ -x "$f" ] || { echo "run.sh: $f is not an executable (build validate and validate_panel_c)" >&2; exit 2; }
done
mkdir -p "$work"
ref=${PANEL_REF:-}
if [ -z "$ref" ]; then
  ref=$work/ref
  if [ ! -f "$ref/manifest.json" ]; then
    rm -rf "$ref"
    echo "# generating $cases into $ref"
    "$bin" generate --cases "$cases" --out "$ref" --progress 0
  fi
fi
echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cores, $(awk '/model name/{sub(/.*: /,"");print;exit}' /proc/cpuinfo)"
echo "# validate $("$bin" --version 2>/dev/null | head -1), ref $ref"
start=$(date +%s)
"$python" tests/panel/panel.py sweep "$@" --validate "$bin" --panel-c "$panel_c" --python "$python" \
  --ref "$ref" --work "$work/runs" --timeout "${PANEL_TIMEOUT:-3600}"
echo "# total $(( $(date +%s) - start )) s"
[ "${PANEL_KEEP:-0}" = 1 ] || rm -rf "$work"
