"""Every fixture and corpus file loads as the format's own tool reads it:
np.load (npy, npz), gguf-py's reader (GGUF), safetensors.numpy
(safetensors), what torch.load gave (recorded beside the torch fixtures,
and in the corpus manifest: torch itself is not needed here)."""

import json
import os
import pathlib
import zlib

import numpy as np
import pytest

import tessera
from tessera import _lib

from conftest import ROOT


def _files(sub, ext):
    return sorted((ROOT / "tests" / sub).glob(f"*{ext}"))


@pytest.mark.parametrize("path", _files("fixtures/npy", ".npy"), ids=lambda p: p.name)
@pytest.mark.parametrize("mmap", [False, True])
def test_npy_as_np_load(path, mmap):
    expected = np.load(path)
    got = tessera.load(path, mmap=mmap)
    (name, a), = got.items()
    assert a.dtype == expected.dtype.newbyteorder("=")
    assert a.shape == expected.shape
    np.testing.assert_array_equal(a, expected)


@pytest.mark.parametrize("path", _files("fixtures/npz", ".npz"), ids=lambda p: p.name)
def test_npz_as_np_load(path):
    with np.load(path) as expected:
        got = tessera.load(path)
        assert sorted(got) == sorted(expected.files)
        for name in expected.files:
            np.testing.assert_array_equal(got[name], expected[name])
            assert got[name].dtype == expected[name].dtype.newbyteorder("=")


@pytest.mark.parametrize("path", _files("fixtures/gguf", ".gguf"), ids=lambda p: p.name)
def test_gguf_as_gguf_py(path):
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(path)
    got = tessera.load(path)
    assert sorted(got) == sorted(t.name for t in reader.tensors)
    for t in reader.tensors:
        a = got[t.name]
        if t.data.dtype == np.uint8 and a.dtype != np.uint8:
            # gguf-py gives bfloat16 as the file's bytes (swapped in a
            # big-endian file: byte_order "S"); tessera in native order
            native = a.view(np.uint16)
            if reader.byte_order == "S":
                native = native.byteswap()
            assert native.tobytes() == t.data.tobytes(), t.name
        else:
            assert a.shape == t.data.shape, t.name
            np.testing.assert_array_equal(a, t.data)


def test_safetensors_as_safetensors_numpy(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = {
        "w": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "h": np.linspace(-1, 1, 7).astype(np.float16),
        "i": np.array([[1, -2], [3, -4]], dtype=np.int64),
        "b": np.array([True, False, True]),
        "scalar": np.array(2.5, dtype=np.float64),
        "empty": np.zeros((0, 3), dtype=np.int32),
    }
    path = tmp_path / "ref.safetensors"
    st.save_file(arrays, str(path), metadata={"origin": "safetensors"})
    expected = st.load_file(str(path))
    for mmap in (False, True):
        got = tessera.load(path, mmap=mmap)
        assert sorted(got) == sorted(expected)
        assert got.metadata == {"origin": "safetensors"}
        for name, e in expected.items():
            assert got[name].dtype == e.dtype and got[name].shape == e.shape, name
            np.testing.assert_array_equal(got[name], e)


def _expected_torch(path):
    lines = [json.loads(l) for l in path.read_text().splitlines()]
    return lines[:-1], lines[-1]


@pytest.mark.parametrize(
    "path",
    _files("data/torch_save", ".pt") + _files("data/torch_wild", ".pt"),
    ids=lambda p: p.name)
def test_torch_files_as_torch_load_read_them(path):
    # The values torch.load gave (scripts/make_torch_fixtures.py): name,
    # sizes and the row-major bytes of each tensor.
    expected_path = path.with_name(path.stem + ".expected.jsonl")
    if not expected_path.exists():
        pytest.skip("no recorded torch.load values")
    tensors, _ = _expected_torch(expected_path)
    got = tessera.load(path)
    for t in tensors:
        a = got[t["name"]]
        assert list(a.shape) == t["sizes"], t["name"]
        assert np.ascontiguousarray(a).tobytes().hex() == t["bytes"], t["name"]


def _corpus_cases():
    manifest = json.loads((ROOT / "tests/corpus/manifest.json").read_text())
    packages = json.loads((ROOT / "tests/corpus/packages.json").read_text())
    expect = {(p["name"], f["path"]): f["expect"]
              for p in packages["packages"] for f in p["files"]}
    return [f for f in manifest["files"] if expect.get((f["package"], f["path"])) == "match"]


@pytest.mark.skipif(not os.environ.get("TESSERA_CORPUS_DIR"),
                    reason="TESSERA_CORPUS_DIR names the corpus .ci/corpus.sh fetched")
@pytest.mark.parametrize("case", _corpus_cases(), ids=lambda c: f"{c['package']}/{c['path']}")
def test_corpus_as_the_manifest_says(case):
    path = pathlib.Path(os.environ["TESSERA_CORPUS_DIR"]) / "files" / case["package"] / case["path"]
    got = tessera.load(path, strict=not case["skip_unknown"])
    names = [t["name"] for t in case["tensors"]]
    assert sorted(got) == sorted(names)
    for t in case["tensors"]:
        a = got[t["name"]]
        assert _lib.dtype_name(a.dtype) == t["dtype"], t["name"]
        assert list(a.shape) == t["shape"], t["name"]
        crc = zlib.crc32(np.ascontiguousarray(a).tobytes())
        assert f"{crc:08x}" == t["crc32"], t["name"]
