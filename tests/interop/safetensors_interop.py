"""The Python side of the safetensors interop check (.ci/serialization-interop.sh).

    python3 safetensors_interop.py check PATH   read tessera's file with the
                                                safetensors package (numpy)
    python3 safetensors_interop.py write PATH   write the reference dict

The reference dict is the one tests/interop/safetensors_driver.c writes and
checks: "t_<dtype>" of shape (2, 3, 4) with element i = (i * 7 + 3) % 100
(bool: i % 3 == 0), "scalar" (float32 0-dim 2.5), "empty" (float32 (0, 4)),
metadata {"origin": ..., "format": "pt"}.
"""
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

DTYPES = ["float32", "float64", "float16", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool"]


def reference():
    i = np.arange(24)
    out = {}
    for name in DTYPES:
        v = (i % 3 == 0) if name == "bool" else ((i * 7 + 3) % 100).astype(name)
        out["t_" + name] = v.reshape(2, 3, 4)
    out["scalar"] = np.array(2.5, dtype=np.float32)
    out["empty"] = np.zeros((0, 4), dtype=np.float32)
    return out


def check(path):
    got = load_file(path)
    want = reference()
    assert sorted(got) == sorted(want), (sorted(got), sorted(want))
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
        assert g.shape == w.shape, (name, g.shape, w.shape)
        assert np.array_equal(g, w), name
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    assert meta == {"origin": "tessera", "format": "pt"}, meta
    print(f"safetensors (Python) read {path}: {len(got)} tensors, values and metadata match")


def write(path):
    save_file(reference(), path, metadata={"origin": "safetensors-python", "format": "pt"})


if __name__ == "__main__":
    {"check": check, "write": write}[sys.argv[1]](sys.argv[2])
