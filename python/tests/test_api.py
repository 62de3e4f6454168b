"""The package's calls: loads that view or own memory, lifetimes, the
handle loaded in parts from several threads, saves read back by each
format's own tool, dtypes NumPy lacks, and errors as exceptions carrying
tessera's message."""

import gc
import json
import subprocess
import sys
import threading

import numpy as np
import pytest

import tessera


def _arrays():
    return {
        "embed": np.arange(64 * 16, dtype=np.float32).reshape(64, 16),
        "norm": np.linspace(0, 1, 16),
        "ids": np.array([3, 1, 4, 1, 5], dtype=np.int64),
        "mask": np.array([[True, False], [False, True]]),
        "half": np.arange(8, dtype=np.float16),
        "step": np.array(7, dtype=np.int64),
    }


def _mapped_files():
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            yield lo, hi, parts[5] if len(parts) > 5 else ""


def _file_of(a):
    address = a.__array_interface__["data"][0]
    return next((p for lo, hi, p in _mapped_files() if lo <= address < hi), "")


def test_mmap_arrays_view_the_file_read_only(tmp_path):
    path = tmp_path / "m.safetensors"
    tessera.save(_arrays(), path)
    mapped = tessera.load(path, mmap=True)
    a = mapped["embed"]
    assert _file_of(a) == str(path), "the array views the file's mapping"
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0] = 1
    copied = tessera.load(path)
    assert copied["embed"].flags.writeable and _file_of(copied["embed"]) != str(path)
    copied["embed"][0, 0] = 5  # owned memory: writable, the file unchanged
    assert tessera.load(path)["embed"][0, 0] == 0


def test_arrays_outlive_the_dict_and_the_handle(tmp_path):
    path = tmp_path / "l.safetensors"
    tessera.save(_arrays(), path)
    a = tessera.load(path, mmap=True)["embed"]
    with tessera.open(path) as c:
        row = c.load_rows("embed", 2, 4)
        one = c["norm"]
    del c
    gc.collect()
    np.testing.assert_array_equal(a, _arrays()["embed"])
    np.testing.assert_array_equal(row, _arrays()["embed"][2:4])
    np.testing.assert_array_equal(one, _arrays()["norm"])
    view = a[10:20, 3]
    del a
    gc.collect()
    np.testing.assert_array_equal(view, _arrays()["embed"][10:20, 3])


def test_a_handle_reads_only_what_is_asked(tmp_path):
    path = tmp_path / "h.safetensors"
    arrays = _arrays()
    tessera.save(arrays, path)
    with tessera.open(path) as c:
        assert sorted(c.keys()) == sorted(arrays)
        assert c.shape("embed") == (64, 16) and c.nbytes("embed") == 64 * 16 * 4
        opened = c.bytes_read
        assert 0 < opened < path.stat().st_size - 64 * 16 * 4
        rows = c.load_rows("embed", 8, 12)
        assert c.bytes_read - opened == 4 * 16 * 4
        np.testing.assert_array_equal(rows, arrays["embed"][8:12])
        some = c.load_many(["ids", "mask"])
        assert sorted(some) == ["ids", "mask"]
        assert len(c) == len(arrays) and "ids" in c
    with pytest.raises(tessera.TesseraValueError, match="closed"):
        c.load("ids")


def test_four_threads_load_from_one_handle(tmp_path):
    path = tmp_path / "t.safetensors"
    arrays = {f"w{i}": np.full((256, 64), i, dtype=np.float32) for i in range(16)}
    tessera.save(arrays, path)
    errors = []
    with tessera.open(path) as c:
        def work(k):
            try:
                for _ in range(20):
                    for i in range(k, 16, 4):
                        a = c.load(f"w{i}")
                        assert a.shape == (256, 64) and (a == i).all()
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


@pytest.mark.parametrize("ext", [".safetensors", ".pt", ".npz", ".gguf"])
def test_saves_read_back_by_tessera(tmp_path, ext):
    arrays = _arrays()
    if ext == ".gguf":
        arrays = {k: v for k, v in arrays.items() if v.dtype != np.bool_ and v.ndim > 0}
    path = tmp_path / f"s{ext}"
    tessera.save(arrays, path)
    got = tessera.load(path)
    assert sorted(got) == sorted(arrays)
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype, name
        np.testing.assert_array_equal(got[name], a)


def test_saves_read_by_each_formats_tool(tmp_path):
    arrays = _arrays()
    tessera.save({"x": arrays["embed"]}, tmp_path / "x.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), arrays["embed"])
    tessera.save(arrays, tmp_path / "a.npz")
    with np.load(tmp_path / "a.npz") as z:
        for name, a in arrays.items():
            np.testing.assert_array_equal(z[name], a)
    st = pytest.importorskip("safetensors.numpy")
    tessera.save(arrays, tmp_path / "a.safetensors", metadata={"k": "v"})
    back = st.load_file(str(tmp_path / "a.safetensors"))
    for name, a in arrays.items():
        np.testing.assert_array_equal(back[name], a)
    gguf = pytest.importorskip("gguf")
    tessera.save({"w": arrays["embed"]}, tmp_path / "a.gguf")
    t, = gguf.GGUFReader(tmp_path / "a.gguf").tensors
    np.testing.assert_array_equal(t.data, arrays["embed"])


def test_values_of_a_checkpoint_load_and_save_typed(fixtures, tmp_path):
    # torch.save's checkpoint (scripts/make_values_fixtures.py): its plain
    # values come back as Python values; objects stay in `skipped`.
    got = tessera.load(fixtures / "data" / "values" / "checkpoint.pt")
    assert got.non_tensors["global_step"] == 1234
    assert isinstance(got.non_tensors["global_step"], int)
    assert got.non_tensors["config_dict"] == {
        "n_layers": 4, "act": "gelu", "dropout": 0.1, "tied": True, "sizes": [1, 2]}
    assert got.non_tensors["hidden_dims"] == [64, 128, 256]
    assert got.non_tensors["note"] is None
    assert "args (argparse.Namespace)" in got.skipped
    assert "global_step" not in " ".join(got.skipped)
    # dict's own values() is not shadowed by them.
    assert list(got.values())[0] is got[next(iter(got))]
    values = {"step": 7, "lr": 0.5, "cfg": {"a": [1, "x"], "b": None}}
    for ext in (".pt", ".safetensors", ".gguf"):
        path = tmp_path / f"v{ext}"
        tessera.save({"w": np.arange(3, dtype=np.float32)}, path, non_tensors=values)
        back = tessera.load(path)
        assert back.non_tensors == values, ext
        assert list(back.non_tensors) == list(values), ext
        assert back.skipped == [] and "tessera.values" not in back.metadata, ext
    with pytest.raises(tessera.TesseraError, match="a tensor has this name"):
        tessera.save({"w": np.zeros(1)}, tmp_path / "x.pt", non_tensors={"w": 1})


def test_strided_and_foreign_byte_order_arrays_save(tmp_path):
    base = np.arange(60, dtype=np.float64).reshape(6, 10)
    arrays = {
        "transposed": base.T,
        "every_other": base[::2, 1::3],
        "reversed": base[::-1],
        "big_endian": base.astype(">f8"),
    }
    tessera.save(arrays, tmp_path / "v.safetensors")
    got = tessera.load(tmp_path / "v.safetensors")
    for name, a in arrays.items():
        np.testing.assert_array_equal(got[name], a)
    same = {"a": base, "b": base}  # one array under two names
    tessera.save(same, tmp_path / "same.pt")
    got = tessera.load(tmp_path / "same.pt")
    np.testing.assert_array_equal(got["a"], base)
    np.testing.assert_array_equal(got["b"], base)


def test_bfloat16_and_float8_through_ml_dtypes(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    arrays = {
        "bf16": np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16),
        "f8": np.array([0.5, -1.0], dtype=ml_dtypes.float8_e4m3fn),
    }
    path = tmp_path / "b.safetensors"
    tessera.save(arrays, path)
    for mmap in (False, True):
        got = tessera.load(path, mmap=mmap)
        for name, a in arrays.items():
            assert got[name].dtype == a.dtype, name
            assert got[name].tobytes() == a.tobytes(), name
    # safetensors' own names for them (its NumPy reader has no float8)
    raw = path.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    assert header["bf16"]["dtype"] == "BF16" and header["f8"]["dtype"] == "F8_E4M3"


def test_without_ml_dtypes_bfloat16_is_refused_naming_the_tensor(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    path = tmp_path / "b.safetensors"
    tessera.save({"bf16": np.zeros(3, dtype=ml_dtypes.bfloat16)}, path)
    code = (
        "import sys; sys.modules['ml_dtypes'] = None\n"
        "import tessera\n"
        f"try:\n    tessera.load({str(path)!r})\n"
        "except tessera.TesseraValueError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "tensor 'bf16' is BFloat16" in out and "ml_dtypes" in out, out


def test_errors_carry_tesseras_message(tmp_path):
    with pytest.raises(tessera.TesseraIOError) as e:
        tessera.load(tmp_path / "absent.pt")
    assert isinstance(e.value, OSError) and "absent.pt" in str(e.value)
    assert e.value.status_name == "TSR_ERR_IO"
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}......")
    with pytest.raises(tessera.TesseraFormatError) as e:
        tessera.load(bad)
    assert isinstance(e.value, ValueError) and str(e.value)
    with pytest.raises(tessera.TesseraValueError, match="format 'zip'"):
        tessera.load(bad, format="zip")
    with pytest.raises(tessera.TesseraValueError, match="array 'o'"):
        tessera.save({"o": np.array(["text"])}, tmp_path / "o.safetensors")
    assert not (tmp_path / "o.safetensors").exists()
    with tessera.open(_saved(tmp_path)) as c:
        with pytest.raises(tessera.TesseraValueError, match="no tensor named 'nope'"):
            c.load("nope")


def _saved(tmp_path):
    path = tmp_path / "ok.safetensors"
    tessera.save({"x": np.ones(3, dtype=np.float32)}, path)
    return path


def test_open_takes_remote_settings_by_their_variables_names(tmp_path):
    # A local path ignores them; a name tessera does not take is refused
    # naming it; a URL's bad value is refused at open, before any request.
    with tessera.open(_saved(tmp_path), settings={"TSR_REMOTE_CONCURRENCY": 16,
                                                  "AWS_REGION": "us-east-1"}) as c:
        assert c.keys() == ["x"]
    with pytest.raises(tessera.TesseraValueError, match="TSR_REMOTE_THREADS"):
        tessera.open(_saved(tmp_path), settings={"TSR_REMOTE_THREADS": 4})
    with pytest.raises(tessera.TesseraValueError, match="TSR_REMOTE_RETRIES"):
        tessera.open("s3://bucket/x.safetensors", settings={"TSR_REMOTE_RETRIES": "many"})


def test_load_and_open_take_urls(tmp_path):
    # The repository's test server (tests/remote/http_server.py) serving
    # tmp_path on 127.0.0.1: a URL loads as the file does.
    import subprocess
    import sys
    from pathlib import Path

    server = Path(__file__).resolve().parents[2] / "tests" / "remote" / "http_server.py"
    if not server.is_file():
        pytest.skip("tests/remote/http_server.py is not beside this checkout")
    path = _saved(tmp_path)
    proc = subprocess.Popen([sys.executable, str(server), "--root", str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().split()[1])
        url = f"http://127.0.0.1:{port}/ok/{path.name}"
        assert np.array_equal(tessera.load(url)["x"], tessera.load(path)["x"])
        with tessera.open(url, settings={"TSR_REMOTE_CONCURRENCY": 2}) as c:
            assert c.keys() == ["x"] and c.bytes_read > 0
    finally:
        proc.kill()
        proc.wait()
