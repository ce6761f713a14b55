#!/usr/bin/env bash
# Checks a `validate compare --html` report the way a reader sees it: renders it in headless
# Chromium (no network, fresh profile) and saves a screenshot; also refuses pages that would fetch
# anything (scripts, stylesheets, images, fonts from elsewhere). Checks what Chromium built (the
# DOM: summary line, table, plots, one marker shape per plotted series; every rotated tick label
# inside its picture and above its axis title, measured in the browser) and what it drew (the
# screenshot: a PNG of the window's size, not blank, the summary line's colour at the top, the
# series colours in the plots). Skips, exit 0, without Chromium -- except under CI (CI set), where
# scripts/install-deps.sh installs it and a missing browser is an error.
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
import hashlib
files = {}
for root, _, names in os.walk(out):
    for n in names:
        path = os.path.join(root, n)
        files[os.path.relpath(path, out)] = {"sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
                                             "size": os.path.getsize(path)}
json.dump({"format": "validate-run/1", "files": files}, open(f"{out}/manifest.json", "w"))
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
  if [[ -n ${CI:-} ]]; then
    echo "check-html: no chromium under CI: scripts/install-deps.sh should have installed it" >&2
    exit 1
  fi
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
timeout 120 "$chrome" "${flags[@]}" --screenshot="$(realpath -m "$shot")" --window-size=1280,2600 \
  "file://$(realpath "$html")" > "$profile.log" 2>&1 || rc=$?
[[ $rc -eq 0 && -s $shot ]] || { cat "$profile.log" >&2; echo "check-html: chromium exited $rc, screenshot: $( [[ -s $shot ]] && echo yes || echo none)" >&2; exit 1; }
# What the browser built from the page, read from a copy of it with a script appended that records
# where Chromium laid out the plot text, with the fonts it has: each SVG's box and the boxes of its
# rotated x tick labels and its axis title (checked below). The page itself holds no script.
probe_html=$profile/geometry.html
/usr/bin/python3 - "$html" "$probe_html" <<'PY' || exit 1
import sys
page = open(sys.argv[1], encoding="utf-8").read()
script = """<script>
const out = [];
document.querySelectorAll('svg').forEach((svg, i) => {
  const s = svg.getBoundingClientRect();
  const box = r => [r.left - s.left, r.top - s.top, r.right - s.left, r.bottom - s.top].map(v => +v.toFixed(2));
  const ticks = [...svg.querySelectorAll('text.tick[transform^="rotate"]')].map(t => [t.textContent, box(t.getBoundingClientRect())]);
  const axis = [...svg.querySelectorAll('text.axis')].map(t => box(t.getBoundingClientRect()));
  if (ticks.length) out.push({svg: i, width: +s.width.toFixed(2), height: +s.height.toFixed(2), ticks, axis});
});
const pre = document.createElement('pre'); pre.id = 'geometry'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""
open(sys.argv[2], "w", encoding="utf-8").write(page.replace("</body>", script + "</body>"))
PY
# The summary line and the per-tensor table must be there.
dom=$(timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$(realpath "$probe_html")" 2>/dev/null) || true
rm -f "$profile.log"
grep -Eq '[0-9]+ passed, [0-9]+ failed' <<<"$dom" && grep -q '<table' <<<"$dom" && grep -q '<svg' <<<"$dom" ||
  { echo "check-html: the rendered page lacks its summary line, table or plots" >&2; exit 1; }
# Plotted series are told apart by marker shape, not colour alone: in every plot, as many
# shapes as series (up to the nine shapes there are).
printf '%s' "$dom" > "$profile/dom.html"
/usr/bin/python3 - "$profile/dom.html" <<'PY' || exit 1
import re, sys
dom = open(sys.argv[1], encoding="utf-8", errors="replace").read()
plots = re.findall(r'<svg[^>]*>.*?</svg>', dom, re.S)
n = 0
for svg in plots:
    series = re.findall(r'<g class="series" data-series="([^"]*)" data-marker="([^"]*)" data-dash="([^"]*)"', svg)
    if not series:
        continue
    n += 1
    shapes = {m for _, m, _ in series}
    styles = {(m, d) for _, m, d in series}
    if len(shapes) < min(len(series), 9) or len(styles) < len(series):
        sys.exit(f"check-html: a plot draws {len(series)} series with {len(shapes)} marker shapes and {len(styles)} styles")
if "Error versus K" in dom and n == 0:
    sys.exit("check-html: the error-versus-K plots have no series groups")
PY
# Every rotated tick label inside its picture and above its axis title (they once ran through the
# title and off the bottom of the ULP histograms).
/usr/bin/python3 - "$profile/dom.html" <<'PY' || exit 1
import html, json, re, sys
m = re.search(r'<pre id="geometry">(.*?)</pre>', open(sys.argv[1], encoding="utf-8", errors="replace").read(), re.S)
if not m:
    sys.exit("check-html: the geometry probe did not run in Chromium")
plots, labels = json.loads(html.unescape(m.group(1))), 0
for p in plots:
    title_top = min((a[1] for a in p["axis"]), default=p["height"])
    for text, (l, t, r, b) in p["ticks"]:
        labels += 1
        if l < -0.5 or t < -0.5 or r > p["width"] + 0.5 or b > p["height"] + 0.5:
            sys.exit(f"check-html: plot {p['svg']}: tick label {text!r} at {l},{t}-{r},{b} leaves its {p['width']}x{p['height']} picture")
        if b > title_top + 0.5:
            sys.exit(f"check-html: plot {p['svg']}: tick label {text!r} reaches y={b}, below the axis title's top {title_top}")
    for l, t, r, b in p["axis"]:
        if b > p["height"] + 0.5:
            sys.exit(f"check-html: plot {p['svg']}: the axis title reaches y={b}, past the picture's {p['height']}")
longest = max((len(x) for p in plots for x, _ in p["ticks"]), default=0)
print(f"check-html: {labels} rotated tick labels in {len(plots)} plots (longest {longest} characters) inside their pictures, above their axis titles")
PY
# What Chromium drew: decode the PNG (zlib + PNG row filters, standard library only).
/usr/bin/python3 - "$shot" "$profile/dom.html" <<'PY' || exit 1
import re, struct, sys, zlib
path = sys.argv[1]
dom = open(sys.argv[2], encoding="utf-8", errors="replace").read()
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"check-html: {path} is not a PNG")
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, = struct.unpack(">I", data[pos:pos + 4])
    typ, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
    pos += 12 + n
    if typ == b"IHDR":
        ihdr = struct.unpack(">IIBBBBB", body)
    elif typ == b"IDAT":
        idat += body
w, h, depth, ctype, _, _, interlace = ihdr
if (w, h) != (1280, 2600) or depth != 8 or ctype not in (2, 6) or interlace:
    sys.exit(f"check-html: {path} is {w}x{h}, depth {depth}, colour type {ctype}: expected an 8-bit 1280x2600 RGB(A) screenshot")
bpp = 3 if ctype == 2 else 4
raw, stride, prev, rows, i = zlib.decompress(idat), w * bpp, bytearray(w * bpp), [], 0
for _ in range(h):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
    i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + ((a + b) >> 1)) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
import numpy as np
img = np.frombuffer(bytes(b"".join(rows)), np.uint8).reshape(h, w, bpp)[:, :, :3].astype(np.int16)
def near(region, hexcol, tol=40):
    q = np.array([int(hexcol[k:k + 2], 16) for k in (1, 3, 5)], np.int16)
    return int((np.abs(region - q) <= tol).all(axis=2).sum())
ink = float((img.min(axis=2) < 235).mean())
flat = img.reshape(-1, 3)
colours = len(np.unique(flat[::7, 0] * 65536 + flat[::7, 1] * 256 + flat[::7, 2]))
if ink < 0.02 or colours < 50:
    sys.exit(f"check-html: {path} looks blank ({ink:.1%} ink, {colours} colours)")
# The summary line (green when it passed, red when not) is drawn near the top.
ok = "exit code 0" in dom
want = "#1a7f37" if ok else "#cf222e"
if near(img[:160], want) < 30:
    sys.exit(f"check-html: {path}: the summary line's colour {want} is not at the top of the page")
# The plots' series colours (one per series, svg.cpp series_style) are drawn.
plotted = set(re.findall(r'<g class="series"[^>]*>(?:(?!</g>).)*?stroke="(#[0-9A-Fa-f]{6})"', dom, re.S))
seen = {c for c in plotted if near(img, c, 24) >= 5}
if plotted and len(seen) < min(5, len(plotted)):
    sys.exit(f"check-html: {path}: only {len(seen)} of the {len(plotted)} series colours are visible")
print(f"check-html: screenshot {w}x{h}, {ink:.0%} ink, {colours} colours, {len(seen)}/{len(plotted)} series colours seen")
PY
echo "check-html: rendered $html -> $shot ($(stat -c %s "$shot") bytes)"
