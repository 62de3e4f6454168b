#!/usr/bin/env python3
"""Check what the memory viewer shows against the snapshot it was given.

    viewer_check.py expect SNAPSHOT.json          print the expected figures (JSON)
    viewer_check.py compare SNAPSHOT.json DOM.html [--max-render-ms N]
    viewer_check.py error DOM.html                the page must show an error

    viewer_check.py peak DOM.html BYTES           the page's peak must be BYTES

The expected figures are computed here, independently of the page's
JavaScript (a backward walk from the snapshot's live blocks, where the page
walks forward): peak bytes over the history window (all allocators, each
byte once: a nested allocator's blocks, such as a caching allocator's whose
`inner` allocator is in the snapshot, lie inside that allocator's blocks
and are not added again; the live blocks' total when there are no events),
the number of live blocks (every allocator's), the allocation site
holding the most bytes at the peak (the innermost frame outside tessera and
the Rust runtime, or with a host's frames the innermost host frame outside
NumPy's and tessera's sources; ties by name; outermost allocators' blocks),
the bytes still live at the snapshot (outermost allocators), the small
long-lived blocks (live at the snapshot, under 64 KiB, allocated at least
10% of the window before the snapshot or before the window; outermost
allocators), and that the
chart runs to the snapshot and at least 4% past the last event.
"""

import json
import re
import sys

INTERNAL = ("tessera::", "<tessera::", "tsr_", "std::", "<std::", "core::", "<core::", "alloc::", "<alloc::", "backtrace::", "__rust", "rust_")
LIBRARY_FILES = re.compile(r"[\\/](numpy|tessera_numpy|numpy_allocator)[\\/]")
SMALL_BYTES = 65536
NO_STACK = "(no backtrace)"
BEFORE = "(allocated before the history window)"


def site(frames, stack):
    if not stack:
        return NO_STACK
    host = [frames[i] for i in stack if frames[i].get("host")]
    if host:
        f = next((h for h in host if not (h.get("file") and LIBRARY_FILES.search(h["file"]))), host[0])
    else:
        f = next((frames[i] for i in stack if not frames[i]["function"].startswith(INTERNAL)), frames[stack[0]])
    label = f["function"]
    if f.get("file"):
        label += " (%s%s)" % (f["file"], ":%d" % f["line"] if "line" in f else "")
    return label


def nested(snap):
    """The allocators whose memory lies inside another's: those whose
    `inner` names an allocator of the snapshot (the one on the same device
    when several share the name), as (name, device type, device index)."""
    out = set()
    for a in snap["allocators"]:
        inner = a.get("inner")
        if inner is None:
            continue
        cands = [b for b in snap["allocators"] if b["name"] == inner and b is not a]
        if cands:
            out.add((a["name"], a["device"]["type"], a["device"]["index"]))
    return out


def outer_bytes(snap, live):
    """The bytes of a live_at() result, each once: outermost allocators' blocks."""
    inside = nested(snap)
    return sum(size for k, (size, _) in live.items() if k[:3] not in inside)


def live_at(snap, k):
    """The blocks live after the first k events: {key: (size, site)}, found
    by undoing the events after k, newest first, from the live blocks."""
    frames, events = snap["frames"], snap["events"]
    key = lambda name, dev, addr: (name, dev["type"], dev["index"], int(addr, 16))
    allocs = {}
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            allocs.setdefault(key(e["allocator"], e["device"], e["addr"]), []).append(i)

    def alloc_before(k, i):
        idx = [j for j in allocs.get(k, []) if j < i]
        return idx[-1] if idx else None

    live = {}
    for a in snap["allocators"]:
        for b in a["blocks"]:
            bk = key(a["name"], a["device"], b["addr"])
            j = alloc_before(bk, len(events))
            if b.get("stack"):
                s = site(frames, b["stack"])
            elif j is not None:
                s = site(frames, events[j].get("stack"))
            else:
                s = NO_STACK if "time_ns" in b else BEFORE
            live[bk] = (b["size"], s)
    for i in range(len(events) - 1, k - 1, -1):
        e = events[i]
        ek = key(e["allocator"], e["device"], e["addr"])
        if e["action"] == "alloc":
            live.pop(ek, None)
        elif e["action"] == "free":
            j = alloc_before(ek, i)
            live[ek] = (e["size"], site(frames, events[j].get("stack")) if j is not None else BEFORE)
    return live


def expect(snap):
    frames, events = snap["frames"], snap["events"]
    key = lambda name, dev, addr: (name, dev["type"], dev["index"], int(addr, 16))
    inside = nested(snap)
    live = {}
    for a in snap["allocators"]:
        for b in a["blocks"]:
            live[key(a["name"], a["device"], b["addr"])] = b
    live_count = len(live)
    # Totals backwards: before an alloc there was less, before a free more.
    # Only outermost allocators count: nested ones' bytes are inside them.
    total_end = sum(b["size"] for k, b in live.items() if k[:3] not in inside)
    totals = [0] * (len(events) + 1)
    totals[len(events)] = total_end
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        delta = e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free" else 0
        if (e["allocator"], e["device"]["type"], e["device"]["index"]) in inside:
            delta = 0
        totals[i] = totals[i + 1] - delta
    peak = max(totals)
    peak_k = totals.index(peak)
    at_peak = {k: v for k, v in live_at(snap, peak_k).items() if k[:3] not in inside}
    if sum(size for size, _ in at_peak.values()) != peak:
        raise SystemExit("inconsistent snapshot: the blocks live at the peak (state %d) add up to %d bytes, "
                         "the totals to %d" % (peak_k, sum(size for size, _ in at_peak.values()), peak))
    by_site = {}
    for size, s in at_peak.values():
        by_site[s] = by_site.get(s, 0) + size
    ranked = sorted(by_site.items(), key=lambda kv: (-kv[1], kv[0]))
    # Small long-lived blocks: when each live block was allocated (its
    # alloc event in the window, else the block's own time, else unknown).
    times = [e["time_ns"] for e in events]
    taken = snap.get("taken", {}).get("time_ns", 0)
    old_before = max(taken, max(times)) - 0.1 * (max(times) - times[0]) if times else float("inf")
    open_alloc = {}
    for e in events:
        k = key(e["allocator"], e["device"], e["addr"])
        if e["action"] == "alloc":
            open_alloc[k] = e["time_ns"]
        elif e["action"] == "free":
            open_alloc.pop(k, None)
    small = [b for k, b in live.items() if k[:3] not in inside and b["size"] < SMALL_BYTES
             and not (open_alloc.get(k, b.get("time_ns")) is not None
                      and open_alloc.get(k, b.get("time_ns")) > old_before)]
    return {
        "peak-bytes": peak,
        "live-blocks": live_count,
        "top-site": ranked[0][0] if ranked else "",
        "event-count": len(events),
        "dropped-events": snap["history"]["dropped"],
        "still-live-bytes": total_end,
        "small-live-blocks": len(small),
        "small-live-bytes": sum(b["size"] for b in small),
    }


def chart_end_ok(snap, got):
    """Whether the chart's end (the page's chart-end-ns) is at the snapshot
    and at least 4% of the window past the last event."""
    times = [e["time_ns"] for e in snap["events"]]
    if not times:
        return True
    t0, t1 = times[0], max(times)
    want = max(snap.get("taken", {}).get("time_ns", 0), t1 + max(1, (t1 - t0) * 0.04))
    return abs(float(got) - want) <= 1


def dom_values(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    import html
    return {m.group(1): html.unescape(m.group(2)) for m in re.finditer(r'data-testid="([a-z-]+)">([^<]*)<', text)}


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "expect" and len(sys.argv) == 3:
        print(json.dumps(expect(json.load(open(sys.argv[2]))), indent=1))
        return 0
    if cmd == "error" and len(sys.argv) == 3:
        got = dom_values(sys.argv[2])
        if got.get("status") != "error" or not got.get("error"):
            print("FAIL %s: expected an error message, page status %r" % (sys.argv[2], got.get("status")))
            return 1
        print("ok   %s shows an error: %s" % (sys.argv[2], got["error"]))
        return 0
    if cmd == "peak" and len(sys.argv) == 4:
        got = dom_values(sys.argv[2]).get("peak-bytes")
        if got != sys.argv[3]:
            print("FAIL %s: the page shows a peak of %s bytes, the true peak is %s" % (sys.argv[2], got, sys.argv[3]))
            return 1
        print("ok   %s: peak %s bytes, the true peak" % (sys.argv[2], got))
        return 0
    if cmd == "compare" and len(sys.argv) in (4, 6):
        want = expect(json.load(open(sys.argv[2])))
        got = dom_values(sys.argv[3])
        bad = 0
        if got.get("status") != "ok":
            print("FAIL %s: page status %r, error %r" % (sys.argv[3], got.get("status"), got.get("error")))
            return 1
        for k, v in want.items():
            if got.get(k) != str(v):
                print("FAIL %s: %s is %r on the page, %r in the snapshot" % (sys.argv[3], k, got.get(k), str(v)))
                bad += 1
        if not chart_end_ok(json.load(open(sys.argv[2])), got.get("chart-end-ns") or "nan"):
            print("FAIL %s: the chart ends at %s ns, not at the snapshot (or 4%% past the last event)"
                  % (sys.argv[3], got.get("chart-end-ns")))
            bad += 1
        ms = float(got.get("render-ms") or "nan")
        print("%s %s: peak %s B, %s live blocks, top site %r, %s events; load+render %.1f ms" % (
            "ok  " if not bad else "FAIL", sys.argv[3], got.get("peak-bytes"), got.get("live-blocks"),
            got.get("top-site"), got.get("event-count"), ms))
        if len(sys.argv) == 6 and sys.argv[4] == "--max-render-ms" and not ms <= float(sys.argv[5]):
            print("FAIL %s: load+render took %.1f ms, more than %s ms" % (sys.argv[3], ms, sys.argv[5]))
            bad += 1
        return 1 if bad else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
