"""A pytest plugin installing tessera's NumPy handler for a whole run:

    python -m pytest -p tessera_numpy.pytest_plugin --pyargs numpy

install() runs when pytest is configured, before any test module is
imported, so every array the suite makes after that (module-level ones
included) gets its data from tessera. The terminal summary gives tessera's
statistics at the end of the session; TESSERA_NUMPY_STATS_JSON=PATH also
writes them there as JSON (with the counts at configure time).
"""
import gc
import json
import os

import tessera_numpy

_at_start = None


def pytest_configure(config):
    global _at_start
    _at_start = tessera_numpy.stats()
    tessera_numpy.install()
    if not tessera_numpy.is_installed():
        raise RuntimeError("tessera_numpy.pytest_plugin: install() did not take effect")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    gc.collect()
    end = tessera_numpy.stats()
    still = tessera_numpy.is_installed()
    tr = terminalreporter
    tr.section("tessera NumPy handler")
    tr.write_line(f"handler still installed at the end: {still}")
    tr.write_line(
        "allocations {allocations}  frees {frees}  live_blocks {live_blocks}  "
        "current_bytes {current_bytes}  peak_bytes {peak_bytes}  failed {failed}  "
        "bad_frees {bad_frees}  size_mismatches {size_mismatches}".format(**end)
    )
    path = os.environ.get("TESSERA_NUMPY_STATS_JSON")
    if path:
        with open(path, "w") as f:
            json.dump({"at_configure": _at_start, "at_session_end": end,
                       "installed_at_end": still}, f, indent=1)
