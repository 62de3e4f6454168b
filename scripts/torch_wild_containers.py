"""The file layouts of old and foreign torch.save files that today's
torch.save no longer writes, made with today's torch for
scripts/make_torch_wild_fixtures.py. Each was checked against what
PyTorch 2.15's torch.load (torch/serialization.py) reads, and each file
made is read back by torch.load there.

- old_pickler(): a pickle module for torch.save(pickle_module=...) whose
  Pickler reduces OrderedDicts through their constructor (Python 2's
  layout) and tensors through torch._utils._rebuild_tensor (PyTorch
  0.4's), so torch's own writer writes those layouts.
- big_endian_zip(): a zip archive as torch.save writes it on a
  big-endian machine.
- big_endian_legacy(): a legacy file as torch.save writes it on a
  big-endian machine.
- legacy_with_views(): a legacy file whose storages have views (PyTorch
  0.3 and before).
- tar_file(): the tar container of PyTorch before 0.1.10.
"""

import collections
import io
import pickle
import struct
import tarfile
import types

import torch


def old_pickler(od=None, tensors=False):
    """A pickle module (for torch.save's pickle_module=) whose Pickler
    writes, for `od` "lists" / "tuples", every OrderedDict as
    OrderedDict([[k, v], ...]) / OrderedDict([(k, v), ...]): its items in
    the constructor's argument, its instance dict (a state dict's
    _metadata) as BUILD state, as Python 2 pickled it; for "both", the
    first half of the items in the constructor's argument and the rest in
    SETITEMS. With `tensors` "rebuild_tensor", each plain tensor is
    reduced as PyTorch 0.4 did, torch._utils._rebuild_tensor(storage,
    offset, size, stride), and each Parameter as _rebuild_parameter(data,
    requires_grad, hooks); with "setstate", each plain tensor as older
    PyTorch did: its class (torch.FloatTensor, ...) called with no
    arguments and BUILD state (storage, offset, size, stride), which
    Tensor.__setstate__ reads (PyTorch's own test_serialization has both
    as OldTensorV1 / V2)."""

    class Pickler(pickle.Pickler):
        def reducer_override(self, obj):
            if od and type(obj) is collections.OrderedDict:
                pairs = [[k, v] if od == "lists" else (k, v) for k, v in obj.items()]
                state = dict(vars(obj)) or None
                if od == "both":
                    half = len(pairs) // 2
                    return (collections.OrderedDict, (pairs[:half],), state, None, iter(pairs[half:]))
                return (collections.OrderedDict, (pairs,), state)
            if tensors == "rebuild_tensor" and type(obj) is torch.nn.Parameter:
                return (torch._utils._rebuild_parameter, (obj.data, obj.requires_grad, collections.OrderedDict()))
            if tensors and type(obj) is torch.Tensor:
                storage = torch.storage.TypedStorage(wrap_storage=obj.untyped_storage(), dtype=obj.dtype, _internal=True)
                args = (storage, obj.storage_offset(), tuple(obj.size()), obj.stride())
                if tensors == "setstate":
                    kind = getattr(torch, storage._pickle_storage_type().replace("Storage", "Tensor"))
                    return (kind, (), args)
                return (torch._utils._rebuild_tensor, args)
            return NotImplemented

    return types.SimpleNamespace(
        Pickler=Pickler, Unpickler=pickle.Unpickler, dump=pickle.dump, load=pickle.load, __name__="old_pickler"
    )


def swap_bytes(data, dtype):
    """`data` (a storage's bytes of `dtype`) with each element's bytes
    reversed, as a big-endian machine holds them; a complex number's two
    parts each on their own (torch's UntypedStorage.byteswap)."""
    size = torch._utils._element_size(dtype)
    if dtype.is_complex:
        size //= 2
    if size == 1 or not data:
        return bytes(data)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(-1, size).flip(1).numpy().tobytes()


def storage_dtypes(pickled):
    """Storage key -> dtype, from the persistent ids of a torch.save
    pickle ('storage', storage type, key, location, numel)."""
    found = {}

    class Reader(pickle.Unpickler):
        def find_class(self, module, name):
            if "Storage" in name:
                return name
            return lambda *args, **kwargs: None

        def persistent_load(self, pid):
            found[pid[2]] = torch.serialization._get_dtype_from_pickle_storage_type(pid[1])

    Reader(io.BytesIO(pickled)).load()
    return found


def big_endian_zip(src, dst):
    """Writes `dst`: the zip archive `src` (torch.save's) as torch.save
    writes it on a big-endian machine. The records are written again in
    their order by torch's own zip writer (PyTorchFileWriter; it adds
    `version` and `.data/serialization_id` itself), each storage record
    data/K with every element byte-swapped (K's dtype from data.pkl) and
    the `byteorder` record "big": torch.load swaps each storage back on a
    little-endian machine (_load: storage.byteswap(dtype) when the record
    names the other order)."""
    reader = torch._C.PyTorchFileReader(str(src))
    records = [r for r in reader.get_all_records() if r not in ("version", ".data/serialization_id")]
    dtypes = storage_dtypes(reader.get_record("data.pkl"))
    writer = torch._C.PyTorchFileWriter(str(dst))
    for name in records:
        data = reader.get_record(name)
        if name == "byteorder":
            data = b"big"
        elif name.startswith("data/"):
            data = swap_bytes(data, dtypes[name.removeprefix("data/")])
        writer.write_record(name, data, len(data))
    writer.write_end_of_file()


def big_endian_legacy(src, dst):
    """Writes `dst`: the legacy file `src` as torch.save writes it on a
    big-endian machine. Only the sys_info pickle differs (little_endian
    False): torch's C++ storage writer (THPStorage_writeFileRaw) always
    writes a storage's element count and bytes little-endian, converting
    on big-endian machines, and torch.load's _legacy_load never reads
    sys_info."""
    data = src.read_bytes()
    f = io.BytesIO(data)
    pickle.load(f)  # the magic number
    pickle.load(f)  # the protocol version
    start = f.tell()
    sys_info = pickle.load(f)
    end = f.tell()
    sys_info["little_endian"] = False
    dst.write_bytes(data[:start] + pickle.dumps(sys_info, protocol=2) + data[end:])


# torch.save's legacy magic number and protocol version (torch/serialization.py).
MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
SYS_INFO = {"protocol_version": PROTOCOL_VERSION, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}


class Storage:
    """A storage of an old file: its key (old torch used the C address,
    str(storage._cdata)), its torch.*Storage class and its tensor of
    values; a view is (root Storage, element offset, element count)."""

    def __init__(self, key, values=None, view=None):
        self.key = key
        self.values = values
        self.view = view

    def root(self):
        return self.view[0] if self.view else self

    def storage_type(self):
        """The legacy typed storage class of the root's dtype
        (torch.FloatStorage for float32)."""
        values = self.root().values
        typed = torch.storage.TypedStorage(wrap_storage=values.untyped_storage(), dtype=values.dtype, _internal=True)
        return getattr(torch, typed._pickle_storage_type())

    def element_count(self):
        return self.root().values.numel()


class OldTensor:
    """A tensor as PyTorch 0.3 / 0.4 pickled it:
    torch._utils._rebuild_tensor(storage, offset, size, stride)."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride))

    def __reduce__(self):
        return (torch._utils._rebuild_tensor, self.args)


def legacy_with_views(path, obj):
    """Writes `path`: the legacy container (torch/serialization.py's
    _legacy_save layout, PyTorch 0.1.10 to 1.5) with `obj` as its main
    pickle (protocol 2), where each Storage is the persistent id
    ('storage', storage class, root key, 'cpu', root element count, view)
    and view is None for a root or (view key, element offset, element
    count) for a view of one (PyTorch 0.3 and before: a tensor of a view
    lies in that part of its root). Then the sorted root keys, then each
    root: its element count (8 bytes, little-endian) and its bytes."""
    roots = {}

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if not isinstance(obj, Storage):
                return None
            root = obj.root()
            roots[root.key] = root
            view = (obj.key, obj.view[1], obj.view[2]) if obj.view else None
            return ("storage", root.storage_type(), root.key, "cpu", root.element_count(), view)

    with open(path, "wb") as f:
        for value in (MAGIC_NUMBER, PROTOCOL_VERSION, SYS_INFO):
            pickle.dump(value, f, protocol=2)
        Pickler(f, protocol=2).dump(obj)
        keys = sorted(roots)
        pickle.dump(keys, f, protocol=2)
        for key in keys:
            values = roots[key].values
            f.write(struct.pack("<q", values.numel()))
            f.write(values.contiguous().view(torch.uint8).numpy().tobytes())


class TarTensor:
    """A tensor of the tar container: its key (int), Storage, offset,
    sizes and strides, named in the main pickle by str(key)."""

    def __init__(self, key, storage, offset, size, stride):
        self.key, self.storage, self.offset, self.size, self.stride = key, storage, offset, size, stride


def tar_file(path, obj, tensors, mtime=1486000000):
    """Writes `path`: torch.save's container before PyTorch 0.1.10, a tar
    archive (PAX format, as tarfile writes it) of four entries in this
    order, every pickle protocol 2 and every number little-endian:

    - sys_info: a pickle of {'protocol_version': 1000, 'little_endian',
      'type_sizes'} (torch 2.15 never reads it);
    - pickle: the main pickle; each tensor in it is the persistent id
      str(tensor key), resolved as int(id) by torch.load (a tuple id
      names a module class: (class, source file, source));
    - tensors: a pickle of the tensor count, then per tensor a pickle of
      (key, storage key, tensor class) followed by its metadata: ndim as
      8 bytes (torch 2.15 reads 4 and skips 4), ndim sizes and ndim
      strides as int64, the storage offset as int64;
    - storages: a pickle of the root storage count, then per root a
      pickle of (key, location, storage class) followed by its element
      count (int64) and bytes; then a pickle of the list of views
      (view key, root key, element offset, element count).

    `obj` is the main pickle's value with TarTensor in place of tensors;
    `tensors` lists every TarTensor (their Storages and views follow)."""
    storages = {}
    for t in tensors:
        storages.setdefault(t.storage.key, t.storage)
        storages.setdefault(t.storage.root().key, t.storage.root())

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return str(obj.key) if isinstance(obj, TarTensor) else None

    def entry(tar, name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mtime = mtime
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))

    main = io.BytesIO()
    Pickler(main, protocol=2).dump(obj)
    tens = io.BytesIO()
    pickle.dump(len(tensors), tens, protocol=2)
    for t in tensors:
        kind = getattr(torch, t.storage.storage_type().__name__.replace("Storage", "Tensor"))
        pickle.dump((t.key, t.storage.key, kind), tens, protocol=2)
        n = len(t.size)
        tens.write(struct.pack(f"<q{n}q{n}qq", n, *t.size, *t.stride, t.offset))
    stor = io.BytesIO()
    roots = [s for s in storages.values() if not s.view]
    pickle.dump(len(roots), stor, protocol=2)
    for s in roots:
        pickle.dump((s.key, "cpu", s.storage_type()), stor, protocol=2)
        stor.write(struct.pack("<q", s.values.numel()))
        stor.write(s.values.contiguous().view(torch.uint8).numpy().tobytes())
    views = [(s.key, s.view[0].key, s.view[1], s.view[2]) for s in storages.values() if s.view]
    pickle.dump(views, stor, protocol=2)

    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        entry(tar, "sys_info", pickle.dumps({**SYS_INFO, "protocol_version": 1000}, protocol=2))
        entry(tar, "pickle", main.getvalue())
        entry(tar, "tensors", tens.getvalue())
        entry(tar, "storages", stor.getvalue())
