"""tessera.numpy_allocator: NumPy array data from tessera (issue 40), incl. bad input.

    pip install .               # the tessera package (maturin)
    python -m pytest tests/python/test_numpy_host.py

Each test checks where the data really came from: tessera's allocator
statistics move (or do not), and NumPy reports the handler's name.
"""
import gc
import json
import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

from tessera import numpy_allocator

get_handler_name = np._core.multiarray.get_handler_name


@pytest.fixture(autouse=True)
def default_handler():
    """Every test starts and ends with NumPy's default handler."""
    numpy_allocator.uninstall()
    yield
    numpy_allocator.uninstall()
    gc.collect()


def live(s):
    return s["allocations"] - s["frees"]


def test_install_routes_new_arrays_to_tessera():
    assert get_handler_name() == "default_allocator"
    before = numpy_allocator.stats()
    numpy_allocator.install()
    assert get_handler_name() == "tessera"
    assert numpy_allocator.is_installed()
    a = np.empty(1000)
    s = numpy_allocator.stats()
    assert s["allocations"] == before["allocations"] + 1
    assert s["current_bytes"] >= before["current_bytes"] + 8000 + numpy_allocator.HEADER_BYTES
    assert get_handler_name(a) == "tessera"
    # tessera's CPU allocator aligns to 64; the header keeps that.
    assert a.ctypes.data % 64 == 0
    del a
    s2 = numpy_allocator.stats()
    assert s2["frees"] == s["frees"] + 1
    assert s2["current_bytes"] == before["current_bytes"]


def test_stats_keys():
    s = numpy_allocator.stats()
    for k in ("allocations", "frees", "current_bytes", "peak_bytes"):
        assert isinstance(s[k], int) and s[k] >= 0
    assert s["peak_bytes"] >= s["current_bytes"]


def test_install_twice_is_idempotent():
    numpy_allocator.install()
    numpy_allocator.install()
    assert get_handler_name() == "tessera"
    before = numpy_allocator.stats()
    a = np.empty(64)
    assert numpy_allocator.stats()["allocations"] == before["allocations"] + 1
    numpy_allocator.uninstall()
    numpy_allocator.uninstall()  # twice too
    assert get_handler_name() == "default_allocator"
    del a
    assert live(numpy_allocator.stats()) == live(before)


def test_uninstall_with_live_blocks_frees_them_later():
    before = numpy_allocator.stats()
    numpy_allocator.install()
    arrays = [np.arange(n, dtype=np.int64) for n in range(0, 300, 7)]
    views = [a[::2] for a in arrays]
    mid = numpy_allocator.stats()
    assert live(mid) == live(before) + len(arrays)
    numpy_allocator.uninstall()
    assert get_handler_name() == "default_allocator"
    assert get_handler_name(arrays[5]) == "tessera"
    b = np.empty(100)  # from NumPy's default handler now
    assert get_handler_name(b) == "default_allocator"
    assert numpy_allocator.stats()["allocations"] == mid["allocations"]
    for n, (a, v) in enumerate(zip(arrays, views)):
        assert a.tolist() == list(range(0, 7 * n, 1))
        assert v.tolist() == list(range(0, 7 * n, 2))
    del arrays, views, a, v
    gc.collect()
    end = numpy_allocator.stats()
    assert live(end) == live(before)
    assert end["current_bytes"] == before["current_bytes"]
    assert end["bad_frees"] == 0


def test_installed_context_manager_restores_previous():
    with numpy_allocator.installed():
        assert get_handler_name() == "tessera"
        with numpy_allocator.installed("failing"):
            assert get_handler_name() == "tessera(tessera_numpy_failing)"
        assert get_handler_name() == "tessera"
    assert get_handler_name() == "default_allocator"


def test_zero_bytes_and_empty_arrays():
    numpy_allocator.install()
    before = numpy_allocator.stats()
    a = np.empty(0)
    b = np.zeros((0, 5))
    c = np.array([], dtype=np.float32)
    assert a.size == b.size == c.size == 0
    assert numpy_allocator.stats()["allocations"] >= before["allocations"] + 3
    del a, b, c
    assert live(numpy_allocator.stats()) == live(before)


def test_calloc_zeroes_reused_memory():
    numpy_allocator.install()
    # Dirty blocks go back to tessera's thread cache; zeros must not see them.
    for _ in range(20):
        d = np.full(4096, 0xAB, dtype=np.uint8)
        del d
        z = np.zeros(4096, dtype=np.uint8)
        assert not z.any()
        del z


def test_realloc_keeps_data():
    numpy_allocator.install()
    before = numpy_allocator.stats()
    a = np.arange(10, dtype=np.float64)
    a.resize(100_000, refcheck=False)  # realloc up: grows, keeps the data
    assert a[:10].tolist() == list(range(10)) and not a[10:].any()
    a.resize(3, refcheck=False)  # realloc down
    assert a.tolist() == [0.0, 1.0, 2.0]
    # np.fromiter of unknown length grows its buffer with realloc.
    f = np.fromiter((i * i for i in range(50_000)), dtype=np.int64)
    assert f[-1] == 49_999**2 and f[1234] == 1234**2
    assert numpy_allocator.stats()["allocations"] > before["allocations"] + 2
    del a, f
    end = numpy_allocator.stats()
    assert live(end) == live(before) and end["current_bytes"] == before["current_bytes"]


def test_failing_plugin_raises_memoryerror_nothing_lost():
    numpy_allocator.install()
    base = numpy_allocator.stats()
    keep = np.arange(1000)
    with numpy_allocator.installed("failing"):
        s0 = numpy_allocator.stats()
        assert s0["allocator"] == "tessera_numpy_failing"
        with pytest.raises(MemoryError):
            np.empty(1000)
        with pytest.raises(MemoryError):
            np.zeros((10, 10))
        with pytest.raises(MemoryError):
            np.empty(0)
        s1 = numpy_allocator.stats()
        assert s1["allocations"] == s0["allocations"] == 0
        assert s1["failed"] >= s0["failed"] + 3
        assert s1["current_bytes"] == 0
    # Back on the registry allocator: nothing of it moved.
    assert get_handler_name() == "tessera"
    after = numpy_allocator.stats()
    assert live(after) == live(base) + 1
    assert keep.sum() == 499500


def test_limited_plugin_failure_keeps_old_block_on_realloc():
    with numpy_allocator.installed("limited", limit_bytes=64 * 1024):
        a = np.arange(100, dtype=np.int64)
        s0 = numpy_allocator.stats()
        assert s0["allocator"] == "tessera_numpy_limited" and s0["allocations"] == 1
        with pytest.raises(MemoryError):
            np.empty(1 << 20)
        with pytest.raises(MemoryError):
            a.resize(1 << 20, refcheck=False)  # realloc fails, a stays
        assert a.tolist() == list(range(100))
        s1 = numpy_allocator.stats()
        assert s1["failed"] == s0["failed"] + 2
        assert s1["current_bytes"] == s0["current_bytes"]
        b = np.ones(1000)  # still room under the limit
        assert b.sum() == 1000
        del a, b
        s2 = numpy_allocator.stats()
        assert s2["frees"] == s2["allocations"] and s2["current_bytes"] == 0


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match=r"install: allocator='bogus' is unknown"):
        numpy_allocator.install("bogus")
    with pytest.raises(TypeError, match=r"needs limit_bytes"):
        numpy_allocator.install("limited")
    with pytest.raises(ValueError, match=r"limit_bytes=-1 is out of range"):
        numpy_allocator.install("limited", limit_bytes=-1)
    with pytest.raises(ValueError, match=r"only for allocator='limited'"):
        numpy_allocator.install("registry", limit_bytes=10)
    with pytest.raises(TypeError, match=r"set_handler: expected a NumPy 'mem_handler' capsule"):
        numpy_allocator.restore(42)
    with pytest.raises(ValueError, match=r"max_entries=0, expected >= 1"):
        numpy_allocator.record_history(True, max_entries=0)
    with pytest.raises(ValueError, match=r"format='xml' is unknown"):
        numpy_allocator.snapshot("x.json", format="xml")
    assert get_handler_name() == "default_allocator"


def test_snapshot_unwritable_path_raises_oserror(tmp_path):
    with pytest.raises(OSError, match=r"numpy_allocator.snapshot: tsr_memory_snapshot"):
        numpy_allocator.snapshot(str(tmp_path / "no" / "such" / "dir.json"))
    with pytest.raises(OSError):
        numpy_allocator.snapshot(str(tmp_path))  # a directory


def test_snapshot_json_and_pickle_show_numpy_blocks(tmp_path):
    numpy_allocator.record_history(True, max_entries=10000)
    try:
        numpy_allocator.install()
        a = np.empty(12345, dtype=np.uint8)
        numpy_allocator.snapshot(str(tmp_path / "s.json"))
        numpy_allocator.snapshot(str(tmp_path / "s.pickle"))
    finally:
        numpy_allocator.record_history(False)
    text = (tmp_path / "s.json").read_text()
    doc = json.loads(text)
    assert str(12345 + numpy_allocator.HEADER_BYTES) in text
    assert doc  # tessera's JSON (docs/MEMORY_SNAPSHOT.md)
    with open(tmp_path / "s.pickle", "rb") as f:
        viz = pickle.load(f)
    assert isinstance(viz, dict) and "segments" in viz
    del a


def allocate_at_a_known_line():
    return np.ones(1 << 16)  # the line the snapshot must name


def snapshot_with_history(tmp_path, backtraces, work):
    """Runs work() with tessera's handler and history on; returns the JSON
    snapshot and the pickle's dict, both taken at the end of work()."""
    numpy_allocator.record_history(True, max_entries=10000, backtraces=backtraces)
    try:
        numpy_allocator.install()
        keep = work()
        numpy_allocator.snapshot(str(tmp_path / "s.json"))
        numpy_allocator.snapshot(str(tmp_path / "s.pickle"))
    finally:
        numpy_allocator.record_history(False)
    del keep
    with open(tmp_path / "s.pickle", "rb") as f:
        viz = pickle.load(f)
    return json.loads((tmp_path / "s.json").read_text()), viz


def block_of_size(doc, size):
    blocks = [b for a in doc["allocators"] for b in a["blocks"] if b["size"] == size]
    assert len(blocks) == 1, blocks
    return blocks[0]


def test_snapshot_names_the_python_lines_of_numpy_allocations(tmp_path):
    doc, viz = snapshot_with_history(tmp_path, True, allocate_at_a_known_line)
    line = allocate_at_a_known_line.__code__.co_firstlineno + 1
    size = (1 << 16) * 8 + numpy_allocator.HEADER_BYTES
    block = block_of_size(doc, size)
    stack = [doc["frames"][i] for i in block["stack"]]
    python = [f for f in stack if f.get("host") == "python"]
    here = {"function": "allocate_at_a_known_line", "file": __file__, "line": line,
            "host": "python"}
    assert here in python, python
    # The whole Python stack, innermost first: its callers follow.
    i = python.index(here)
    assert [f["function"] for f in python[i + 1:i + 3]] == [
        "snapshot_with_history", "test_snapshot_names_the_python_lines_of_numpy_allocations"]
    assert python[i + 2]["file"] == __file__
    # Frames inside NumPy (np.ones is Python code) come before it.
    numpy_dir = os.path.dirname(np.__file__)
    assert all(f["file"].startswith(numpy_dir) for f in python[:i]), python[:i]
    # The native frames come first (NumPy's C allocation path), the
    # Python frames where the interpreter runs them.
    assert "host" not in stack[0], stack[:3]
    # The same frames in memory_viz's pickle, with the host marked.
    frames = [f for seg in viz["segments"] for b in seg["blocks"]
              if b["size"] == size for f in b.get("frames", [])]
    assert {"filename": __file__, "line": line, "name": "allocate_at_a_known_line",
            "host": "python"} in frames


def test_no_python_frames_without_backtraces(tmp_path):
    doc, _ = snapshot_with_history(tmp_path, False, allocate_at_a_known_line)
    block = block_of_size(doc, (1 << 16) * 8 + numpy_allocator.HEADER_BYTES)
    assert "stack" not in block and doc["frames"] == []


def test_python_frames_keep_the_exception_being_handled(tmp_path):
    def work():
        try:
            raise KeyError("kept")
        except KeyError:
            a = np.ones(777)
            # Walking the Python stack inside the allocation left the
            # exception being handled as it was.
            assert sys.exc_info()[0] is KeyError
            assert str(sys.exc_info()[1]) == "'kept'"
            return a
    doc, _ = snapshot_with_history(tmp_path, True, work)
    block = block_of_size(doc, 777 * 8 + numpy_allocator.HEADER_BYTES)
    functions = [doc["frames"][i]["function"] for i in block["stack"]]
    assert any(f.endswith("work") for f in functions), functions


def test_other_threads_start_with_numpy_default():
    # NumPy keeps the handler in a context variable: threads start with
    # their own (empty) context, so NumPy's default handler.
    numpy_allocator.install()
    names = []
    t = threading.Thread(target=lambda: names.append(get_handler_name()))
    t.start()
    t.join()
    assert names == ["default_allocator"]
    # A thread freeing tessera blocks made in another one is fine.
    arrays = [np.empty(n) for n in range(1, 200)]
    before = numpy_allocator.stats()
    t = threading.Thread(target=arrays.clear)
    t.start()
    t.join()
    assert numpy_allocator.stats()["frees"] == before["frees"] + 199


def test_blocks_outlive_uninstall_until_interpreter_exit(tmp_path):
    # Arrays made under tessera and still alive at exit are freed by
    # Python's finalization through their handler, after uninstall().
    out = tmp_path / "exit.json"
    code = (
        "import numpy as np\nfrom tessera import numpy_allocator\n"
        "numpy_allocator.install()\n"
        "keep = [np.empty(n) for n in range(1, 100)]\n"
        "numpy_allocator.uninstall()\n"
        "assert numpy_allocator.stats()['live_blocks'] >= 99\n"
    )
    env = dict(os.environ, TESSERA_NUMPY_EXIT_STATS=str(out))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    exit_stats = json.loads(out.read_text())
    assert exit_stats["allocations"] >= 99
    assert exit_stats["live_blocks"] == 0 and exit_stats["current_bytes"] == 0


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_large_calloc_zeroes_dirty_blocks_and_stays_lazy():
    numpy_allocator.install()
    for size in (4 << 20, (4 << 20) + 123, (1 << 20) + 4095):
        for _ in range(3):
            d = np.full(size, 0xAB, dtype=np.uint8)  # dirty, back to tessera's cache
            del d
            z = np.zeros(size, dtype=np.uint8)
            assert not z.any(), size
            z[:] = 7
            del z
    # np.zeros of 256 MiB reads as zero without committing it (pages
    # dropped with MADV_DONTNEED, or fresh ones, never written), as with
    # NumPy's default handler through calloc.
    before = rss_bytes()
    big = np.zeros(256 << 20, dtype=np.uint8)
    assert big[-1] == 0 and big[12345] == 0
    assert rss_bytes() - before < 32 << 20
    del big
