#!/usr/bin/env python3
"""DLPack exchange between tessera (through ctypes) and NumPy.

Usage: test_dlpack_numpy.py [path/to/libtessera.so]
(default: $TESSERA_LIB, else target/debug/libtessera.so of this repository).

tessera -> NumPy: a tessera tensor is exported with tsr_tensor_to_dlpack
(or _legacy), wrapped in a PyCapsule by a small object implementing
__dlpack__ / __dlpack_device__, and read with np.from_dlpack.
NumPy -> tessera: arr.__dlpack__() gives a capsule whose pointer goes to
tsr_tensor_from_dlpack(_legacy) after the capsule is renamed "used_..."
(tessera consumes the managed tensor, on success and on error alike).
Both directions check values, that the memory is shared, and that the
producer's deleter runs when the consumer lets go.

Prints "SKIP: ..." and exits 0 when NumPy (>= 1.22) is not installed.
"""

import ctypes
import gc
import os
import sys

# ---- the C side -----------------------------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]


class TsrDevice(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int8), ("index", ctypes.c_int8)]


TSR_OK = 0
TSR_ERR_READ_ONLY = 13
TSR_CPU = 0
TSR_DTYPES = {  # c10 ScalarType numbers -> NumPy dtype names
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
    6: "float32", 7: "float64", 9: "complex64", 10: "complex128", 11: "bool",
    27: "uint16", 28: "uint32", 29: "uint64",
}

_void_pp = ctypes.POINTER(ctypes.c_void_p)


def load(path):
    lib = ctypes.CDLL(path)
    sig = {
        "tsr_tensor_empty": (ctypes.c_int32, [ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                                              ctypes.c_int8, TsrDevice, _void_pp]),
        "tsr_tensor_transpose": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_int64,
                                                  ctypes.c_int64, _void_pp]),
        "tsr_tensor_decref": (ctypes.c_int32, [ctypes.c_void_p]),
        "tsr_tensor_data": (ctypes.c_void_p, [ctypes.c_void_p]),
        "tsr_tensor_ndim": (ctypes.c_int64, [ctypes.c_void_p]),
        "tsr_tensor_sizes": (ctypes.POINTER(ctypes.c_int64), [ctypes.c_void_p]),
        "tsr_tensor_strides": (ctypes.POINTER(ctypes.c_int64), [ctypes.c_void_p]),
        "tsr_tensor_dtype": (ctypes.c_int8, [ctypes.c_void_p]),
        "tsr_tensor_storage": (ctypes.c_void_p, [ctypes.c_void_p]),
        "tsr_storage_decref": (ctypes.c_int32, [ctypes.c_void_p]),
        "tsr_storage_downgrade": (ctypes.c_int32, [ctypes.c_void_p, _void_pp]),
        "tsr_weak_storage_expired": (ctypes.c_bool, [ctypes.c_void_p]),
        "tsr_weak_storage_decref": (ctypes.c_int32, [ctypes.c_void_p]),
        "tsr_tensor_to_dlpack": (ctypes.c_int32, [ctypes.c_void_p, _void_pp]),
        "tsr_tensor_to_dlpack_legacy": (ctypes.c_int32, [ctypes.c_void_p, _void_pp]),
        "tsr_tensor_from_dlpack": (ctypes.c_int32, [ctypes.c_void_p, _void_pp]),
        "tsr_tensor_from_dlpack_legacy": (ctypes.c_int32, [ctypes.c_void_p, _void_pp]),
        "tsr_last_error_message": (ctypes.c_char_p, []),
        "tsr_tensor_is_read_only": (ctypes.c_bool, [ctypes.c_void_p]),
        "tsr_neg": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_void_p, _void_pp]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


def check(lib, status, what):
    if status != TSR_OK:
        raise AssertionError(f"{what}: status {status}: {lib.tsr_last_error_message().decode()}")


# ---- PyCapsule helpers (the GIL is held: PYFUNCTYPE) ------------------------

_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", _api))
_capsule_get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _api))
# In a capsule destructor the capsule is being freed: pass it as a raw pointer.
_capsule_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_capsule_get_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))

# Capsule names must outlive the capsules: module-level constants.
NAME_LEGACY = b"dltensor"
NAME_VERSIONED = b"dltensor_versioned"
NAME_USED_LEGACY = b"used_dltensor"
NAME_USED_VERSIONED = b"used_dltensor_versioned"


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    """Deletes a managed tensor nobody consumed (the capsule kept its name)."""
    for name, struct in ((NAME_LEGACY, DLManagedTensor),
                         (NAME_VERSIONED, DLManagedTensorVersioned)):
        if _capsule_valid_raw(capsule, name):
            m = ctypes.cast(_capsule_get_raw(capsule, name), ctypes.POINTER(struct))
            m.contents.deleter(m)


class TesseraExport:
    """A tessera tensor seen through the Python DLPack protocol."""

    def __init__(self, lib, tensor, allow_versioned=True):
        self.lib, self.tensor, self.allow_versioned = lib, tensor, allow_versioned
        self.capsule_names = []

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("tessera exports share memory; copy=True is not offered")
        out = ctypes.c_void_p()
        if self.allow_versioned and max_version is not None and max_version[0] >= 1:
            check(self.lib, self.lib.tsr_tensor_to_dlpack(self.tensor, ctypes.byref(out)),
                  "tsr_tensor_to_dlpack")
            name = NAME_VERSIONED
        else:
            check(self.lib, self.lib.tsr_tensor_to_dlpack_legacy(self.tensor, ctypes.byref(out)),
                  "tsr_tensor_to_dlpack_legacy")
            name = NAME_LEGACY
        self.capsule_names.append(name)
        return _capsule_new(out.value, name,
                            ctypes.cast(_capsule_destructor, ctypes.c_void_p).value)


class LegacyOnlyExport(TesseraExport):
    """A producer from before DLPack 1.0: __dlpack__ takes only `stream`."""

    def __dlpack__(self, stream=None):
        return TesseraExport.__dlpack__(self, stream=stream)


# ---- tessera side helpers -------------------------------------------------


def tensor_empty(lib, sizes, dtype):
    arr = (ctypes.c_int64 * len(sizes))(*sizes)
    out = ctypes.c_void_p()
    check(lib, lib.tsr_tensor_empty(len(sizes), arr, dtype, TsrDevice(TSR_CPU, -1),
                                    ctypes.byref(out)), "tsr_tensor_empty")
    return out.value


def sizes_strides(lib, t):
    n = lib.tsr_tensor_ndim(t)
    sz, st = lib.tsr_tensor_sizes(t), lib.tsr_tensor_strides(t)
    return [sz[i] for i in range(n)], [st[i] for i in range(n)]


def weak_storage(lib, t):
    s = lib.tsr_tensor_storage(t)
    w = ctypes.c_void_p()
    check(lib, lib.tsr_storage_downgrade(s, ctypes.byref(w)), "tsr_storage_downgrade")
    check(lib, lib.tsr_storage_decref(s), "tsr_storage_decref")
    return w.value


# ---- tests ----------------------------------------------------------------


def test_tessera_to_numpy(lib, np, versioned):
    base = tensor_empty(lib, [2, 3], 6)
    floats = (ctypes.c_float * 6).from_address(lib.tsr_tensor_data(base))
    for i in range(6):
        floats[i] = float(i)
    t = ctypes.c_void_p()
    check(lib, lib.tsr_tensor_transpose(base, 0, 1, ctypes.byref(t)), "tsr_tensor_transpose")
    t = t.value
    weak = weak_storage(lib, base)

    producer = TesseraExport(lib, t) if versioned else LegacyOnlyExport(lib, t)
    arr = np.from_dlpack(producer)
    expected_name = NAME_VERSIONED if versioned else NAME_LEGACY
    assert producer.capsule_names == [expected_name], producer.capsule_names
    assert arr.shape == (3, 2) and arr.dtype == np.float32, (arr.shape, arr.dtype)
    assert arr.strides == (4, 12), arr.strides
    assert arr.ctypes.data == lib.tsr_tensor_data(t), "NumPy copied instead of sharing"
    assert arr.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]], arr.tolist()
    floats[4] = 42.0  # base[1, 1] is element [1, 1] of the transpose
    assert arr[1, 1] == 42.0, "a write through tessera is not seen by NumPy"
    if versioned:
        # READ_ONLY is not set, so NumPy makes the array writable (NumPy
        # marks arrays from legacy capsules read-only: they carry no flags).
        assert arr.flags.writeable
        arr[0, 1] = -3.0
        assert floats[3] == -3.0, "a write through NumPy is not seen by tessera"

    # The export holds the storage: the array outlives the tessera tensors.
    check(lib, lib.tsr_tensor_decref(t), "tsr_tensor_decref")
    check(lib, lib.tsr_tensor_decref(base), "tsr_tensor_decref")
    del floats
    gc.collect()
    assert not lib.tsr_weak_storage_expired(weak)
    assert arr[2, 1] == 5.0
    del arr, producer
    gc.collect()
    assert lib.tsr_weak_storage_expired(weak), "tessera's deleter did not run"
    check(lib, lib.tsr_weak_storage_decref(weak), "tsr_weak_storage_decref")


def test_tessera_dtypes_to_numpy(lib, np):
    for code, name in TSR_DTYPES.items():
        t = tensor_empty(lib, [3], code)
        arr = np.from_dlpack(TesseraExport(lib, t))
        assert arr.dtype == np.dtype(name), (code, arr.dtype, name)
        assert arr.ctypes.data == lib.tsr_tensor_data(t)
        del arr
        check(lib, lib.tsr_tensor_decref(t), "tsr_tensor_decref")


def import_capsule(lib, capsule, versioned):
    """Hands a NumPy capsule to tessera: returns (status, tensor or None)."""
    name, used = (NAME_VERSIONED, NAME_USED_VERSIONED) if versioned else (NAME_LEGACY,
                                                                          NAME_USED_LEGACY)
    ptr = _capsule_get(capsule, name)
    # tessera consumes the managed tensor whatever the outcome: rename first
    # so the capsule's destructor does not delete it again.
    assert _capsule_set_name(capsule, used) == 0
    out = ctypes.c_void_p()
    fn = lib.tsr_tensor_from_dlpack if versioned else lib.tsr_tensor_from_dlpack_legacy
    status = fn(ptr, ctypes.byref(out))
    return status, out.value


def test_numpy_to_tessera(lib, np, versioned):
    arr = np.arange(24, dtype=np.float64).reshape(4, 6)[1:, ::2]
    refs = sys.getrefcount(arr)
    capsule = arr.__dlpack__(max_version=(1, 1)) if versioned else arr.__dlpack__()
    status, t = import_capsule(lib, capsule, versioned)
    check(lib, status, "tsr_tensor_from_dlpack")
    del capsule
    assert sys.getrefcount(arr) == refs + 1, "NumPy's managed tensor should hold the array"
    assert sizes_strides(lib, t) == ([3, 3], [6, 2]), sizes_strides(lib, t)
    assert lib.tsr_tensor_dtype(t) == 7  # Double
    assert lib.tsr_tensor_data(t) == arr.ctypes.data, "tessera does not view NumPy's memory"
    first = ctypes.c_double.from_address(lib.tsr_tensor_data(t))
    assert first.value == 6.0
    first.value = -1.0
    assert arr[0, 0] == -1.0, "a write through tessera is not seen by NumPy"
    del first
    check(lib, lib.tsr_tensor_decref(t), "tsr_tensor_decref")
    assert sys.getrefcount(arr) == refs, "NumPy's deleter did not run exactly once"


def test_numpy_read_only_imports_read_only(lib, np):
    arr = np.arange(4, dtype=np.int32)
    arr.flags.writeable = False
    refs = sys.getrefcount(arr)
    capsule = arr.__dlpack__(max_version=(1, 1))
    status, t = import_capsule(lib, capsule, True)
    check(lib, status, "tsr_tensor_from_dlpack of a read-only array")
    del capsule
    assert lib.tsr_tensor_is_read_only(t), "NumPy's READ_ONLY flag was not kept"
    assert lib.tsr_tensor_data(t) == arr.ctypes.data, "tessera does not view NumPy's memory"
    # an in-place write through tessera (neg into itself) is refused
    out = ctypes.c_void_p()
    status = lib.tsr_neg(t, t, ctypes.byref(out))
    assert status == TSR_ERR_READ_ONLY and out.value is None, (status, out.value)
    msg = lib.tsr_last_error_message()
    assert msg.startswith(b"tsr_neg") and b"read-only" in msg, msg
    assert list(arr) == [0, 1, 2, 3], arr
    check(lib, lib.tsr_tensor_decref(t), "tsr_tensor_decref")
    assert sys.getrefcount(arr) == refs, "NumPy's deleter did not run exactly once"


def main():
    try:
        import numpy as np
    except ImportError:
        print("SKIP: numpy not installed")
        return 0
    version = tuple(int(x) for x in np.__version__.split(".")[:2])
    if version < (1, 22):
        print(f"SKIP: numpy {np.__version__} has no np.from_dlpack (needs >= 1.22)")
        return 0
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = (sys.argv[1] if len(sys.argv) > 1 else
            os.environ.get("TESSERA_LIB", os.path.join(root, "target", "debug", "libtessera.so")))
    lib = load(path)
    print(f"numpy {np.__version__}, library {path}")

    try:
        np.arange(1).__dlpack__(max_version=(1, 1))
        numpy_versioned = True
    except TypeError:
        numpy_versioned = False  # NumPy < 2.1 exports legacy capsules only

    tests = [
        ("tessera_to_numpy_legacy", lambda: test_tessera_to_numpy(lib, np, False)),
        ("tessera_dtypes_to_numpy", lambda: test_tessera_dtypes_to_numpy(lib, np)),
        ("numpy_to_tessera_legacy", lambda: test_numpy_to_tessera(lib, np, False)),
    ]
    if version >= (2, 1):
        tests.append(("tessera_to_numpy_versioned", lambda: test_tessera_to_numpy(lib, np, True)))
    else:
        print(f"note: numpy {np.__version__} does not request versioned capsules")
    if numpy_versioned:
        tests += [
            ("numpy_to_tessera_versioned", lambda: test_numpy_to_tessera(lib, np, True)),
            ("numpy_read_only_imports_read_only",
             lambda: test_numpy_read_only_imports_read_only(lib, np)),
        ]
    else:
        print(f"note: numpy {np.__version__} cannot export versioned capsules")
    for name, test in tests:
        test()
        print(f"ok {name}")
    print(f"PASS: {len(tests)} tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
