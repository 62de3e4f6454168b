"""tessera tensors out through DLPack: `Tensor`, with `__dlpack__` and
`__dlpack_device__`, for `np.from_dlpack`, `torch.from_dlpack`,
`jax.dlpack.from_dlpack` and any other consumer of the Python DLPack
protocol. The managed tensor is tessera's own export
(`tsr_tensor_to_dlpack`, or `tsr_tensor_to_dlpack_legacy` for a consumer
that asks for no version): the consumer views tessera's memory, which its
deleter releases. bfloat16 and the float8 types go out this way without
ml_dtypes (torch reads them; NumPy has no such dtypes).
"""

from ._lib import TesseraValueError, check, ffi, lib, to_array

__all__ = ["Tensor"]

_KDLCPU = 1


class Tensor:
    """A tessera tensor (one reference to a `TsrTensor`), as
    `Checkpoint.tensor` returns it: any dtype tessera loads, exported
    through DLPack without a copy, or viewed by NumPy with `numpy()`."""

    __slots__ = ("_t", "name")

    def __init__(self, t, name):
        """Takes over the new reference `t` (a `TsrTensor *`)."""
        self._t = ffi.gc(t, lib.tsr_tensor_decref)
        self.name = name

    @property
    def shape(self):
        """The sizes (`tsr_tensor_sizes`)."""
        n = lib.tsr_tensor_ndim(self._t)
        sizes = lib.tsr_tensor_sizes(self._t)
        return tuple(sizes[i] for i in range(n))

    @property
    def dtype(self):
        """torch's name of the dtype (`tsr_dtype_torch_name`: "bfloat16",
        "float32", ...), c10's (`tsr_dtype_name`) for one torch lacks."""
        code = lib.tsr_tensor_dtype(self._t)
        name = lib.tsr_dtype_torch_name(code)
        return ffi.string(name if name != ffi.NULL else lib.tsr_dtype_name(code)).decode()

    @property
    def read_only(self):
        """Whether the memory is read-only (a read-only mapping,
        `tsr_tensor_is_read_only`): exported with DLPack's read-only flag."""
        return bool(lib.tsr_tensor_is_read_only(self._t))

    def numpy(self):
        """An ndarray viewing the tensor (as `Checkpoint.load` gives)."""
        check(lib.tsr_tensor_incref(self._t))
        return to_array(self._t, self.name)

    def __dlpack_device__(self):
        if lib.tsr_tensor_device(self._t).type != lib.TSR_CPU:
            raise TesseraValueError(lib.TSR_ERR_DEVICE,
                                    f"tensor '{self.name}' is not in CPU memory")
        return (_KDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of the tensor, sharing its memory: a versioned
        one (`tsr_tensor_to_dlpack`) when the consumer's max_version is
        1.x or later, else a legacy one (`tsr_tensor_to_dlpack_legacy`,
        refused for a read-only tensor: that struct cannot say so)."""
        if copy:
            raise BufferError(f"tensor '{self.name}': tessera's DLPack export shares "
                              "memory; copy=True is not offered")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"tensor '{self.name}' is on the CPU, not DLPack device "
                              f"{tuple(dl_device)}")
        if stream is not None and stream != -1:
            raise BufferError(f"tensor '{self.name}' is on the CPU: stream={stream!r}, "
                              "expected None or -1")
        # Its capsules' destructor (C) calls the deleter if no consumer
        # takes the tensor; imported before the export, which it owns.
        from . import _dlpack_capsule

        if max_version is not None and max_version[0] >= 1:
            out = ffi.new("DLManagedTensorVersioned **")
            check(lib.tsr_tensor_to_dlpack(self._t, out))
            versioned = True
        else:
            out = ffi.new("DLManagedTensor **")
            check(lib.tsr_tensor_to_dlpack_legacy(self._t, out))
            versioned = False
        return _dlpack_capsule.capsule(int(ffi.cast("uintptr_t", out[0])), versioned)

    def __repr__(self):
        return f"tessera.Tensor({self.name!r}, shape={self.shape}, dtype={self.dtype})"
