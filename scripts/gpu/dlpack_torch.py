#!/usr/bin/env python3
"""DLPack interop between tessera (via ctypes) and torch on CUDA.

    dlpack_torch.py LIBPATH                    # the GPU checks (torch + numpy + a GPU)
    dlpack_torch.py LIBPATH --symbols-only     # resolve symbols, check struct sizes
    dlpack_torch.py LIBPATH --cpu-selftest     # --symbols-only plus the same
                                               # round trips on the CPU with numpy
                                               # as the other side (no torch, no GPU)

Prints one line per check, "ok <name>" or "FAIL <name>: why"; exits 0 iff all
checks pass (1 when one failed, 2 on a setup error).

tessera -> torch: a tessera tensor on cuda:0 (and a transposed view, and a
narrow with a storage offset) is wrapped in an object with __dlpack__ /
__dlpack_device__, exported with tsr_tensor_to_dlpack_on_stream (versioned,
"dltensor_versioned") or tsr_tensor_to_dlpack_legacy ("dltensor"), with the
struct's deleter swapped for a counting wrapper; torch.from_dlpack must see
the same memory, shape, strides and values, must pass its current stream
per the DLPack rules, and the deleter must run exactly once.

torch -> tessera: a torch tensor (and views) exported with
Tensor.__dlpack__, imported with tsr_tensor_from_dlpack(_legacy) after the
capsule is renamed "used_..."; tessera must see the same memory, shape and
strides, copy the same bytes back, and run the deleter exactly once.
"""

import argparse
import ctypes as C
import gc
import sys
import traceback

# --------------------------------------------------------------------------
# DLPack structs, as in include/tessera.h (DLPack 1.1)

kDLCPU, kDLCUDA = 1, 2
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 4, 5, 6


class DLPackVersion(C.Structure):
    _fields_ = [("major", C.c_uint32), ("minor", C.c_uint32)]


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("device", DLDevice),
        ("ndim", C.c_int32),
        ("dtype", DLDataType),
        ("shape", C.POINTER(C.c_int64)),
        ("strides", C.POINTER(C.c_int64)),
        ("byte_offset", C.c_uint64),
    ]


# The deleter fields are function pointers taking the struct's address;
# declared c_void_p so reading gives the address and writing takes one.
class DLManagedTensor(C.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", C.c_void_p),
        ("deleter", C.c_void_p),  # void (*)(DLManagedTensor *)
    ]


class DLManagedTensorVersioned(C.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", C.c_void_p),
        ("deleter", C.c_void_p),  # void (*)(DLManagedTensorVersioned *)
        ("flags", C.c_uint64),
        ("dl_tensor", DLTensor),
    ]


DELETER = C.CFUNCTYPE(None, C.c_void_p)

DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0
DLPACK_FLAG_BITMASK_IS_COPIED = 1 << 1


# --------------------------------------------------------------------------
# tessera declarations (include/tessera.h)


class TsrDevice(C.Structure):
    _fields_ = [("type", C.c_int8), ("index", C.c_int8)]


class TsrDataPtr(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("ctx", C.c_void_p),
        ("deleter", C.c_void_p),
        ("device", TsrDevice),
    ]


TSR_OK = 0
TSR_ERR_UNSUPPORTED = 9
TSR_ERR_DEVICE = 6
TSR_ERR_INVALID_ARGUMENT = 1
TSR_CPU, TSR_CUDA = 0, 1
TSR_BYTE, TSR_LONG, TSR_HALF, TSR_FLOAT = 0, 4, 5, 6
TSR_COMPLEX_FLOAT, TSR_BOOL, TSR_BFLOAT16 = 9, 11, 15

St = C.c_int32  # TsrStatus
PP = C.POINTER(C.c_void_p)
I64P = C.POINTER(C.c_int64)

SIGNATURES = {
    # name: (restype, argtypes)
    "tsr_last_error_message": (C.c_char_p, []),
    "tsr_status_name": (C.c_char_p, [St]),
    "tsr_version": (C.c_char_p, []),
    "tsr_cuda_is_available": (C.c_bool, []),
    "tsr_cuda_init": (St, []),
    "tsr_cuda_allocator": (St, [PP]),
    "tsr_allocator_copy_data": (St, [C.c_void_p, C.c_void_p, C.c_void_p, C.c_size_t]),
    "tsr_allocator_decref": (St, [C.c_void_p]),
    "tsr_tensor_empty": (St, [C.c_int64, I64P, C.c_int8, TsrDevice, PP]),
    "tsr_tensor_transpose": (St, [C.c_void_p, C.c_int64, C.c_int64, PP]),
    "tsr_tensor_narrow": (St, [C.c_void_p, C.c_int64, C.c_int64, C.c_int64, PP]),
    "tsr_tensor_ndim": (C.c_int64, [C.c_void_p]),
    "tsr_tensor_sizes": (I64P, [C.c_void_p]),
    "tsr_tensor_strides": (I64P, [C.c_void_p]),
    "tsr_tensor_storage_offset": (C.c_int64, [C.c_void_p]),
    "tsr_tensor_numel": (C.c_int64, [C.c_void_p]),
    "tsr_tensor_dtype": (C.c_int8, [C.c_void_p]),
    "tsr_tensor_itemsize": (C.c_size_t, [C.c_void_p]),
    "tsr_tensor_device": (TsrDevice, [C.c_void_p]),
    "tsr_tensor_data": (C.c_void_p, [C.c_void_p]),
    "tsr_tensor_is_read_only": (C.c_bool, [C.c_void_p]),
    "tsr_tensor_decref": (St, [C.c_void_p]),
    "tsr_tensor_to_dlpack": (St, [C.c_void_p, PP]),
    "tsr_tensor_to_dlpack_legacy": (St, [C.c_void_p, PP]),
    "tsr_tensor_from_dlpack": (St, [C.c_void_p, PP]),
    "tsr_tensor_from_dlpack_legacy": (St, [C.c_void_p, PP]),
}
# Being added; not in every build (resolved only for CUDA exports):
# TsrStatus tsr_tensor_to_dlpack_on_stream(const struct TsrTensor *t,
#     intptr_t stream, DLManagedTensorVersioned **out);
ON_STREAM = ("tsr_tensor_to_dlpack_on_stream", St, [C.c_void_p, C.c_ssize_t, PP])


class TsrError(Exception):
    pass


class Lib:
    def __init__(self, path):
        self.dll = C.CDLL(path)
        for name, (res, args) in SIGNATURES.items():
            f = getattr(self.dll, name)  # AttributeError when missing
            f.restype, f.argtypes = res, args
            setattr(self, name, f)
        self.on_stream = None
        try:
            f = getattr(self.dll, ON_STREAM[0])
            f.restype, f.argtypes = ON_STREAM[1], ON_STREAM[2]
            self.on_stream = f
        except AttributeError:
            pass

    def check(self, st, what):
        if st != TSR_OK:
            msg = self.tsr_last_error_message()
            name = self.tsr_status_name(st)
            raise TsrError(
                "%s: status %d (%s): %s"
                % (what, st, name.decode() if name else "?", msg.decode() if msg else "")
            )

    def sizes(self, t):
        n = self.tsr_tensor_ndim(t)
        p = self.tsr_tensor_sizes(t)
        return tuple(p[i] for i in range(n))

    def strides(self, t):
        n = self.tsr_tensor_ndim(t)
        p = self.tsr_tensor_strides(t)
        return tuple(p[i] for i in range(n))

    def device(self, t):
        d = self.tsr_tensor_device(t)
        return (d.type, d.index)


# --------------------------------------------------------------------------
# Python C API through ctypes

_api = C.pythonapi
PyCapsule_New = _api.PyCapsule_New
PyCapsule_New.restype = C.py_object
PyCapsule_New.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]
PyCapsule_GetPointer = _api.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = C.c_void_p
PyCapsule_GetPointer.argtypes = [C.py_object, C.c_char_p]
PyCapsule_GetName = _api.PyCapsule_GetName
PyCapsule_GetName.restype = C.c_char_p
PyCapsule_GetName.argtypes = [C.py_object]
PyCapsule_SetName = _api.PyCapsule_SetName
PyCapsule_SetName.restype = C.c_int
PyCapsule_SetName.argtypes = [C.py_object, C.c_char_p]
# For the capsule destructor, which gets a PyObject* whose refcount is 0:
# never turn it into a py_object there.
_IsValidRaw = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.c_char_p)(("PyCapsule_IsValid", _api))
_GetPointerRaw = C.PYFUNCTYPE(C.c_void_p, C.c_void_p, C.c_char_p)(("PyCapsule_GetPointer", _api))

# Capsule names: module-level bytes, so the pointers stay valid for as long
# as any capsule carries them.
NAME_V = b"dltensor_versioned"
NAME_L = b"dltensor"
USED_V = b"used_dltensor_versioned"
USED_L = b"used_dltensor"


@C.CFUNCTYPE(None, C.c_void_p)
def _capsule_destructor(cap):
    # A capsule still named "dltensor[_versioned]" was never consumed: the
    # producer's destructor frees it (DLPack's Python rules).
    try:
        for name, struct in ((NAME_V, DLManagedTensorVersioned), (NAME_L, DLManagedTensor)):
            if _IsValidRaw(cap, name):
                p = _GetPointerRaw(cap, name)
                d = struct.from_address(p).deleter
                if d:
                    DELETER(d)(p)
                return
    except Exception:  # never raise out of a destructor
        traceback.print_exc()


_CAPSULE_DESTRUCTOR = C.cast(_capsule_destructor, C.c_void_p).value


class CountingDeleter:
    """Replaces a managed tensor's deleter with one that counts its calls and
    then calls the original. Kept alive in KEEP (it may run late)."""

    def __init__(self, struct):
        self.orig_addr = struct.deleter
        self.orig = DELETER(self.orig_addr) if self.orig_addr else None
        self.calls = 0
        self.cfunc = DELETER(self._call)
        struct.deleter = C.cast(self.cfunc, C.c_void_p).value
        KEEP.append(self)

    def _call(self, p):
        self.calls += 1
        if self.orig is not None:
            self.orig(p)


KEEP = []


def snapshot(mt, versioned):
    """The fields of a managed tensor, read while it is alive."""
    dl = mt.dl_tensor
    n = dl.ndim
    return {
        "versioned": versioned,
        "version": (mt.version.major, mt.version.minor) if versioned else None,
        "flags": mt.flags if versioned else None,
        "data": dl.data or 0,
        "device": (dl.device.device_type, dl.device.device_id),
        "ndim": n,
        "dtype": (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes),
        "shape": tuple(dl.shape[i] for i in range(n)) if n else (),
        "strides": tuple(dl.strides[i] for i in range(n)) if dl.strides else None,
        "byte_offset": dl.byte_offset,
    }


class TsrExport:
    """A tessera tensor seen through the Python DLPack protocol (borrowed
    handle: the caller keeps its reference while this is used)."""

    def __init__(self, lib, t, dl_device):
        self.lib, self.t, self.dl_device = lib, t, dl_device
        self.calls = []  # kwargs of each __dlpack__ call
        self.exports = []  # (snapshot, CountingDeleter)

    def __dlpack_device__(self):
        return self.dl_device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(
            {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        )
        if copy:
            raise BufferError("tessera export never copies")
        if dl_device is not None and tuple(dl_device) != tuple(self.dl_device):
            raise BufferError("tessera export cannot move to %r" % (dl_device,))
        out = C.c_void_p()
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        if versioned:
            if self.dl_device[0] == kDLCUDA:
                if self.lib.on_stream is None:
                    raise BufferError("library lacks %s" % ON_STREAM[0])
                # DLPack: None means the legacy default stream (1).
                s = 1 if stream is None else int(stream)
                self.lib.check(
                    self.lib.on_stream(self.t, s, C.byref(out)), "tsr_tensor_to_dlpack_on_stream"
                )
            else:
                if stream is not None and stream != -1:
                    raise BufferError("stream must be None on the CPU, got %r" % (stream,))
                self.lib.check(self.lib.tsr_tensor_to_dlpack(self.t, C.byref(out)), "tsr_tensor_to_dlpack")
            mt = DLManagedTensorVersioned.from_address(out.value)
            name = NAME_V
        else:
            # The legacy export has no stream argument; tessera's memory is
            # ordered on the legacy default stream.
            self.lib.check(
                self.lib.tsr_tensor_to_dlpack_legacy(self.t, C.byref(out)),
                "tsr_tensor_to_dlpack_legacy",
            )
            mt = DLManagedTensor.from_address(out.value)
            name = NAME_L
        snap = snapshot(mt, versioned)
        counter = CountingDeleter(mt)
        self.exports.append((snap, counter))
        return PyCapsule_New(out.value, name, _CAPSULE_DESTRUCTOR)


def import_capsule(lib, cap):
    """Consumes a producer's capsule with tsr_tensor_from_dlpack(_legacy):
    swaps in a counting deleter, renames the capsule "used_...", imports.
    Returns (tessera tensor, snapshot, counter)."""
    name = PyCapsule_GetName(cap)
    if name == NAME_V:
        struct, used, fn, versioned = DLManagedTensorVersioned, USED_V, lib.tsr_tensor_from_dlpack, True
    elif name == NAME_L:
        struct, used, fn, versioned = DLManagedTensor, USED_L, lib.tsr_tensor_from_dlpack_legacy, False
    else:
        raise TsrError("capsule named %r" % (name,))
    p = PyCapsule_GetPointer(cap, name)
    mt = struct.from_address(p)
    snap = snapshot(mt, versioned)
    counter = CountingDeleter(mt)
    if PyCapsule_SetName(cap, used) != 0:
        raise TsrError("PyCapsule_SetName failed")
    out = C.c_void_p()
    st = fn(p, C.byref(out))  # consumes p, also on error
    lib.check(st, fn.__name__)
    return out.value, snap, counter


# --------------------------------------------------------------------------
# checks

RESULTS = {"ok": 0, "fail": 0}


def report(name, ok, why=""):
    if ok:
        RESULTS["ok"] += 1
        print("ok %s" % name, flush=True)
    else:
        RESULTS["fail"] += 1
        print("FAIL %s: %s" % (name, why), flush=True)


class Checker:
    """Collects the sub-checks of one case into one line."""

    def __init__(self, name):
        self.name, self.errors = name, []

    def eq(self, what, got, want):
        if got != want:
            self.errors.append("%s: got %r, want %r" % (what, got, want))

    def true(self, what, cond):
        if not cond:
            self.errors.append(what)

    def done(self):
        report(self.name, not self.errors, "; ".join(self.errors))


def run_case(name, fn, *args):
    c = Checker(name)
    try:
        fn(c, *args)
    except Exception as e:  # noqa: BLE001 - report and go on
        c.errors.append("%s: %s" % (type(e).__name__, e))
        if "-v" in sys.argv:
            traceback.print_exc()
    c.done()


SHAPE = (5, 7)
# view name -> (tessera view maker, reference view maker)
VIEWS = {
    "base": (None, lambda a: a),
    "transposed": (lambda lib, t, out: lib.tsr_tensor_transpose(t, 0, 1, out), lambda a: a.T),
    "narrow": (lambda lib, t, out: lib.tsr_tensor_narrow(t, 0, 1, 3, out), lambda a: a[1:4]),
}


class Backend:
    """The other side: torch on cuda:0, or numpy on the CPU (self-test)."""

    def __init__(self, lib, kind):
        self.lib, self.kind = lib, kind
        import numpy as np

        self.np = np
        if kind == "torch":
            import torch

            self.torch = torch
            self.tsr_device = TsrDevice(TSR_CUDA, 0)
            self.dl_device = (kDLCUDA, 0)
            a = C.c_void_p()
            lib.check(lib.tsr_cuda_allocator(C.byref(a)), "tsr_cuda_allocator")
            self.cuda_alloc = a.value
            T = torch
            self.dtypes = {
                # name: (torch dtype, tessera dtype, DLPack (code, bits, lanes))
                "float32": (T.float32, TSR_FLOAT, (kDLFloat, 32, 1)),
                "float16": (T.float16, TSR_HALF, (kDLFloat, 16, 1)),
                "bfloat16": (T.bfloat16, TSR_BFLOAT16, (kDLBfloat, 16, 1)),
                "int64": (T.int64, TSR_LONG, (kDLInt, 64, 1)),
                "uint8": (T.uint8, TSR_BYTE, (kDLUInt, 8, 1)),
                "bool": (T.bool, TSR_BOOL, (kDLBool, 8, 1)),
                "complex64": (T.complex64, TSR_COMPLEX_FLOAT, (kDLComplex, 64, 1)),
            }
        else:
            self.tsr_device = TsrDevice(TSR_CPU, 0)
            self.dl_device = (kDLCPU, 0)
            self.dtypes = {
                "float32": (np.float32, TSR_FLOAT, (kDLFloat, 32, 1)),
                "float16": (np.float16, TSR_HALF, (kDLFloat, 16, 1)),
                "int64": (np.int64, TSR_LONG, (kDLInt, 64, 1)),
                "uint8": (np.uint8, TSR_BYTE, (kDLUInt, 8, 1)),
                "bool": (np.bool_, TSR_BOOL, (kDLBool, 8, 1)),
                "complex64": (np.complex64, TSR_COMPLEX_FLOAT, (kDLComplex, 64, 1)),
            }

    def close(self):
        if self.kind == "torch":
            self.lib.tsr_allocator_decref(self.cuda_alloc)

    # -- reference values (host) and their bytes
    def ref(self, dname):
        np = self.np
        n = SHAPE[0] * SHAPE[1]
        i = np.arange(n, dtype=np.int64).reshape(SHAPE)
        f = i.astype(np.float64) * 0.25 - 3.0
        vals = {
            "float32": f.astype(np.float32),
            "float16": f.astype(np.float16),
            "bfloat16": f.astype(np.float32),  # converted by torch below
            "int64": (i - 17) * 123456789012 + 5,
            "uint8": ((i * 37 + 11) % 256).astype(np.uint8),
            "bool": (i % 3 == 0),
            "complex64": (f + 1j * (0.5 - f)).astype(np.complex64),
        }[dname]
        if self.kind == "torch":
            t = self.torch.from_numpy(np.ascontiguousarray(vals))
            return t.to(self.dtypes[dname][0]).contiguous()
        return np.ascontiguousarray(vals)

    def host_bytes(self, x):
        """The bytes of x's elements in row-major order (numpy uint8)."""
        if self.kind == "torch":
            x = x.detach().cpu().contiguous().reshape(-1)
            return x.view(self.torch.uint8).numpy().copy()
        return self.np.ascontiguousarray(x).reshape(-1).view(self.np.uint8).copy()

    def data_ptr(self, x):
        return x.data_ptr() if self.kind == "torch" else x.ctypes.data

    def shape(self, x):
        return tuple(x.shape)

    def strides(self, x):
        if self.kind == "torch":
            return tuple(x.stride())
        return tuple(s // x.itemsize for s in x.strides)

    def sync(self):
        if self.kind == "torch":
            self.torch.cuda.synchronize()

    def consume(self, obj):
        if self.kind == "torch":
            return self.torch.from_dlpack(obj)
        return self.np.from_dlpack(obj)

    def consume_capsule(self, cap):
        if self.kind == "torch":
            return self.torch.from_dlpack(cap)  # torch takes a bare capsule

        class Holder:  # numpy.from_dlpack takes only objects with __dlpack__
            def __dlpack__(self, **kwargs):
                return cap

            def __dlpack_device__(self):
                return (kDLCPU, 0)

        return self.np.from_dlpack(Holder())

    def to_device(self, ref):
        return ref.cuda() if self.kind == "torch" else ref.copy()

    def export(self, x):
        """The other side's capsule of x: versioned when it can."""
        if self.kind == "torch":
            try:
                return x.__dlpack__(stream=1, max_version=(1, 0))
            except TypeError:
                return x.__dlpack__(stream=1)
        try:
            return x.__dlpack__(max_version=(1, 0))
        except TypeError:
            return x.__dlpack__()

    def export_legacy(self, x):
        return x.__dlpack__(stream=1) if self.kind == "torch" else x.__dlpack__()

    def expected_stream(self):
        """What a consumer passes as `stream` (DLPack rules)."""
        if self.kind == "torch":
            s = self.torch.cuda.current_stream().cuda_stream
            return 1 if s == 0 else s
        return None

    # -- tessera memory <-> host
    def copy_in(self, dst, host):
        if self.kind == "torch":
            self.lib.check(
                self.lib.tsr_allocator_copy_data(self.cuda_alloc, dst, host.ctypes.data, host.nbytes),
                "tsr_allocator_copy_data(H2D)",
            )
        else:
            C.memmove(dst, host.ctypes.data, host.nbytes)

    def copy_out(self, host, src):
        if self.kind == "torch":
            self.lib.check(
                self.lib.tsr_allocator_copy_data(self.cuda_alloc, host.ctypes.data, src, host.nbytes),
                "tsr_allocator_copy_data(D2H)",
            )
        else:
            C.memmove(host.ctypes.data, src, host.nbytes)

    def tsr_logical_bytes(self, t, dname):
        """tessera tensor t's elements, copied to the host through tessera,
        as row-major bytes."""
        np, lib = self.np, self.lib
        sizes, strides = lib.sizes(t), lib.strides(t)
        item = lib.tsr_tensor_itemsize(t)
        if any(s == 0 for s in sizes):
            return np.zeros(0, np.uint8)
        span = (sum((n - 1) * s for n, s in zip(sizes, strides)) + 1) * item
        host = np.empty(span, np.uint8)
        self.sync()
        self.copy_out(host, lib.tsr_tensor_data(t))
        elems = np.lib.stride_tricks.as_strided(
            host.view(np.dtype("V%d" % item)),
            shape=sizes,
            strides=tuple(s * item for s in strides),
        )
        return np.ascontiguousarray(elems).reshape(-1).view(np.uint8)


def make_tsr(be, dname, view):
    """A tessera tensor filled with ref(dname), and the view; returns
    (base handle, view handle or None, reference, reference view)."""
    lib = be.lib
    ref = be.ref(dname)
    sizes = (C.c_int64 * 2)(*SHAPE)
    t = C.c_void_p()
    lib.check(
        lib.tsr_tensor_empty(2, sizes, be.dtypes[dname][1], be.tsr_device, C.byref(t)),
        "tsr_tensor_empty",
    )
    be.copy_in(lib.tsr_tensor_data(t), be.host_bytes(ref))
    mk, refview = VIEWS[view]
    v = None
    if mk is not None:
        o = C.c_void_p()
        lib.check(mk(lib, t, C.byref(o)), "view " + view)
        v = o.value
    return t.value, v, ref, refview(ref)


def case_tsr_to_other(c, be, dname, view, legacy=False, stream_ctx=None):
    lib, np = be.lib, be.np
    base, v, ref, want = make_tsr(be, dname, view)
    t = v if v is not None else base
    want_bytes = be.host_bytes(want)
    data = lib.tsr_tensor_data(t)
    if view == "narrow":
        c.eq("tessera storage offset", lib.tsr_tensor_storage_offset(t), SHAPE[1])
    obj = TsrExport(lib, t, be.dl_device)
    ctx = stream_ctx() if stream_ctx else None
    if ctx is not None:
        ctx.__enter__()
    try:
        want_stream = be.expected_stream()
        if legacy:
            cap = obj.__dlpack__(stream=want_stream)
            c.eq("capsule name", PyCapsule_GetName(cap), NAME_L)
            x = be.consume_capsule(cap)
            del cap
        else:
            x = be.consume(obj)
            c.eq("__dlpack__ calls", len(obj.calls), 1)
            call = obj.calls[-1] if obj.calls else {}
            c.eq("stream passed", call.get("stream"), want_stream)
            mv = call.get("max_version")
            c.true("max_version %r < (1, 0)" % (mv,), mv is not None and tuple(mv) >= (1, 0))
        c.eq("data pointer", be.data_ptr(x), data)
        c.eq("shape", be.shape(x), lib.sizes(t))
        c.eq("strides", be.strides(x), lib.strides(t))
        c.eq("values", be.host_bytes(x).tobytes(), want_bytes.tobytes())
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    if len(obj.exports) != 1:
        c.errors.append("%d exports" % len(obj.exports))
        return
    snap, counter = obj.exports[0]
    c.eq("struct version", snap["version"], None if legacy else (1, 1))
    c.eq("struct flags", snap["flags"], None if legacy else 0)
    c.eq("struct device", snap["device"], be.dl_device)
    c.eq("struct dtype", snap["dtype"], be.dtypes[dname][2])
    c.eq("struct data", snap["data"], data)
    c.eq("struct byte_offset", snap["byte_offset"], 0)
    c.eq("struct shape", snap["shape"], lib.sizes(t))
    c.eq("struct strides", snap["strides"], lib.strides(t))
    # tessera's handles go first: the export keeps the memory alive
    if v is not None:
        lib.check(lib.tsr_tensor_decref(v), "tsr_tensor_decref(view)")
    lib.check(lib.tsr_tensor_decref(base), "tsr_tensor_decref")
    be.sync()
    c.eq("deleter calls while the consumer holds it", counter.calls, 0)
    c.eq("values after tessera released its handles", be.host_bytes(x).tobytes(), want_bytes.tobytes())
    del x
    be.sync()
    gc.collect()
    c.eq("deleter calls", counter.calls, 1)


def case_other_to_tsr(c, be, dname, view, legacy=False):
    lib = be.lib
    ref = be.ref(dname)
    base = be.to_device(ref)
    x = VIEWS[view][1](base)
    cap = be.export_legacy(x) if legacy else be.export(x)
    t, snap, counter = import_capsule(lib, cap)
    try:
        c.eq("capsule kind", "legacy" if not snap["versioned"] else "versioned",
             "legacy" if legacy else "versioned")
        c.eq("data pointer", lib.tsr_tensor_data(t), be.data_ptr(x))
        c.eq("shape", lib.sizes(t), be.shape(x))
        c.eq("strides", lib.strides(t), be.strides(x))
        c.eq("dtype", lib.tsr_tensor_dtype(t), be.dtypes[dname][1])
        dev = lib.device(t)
        if be.kind == "torch":
            c.eq("device", dev, (TSR_CUDA, 0))
        else:  # tessera's CPU device index is -1 (c10's convention) or 0
            c.true("device %r is not the CPU" % (dev,), dev[0] == TSR_CPU and dev[1] in (-1, 0))
        c.eq("storage offset", lib.tsr_tensor_storage_offset(t), 0)
        c.eq("read-only", bool(lib.tsr_tensor_is_read_only(t)),
             bool(snap["flags"] and snap["flags"] & DLPACK_FLAG_BITMASK_READ_ONLY))
        c.eq("values", be.tsr_logical_bytes(t, dname).tobytes(), be.host_bytes(x).tobytes())
        del cap
        gc.collect()
        c.eq("deleter calls before release", counter.calls, 0)
    finally:
        lib.check(lib.tsr_tensor_decref(t), "tsr_tensor_decref")
    be.sync()
    gc.collect()
    c.eq("deleter calls", counter.calls, 1)
    c.eq("values after release", be.host_bytes(x).tobytes(), be.host_bytes(VIEWS[view][1](ref)).tobytes())


def case_unconsumed(c, be, legacy):
    """A capsule nobody consumes: its destructor runs the deleter once."""
    lib = be.lib
    base, _, _, _ = make_tsr(be, "float32", "base")
    obj = TsrExport(lib, base, be.dl_device)
    cap = obj.__dlpack__(stream=be.expected_stream(), max_version=None if legacy else (1, 0))
    c.eq("capsule name", PyCapsule_GetName(cap), NAME_L if legacy else NAME_V)
    lib.check(lib.tsr_tensor_decref(base), "tsr_tensor_decref")
    counter = obj.exports[0][1]
    c.eq("deleter calls before the capsule dies", counter.calls, 0)
    del cap
    gc.collect()
    c.eq("deleter calls", counter.calls, 1)


def run_all(be):
    run_case("unconsumed versioned capsule", case_unconsumed, be, False)
    run_case("unconsumed legacy capsule", case_unconsumed, be, True)
    for dname in be.dtypes:
        for view in VIEWS:
            run_case("%s->%s %s %s" % ("tessera", be.kind, dname, view), case_tsr_to_other, be, dname, view)
    for dname in be.dtypes:
        for view in VIEWS:
            run_case("%s->%s %s %s" % (be.kind, "tessera", dname, view), case_other_to_tsr, be, dname, view)
    # legacy (unversioned) capsules both ways
    for view in VIEWS:
        run_case("tessera->%s legacy float32 %s" % (be.kind, view), case_tsr_to_other, be, "float32", view, True)
        run_case("%s->tessera legacy float32 %s" % (be.kind, view), case_other_to_tsr, be, "float32", view, True)
    if be.kind == "torch":
        torch = be.torch

        def side_stream():
            return torch.cuda.stream(torch.cuda.Stream())

        run_case("C API streams", case_c_streams, be)
        for dname in ("float32", "bfloat16"):
            for view in VIEWS:
                run_case(
                    "tessera->torch on a side stream %s %s" % (dname, view),
                    case_tsr_to_other, be, dname, view, False, side_stream,
                )


def case_c_streams(c, be):
    """The C API of streams: the thread's current stream, record_stream,
    and the refusals."""
    lib, torch = be.lib, be.torch
    dll = lib.dll
    setf = dll.tsr_cuda_set_current_stream
    setf.restype, setf.argtypes = C.c_int, [C.c_int32, C.c_void_p]
    getf = dll.tsr_cuda_current_stream
    getf.restype, getf.argtypes = C.c_void_p, [C.c_int32]
    rec = dll.tsr_tensor_record_stream
    rec.restype, rec.argtypes = C.c_int, [C.c_void_p, C.c_void_p]
    side = torch.cuda.Stream()
    h = side.cuda_stream
    c.eq("current stream at first", getf(0) or 0, 0)
    lib.check(setf(0, h), "tsr_cuda_set_current_stream")
    c.eq("current stream after set", getf(0), h)
    c.eq("current stream of -1 (the current device)", getf(-1), h)
    t, _, _, _ = make_tsr(be, "float32", "base")
    try:
        lib.check(rec(t, None), "tsr_tensor_record_stream(legacy default)")
        lib.check(rec(t, h), "tsr_tensor_record_stream(own stream)")
        other = torch.cuda.Stream()
        lib.check(rec(t, other.cuda_stream), "tsr_tensor_record_stream(other)")
        c.eq("set on cuda:9", setf(9, h), TSR_ERR_DEVICE)
        c.eq("stream 0 for DLPack", lib.on_stream(t, 0, C.byref(C.c_void_p())), TSR_ERR_INVALID_ARGUMENT)
    finally:
        lib.check(lib.tsr_tensor_decref(t), "tsr_tensor_decref")
    torch.cuda.synchronize()
    lib.check(setf(0, None), "tsr_cuda_set_current_stream(NULL)")
    c.eq("current stream after reset", getf(0) or 0, 0)


def check_layouts():
    want = {
        "DLTensor": (DLTensor, 48),
        "DLManagedTensor": (DLManagedTensor, 64),
        "DLManagedTensorVersioned": (DLManagedTensorVersioned, 80),
        "TsrDevice": (TsrDevice, 2),
        "TsrDataPtr": (TsrDataPtr, 32),
    }
    for name, (cls, size) in want.items():
        report("sizeof(%s) == %d" % (name, size), C.sizeof(cls) == size, "got %d" % C.sizeof(cls))
    report(
        "offsetof(DLManagedTensorVersioned, dl_tensor) == 32",
        DLManagedTensorVersioned.dl_tensor.offset == 32,
        "got %d" % DLManagedTensorVersioned.dl_tensor.offset,
    )
    report(
        "offsetof(DLTensor, byte_offset) == 40",
        DLTensor.byte_offset.offset == 40,
        "got %d" % DLTensor.byte_offset.offset,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("libpath")
    ap.add_argument("--symbols-only", action="store_true", help="resolve symbols and check struct sizes")
    ap.add_argument("--cpu-selftest", action="store_true", help="also run the CPU round trips with numpy")
    ap.add_argument("-v", action="store_true", help="print tracebacks")
    args = ap.parse_args()

    try:
        lib = Lib(args.libpath)
    except (OSError, AttributeError) as e:
        print("FAIL load %s: %s" % (args.libpath, e), flush=True)
        return 2
    report("symbols (%d resolved)" % len(SIGNATURES), True)
    print("tessera %s; %s %s" % (
        lib.tsr_version().decode(), ON_STREAM[0], "present" if lib.on_stream else "absent"), flush=True)
    check_layouts()

    if args.symbols_only or args.cpu_selftest:
        if args.cpu_selftest:
            be = Backend(lib, "numpy")
            run_all(be)
    else:
        report(ON_STREAM[0] + " present", lib.on_stream is not None, "symbol not exported")
        import torch

        print("torch %s, cuda %s, device %s" % (
            torch.__version__, torch.version.cuda,
            torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"), flush=True)
        if not torch.cuda.is_available():
            report("torch.cuda.is_available()", False, "no CUDA device for torch")
            return 1
        torch.cuda.init()
        st = lib.tsr_cuda_init()
        if st != TSR_OK:
            try:
                lib.check(st, "tsr_cuda_init")
            except TsrError as e:
                report("tsr_cuda_init", False, str(e))
            return 1
        be = Backend(lib, "torch")
        try:
            run_all(be)
        finally:
            gc.collect()
            be.sync()
            be.close()

    print("%d ok, %d failed" % (RESULTS["ok"], RESULTS["fail"]), flush=True)
    return 0 if RESULTS["fail"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
