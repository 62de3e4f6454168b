"""DLPack out (`Checkpoint.tensor` -> `tessera.Tensor`): NumPy's
from_dlpack everywhere, torch's where torch is installed; the export
shares tessera's memory, keeps it alive, says read-only, and an
unconsumed capsule gives the memory back."""

import gc
import json
import struct

import numpy as np
import pytest

import tessera


def _address(a):
    return a.__array_interface__["data"][0]


def _write_safetensors(path, tensors):
    """A safetensors file written by hand: (name, dtype, shape, bytes)."""
    header, offset, blobs = {}, 0, []
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def _bf16_bytes(values):
    # bfloat16 is the upper half of float32: exact for these values.
    f32 = np.asarray(values, dtype=np.float32).view(np.uint32)
    return (f32 >> 16).astype("<u2").tobytes()


BF16 = [1.0, -2.5, 0.15625, 32768.0, -0.0, 7.0]


@pytest.fixture
def ckpt_path(tmp_path):
    path = tmp_path / "d.safetensors"
    tessera.save({"w": np.arange(24, dtype=np.float32).reshape(4, 6),
                  "ids": np.array([5, 6, 7], dtype=np.int64)}, path)
    return path


def test_numpy_from_dlpack_shares_tessera_memory(ckpt_path):
    with tessera.open(ckpt_path) as ckpt:
        t = ckpt.tensor("w")
        assert (t.shape, t.dtype, t.name) == ((4, 6), "float32", "w")
        a = np.from_dlpack(t)
        view = t.numpy()
    np.testing.assert_array_equal(a, np.arange(24, dtype=np.float32).reshape(4, 6))
    assert _address(a) == _address(view), "one memory behind both"
    view[1, 2] = -1  # a loaded (not mapped) tensor is writable
    assert a[1, 2] == -1
    # The exported array outlives the tensor and the checkpoint.
    del t, view, ckpt
    gc.collect()
    assert a.sum() == np.arange(24).sum() - 8 - 1


def test_mapped_tensor_exports_read_only(ckpt_path):
    with tessera.open(ckpt_path, mmap=True) as ckpt:
        t = ckpt.tensor("ids")
    assert t.read_only
    a = np.from_dlpack(t)  # NumPy >= 2.1 asks for a versioned capsule
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, [5, 6, 7])
    # The legacy struct cannot say read-only: tessera refuses it.
    with pytest.raises(tessera.TesseraError, match="read-only") as e:
        t.__dlpack__()
    assert e.value.status_name == "TSR_ERR_READ_ONLY"


def test_dlpack_device_and_refused_requests(ckpt_path):
    t = tessera.open(ckpt_path).tensor("w")
    assert t.__dlpack_device__() == (1, 0)  # kDLCPU
    with pytest.raises(BufferError, match="copy=True"):
        t.__dlpack__(max_version=(1, 0), copy=True)
    with pytest.raises(BufferError, match="not DLPack device"):
        t.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream=7"):
        t.__dlpack__(stream=7)


def test_unconsumed_capsule_releases_the_storage(ckpt_path):
    from tessera import numpy_allocator  # tessera's CPU allocator statistics

    ckpt = tessera.open(ckpt_path)
    before = numpy_allocator.stats()
    t = ckpt.tensor("w")
    caps = [t.__dlpack__(max_version=(1, 0)), t.__dlpack__()]
    del t
    gc.collect()
    live = numpy_allocator.stats()
    assert live["live_blocks"] > before["live_blocks"], "the capsules hold the storage"
    del caps
    gc.collect()
    assert numpy_allocator.stats()["live_blocks"] == before["live_blocks"]


def test_bfloat16_goes_out_without_ml_dtypes(tmp_path):
    path = tmp_path / "bf.safetensors"
    _write_safetensors(path, [("h", "BF16", (2, 3), _bf16_bytes(BF16))])
    t = tessera.open(path).tensor("h")
    assert t.dtype == "bfloat16" and t.shape == (2, 3)
    # NumPy has no bfloat16: its from_dlpack refuses the dtype, and that
    # error reaches the caller (the unconsumed capsule's destructor, run
    # while NumPy raises, keeps it).
    with pytest.raises(Exception, match="(?i)dtype") as e:
        np.from_dlpack(t)
    assert not isinstance(e.value, SystemError)


def test_torch_from_dlpack(tmp_path, ckpt_path):
    torch = pytest.importorskip("torch")
    with tessera.open(ckpt_path) as ckpt:
        t = ckpt.tensor("w")
        x = torch.from_dlpack(t)
        view = t.numpy()
    assert x.dtype == torch.float32 and tuple(x.shape) == (4, 6)
    assert x.data_ptr() == _address(view)
    x[0, 0] = 42
    assert view[0, 0] == 42
    path = tmp_path / "bf.safetensors"
    _write_safetensors(path, [("h", "BF16", (2, 3), _bf16_bytes(BF16))])
    h = torch.from_dlpack(tessera.open(path).tensor("h"))
    assert h.dtype == torch.bfloat16
    assert h.float().flatten().tolist() == BF16
