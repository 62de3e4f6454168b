"""The C library and the conversions every call shares: statuses to
exceptions, dtypes to NumPy's, tessera tensors to arrays that view them.

The library is libtessera itself (the same C ABI C and C++ hosts call),
loaded by cffi in ABI mode from the declarations maturin generated from
its header: nothing here is compiled, and no tensor code is written twice.
"""

import sys

import numpy as np

from ._native import ffi, lib

__all__ = ["ffi", "lib", "TesseraError", "check", "numpy_dtype", "tessera_dtype",
           "to_array", "CPU"]

CPU = lib.tsr_device(lib.TSR_CPU, 0)


class TesseraError(Exception):
    """An error tessera reported: `status` is its TsrStatus number,
    `status_name` its name (``"TSR_ERR_FORMAT"``), the message tessera's
    (naming the function, the bad value and what was expected)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.status_name = _STATUS_NAMES.get(status, str(status))


def _status_names():
    return {getattr(lib, n): n for n in dir(lib)
            if n == "TSR_OK" or n.startswith("TSR_ERR_")}


_STATUS_NAMES = _status_names()


def _error_class(name, *bases):
    return type(name, (TesseraError,) + bases, {"__module__": "tessera"})


# Each status also raises as the Python exception a caller would catch
# for it (a file that is not there is an OSError too, a bad value a
# ValueError, ...).
TesseraIOError = _error_class("TesseraIOError", OSError)
TesseraFormatError = _error_class("TesseraFormatError", ValueError)
TesseraValueError = _error_class("TesseraValueError", ValueError)
TesseraMemoryError = _error_class("TesseraMemoryError", MemoryError)
TesseraCancelled = _error_class("TesseraCancelled")

_CLASSES = {
    lib.TSR_ERR_IO: TesseraIOError,
    lib.TSR_ERR_FORMAT: TesseraFormatError,
    lib.TSR_ERR_INVALID_ARGUMENT: TesseraValueError,
    lib.TSR_ERR_SHAPE: TesseraValueError,
    lib.TSR_ERR_DTYPE: TesseraValueError,
    lib.TSR_ERR_OUT_OF_MEMORY: TesseraMemoryError,
    lib.TSR_ERR_CANCELLED: TesseraCancelled,
}


def check(status):
    """Raises the error of `status` (with the thread's last message)
    unless it is TSR_OK."""
    if status != lib.TSR_OK:
        message = lib.tsr_last_error_message()
        text = ffi.string(message).decode("utf-8", "replace") if message else ""
        raise _CLASSES.get(status, TesseraError)(status, text)


def _text(p):
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else None


_BYTE_ORDER = "<" if sys.byteorder == "little" else ">"


def _dtype_of(code):
    """NumPy's dtype for tessera dtype `code`, or None: NumPy's own type
    where it has one, else ml_dtypes' type of torch's name (bfloat16, the
    float8 types) when ml_dtypes is installed."""
    numpy = _text(lib.tsr_dtype_numpy(code))
    if numpy is not None:
        order = "|" if lib.tsr_dtype_itemsize(code) == 1 else _BYTE_ORDER
        return np.dtype(order + numpy)
    name = _text(lib.tsr_dtype_torch_name(code))
    try:
        import ml_dtypes
    except ImportError:
        return None
    t = getattr(ml_dtypes, name, None) if name else None
    if t is None or np.dtype(t).itemsize != lib.tsr_dtype_itemsize(code):
        return None
    return np.dtype(t)


_COUNT = next(i for i in range(128) if not lib.tsr_dtype_is_valid(i))
_DTYPES = {code: _dtype_of(code) for code in range(_COUNT)}
_CODES = {}
for _code, _dt in _DTYPES.items():
    if _dt is not None:
        _CODES.setdefault(_dt, _code)  # the first dtype of a NumPy type


def numpy_dtype(code, name):
    """NumPy's dtype for tessera dtype `code` of tensor `name`; raises
    TesseraValueError naming both where NumPy (with ml_dtypes) has none."""
    dt = _DTYPES.get(code)
    if dt is None:
        dname = _text(lib.tsr_dtype_name(code))
        hint = ""
        if _text(lib.tsr_dtype_torch_name(code)) and lib.tsr_dtype_numpy(code) == ffi.NULL:
            hint = " (install ml_dtypes for bfloat16 and the float8 types)"
        raise TesseraValueError(
            lib.TSR_ERR_DTYPE,
            f"tensor '{name}' is {dname}: NumPy has no such dtype{hint}")
    return dt


def tessera_dtype(dt, name):
    """tessera's dtype number for NumPy dtype `dt` (native byte order) of
    array `name`."""
    code = _CODES.get(np.dtype(dt).newbyteorder("="))
    if code is None:
        code = _CODES.get(np.dtype(dt))
    if code is None:
        raise TesseraValueError(
            lib.TSR_ERR_DTYPE,
            f"array '{name}' is {np.dtype(dt)}: expected a dtype tessera stores "
            f"(one of {sorted(str(d) for d in _CODES)})")
    return code


class _Owner:
    """Holds a tensor reference for as long as an array views its memory
    (the array's base)."""

    __slots__ = ("_tensor", "__array_interface__")


def to_array(t, name):
    """An ndarray viewing tensor `t` (a new reference, consumed: released
    when the array and its views are gone). Read-only where the tensor is
    (a read-only mapping)."""
    t = ffi.gc(t, lib.tsr_tensor_decref)
    if lib.tsr_tensor_device(t).type != lib.TSR_CPU:
        raise TesseraValueError(lib.TSR_ERR_DEVICE,
                                f"tensor '{name}' is not in CPU memory")
    dt = numpy_dtype(lib.tsr_tensor_dtype(t), name)
    ndim = lib.tsr_tensor_ndim(t)
    shape = tuple(lib.tsr_tensor_sizes(t)[i] for i in range(ndim))
    if lib.tsr_tensor_numel(t) == 0:
        return np.empty(shape, dt)
    item = dt.itemsize
    strides = tuple(lib.tsr_tensor_strides(t)[i] * item for i in range(ndim))
    owner = _Owner()
    owner._tensor = t
    readonly = bool(lib.tsr_tensor_is_read_only(t))
    address = int(ffi.cast("uintptr_t", lib.tsr_tensor_data(t)))
    ml = dt.kind == "V"
    owner.__array_interface__ = {
        "version": 3,
        "shape": shape,
        "strides": strides,
        "typestr": f"|V{item}" if ml else dt.str,
        "data": (address, readonly),
    }
    a = np.asarray(owner)
    return a.view(dt) if ml else a


def dtype_name(dt):
    """c10's name of the tessera dtype NumPy dtype `dt` stands for."""
    return _text(lib.tsr_dtype_name(tessera_dtype(dt, "")))
