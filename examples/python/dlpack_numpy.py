#!/usr/bin/env python3
"""Exchanging tensors between tessera and NumPy through DLPack, from Python.

tessera is a C library: this example loads libtessera.so with ctypes and
moves tensors both ways without copying.

- tessera -> NumPy: a small producer object implements the Python DLPack
  protocol (__dlpack__ / __dlpack_device__) by exporting a tessera tensor
  with tsr_tensor_to_dlpack and wrapping the result in a PyCapsule;
  np.from_dlpack reads it. NumPy then holds a reference to tessera's
  storage, which outlives the tessera handles.
- NumPy -> tessera: arr.__dlpack__() gives a capsule; its DLManagedTensor is
  handed to tsr_tensor_from_dlpack, which consumes it (the capsule is
  renamed "used_..." first, as the protocol requires of a consumer).

Usage: dlpack_numpy.py [path/to/libtessera.so]
(default: $TESSERA_LIB, else target/debug or target/release of this
repository). Prints "SKIP: numpy not installed" and exits 0 without NumPy.
"""

import ctypes
import gc
import os
import sys

# ---- DLPack and tessera declarations (see include/tessera.h) --------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]


class TsrDevice(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int8), ("index", ctypes.c_int8)]


TSR_OK, TSR_CPU, TSR_FLOAT = 0, 0, 6
HANDLE = ctypes.c_void_p
OUT = ctypes.POINTER(ctypes.c_void_p)


def load_tessera(path):
    lib = ctypes.CDLL(path)
    signatures = {
        "tsr_version": (ctypes.c_char_p, []),
        "tsr_last_error_message": (ctypes.c_char_p, []),
        "tsr_dtype_name": (ctypes.c_char_p, [ctypes.c_int8]),
        "tsr_tensor_empty": (ctypes.c_int32, [ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                                              ctypes.c_int8, TsrDevice, OUT]),
        "tsr_tensor_transpose": (ctypes.c_int32, [HANDLE, ctypes.c_int64, ctypes.c_int64, OUT]),
        "tsr_tensor_decref": (ctypes.c_int32, [HANDLE]),
        "tsr_tensor_data": (ctypes.c_void_p, [HANDLE]),
        "tsr_tensor_ndim": (ctypes.c_int64, [HANDLE]),
        "tsr_tensor_numel": (ctypes.c_int64, [HANDLE]),
        "tsr_tensor_sizes": (ctypes.POINTER(ctypes.c_int64), [HANDLE]),
        "tsr_tensor_strides": (ctypes.POINTER(ctypes.c_int64), [HANDLE]),
        "tsr_tensor_dtype": (ctypes.c_int8, [HANDLE]),
        "tsr_tensor_storage": (HANDLE, [HANDLE]),
        "tsr_storage_decref": (ctypes.c_int32, [HANDLE]),
        "tsr_storage_downgrade": (ctypes.c_int32, [HANDLE, OUT]),
        "tsr_weak_storage_expired": (ctypes.c_bool, [HANDLE]),
        "tsr_weak_storage_decref": (ctypes.c_int32, [HANDLE]),
        "tsr_tensor_to_dlpack": (ctypes.c_int32, [HANDLE, OUT]),
        "tsr_tensor_to_dlpack_legacy": (ctypes.c_int32, [HANDLE, OUT]),
        "tsr_tensor_from_dlpack": (ctypes.c_int32, [ctypes.c_void_p, OUT]),
        "tsr_tensor_from_dlpack_legacy": (ctypes.c_int32, [ctypes.c_void_p, OUT]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def check(lib, status, what):
    if status != TSR_OK:
        raise RuntimeError(f"{what}: {lib.tsr_last_error_message().decode()}")


# ---- PyCapsule functions of the running interpreter (GIL held) ------------

_py = ctypes.pythonapi
capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                ctypes.c_void_p)(("PyCapsule_New", _py))
capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _py))
capsule_rename = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _py))
# Inside a capsule destructor the capsule is a bare pointer.
capsule_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _py))
capsule_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _py))

VERSIONED, LEGACY = b"dltensor_versioned", b"dltensor"
USED_VERSIONED, USED_LEGACY = b"used_dltensor_versioned", b"used_dltensor"


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def delete_unconsumed(capsule):
    """Capsule destructor: runs the export's deleter if no consumer took it."""
    for name, struct in ((VERSIONED, DLManagedTensorVersioned), (LEGACY, DLManagedTensor)):
        if capsule_is_valid_raw(capsule, name):
            managed = ctypes.cast(capsule_pointer_raw(capsule, name), ctypes.POINTER(struct))
            managed.contents.deleter(managed)


class TesseraTensor:
    """A tessera tensor handle that NumPy can read through DLPack."""

    def __init__(self, lib, handle):
        self.lib, self.handle = lib, handle

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("tessera exports share memory; it does not copy")
        out = ctypes.c_void_p()
        if max_version is not None and max_version[0] >= 1:
            check(self.lib, self.lib.tsr_tensor_to_dlpack(self.handle, ctypes.byref(out)),
                  "tsr_tensor_to_dlpack")
            name = VERSIONED
        else:  # a consumer from before DLPack 1.0
            check(self.lib, self.lib.tsr_tensor_to_dlpack_legacy(self.handle, ctypes.byref(out)),
                  "tsr_tensor_to_dlpack_legacy")
            name = LEGACY
        return capsule_new(out.value, name, ctypes.cast(delete_unconsumed, ctypes.c_void_p).value)


def from_numpy(lib, array):
    """A new tessera tensor viewing `array`'s memory (the caller decrefs it)."""
    try:
        capsule, name, used = array.__dlpack__(max_version=(1, 1)), VERSIONED, USED_VERSIONED
        importer = lib.tsr_tensor_from_dlpack
    except TypeError:  # NumPy < 2.1 exports legacy capsules only
        capsule, name, used = array.__dlpack__(), LEGACY, USED_LEGACY
        importer = lib.tsr_tensor_from_dlpack_legacy
    managed = capsule_pointer(capsule, name)
    capsule_rename(capsule, used)  # tessera consumes it, on success and on failure
    out = ctypes.c_void_p()
    check(lib, importer(managed, ctypes.byref(out)), "tsr_tensor_from_dlpack")
    return out.value


def describe(lib, t):
    n = lib.tsr_tensor_ndim(t)
    sizes, strides = lib.tsr_tensor_sizes(t), lib.tsr_tensor_strides(t)
    dtype = lib.tsr_dtype_name(lib.tsr_tensor_dtype(t)).decode()
    return f"{dtype}, sizes {[sizes[i] for i in range(n)]}, strides {[strides[i] for i in range(n)]}"


def default_library():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for profile in ("debug", "release"):
        path = os.path.join(root, "target", profile, "libtessera.so")
        if os.path.exists(path):
            return path
    return "libtessera.so"


def main():
    try:
        import numpy as np
    except ImportError:
        print("SKIP: numpy not installed")
        return 0
    if not hasattr(np, "from_dlpack"):
        print(f"SKIP: numpy {np.__version__} has no from_dlpack (needs 1.22 or later)")
        return 0
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TESSERA_LIB") or default_library()
    lib = load_tessera(path)

    print("tessera -> NumPy")
    sizes = (ctypes.c_int64 * 2)(2, 3)
    base = ctypes.c_void_p()
    check(lib, lib.tsr_tensor_empty(2, sizes, TSR_FLOAT, TsrDevice(TSR_CPU, -1),
                                    ctypes.byref(base)), "tsr_tensor_empty")
    values = (ctypes.c_float * 6).from_address(lib.tsr_tensor_data(base))
    for i in range(6):
        values[i] = float(i)
    view = ctypes.c_void_p()
    check(lib, lib.tsr_tensor_transpose(base, 0, 1, ctypes.byref(view)), "tsr_tensor_transpose")
    print(f"  tessera tensor: {describe(lib, view)}")

    storage = lib.tsr_tensor_storage(base)
    weak = ctypes.c_void_p()
    check(lib, lib.tsr_storage_downgrade(storage, ctypes.byref(weak)), "tsr_storage_downgrade")
    check(lib, lib.tsr_storage_decref(storage), "tsr_storage_decref")

    array = np.from_dlpack(TesseraTensor(lib, view))
    print(f"  NumPy array: {array.dtype}, shape {array.shape}, byte strides {array.strides}")
    print(f"  values: {array.tolist()}")
    print(f"  same memory: {array.ctypes.data == lib.tsr_tensor_data(view)}")
    values[4] = 40.0  # element [1][1] of the tensor, [1][1] of its transpose
    print(f"  after tessera writes 40 at [1][1]: NumPy sees {array[1, 1]}")

    check(lib, lib.tsr_tensor_decref(view), "tsr_tensor_decref")
    check(lib, lib.tsr_tensor_decref(base), "tsr_tensor_decref")
    del values
    gc.collect()
    print(f"  tessera handles released; storage alive for NumPy: "
          f"{not lib.tsr_weak_storage_expired(weak)}; array sum {array.sum()}")
    del array
    gc.collect()
    print(f"  array deleted; storage released: {lib.tsr_weak_storage_expired(weak)}")
    check(lib, lib.tsr_weak_storage_decref(weak), "tsr_weak_storage_decref")

    print("NumPy -> tessera")
    source = np.arange(12, dtype=np.float64).reshape(3, 4)
    columns = source[:, ::2]  # a strided view: no copy on either side
    refs_before = sys.getrefcount(columns)
    t = from_numpy(lib, columns)
    print(f"  tessera tensor: {describe(lib, t)}")
    strides = lib.tsr_tensor_strides(t)
    span = 2 * strides[0] + 1 * strides[1] + 1  # elements from [0][0] to [2][1]
    data = (ctypes.c_double * span).from_address(lib.tsr_tensor_data(t))
    total = sum(data[i * strides[0] + j * strides[1]] for i in range(3) for j in range(2))
    print(f"  same memory: {lib.tsr_tensor_data(t) == columns.ctypes.data}; "
          f"sum through tessera {total}")
    data[0] = -1.0
    print(f"  after tessera writes -1 at [0][0]: NumPy sees {source[0, 0]}")
    del data
    print(f"  NumPy's exporter holds the array while tessera uses it: "
          f"{sys.getrefcount(columns) > refs_before}")
    check(lib, lib.tsr_tensor_decref(t), "tsr_tensor_decref")
    print(f"  released when tessera lets go: {sys.getrefcount(columns) == refs_before}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
