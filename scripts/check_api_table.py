#!/usr/bin/env python3
"""docs/C_API.md's "C API by area" table names every function of
include/tessera.h: fails listing those it omits and those it names that
the header does not declare.

The table's refcount row is read as its pattern: for X in allocator,
object, storage, tensor, `tsr_X_incref`, `_decref`, ... and
`tsr_weak_X_lock`, ...; a name written `_suffix` after a full name in the
same cell continues that name's prefix (`tsr_X_incref`, `_decref`)."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def header_functions():
    text = (ROOT / "include" / "tessera.h").read_text()
    return set(re.findall(r"\b(tsr_\w+)\(", re.sub(r"/\*.*?\*/", "", text, flags=re.S))) - {
        n for n in re.findall(r"#define (tsr_\w+)\(", text)}


def table_functions():
    text = (ROOT / "docs" / "C_API.md").read_text()
    m = re.search(r"^## C API by area\n(.*?)^## ", text, flags=re.S | re.M)
    if not m:
        sys.exit("check_api_table.py: docs/C_API.md has no '## C API by area' section")
    names = set()
    for row in m.group(1).splitlines():
        if not row.startswith("| ") or row.startswith("| Area") or row.startswith("|---"):
            continue
        cells = row.split(" | ")
        cell = cells[-1]
        handles = re.search(r"for X in (.*?):", cell)
        xs = re.findall(r"`(\w+)`", handles.group(1)) if handles else [None]
        for x in xs:
            prefix = None
            for tok in re.findall(r"`([\w.]+)`", cell):
                if x is not None:
                    tok = tok.replace("_X_", f"_{x}_")
                if tok.startswith("tsr_"):
                    names.add(tok)
                    # the prefix a following `_suffix` continues
                    if x is not None and f"_{x}_" in tok:
                        prefix = tok[: tok.index(f"_{x}_") + len(x) + 1]
                    else:
                        prefix = None
                elif tok.startswith("_") and prefix:
                    names.add(prefix + tok)
    return names


def main():
    header, table = header_functions(), table_functions()
    missing = sorted(header - table)
    unknown = sorted(n for n in table - header if not n.startswith("tsr_X"))
    if missing or unknown:
        if missing:
            print("docs/C_API.md's C API table omits: " + ", ".join(missing), file=sys.stderr)
        if unknown:
            print("docs/C_API.md's C API table names functions the header lacks: "
                  + ", ".join(unknown), file=sys.stderr)
        return 1
    print(f"check_api_table.py: docs/C_API.md's C API table names all {len(header)} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
