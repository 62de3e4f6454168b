"""tessera's Python calls, each a thin layer over the C calls it names."""

import itertools
import json
import os

import numpy as np

from ._dlpack import Tensor
from ._lib import CPU, TesseraValueError, check, ffi, lib, tessera_dtype, to_array

__all__ = ["load", "open", "save", "Checkpoint", "LoadedDict", "SKIPPED_KEY"]

#: The metadata key listing what a load left out (objects tessera does
#: not load, values JSON cannot hold), one per line.
SKIPPED_KEY = "tessera.skipped"

_FORMATS = {
    None: lib.TSR_FORMAT_AUTO,
    "torch": lib.TSR_FORMAT_TORCH,
    "safetensors": lib.TSR_FORMAT_SAFETENSORS,
    "npy": lib.TSR_FORMAT_NPY,
    "npz": lib.TSR_FORMAT_NPZ,
    "gguf": lib.TSR_FORMAT_GGUF,
    "torch_legacy": lib.TSR_FORMAT_TORCH_LEGACY,
    "torchscript": lib.TSR_FORMAT_TORCHSCRIPT,
    "dcp": lib.TSR_FORMAT_DCP,
}


def _format(format):
    try:
        return _FORMATS[format]
    except KeyError:
        raise TesseraValueError(
            lib.TSR_ERR_INVALID_ARGUMENT,
            f"format {format!r}: expected None (told by the file) or one of "
            f"{sorted(k for k in _FORMATS if k)}") from None


def _path(path):
    return os.fsencode(path)


class LoadedDict(dict):
    """The arrays of a load by name, in the file's order, with the file's
    string metadata (`metadata`), its values that are not tensors
    (`non_tensors`: a checkpoint's ``global_step`` as an int, its config as
    a dict, by dotted name; not `values`, which stays dict's method) and
    what the load left out (`skipped`: objects tessera does not load)."""

    metadata: dict
    non_tensors: dict
    skipped: list


def _from_dict(d):
    """A LoadedDict of the TsrTensorDict `d` (freed here)."""
    try:
        out = LoadedDict()
        for i in range(lib.tsr_dict_size(d)):
            name = ffi.string(lib.tsr_dict_name(d, i)).decode()
            t = lib.tsr_dict_get(d, lib.tsr_dict_name(d, i))
            out[name] = to_array(t, name)
        meta = {}
        for i in range(lib.tsr_dict_metadata_count(d)):
            key = lib.tsr_dict_metadata_key(d, i)
            meta[ffi.string(key).decode()] = ffi.string(lib.tsr_dict_metadata(d, key)).decode()
        out.skipped = [s for s in meta.pop(SKIPPED_KEY, "").split("\n") if s]
        out.metadata = meta
        out.non_tensors = {}
        for i in range(lib.tsr_dict_value_count(d)):
            name = lib.tsr_dict_value_name(d, i)
            text = ffi.string(lib.tsr_dict_value_json(d, name)).decode()
            out.non_tensors[ffi.string(name).decode()] = json.loads(text)
        return out
    finally:
        lib.tsr_dict_free(d)


def _flags(mmap, strict):
    flags = 0 if strict else lib.TSR_LOAD_SKIP_UNKNOWN
    if mmap:
        flags |= lib.TSR_LOAD_MMAP | lib.TSR_LOAD_READ_ONLY
    return flags


def load(path, mmap=False, format=None, strict=False):
    """Every tensor of the checkpoint at `path` as a NumPy array
    (`tsr_load`): any format tessera reads (torch zip and legacy,
    TorchScript, safetensors, npy, npz, GGUF, a Hugging Face shard index,
    a DCP directory), told by its content unless `format` names it.

    With `mmap`, the arrays view a read-only mapping of the file (no copy;
    writing raises), else they own fresh memory. Values that are not
    tensors come back in the result's `non_tensors` (JSON's types); objects
    tessera does not load are left out and named in its `skipped`, unless
    `strict` (then such a file is refused)."""
    out = ffi.new("struct TsrTensorDict **")
    check(lib.tsr_load(_path(path), _format(format), _flags(mmap, strict), out))
    return _from_dict(out[0])


class Checkpoint:
    """A checkpoint opened once, its tensors loaded when asked
    (`tsr_checkpoint_open`): only the index is read at open. Safe to use
    from several threads; arrays outlive it."""

    def __init__(self, path, mmap=False, format=None, strict=False, settings=None):
        out = ffi.new("struct TsrCheckpoint **")
        pairs = [(str(k).encode(), str(v).encode()) for k, v in (settings or {}).items()]
        # The strings live as long as the call (cffi frees them after).
        keep = [(ffi.new("char[]", k), ffi.new("char[]", v)) for k, v in pairs]
        array = ffi.new("struct TsrSetting[]", max(len(keep), 1))
        for i, (k, v) in enumerate(keep):
            array[i].name = k
            array[i].value = v
        check(lib.tsr_checkpoint_open_with(_path(path), _format(format),
                                           _flags(mmap, strict), array, len(keep), out))
        self._c = ffi.gc(out[0], lib.tsr_checkpoint_close)
        self._names = [ffi.string(lib.tsr_checkpoint_name(self._c, i)).decode()
                       for i in range(lib.tsr_checkpoint_size(self._c))]

    def keys(self):
        """The tensors' names, in the file's order."""
        return list(self._names)

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)

    def __contains__(self, name):
        return name in self._names

    def _index(self, name):
        i = ffi.new("size_t *")
        check(lib.tsr_checkpoint_find(self._handle(), name.encode(), i))
        return i[0]

    def _handle(self):
        if self._c is None:
            raise TesseraValueError(lib.TSR_ERR_INVALID_ARGUMENT,
                                    "the checkpoint is closed")
        return self._c

    def shape(self, name):
        """The sizes of tensor `name`, read from the index."""
        i = self._index(name)
        sizes = lib.tsr_checkpoint_sizes(self._c, i)
        return tuple(sizes[d] for d in range(lib.tsr_checkpoint_ndim(self._c, i)))

    def nbytes(self, name):
        """The bytes of tensor `name`, read from the index."""
        return lib.tsr_checkpoint_nbytes(self._c, self._index(name))

    def load(self, name):
        """Tensor `name` (`tsr_checkpoint_load`): reads only its bytes."""
        out = ffi.new("struct TsrTensor **")
        check(lib.tsr_checkpoint_load(self._handle(), name.encode(), CPU, 0, out))
        return to_array(out[0], name)

    def __getitem__(self, name):
        return self.load(name)

    def tensor(self, name):
        """Tensor `name` as a `tessera.Tensor` (`tsr_checkpoint_load`),
        for DLPack (`torch.from_dlpack(ckpt.tensor(name))`): any dtype,
        bfloat16 and float8 included, without ml_dtypes."""
        out = ffi.new("struct TsrTensor **")
        check(lib.tsr_checkpoint_load(self._handle(), name.encode(), CPU, 0, out))
        return Tensor(out[0], name)

    def load_rows(self, name, start, stop):
        """Rows [start, stop) of tensor `name` along dim 0
        (`tsr_checkpoint_load_rows`): reads only those rows' bytes."""
        out = ffi.new("struct TsrTensor **")
        check(lib.tsr_checkpoint_load_rows(self._handle(), name.encode(), start, stop,
                                           CPU, 0, out))
        return to_array(out[0], name)

    def load_many(self, names=None):
        """Several tensors (None: all), fetched in parallel
        (`tsr_checkpoint_load_many`)."""
        out = ffi.new("struct TsrTensorDict **")
        if names is None:
            check(lib.tsr_checkpoint_load_many(self._handle(), ffi.NULL, 0, CPU, 0, out))
        else:
            keep = [ffi.new("char[]", n.encode()) for n in names]
            array = ffi.new("const char *[]", keep)
            check(lib.tsr_checkpoint_load_many(self._handle(), array, len(keep), CPU, 0, out))
        return _from_dict(out[0])

    @property
    def bytes_read(self):
        """Bytes read from the file(s) since open
        (`tsr_checkpoint_bytes_read`)."""
        return lib.tsr_checkpoint_bytes_read(self._handle())

    def close(self):
        """Releases the handle (`tsr_checkpoint_close`); arrays stay valid."""
        if self._c is not None:
            c, self._c = self._c, None
            ffi.release(c)  # runs tsr_checkpoint_close now

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open(path, mmap=False, format=None, strict=False, settings=None):
    """The checkpoint at `path` opened for loading in parts: a
    `Checkpoint` (also a context manager). `settings`: a dict of remote
    settings over the environment's for this open only, by the variables'
    names (``{"AWS_ENDPOINT_URL": "http://...", "TSR_REMOTE_CONCURRENCY":
    16}``)."""
    return Checkpoint(path, mmap=mmap, format=format, strict=strict, settings=settings)


# The arrays tessera storages view, by the key their deleter gets.
_ARRAYS = {}
_KEYS = itertools.count(1)


@ffi.callback("void(void *)")
def _release(ctx):
    # The deleter of a storage over an array's memory: drops the reference
    # that kept the array alive.
    _ARRAYS.pop(int(ffi.cast("uintptr_t", ctx)), None)


def _tensor(name, a):
    """A new tensor viewing array `a`'s memory (kept alive until tessera
    releases it)."""
    a = np.asarray(a)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    item = a.dtype.itemsize
    if any(s < 0 or s % item for s in a.strides):
        a = np.ascontiguousarray(a)
    code = tessera_dtype(a.dtype, name)
    extent = (sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + item
              if a.size else 0)
    dp = ffi.new("struct TsrDataPtr *")
    address = a.__array_interface__["data"][0] if a.size else 0
    key = next(_KEYS)
    _ARRAYS[key] = a
    dp.data = ffi.cast("void *", address)
    dp.ctx = ffi.cast("void *", key)
    dp.deleter = _release
    dp.device = CPU
    storage = ffi.new("struct TsrStorage **")
    try:
        check(lib.tsr_storage_from_data_ptr(dp, extent, storage))
    except BaseException:
        _ARRAYS.pop(key, None)
        raise
    s = ffi.gc(storage[0], lib.tsr_storage_decref)
    sizes = ffi.new("int64_t[]", list(a.shape) or [0])
    strides = ffi.new("int64_t[]", [st // item for st in a.strides] or [0])
    out = ffi.new("struct TsrTensor **")
    check(lib.tsr_tensor_from_storage(s, 0, a.ndim, sizes, strides, code, out))
    return out[0]


def save(arrays, path, format=None, metadata=None, non_tensors=None):
    """Saves `arrays` (a mapping of name -> array) to `path` (`tsr_save`)
    in `format`, or the format the path's extension names (.safetensors,
    .npy, .npz, .gguf; torch's zip format otherwise), with the string
    pairs of `metadata` and the `non_tensors` (name -> a JSON-able value: a
    ``global_step``, a config dict) where the format holds them. The file
    is replaced atomically: on an error the old one is unchanged. `path`
    may be an ``s3://BUCKET/KEY`` URL: written locally, then uploaded."""
    out = ffi.new("struct TsrTensorDict **")
    check(lib.tsr_dict_new(out))
    d = ffi.gc(out[0], lib.tsr_dict_free)
    for name, a in arrays.items():
        t = _tensor(name, a)
        try:
            check(lib.tsr_dict_set(d, name.encode(), t))
        finally:
            lib.tsr_tensor_decref(t)
    for k, v in (metadata or {}).items():
        check(lib.tsr_dict_set_metadata(d, str(k).encode(), str(v).encode()))
    for k, v in (non_tensors or {}).items():
        text = json.dumps(v, allow_nan=False)
        check(lib.tsr_dict_set_value_json(d, str(k).encode(), text.encode()))
    check(lib.tsr_save(d, _path(path), _format(format)))
