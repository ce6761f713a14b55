#!/usr/bin/env bash
# Checks a `validate compare --html` report the way a reader sees it: renders it in headless
# Chromium (no network, fresh profile) and saves a screenshot; also refuses pages that would fetch
# anything (scripts, stylesheets, images, fonts from elsewhere). Skips, exit 0, without Chromium.
#
#   scripts/check-html.sh REPORT.html [SCREENSHOT.png]
#   scripts/check-html.sh            # builds the sample: reports/sample-compare.html from
#                                    # references/smoke and a synthetic run with planted layout
#                                    # mistakes, rendered to reports/compare-html.png
# VALIDATE_BIN picks the binary (default: build/validate, then build-compare/validate).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

html=${1:-}
shot=${2:-}
if [[ -z $html ]]; then
  html=reports/sample-compare.html
  shot=${shot:-reports/compare-html.png}
  bin=${VALIDATE_BIN:-}
  for b in build/validate build-compare/validate; do [[ -z $bin && -x $b ]] && bin=$b; done
  [[ -n $bin ]] || { echo "check-html: no validate binary (build it, or set VALIDATE_BIN)" >&2; exit 2; }
  /usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo "check-html: needs /usr/bin/python3 with numpy for the sample run" >&2; exit 2; }
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/validate_html.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # A run that differs from the reference like a second stack would (a few ULPs), plus three
  # classic layout mistakes for the diagnosis to name.
  /usr/bin/python3 - references/smoke "$tmp/run" <<'PY'
import glob, json, os, sys
import numpy as np
ref, out = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
def bf16(a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    return u.astype(np.uint32).view(np.float32)
for dt in ["float32", "bfloat16", "float16"]:
    os.makedirs(f"{out}/{dt}", exist_ok=True)
    for mf in sorted(glob.glob(f"{ref}/{dt}/*_metadata.json")):
        meta = json.load(open(mf)); case = meta["case"]
        doc = {"case": case, "dtype": dt, "ops": {}}
        for op, o in meta["ops"].items():
            produced = []
            for t, ti in o["tensors"].items():
                if ti["role"] == "input":
                    continue
                a = np.load(f"{ref}/{dt}/{ti['file']}")
                noise = rng.standard_normal(a.shape)
                if ti["role"] == "loss":  # a float32 scalar in every dtype
                    a = (a * (1 + 2e-7 * noise)).astype(np.float32)
                elif dt == "float32":
                    a = (a * (1 + 2e-7 * noise)).astype(np.float32)
                elif dt == "bfloat16":
                    a = bf16(a * (1 + 4e-3 * noise * (rng.random(a.shape) < 0.2)))
                else:
                    a = (a.astype(np.float32) * (1 + 1e-3 * noise * (rng.random(a.shape) < 0.2))).astype(np.float16)
                key = f"{dt}/{case}/{op}/{t}"
                if key == "float32/k0072_ic008/conv2d/grad_weight":
                    a = np.ascontiguousarray(a[:, :, ::-1, ::-1])            # cuDNN's flipped dW
                if key == "float32/k0144_ic016/conv2d/output":
                    a = np.ascontiguousarray(a.transpose(0, 2, 3, 1)).reshape(a.shape)  # NHWC bytes
                if key == "bfloat16/k0072_ic008/conv2d/grad_input":
                    a = np.ascontiguousarray(a.transpose(0, 1, 3, 2))         # H <-> W on a square tensor
                np.save(f"{out}/{dt}/{case}_{op}_{t}.npy", np.ascontiguousarray(a))
                produced.append(t)
            doc["ops"][op] = {"outcome": "ok", "message": "", "produced": produced, "elapsed_s": 0.0,
                              "input_hashes": {t: ti["sha256"] for t, ti in o["tensors"].items() if ti["role"] == "input"}}
        json.dump(doc, open(f"{out}/{dt}/{case}_run.json", "w"), indent=1)
json.dump({"format": "validate-run/1", "backend": "sample (synthetic)", "device": "cpu", "math": "fp32", "variants": []},
          open(f"{out}/run_info.json", "w"), indent=1)
json.dump({"format": "validate-run/1", "files": {}}, open(f"{out}/manifest.json", "w"))
PY
  mkdir -p reports
  set +e
  "$bin" compare references/smoke "$tmp/run" --html "$html" --color never > "$tmp/terminal.txt"
  rc=$?
  set -e
  [[ $rc -le 1 ]] || { cat "$tmp/terminal.txt" >&2; echo "check-html: compare exited $rc" >&2; exit 2; }
  tail -1 "$tmp/terminal.txt"
fi
shot=${shot:-${html%.html}.png}

[[ -f $html ]] || { echo "check-html: $html does not exist" >&2; exit 2; }
# Self-contained: the only URLs allowed are SVG namespace declarations, which are never fetched.
if grep -Eq '<script|<link|<img|<iframe|@import|url\(| src=' "$html" ||
   [[ $(grep -o 'https\?://' "$html" | wc -l) -ne $(grep -o 'xmlns="http://www.w3.org/2000/svg"' "$html" | wc -l) ]]; then
  echo "check-html: $html references external resources" >&2
  exit 1
fi

chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $chrome ]]; then
  echo "check-html: SKIP (no chromium; apt-get install -y chromium)"
  exit 0
fi
profile=$(mktemp -d "${TMPDIR:-/tmp}/validate_chrome.XXXXXX")
trap 'rm -rf "$profile" ${tmp:+"$tmp"}' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
       --disable-sync --no-first-run --disable-quic --user-data-dir="$profile")
# A screenshot left by an earlier run must not pass for this one.
rm -f "$shot"
rc=0
timeout 120 "$chrome" "${flags[@]}" --screenshot="$(realpath -m "$shot")" --window-size=1280,2000 \
  "file://$(realpath "$html")" > "$profile.log" 2>&1 || rc=$?
[[ $rc -eq 0 && -s $shot ]] || { cat "$profile.log" >&2; echo "check-html: chromium exited $rc, screenshot: $( [[ -s $shot ]] && echo yes || echo none)" >&2; exit 1; }
# What the browser built from the page: the summary line and the per-tensor table must be there.
dom=$(timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$(realpath "$html")" 2>/dev/null) || true
rm -f "$profile.log"
grep -Eq '[0-9]+ passed, [0-9]+ failed' <<<"$dom" && grep -q '<table' <<<"$dom" && grep -q '<svg' <<<"$dom" ||
  { echo "check-html: the rendered page lacks its summary line, table or plots" >&2; exit 1; }
echo "check-html: rendered $html -> $shot ($(stat -c %s "$shot") bytes)"
