#!/usr/bin/env bash
# Screenshot an mptool HTML report in headless Chromium (no network, throw-away profile).
#
#   scripts/screenshot_report.sh REPORT.html [OUT.png] [WIDTHxHEIGHT]
#
# Default OUT.png is REPORT.png beside the report; default size 1280x4000 (a full-page-ish
# strip). Needs Debian's chromium (apt-get install -y chromium) or $CHROMIUM.
set -euo pipefail

report=${1:?usage: $0 REPORT.html [OUT.png] [WIDTHxHEIGHT]}
out=${2:-${report%.*}.png}
size=${3:-1280x4000}
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [[ -z "$browser" ]]; then
  echo "screenshot_report.sh: chromium not found; install it (apt-get install -y chromium) or set CHROMIUM" >&2
  exit 2
fi
[[ -f "$report" ]] || { echo "screenshot_report.sh: $report: no such file" >&2; exit 2; }

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
url="file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
out_abs="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"

"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
  --user-data-dir="$profile" --window-size="${size/x/,}" --screenshot="$out_abs" "$url" \
  >"$profile/chromium.log" 2>&1 || { cat "$profile/chromium.log" >&2; exit 1; }
[[ -s "$out_abs" ]] || { echo "screenshot_report.sh: no screenshot written" >&2; cat "$profile/chromium.log" >&2; exit 1; }
echo "$out_abs"
