"""NumPy's array data from tessera's CPU allocator (NEP 49 handler).

    from tessera import numpy_allocator
    numpy_allocator.install()       # new arrays' data from tessera
    numpy_allocator.uninstall()     # back to NumPy's default handler
    numpy_allocator.stats()         # tessera's allocator statistics (a dict)
    numpy_allocator.snapshot(path)  # JSON, or memory_viz's pickle for *.pickle

The successor of the separate tessera_numpy package (same functions, same
C handler, python/csrc/), now over the library the tessera package loads:
the arrays' blocks, tessera.load's storages and memory history are one
library's.

NumPy keeps the current handler in a context variable: install() affects
the calling thread's context (threads started later begin with NumPy's
default handler), as numpy.core.multiarray's own set_handler does. Every
array keeps a reference to the handler that allocated it, so blocks made
while installed are freed by tessera after uninstall() too.
"""
import contextlib
import ctypes
import glob
import os

from .. import _native


def _load_library_global():
    """The handler's tsr_* calls bind to the library tessera._native
    loaded (it is not linked to one of its own): made RTLD_GLOBAL here,
    before the handler is imported. dlopen of a loaded library returns
    it, so this is the same copy."""
    here = os.path.dirname(_native.__file__)
    libs = sorted(glob.glob(os.path.join(here, "*.so*")))
    if not libs:
        raise ImportError(f"tessera.numpy_allocator: no native library in {here}")
    return ctypes.CDLL(libs[0], mode=ctypes.RTLD_GLOBAL)


_LIB = _load_library_global()

from . import _handler  # noqa: E402  (after the library is global)

__all__ = [
    "install",
    "uninstall",
    "installed",
    "is_installed",
    "handler_name",
    "stats",
    "snapshot",
    "record_history",
    "release_cache",
    "restore",
]

HEADER_BYTES = _handler.HEADER_BYTES
TESSERA_VERSION = _handler.TESSERA_VERSION


def install(allocator="registry", limit_bytes=None):
    """Makes tessera allocate the data of every new NumPy array (in this
    context). Calling it again is harmless (the same handler stays).

    allocator: 'registry' (the allocator registered for TSR_CPU: tessera's
    built-in CPU allocator unless a plugin replaced it), 'cpu' (the
    built-in one, whatever is registered), or, for testing failure paths,
    'failing' (a C plugin refusing every allocation: NumPy raises
    MemoryError) and 'limited' (a malloc-backed C plugin refusing what
    would take its live bytes past limit_bytes).

    Returns the handler that was current before (a NumPy 'mem_handler'
    capsule), which restore() puts back.
    """
    return _handler.install(allocator, limit_bytes)


def uninstall():
    """Goes back to NumPy's default handler. Arrays made while tessera's
    handler was installed keep it and free their data with it later."""
    _handler.set_handler(None)


def restore(handler):
    """Puts back a handler returned by install() (None: NumPy's default)."""
    _handler.set_handler(handler)


@contextlib.contextmanager
def installed(allocator="registry", limit_bytes=None):
    """with numpy_allocator.installed(): ...  -- install() for the block,
    then the handler that was current before it."""
    prev = install(allocator, limit_bytes)
    try:
        yield
    finally:
        _handler.set_handler(prev)


def handler_name():
    """The name of NumPy's current handler ('tessera' once installed)."""
    import numpy as np

    return np._core.multiarray.get_handler_name()


def is_installed():
    """Whether one of numpy_allocator's handlers is NumPy's current one."""
    return _handler.is_tessera_handler(_handler.current_handler())


def stats():
    """tessera's statistics of the allocator behind NumPy's current handler
    when it is numpy_allocator's, else of the registry's CPU allocator (the
    one install() uses): allocations, frees, live_blocks,
    current_bytes, peak_bytes, failed (tessera's own counters, covering the
    64-byte header each block carries, header_bytes), plus bad_frees and
    size_mismatches seen by the handler."""
    return _handler.stats()


def snapshot(path, format=None):
    """Writes tsr_memory_snapshot to path: the memory_viz pickle when the
    path ends in .pickle (or format='pickle'), else tessera's JSON."""
    if format is None:
        fmt = -1
    elif format == "json":
        fmt = _handler.SNAPSHOT_JSON
    elif format == "pickle":
        fmt = _handler.SNAPSHOT_TORCH
    else:
        raise ValueError(
            f"tessera.numpy_allocator.snapshot: format={format!r} is unknown, expected None, 'json' or 'pickle'"
        )
    _handler.snapshot(path, fmt)


def record_history(enabled=True, max_entries=100000, backtraces=True):
    """Starts (or, with False, stops and forgets) tessera's memory history
    (tsr_memory_record_history): the newest max_entries allocations and
    frees, which snapshot() writes out."""
    _handler.record_history(enabled, max_entries, backtraces)


def release_cache():
    """Frees this thread's tessera CPU-allocator cache; returns the bytes."""
    return _handler.release_cache()
