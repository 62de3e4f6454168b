"""A pytest plugin installing tessera's NumPy handler for a whole run:

    python -m pytest -p tessera.numpy_allocator.pytest_plugin --pyargs numpy

install() runs when pytest is configured, before any test module is
imported, so every array the suite makes after that (module-level ones
included) gets its data from tessera. The terminal summary gives tessera's
statistics at the end of the session; TESSERA_NUMPY_STATS_JSON=PATH also
writes them there as JSON (with the counts at configure time), and
TESSERA_NUMPY_CENSUS=1 adds a census of the arrays still reachable that own
tessera blocks (what keeps the live blocks live), and
TESSERA_NUMPY_SNAPSHOT=PATH records tessera's memory history (with
backtraces; the newest 10,000 events) for the whole run and writes the
snapshot (its live blocks with their allocation stacks) at the end.
"""
import gc
import json
import os

from tessera import numpy_allocator

_at_start = None


def pytest_configure(config):
    global _at_start
    _at_start = numpy_allocator.stats()
    if os.environ.get("TESSERA_NUMPY_SNAPSHOT"):
        numpy_allocator.record_history(True, max_entries=10000, backtraces=True)
    numpy_allocator.install()
    if not numpy_allocator.is_installed():
        raise RuntimeError("tessera.numpy_allocator.pytest_plugin: install() did not take effect")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    gc.collect()
    end = numpy_allocator.stats()
    still = numpy_allocator.is_installed()
    tr = terminalreporter
    tr.section("tessera NumPy handler")
    tr.write_line(f"handler still installed at the end: {still}")
    tr.write_line(
        "allocations {allocations}  frees {frees}  live_blocks {live_blocks}  "
        "current_bytes {current_bytes}  peak_bytes {peak_bytes}  failed {failed}  "
        "bad_frees {bad_frees}  size_mismatches {size_mismatches}".format(**end)
    )
    census = None
    if os.environ.get("TESSERA_NUMPY_CENSUS"):
        census = _census()
        tr.write_line(
            f"reachable arrays owning tessera blocks: {census['arrays']} "
            f"({census['bytes']} bytes + {census['arrays']} x {numpy_allocator.HEADER_BYTES} header); "
            f"largest: {census['largest']}"
        )
        tr.write_line(f"held by (referrer type: arrays): {census['held_by']}")
    snap = os.environ.get("TESSERA_NUMPY_SNAPSHOT")
    if snap:
        numpy_allocator.snapshot(snap)
        tr.write_line(f"snapshot written to {snap}")
    path = os.environ.get("TESSERA_NUMPY_STATS_JSON")
    if path:
        with open(path, "w") as f:
            json.dump({"at_configure": _at_start, "at_session_end": end,
                       "installed_at_end": still, "census": census}, f, indent=1)


def _census():
    """The ndarrays reachable from gc-tracked objects (ndarrays themselves
    are not tracked) that own data from a tessera handler."""
    import collections

    import numpy as np

    name_of = np._core.multiarray.get_handler_name
    seen = {}
    held_by = collections.Counter()
    for o in gc.get_objects():
        for r in gc.get_referents(o):
            if isinstance(r, np.ndarray) and id(r) not in seen and r.flags.owndata:
                name = name_of(r)
                if name and name.startswith("tessera"):
                    seen[id(r)] = r
                    held_by[type(o).__name__] += 1
    arrays = list(seen.values())
    arrays.sort(key=lambda a: a.nbytes, reverse=True)
    return {
        "arrays": len(arrays),
        "bytes": sum(a.nbytes for a in arrays),
        "largest": [f"{a.dtype}{a.shape} {a.nbytes} B" for a in arrays[:5]],
        "held_by": dict(held_by.most_common(8)),
    }
