#!/usr/bin/env bash
# The memory viewer in a real browser: synthetic snapshots (scripts/
# make_snapshot.py) are validated against docs/snapshot.schema.json with
# the jsonschema package, turned into standalone reports (scripts/
# snapshot_report.py) and loaded in headless Chromium; what each page shows
# (peak bytes, live blocks, top allocation site, event count, dropped
# events) must equal what .ci/viewer_check.py computes from the snapshot
# file on its own. .ci/viewer_cdp.py then clicks and drags on the timeline
# (the live blocks listed must match the snapshot at the chosen event),
# hovers, drops a file on the page and uses the file picker, through the
# DevTools protocol (stdlib only, no npm). A malformed and a truncated
# snapshot must show an error.
# Prints the load+render time of the 100,000-event page (fails above
# VIEWER_MAX_RENDER_MS, default 5000: a hang guard, not a benchmark).
# Screenshots go to $VIEWER_TEST_OUT (default: a temporary directory, kept).
# A snapshot from a real run of examples/memory_history.c is always checked,
# and its page's peak must equal the true peak (nested allocators count once);
# VIEWER_TEST_SNAPSHOTS="a.json b.json" adds more.
#
#   bash .ci/viewer-test.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${VIEWER_TEST_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/viewer-test.XXXXXX")}
mkdir -p "$out"
max_ms=${VIEWER_MAX_RENDER_MS:-5000}
start=$SECONDS

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

browser=""
for b in chromium chromium-browser; do command -v "$b" >/dev/null && browser=$b && break; done
if [ -z "$browser" ]; then
    echo "installing chromium (apt-get)"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null
    browser=chromium
fi
if ! python3 -c "import jsonschema" 2>/dev/null; then
    echo "installing jsonschema (pip)"
    python3 -m pip install -q jsonschema ||
        python3 -m pip install -q --break-system-packages jsonschema ||
        { as_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq python3-jsonschema >/dev/null; }
fi
echo "browser: $("$browser" --version 2>/dev/null | head -1)"
echo "setup: $((SECONDS - start))s; output in $out"

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# chrome ARGS...: headless Chromium with nothing reaching the network.
chrome() {
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --virtual-time-budget=10000 "$@" 2>>"$out/chromium.log"
}

# Snapshots: name and make_snapshot.py arguments.
cases=(
    "normal:--events 2000"
    "empty:--events 0"
    "large:--events 100000 --dropped 25000"
    "nostack:--events 5000 --dropped 3000 --seed 7 --no-backtraces"
)
for c in "${cases[@]}"; do
    # shellcheck disable=SC2086
    python3 scripts/make_snapshot.py "$out/${c%%:*}.json" ${c#*:}
done
# Snapshots from a real run (e.g. written by a C test through
# tsr_memory_snapshot), space-separated in $VIEWER_TEST_SNAPSHOTS, get the
# same checks as the synthetic ones.
# And always one written by tsr_memory_snapshot in a real run:
# examples/memory_history.c (two allocators, backtraces).
examples/run.sh memory_history >/dev/null
lib=${TESSERA_EXAMPLES_DIR:-$root/target/examples}/lib
${CC:-cc} -std=c99 -g -Iinclude examples/memory_history.c -L"$lib" -ltessera \
    -Wl,-rpath,"$lib" -o "$out/memory_history"
"$out/memory_history" "$out/real0.json" >/dev/null
cases+=("real0:")
# Memory that only grows: the peak is at the snapshot, where the chart's
# "peak" and "still live at the snapshot" labels meet (they must not
# overlap; checked below).
cat >"$out/grow.c" <<'C'
#include <string.h>
#include "tessera.h"
int main(int argc, char **argv) {
    TsrHistoryOptions history = {sizeof history, 10000, true};
    TsrDevice cpu = {TSR_CPU, -1};
    TsrStorage *s[12];
    if (argc < 2 || tsr_memory_record_history(&history) != TSR_OK) return 1;
    for (int i = 0; i < 12; i++) {
        if (tsr_storage_new((size_t)(1 + i) << 18, cpu, false, &s[i]) != TSR_OK) return 1;
        memset(tsr_storage_data(s[i]), 1, (size_t)(1 + i) << 18);
    }
    if (tsr_memory_snapshot(argv[1], TSR_SNAPSHOT_JSON) != TSR_OK) return 1;
    for (int i = 0; i < 12; i++) tsr_storage_decref(s[i]);
    return 0;
}
C
${CC:-cc} -std=c99 -g -Iinclude "$out/grow.c" -L"$lib" -ltessera -Wl,-rpath,"$lib" -o "$out/grow"
"$out/grow" "$out/grow.json"
cases+=("grow:")
i=0
for f in ${VIEWER_TEST_SNAPSHOTS:-}; do
    i=$((i + 1))
    cp "$f" "$out/real$i.json"
    cases+=("real$i:")
done
# The example in docs/MEMORY_SNAPSHOT.md must stay valid and readable.
python3 - "$out/example.json" <<'PY'
import re, sys
text = open("docs/MEMORY_SNAPSHOT.md").read()
open(sys.argv[1], "w").write(re.search(r"```json\n(.*?)```", text, re.S).group(1))
PY
cases+=("example:")

echo "==> schema"
python3 - "$out" "${cases[@]%%:*}" <<'PY'
import copy, json, sys
import jsonschema
schema = json.load(open("docs/snapshot.schema.json"))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
out, names = sys.argv[1], sys.argv[2:]
for n in names:
    snap = json.load(open("%s/%s.json" % (out, n)))
    v.validate(snap)
    asked = {"normal": 2000, "large": 100000, "nostack": 5000}.get(n, len(snap["events"]))
    if not asked - 2 <= len(snap["events"]) <= asked:
        sys.exit("FAIL %s.json has %d events, expected about %d" % (n, len(snap["events"]), asked))
    print("ok   %s.json valid (%d events, %d allocators)" % (n, len(snap["events"]), len(snap["allocators"])))
# The schema must refuse what a producer could get wrong.
snap = json.load(open("%s/normal.json" % out))
bad = {
    "address as a number": lambda s: s["events"][0].__setitem__("addr", 4096),
    "unknown action": lambda s: s["events"][0].__setitem__("action", "realloc"),
    "wrong format marker": lambda s: s.__setitem__("format", "torch"),
    "caching allocator without segments": lambda s: [a.pop("segments") for a in s["allocators"] if a["kind"] == "caching"],
    "negative size": lambda s: s["allocators"][2]["blocks"][0].__setitem__("size", -1),
    "missing dropped": lambda s: s["history"].pop("dropped"),
}
for what, spoil in bad.items():
    s = copy.deepcopy(snap)
    spoil(s)
    if v.is_valid(s):
        sys.exit("FAIL the schema accepts a snapshot with %s" % what)
    print("ok   refused: %s" % what)
PY

echo "==> pages"
status=0
for c in "${cases[@]}"; do
    n=${c%%:*}
    python3 scripts/snapshot_report.py "$out/$n.json" "$out/$n.html"
    chrome --dump-dom "file://$out/$n.html" >"$out/$n.dom.html"
    limit=()
    [ "$n" = large ] && limit=(--max-render-ms "$max_ms")
    python3 .ci/viewer_check.py compare "$out/$n.json" "$out/$n.dom.html" "${limit[@]}" || status=1
    chrome --window-size=1400,1000 --screenshot="$out/$n.png" "file://$out/$n.html" >/dev/null
    [ -s "$out/$n.png" ] || { echo "FAIL no screenshot for $n"; status=1; }
done
echo "==> nested allocators count once (real run: a caching allocator over the CPU allocator)"
# In examples/memory_history.c every byte lives in the CPU allocator's
# blocks (the weights, the scratch buffers and the caching allocator's
# 2 MiB segments, which hold the activations), and history records from
# its first allocation: the true peak is the CPU allocator's own peak_bytes
# statistic, counted by the library apart from the events (9,961,472 bytes:
# 5 MiB of weights, two segments, one 512 KiB scratch buffer). A viewer
# that adds the activations on top of their segments shows more.
true_peak=$(python3 - "$out/real0.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
al = {a["name"]: a for a in s["allocators"]}
assert al["activations"]["kind"] == "caching" and al["activations"].get("inner") == "cpu", al["activations"]
print(al["cpu"]["stats"]["peak_bytes"])
PY
)
python3 .ci/viewer_check.py peak "$out/real0.dom.html" "$true_peak" || status=1
echo "==> the chart's labels never overlap (peak at the snapshot: grow)"
for n in normal real0 grow; do
    python3 - "$out/$n.dom.html" "$n" <<'PY' || status=1
import html, json, re, sys
dom = open(sys.argv[1]).read()
m = re.search(r'data-testid="chart-labels">([^<]*)<', dom)
boxes = json.loads(html.unescape(m.group(1))) if m and m.group(1) else []
if len(boxes) < 2:
    sys.exit("FAIL %s: %d chart labels recorded" % (sys.argv[2], len(boxes)))
for i, a in enumerate(boxes):
    for b in boxes[i + 1:]:
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]:
            sys.exit("FAIL %s: labels %r and %r overlap" % (sys.argv[2], a, b))
print("ok   %s: %s" % (sys.argv[2], " | ".join(b[0] for b in boxes)))
PY
done
echo "==> clicks, drags, drag and drop, file picker (DevTools protocol)"
for n in normal large real0; do
    echo "$n:"
    timeout 300 python3 .ci/viewer_cdp.py "$browser" "$out/$n.json" "$out/$n.html" docs/memory_viewer.html "$out" || status=1
    mv "$out/cursor.png" "$out/$n-cursor.png" 2>/dev/null || true
done

echo "==> bad snapshots"
printf '{"format":"tessera-memory-snapshot","version":2}' >"$out/malformed.json"
head -c 5000 "$out/normal.json" >"$out/truncated.json"
python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); s["allocators"][0]["blocks"] = [{"addr": 4096}]; json.dump(s, open(sys.argv[2], "w"))' \
    "$out/normal.json" "$out/badblock.json"
for n in malformed truncated badblock; do
    # The report script refuses non-JSON; embed the truncated text by hand.
    python3 - "$out/$n.json" "$out/$n.html" <<'PY'
import sys
page = open("docs/memory_viewer.html").read()
text = open(sys.argv[1]).read().replace("<", "\\u003c")
open(sys.argv[2], "w").write(page.replace('<script type="application/json" id="snapshot"></script>',
    '<script type="application/json" id="snapshot">%s</script>' % text))
PY
    chrome --dump-dom "file://$out/$n.html" >"$out/$n.dom.html"
    python3 .ci/viewer_check.py error "$out/$n.dom.html" || status=1
done
chrome --window-size=1400,600 --screenshot="$out/malformed.png" "file://$out/malformed.html" >/dev/null

large_ms=$(sed -n 's/.*data-testid="render-ms">\([^<]*\)<.*/\1/p' "$out/large.dom.html")
page_ms=$(sed -n 's/.*data-testid="page-ms">\([^<]*\)<.*/\1/p' "$out/large.dom.html")
echo "100,000-event page: JSON parse + model + first render ${large_ms} ms (bound ${max_ms} ms);"
echo "  ${page_ms} ms from navigation start (includes parsing the $(($(stat -c %s "$out/large.html") / 1048576)) MiB page)"
echo "screenshots: $out/{normal,empty,large,nostack,example,grow,malformed,normal-cursor,large-cursor,real0-cursor}.png"
echo "viewer test: $([ $status = 0 ] && echo passed || echo FAILED) in $((SECONDS - start))s"
exit $status
