#!/usr/bin/env python3
"""Turn a tessera memory snapshot into a standalone HTML report.

    scripts/snapshot_report.py SNAPSHOT.json OUT.html [--viewer docs/memory_viewer.html]

The report is docs/memory_viewer.html with the snapshot embedded in its
<script type="application/json" id="snapshot"> block: one file, no network,
that opens in any browser (and that a CI job can attach). The snapshot must
be JSON; the viewer itself reports a snapshot it cannot read.
"""

import argparse
import html
import json
import os
import sys

MARKER = '<script type="application/json" id="snapshot"></script>'


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("snapshot", help="a JSON snapshot (tsr_memory_snapshot with TSR_SNAPSHOT_JSON)")
    p.add_argument("out", help="the HTML file to write")
    p.add_argument("--viewer", default=os.path.join(here, "..", "docs", "memory_viewer.html"),
                   help="the viewer page to embed into (default: docs/memory_viewer.html)")
    args = p.parse_args()

    try:
        with open(args.snapshot, encoding="utf-8") as f:
            text = f.read()
        json.loads(text)
    except (OSError, UnicodeDecodeError) as e:
        sys.exit("snapshot_report.py: cannot read snapshot %s: %s" % (args.snapshot, e))
    except ValueError as e:
        sys.exit("snapshot_report.py: %s is not JSON: %s" % (args.snapshot, e))
    with open(args.viewer, encoding="utf-8") as f:
        page = f.read()
    if page.count(MARKER) != 1:
        sys.exit("snapshot_report.py: %s has no empty snapshot block (%s)" % (args.viewer, MARKER))
    # '<' only occurs inside JSON strings, where \u003c means the same; the
    # script block then cannot contain "</script" or "<!--".
    body = text.strip().replace("<", "\\u003c")
    block = '<script type="application/json" id="snapshot" data-source="%s">%s</script>' % (
        html.escape(os.path.basename(args.snapshot), quote=True), body)
    page = page.replace(MARKER, block)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(page)


if __name__ == "__main__":
    main()
