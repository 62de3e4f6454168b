#!/usr/bin/env python3
"""Writes the hostile seeds of the fuzz corpus (issue 52): archives with
two records of one name or records over the same bytes, and a GGUF file
whose tensors' data overlap, each made from a committed seed of the
same target (Python's zipfile writes a repeated name as asked, warning).
tessera refuses every one; the fuzzers mutate them from there.

    python3 scripts/make_fuzz_hostile_seeds.py   # in fuzz/corpus/

Seeds written:
  load_npz/dup_name           positional plus a second arr_0.npy
  load_npz/overlap_bomb       16 records over one deflated entry of zeros
  load_torch/dup_record       a torch archive with a second data/0
  load_torch/dup_pickle       ... with a second data.pkl
  load_torchscript/dup_pickle a TorchScript archive with a second data.pkl
  load_gguf/overlap           tensor b's data inside tensor a's
"""
import io
import os
import struct
import warnings
import zipfile
import zlib

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus")


def path(name):
    return os.path.join(CORPUS, name)


def fixed(name):
    """A stored entry's info with a fixed time: the same seeds each run."""
    return zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))


def rewrite(src, extra, out):
    """`src`'s stored records, then the (name, bytes) of `extra`: a name
    of `src` repeated gives two records of one name."""
    z = zipfile.ZipFile(path(src))
    b = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name"
        with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED) as w:
            for i in z.infolist():
                if i.compress_type == zipfile.ZIP_STORED:
                    w.writestr(fixed(i.filename), z.read(i.filename))
            for name, data in extra:
                w.writestr(fixed(name), data)
    with open(path(out), "wb") as f:
        f.write(b.getvalue())


def bomb():
    """An npz of 16 central-directory records (a0.npy .. a15.npy) over
    one deflated entry: 256 KiB of float32 zeros."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (65536,), }"
    npy = b"\x93NUMPY\x01\x00v\x00" + header.encode().ljust(117) + b"\n"
    data = npy + bytes(4 * 65536)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = c.compress(data) + c.flush()
    crc = zlib.crc32(data)
    name = b"a0.npy"
    local = struct.pack("<HHHHHIIIHH", 20, 0, 8, 0, 0, crc, len(body), len(data), len(name), 0)
    out = b"PK\x03\x04" + local + name + body
    cd = b""
    for i in range(16):
        n = b"a%d.npy" % i
        fields = (20, 20, 0, 8, 0, 0, crc, len(body), len(data), len(n), 0, 0, 0, 0, 0, 0)
        cd += b"PK\x01\x02" + struct.pack("<HHHHHHIIIHHHHHII", *fields) + n
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 16, 16, len(cd), len(out), 0)
    return out + cd + end


def gguf_overlap():
    """GGUF v3: float32 tensors a [16] at data offset 0 and b [4] at 32."""

    def string(s):
        return struct.pack("<Q", len(s)) + s

    def info(name, n, offset):
        return string(name) + struct.pack("<IQIQ", 1, n, 0, offset)

    g = b"GGUF" + struct.pack("<IQQ", 3, 2, 0) + info(b"a", 16, 0) + info(b"b", 4, 32)
    return g + bytes(-len(g) % 32) + struct.pack("<16f", *range(16))


def main():
    savez = zipfile.ZipFile(path("load_npz/savez"))
    rewrite("load_npz/positional", [("arr_0.npy", savez.read("i8.npy"))], "load_npz/dup_name")
    with open(path("load_npz/overlap_bomb"), "wb") as f:
        f.write(bomb())
    src = "load_torch/a10ecbc9094e2ebbf53044cdb968b1460000d7d5"
    names = zipfile.ZipFile(path(src)).namelist()
    z = zipfile.ZipFile(path(src))
    data0 = next(n for n in names if "/data/" in n)
    pkl = next(n for n in names if n.endswith("data.pkl"))
    rewrite(src, [(data0, bytes(len(z.read(data0))))], "load_torch/dup_record")
    rewrite(src, [(pkl, z.read(pkl))], "load_torch/dup_pickle")
    src = "load_torchscript/torchscript_module"
    z = zipfile.ZipFile(path(src))
    pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
    rewrite(src, [(pkl, z.read(pkl))], "load_torchscript/dup_pickle")
    with open(path("load_gguf/overlap"), "wb") as f:
        f.write(gguf_overlap())


if __name__ == "__main__":
    main()
