#!/usr/bin/env python3
"""Writes tests/fixtures/npy/ with NumPy's own writer (np.save and
np.lib.format.write_array), for tests/format_npy.rs.

Every array holds, at row-major (logical) index i, the value
(i * 7 + 3) % 100 (bool: i % 3 == 0; complex: that value plus minus it
times 1j), so the test computes what it expects.

    python3 scripts/make_npy_fixtures.py [OUT_DIR]
    python3 scripts/make_npy_fixtures.py --check DIR   # files tessera wrote

--check loads every c_<code>.npy in DIR (tests/format_npy.rs,
writes_reference_files) with np.load and compares dtype, shape and values.
"""
import os
import sys

import numpy as np

CODES = ["b1", "u1", "i1", "i2", "i4", "i8", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]


def values(code, shape):
    i = np.arange(int(np.prod(shape, dtype=np.int64)))
    if code == "b1":
        v = i % 3 == 0
    else:
        v = (i * 7 + 3) % 100
        if code.startswith("c"):
            v = v - 1j * v
    return np.asarray(v).astype(np.dtype(code)).reshape(shape)


def check(directory):
    for code in CODES:
        path = os.path.join(directory, f"c_{code}.npy")
        got = np.load(path)
        want = values(code, (2, 3, 4))
        assert got.dtype == want.dtype, (path, got.dtype, want.dtype)
        assert got.shape == want.shape, (path, got.shape)
        assert np.array_equal(got, want), (path, got, want)
    print(f"NumPy {np.__version__} read {len(CODES)} files tessera wrote: equal")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        return check(sys.argv[2])
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "fixtures", "npy")
    os.makedirs(out, exist_ok=True)
    for code in CODES:
        np.save(os.path.join(out, f"c_{code}.npy"), values(code, (2, 3, 4)))
    for code in ["f4", "c16", "i2"]:
        np.save(os.path.join(out, f"fortran_{code}.npy"), np.asfortranarray(values(code, (2, 3, 4))))
    for code in ["i4", "f8", "c8", "u2"]:
        np.save(os.path.join(out, f"big_{code}.npy"), values(code, (2, 3, 4)).astype(">" + code))
    np.save(os.path.join(out, "scalar_f8.npy"), values("f8", ()))
    np.save(os.path.join(out, "empty_f4.npy"), values("f4", (0, 4)))
    with open(os.path.join(out, "v2_i8.npy"), "wb") as f:
        np.lib.format.write_array(f, values("i8", (5,)), version=(2, 0))
    print(f"wrote {len(os.listdir(out))} files to {out} with NumPy {np.__version__}")


if __name__ == "__main__":
    main()
