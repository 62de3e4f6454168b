#!/usr/bin/env python3
"""Writes tests/fixtures/npz/ with NumPy's own writers (np.savez and
np.savez_compressed), for tests/format_npz.rs.

Every array holds the values of scripts/make_npy_fixtures.py: at
row-major index i, (i * 7 + 3) % 100 (bool: i % 3 == 0; complex: that
value minus it times 1j).

    python3 scripts/make_npz_fixtures.py [OUT_DIR]
    python3 scripts/make_npz_fixtures.py --check DIR   # files tessera wrote

--check loads DIR/tessera.npz (tests/format_npz.rs, writes_reference_file,
with TESSERA_NPZ_OUT=DIR) with np.load and compares every array's dtype,
shape and values with ARRAYS.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from make_npy_fixtures import values  # noqa: E402

# name -> (code, shape, order: "C", "F" or ">" for big-endian)
ARRAYS = {
    "f4": ("f4", (2, 3, 4), "C"),
    "i8": ("i8", (5,), "C"),
    "b1": ("b1", (3, 2), "C"),
    "u2": ("u2", (4,), "C"),
    "c16_fortran": ("c16", (2, 3, 4), "F"),
    "i4_big": ("i4", (2, 3), ">"),
    "f8_scalar": ("f8", (), "C"),
    "f2_empty": ("f2", (0, 4), "C"),
    "layer.0/weight": ("f4", (3, 2), "C"),
}


def arrays():
    out = {}
    for name, (code, shape, order) in ARRAYS.items():
        v = values(code, shape)
        if order == "F":
            v = np.asfortranarray(v)
        elif order == ">":
            v = v.astype(">" + code)
        out[name] = v
    return out


def check(directory):
    path = os.path.join(directory, "tessera.npz")
    with np.load(path) as z:
        assert sorted(z.files) == sorted(ARRAYS), (z.files, list(ARRAYS))
        for name, want in arrays().items():
            got = z[name]
            assert got.dtype == want.dtype.newbyteorder("=") or got.dtype == want.dtype, (name, got.dtype)
            assert got.shape == want.shape, (name, got.shape)
            assert np.array_equal(got, want), (name, got, want)
    print(f"NumPy {np.__version__} read {len(ARRAYS)} arrays of the npz tessera wrote: equal")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        return check(sys.argv[2])
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "fixtures", "npz")
    os.makedirs(out, exist_ok=True)
    a = arrays()
    np.savez(os.path.join(out, "savez.npz"), **a)
    np.savez_compressed(os.path.join(out, "savez_compressed.npz"), **a)
    # Positional arrays are named arr_0, arr_1, ...
    np.savez(os.path.join(out, "positional.npz"), a["f4"], a["i8"])
    np.savez(os.path.join(out, "empty.npz"))
    print(f"wrote {len(os.listdir(out))} files to {out} with NumPy {np.__version__}")


if __name__ == "__main__":
    main()
