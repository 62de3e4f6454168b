#!/usr/bin/env bash
# Regenerates docs/images/memory_viewer.png, the README's picture of the
# memory viewer: the snapshot given (e.g. one tsr_memory_snapshot wrote in
# a real run) or, without one, a synthetic one from scripts/make_snapshot.py,
# turned into a report and photographed by headless Chromium, 1400 pixels
# wide and as tall as the page. With --example, the snapshot comes from a
# real run of examples/memory_history.c (built with -g, so the allocation
# sites have file and line): that is how the README's picture is made.
#
#   scripts/viewer_screenshot.sh [SNAPSHOT.json | --example] [OUT.png]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${2:-$root/docs/images/memory_viewer.png}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "viewer_screenshot.sh: needs chromium (apt-get install chromium)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

snapshot=${1:-}
if [ "$snapshot" = --example ]; then
    # The library as examples/run.sh builds it (target/examples/lib), then
    # the example with debug information and repository-relative paths.
    "$root/examples/run.sh" memory_history >/dev/null
    lib=${TESSERA_EXAMPLES_DIR:-$root/target/examples}/lib
    (cd "$root" && ${CC:-cc} -std=c99 -g -O0 -fdebug-prefix-map="$root"=. -Iinclude \
        examples/memory_history.c -L"$lib" -ltessera -Wl,-rpath,"$lib" -o "$work/memory_history")
    snapshot=$work/memory_history.json
    "$work/memory_history" "$snapshot"
elif [ -z "$snapshot" ]; then
    snapshot=$work/synthetic.json
    python3 "$root/scripts/make_snapshot.py" "$snapshot" --events 12000 --seed 18
fi
python3 "$root/scripts/snapshot_report.py" "$snapshot" "$work/report.html"
chrome() {
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --hide-scrollbars --user-data-dir="$work/profile" --virtual-time-budget=10000 "$@" 2>>"$work/chromium.log"
}
# First the page's height at 1400 pixels wide, then the picture.
height=$(chrome --window-size=1400,1000 --dump-dom "file://$work/report.html" |
    sed -n 's/.*data-testid="page-height">\([0-9]*\)<.*/\1/p')
[ -n "$height" ] || { echo "viewer_screenshot.sh: the page did not render (see a browser)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
chrome --window-size=1400,"$height" --screenshot="$out" "file://$work/report.html" >/dev/null
echo "wrote $out (1400x$height) from $snapshot"
