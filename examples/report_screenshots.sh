#!/usr/bin/env bash
# The two report screenshots of README.md and docs/guide.md (docs/report.png, docs/report_validation.png) from a report
# that examples/capacity_planning.sh wrote, in headless Chromium: the top of the report (chosen
# plan, decision figures) and its Validation section (through an iframe at the section's anchor:
# a headless screenshot of a scrolled page comes out blank).
# Usage: examples/report_screenshots.sh [REPORT=/tmp/vlaperf_capacity_planning/report.html] [OUT_DIR=docs]
set -euo pipefail
REPORT=$(realpath -m "${1:-/tmp/vlaperf_capacity_planning/report.html}")
OUT=${2:-docs}
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [ -z "$CHROMIUM" ]; then echo "error: no chromium found (install it or set CHROMIUM=/path/to/chrome)" >&2; exit 2; fi
[ -f "$REPORT" ] || { echo "error: REPORT: no such report: $REPORT (run examples/capacity_planning.sh first)" >&2; exit 2; }
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FLAGS=(--headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=15000)
"$CHROMIUM" "${FLAGS[@]}" --window-size=1280,2330 --screenshot="$OUT/report.png" "file://$REPORT" 2>/dev/null
cat > "$TMP/validation.html" <<HTML
<!doctype html><html><head><style>html,body{margin:0;padding:0;overflow:hidden;width:1280px;height:1200px}
iframe{position:absolute;left:0;top:0;width:1280px;height:1200px;border:0}</style></head>
<body><iframe src="file://$REPORT#validation"></iframe></body></html>
HTML
"$CHROMIUM" "${FLAGS[@]}" --allow-file-access-from-files --window-size=1280,1200 \
  --screenshot="$OUT/report_validation.png" "file://$TMP/validation.html" 2>/dev/null
echo "wrote $OUT/report.png $OUT/report_validation.png"
