#!/usr/bin/env python3
"""Writes tests/fixtures/gguf/ with llama.cpp's own writer (the `gguf`
package's GGUFWriter), for tests/format_gguf.rs.

Plain tensors hold, at row-major (c10 order) index i, the value
(i * 7 + 3) % 100 in their dtype; quantized tensors hold the raw block
bytes (i * 7 + 3) % 256 (never dequantized: tessera keeps the blocks).

    python3 scripts/make_gguf_fixtures.py [OUT_DIR]
    python3 scripts/make_gguf_fixtures.py --check DIR   # files tessera wrote

It also writes big_endian.gguf: the same keys and tensors in a big-endian
file (GGUFWriter's endianess=BIG: every number of the header, the keys
and the plain tensors byte-swapped; bf16 given as its big-endian bytes,
as a big-endian machine holds them; quantized blocks are bytes, kept as
they are), and checks that GGUFReader reads back from it the values this
script wrote.

--check reads DIR/tessera.gguf (tests/format_gguf.rs,
writes_reference_file, with TESSERA_GGUF_OUT=DIR: the fixture loaded and
saved again by tessera) with GGUFReader and compares every key's type and
value and every tensor's type, shape and bytes with what this script
wrote.
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES

# name -> (numpy dtype or None for bf16, c10 shape)
PLAIN = {
    "f32": (np.float32, (2, 3, 4)),
    "f16": (np.float16, (3, 4)),
    "f64": (np.float64, (5,)),
    "i8": (np.int8, (2, 2)),
    "i16": (np.int16, (4,)),
    "i32": (np.int32, (2, 3)),
    "i64": (np.int64, (3,)),
    "blk.0.attn_q.weight": (np.float32, (4, 8)),
}
# name -> (type, logical c10 shape)
QUANT = {
    "q4_0": (Q.Q4_0, (2, 64)),
    "q8_0": (Q.Q8_0, (3, 32)),
    "q4_k": (Q.Q4_K, (2, 256)),
    "q6_k": (Q.Q6_K, (1, 256)),
    "iq4_nl": (Q.IQ4_NL, (2, 32)),
}
KV = [
    ("test.u8", "add_uint8", 200),
    ("test.i8", "add_int8", -100),
    ("test.u16", "add_uint16", 60000),
    ("test.i16", "add_int16", -30000),
    ("test.u32", "add_uint32", 4000000000),
    ("test.i32", "add_int32", -2000000000),
    ("test.u64", "add_uint64", 2**63 + 5),
    ("test.i64", "add_int64", -(2**62)),
    ("test.f32", "add_float32", 0.5),
    ("test.f64", "add_float64", -1.25),
    ("test.bool", "add_bool", True),
    ("test.string", "add_string", "héllo wörld"),
    ("test.strings", "add_array", ["a", "b c", "\"q\""]),
    ("test.ints", "add_array", [1, -2, 3]),
    ("test.floats", "add_array", [0.5, 1.5]),
]


def plain_values(dtype, shape):
    i = np.arange(int(np.prod(shape, dtype=np.int64)))
    return ((i * 7 + 3) % 100).astype(dtype).reshape(shape)


def quant_bytes(qtype, shape):
    block, size = GGML_QUANT_SIZES[qtype]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    row_bytes = shape[-1] // block * size
    i = np.arange(rows * row_bytes)
    return ((i * 7 + 3) % 256).astype(np.uint8).reshape(*shape[:-1], row_bytes)


def bf16_bytes(shape, big=False):
    f = plain_values(np.float32, shape)
    hi = (f.view(np.uint32) >> 16).astype(">u2" if big else "<u2")
    return hi.view(np.uint8).reshape(*shape[:-1], shape[-1] * 2)


def write(path, alignment=None, big=False):
    endian = gguf.GGUFEndian.BIG if big else gguf.GGUFEndian.LITTLE
    w = gguf.GGUFWriter(path, arch="tessera-test", endianess=endian)
    if alignment:
        w.add_custom_alignment(alignment)
    for key, method, value in KV:
        getattr(w, method)(key, value)
    for name, (dtype, shape) in PLAIN.items():
        w.add_tensor(name, plain_values(dtype, shape))
    w.add_tensor("bf16", bf16_bytes((2, 4), big), raw_dtype=Q.BF16)
    for name, (qtype, shape) in QUANT.items():
        w.add_tensor(name, quant_bytes(qtype, shape), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check(path, big=False):
    """Checks with GGUFReader that the file at `path` holds the keys and
    tensors write() writes (bf16 compared as its bytes, big-endian in a
    big-endian file)."""
    r = gguf.GGUFReader(path)
    assert r.endianess == (gguf.GGUFEndian.BIG if big else gguf.GGUFEndian.LITTLE), r.endianess
    for key, _, want in KV:
        got = r.fields[key].contents()
        if isinstance(want, float):
            assert abs(got - want) < 1e-6, (key, got, want)
        else:
            assert got == want, (key, got, want)
    assert r.fields["general.architecture"].contents() == "tessera-test"
    tensors = {t.name: t for t in r.tensors}
    for name, (dtype, shape) in PLAIN.items():
        t = tensors[name]
        assert tuple(int(d) for d in reversed(t.shape)) == shape, (name, t.shape)
        assert np.array_equal(np.asarray(t.data).reshape(shape), plain_values(dtype, shape)), name
    t = tensors["bf16"]
    assert t.tensor_type == Q.BF16, t.tensor_type
    assert np.array_equal(np.asarray(t.data).view(np.uint8).reshape(-1), bf16_bytes((2, 4), big).reshape(-1))
    for name, (qtype, shape) in QUANT.items():
        t = tensors[name]
        assert t.tensor_type == qtype, (name, t.tensor_type)
        assert tuple(int(d) for d in reversed(t.shape)) == shape, (name, t.shape)
        assert np.array_equal(np.asarray(t.data).reshape(-1), quant_bytes(qtype, shape).reshape(-1)), name
    from importlib.metadata import version
    print(f"gguf {version('gguf')} GGUFReader read "
          f"{len(KV)} keys and {len(tensors)} tensors of {path}: equal")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        return check(os.path.join(sys.argv[2], "tessera.gguf"))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "fixtures", "gguf")
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "gguf_py.gguf"))
    write(os.path.join(out, "align64.gguf"), alignment=64)
    # Version 2 has version 3's layout (3 added big-endian files only).
    with open(os.path.join(out, "gguf_py.gguf"), "rb") as f:
        b = bytearray(f.read())
    b[4:8] = (2).to_bytes(4, "little")
    with open(os.path.join(out, "v2.gguf"), "wb") as f:
        f.write(b)
    write(os.path.join(out, "big_endian.gguf"), big=True)
    check(os.path.join(out, "big_endian.gguf"), big=True)
    print(f"wrote {len(os.listdir(out))} files to {out}")


if __name__ == "__main__":
    main()
