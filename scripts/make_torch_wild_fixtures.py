#!/usr/bin/env python3
"""Writes tests/data/torch_wild/: torch.save files in the layouts found
in checkpoints from the wild (older PyTorch eras, Python 2, big-endian
machines, whole pickled modules, tensor subclasses), made with PyTorch
2.15 and checked by tests/torch_wild.rs. Run once, by hand, as
scripts/make_torch_fixtures.py is (the files it writes are committed):

    /tmp/pt/bin/python scripts/make_torch_wild_fixtures.py [OUT_DIR]

The layouts today's torch.save no longer writes are made by
scripts/torch_wild_containers.py (torch's own writer with another pickle
module where it can; by hand, to what torch 2.15's torch.load reads,
where it cannot). Whatever made a file, the expected values are what
torch.load of that file returns, never what was put in.

For every NAME.pt it writes NAME.expected.jsonl in make_torch_fixtures.py's
form (one line per tensor tessera should load, in order), whose last line
also holds:

- container: "zip", "legacy" or "tar" (tessera detects tar as legacy);
- torch_weights_only: whether torch.load reads it with weights_only=True;
- skipped: the exact entries of tessera.skipped (null: not checked);
- skipped_extra: names whose entries are tessera's choice: an entry
  beyond `skipped` must be one of them, or start with one and "." or " ";
- skipped_must_name: strings some entry of tessera.skipped must contain
  (a class, a tensor not loaded);
- skip_unknown: load it with TSR_LOAD_SKIP_UNKNOWN;
- refused_without_skip_unknown: without the flag the load fails and its
  message contains this;
- refused: the load fails and its message contains this (no tensor lines).

A tensor line may also hold "view": {"group", "offset"}: torch gives the
tensor a storage that is a part of group's storage, starting `offset`
elements in (legacy storage views); tessera may load it on that part or
on the whole storage with its offset moved by `offset`.

It also writes README.md there, one line per file.
"""

import collections
import io
import pathlib
import pickle
import pickletools
import sys
import warnings
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import torch  # noqa: E402

import make_torch_fixtures as base  # noqa: E402
import torch_wild_classes as classes  # noqa: E402
import torch_wild_containers as containers  # noqa: E402
from torch_wild_containers import Storage, OldTensor, TarTensor  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_wild"
README = []


def torch_load(path):
    """What torch.load reads from `path`, and whether it did so with
    weights_only=True."""
    try:
        return torch.load(path, weights_only=True), True
    except Exception:
        return torch.load(path, weights_only=False), False


def save(name, obj, container, protocol=2, pickler=None):
    """torch.save(obj) to NAME.pt in the zip or legacy container."""
    path = OUT / f"{name}.pt"
    kwargs = {"_use_new_zipfile_serialization": container == "zip", "pickle_protocol": protocol}
    if pickler is not None:
        kwargs["pickle_module"] = pickler
    torch.save(obj, path, **kwargs)
    return path


def expect(name, container, about, value=lambda loaded: loaded, extra=None, **last):
    """Writes NAME.expected.jsonl from torch.load of NAME.pt: the tensors
    and skipped names of value(what torch.load returned), `last` added to
    (or replacing fields of) the last line. Returns what torch.load
    returned."""
    loaded, weights_only = torch_load(OUT / f"{name}.pt")
    tensors, skipped = [], []
    base.describe(value(loaded), "", tensors, skipped)
    last = {"container": container, "torch_weights_only": weights_only, "skipped": skipped, **last}
    base.write_expected(OUT / f"{name}.expected.jsonl", tensors, last, extra)
    README.append(f"- `{name}.pt` ({container}): {about}")
    return loaded


def refuse(name, container, about, message):
    """Writes NAME.expected.jsonl for a file tessera refuses, its message
    naming `message` (torch.load reads it: checked here)."""
    loaded, weights_only = torch_load(OUT / f"{name}.pt")
    assert isinstance(loaded, dict), name
    last = {"container": container, "torch_weights_only": weights_only, "refused": message}
    base.write_expected(OUT / f"{name}.expected.jsonl", [], last)
    README.append(f"- `{name}.pt` ({container}): {about}; refused naming `{message}`")


def assert_pickle(name, container, has=(), lacks=()):
    """Checks that the main pickle of NAME.pt holds each opcode of `has`
    and none of `lacks`, each given as its name ("SETITEMS") or its name
    and argument ("GLOBAL torch._utils _rebuild_tensor"): the layout
    meant is the layout written."""
    data = (OUT / f"{name}.pt").read_bytes()
    if container == "zip":
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            data = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    else:
        f = io.BytesIO(data)
        for _ in range(3):  # the magic number, the protocol version, sys_info
            pickle.load(f)
        data = data[f.tell() :]
    ops = set()
    for op, arg, _ in pickletools.genops(io.BytesIO(data)):
        ops.update((op.name, f"{op.name} {arg}"))
    assert all(h in ops for h in has) and not any(x in ops for x in lacks), (name, has, lacks)


def same_values(a, b):
    """Whether two torch.load results hold the same tensors, bit for bit."""
    ta, tb = [], []
    base.describe(a, "", ta, [])
    base.describe(b, "", tb, [])
    return [(n, base.row_major_hex(t), t.dtype) for n, t in ta] == [(n, base.row_major_hex(t), t.dtype) for n, t in tb]


def views_of_earlier_storages(tname, t, groups):
    """The "view" field of a tensor whose storage lies inside the storage
    of an earlier group (a legacy storage view)."""
    ptr, n = base.storage_key(t)
    for (root, size), group in groups.items():
        if root <= ptr and ptr + n <= root + size and (root, size) != (ptr, n):
            return {"view": {"group": group, "offset": (ptr - root) // t.element_size()}}
    return {}


# 1. State dicts whose items are the OrderedDict constructor's argument.


def small_state_dict():
    """A state dict of several dtypes, a view sharing a storage, a 0-dim
    int64 and a non-tensor value."""
    w = torch.arange(12, dtype=torch.float32).div(4).view(3, 4)
    od = collections.OrderedDict()
    od["conv.weight"] = w
    od["conv.weight_t"] = w.t()
    od["bn.running_mean"] = torch.tensor([0.5, -1.5, 2.0])
    od["bn.num_batches_tracked"] = torch.tensor(7)
    od["emb.half"] = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float16)
    od["step"] = 12
    return od


def block_state_dict():
    """A real module's state dict (with its _metadata attribute)."""
    torch.manual_seed(0)
    m = classes.Block(2)
    for p in m.parameters():
        base.deterministic(p)
    m.train()
    m(base.deterministic(torch.empty(2, 2, 2, 2)))
    sd = m.state_dict()
    assert hasattr(sd, "_metadata")
    return sd


def ordered_dicts():
    for c in ("zip", "legacy"):
        for mode, how in [
            ("lists", "OrderedDict([[key, value], ...]): items as the constructor's list of lists"),
            ("tuples", "OrderedDict([(key, value), ...]): items as the constructor's list of tuples"),
            ("both", "OrderedDict: half the items in the constructor's list, half in SETITEMS"),
        ]:
            name = f"{c}_od_{mode}"
            save(name, small_state_dict(), c, pickler=containers.old_pickler(od=mode))
            if mode == "both":
                assert_pickle(name, c, has=["GLOBAL collections OrderedDict", "SETITEMS"])
            else:
                assert_pickle(name, c, has=["GLOBAL collections OrderedDict"], lacks=["SETITEMS", "SETITEM"])
            expect(name, c, how)
        name = f"{c}_od_py2_state_dict"
        save(name, block_state_dict(), c, pickler=containers.old_pickler(od="lists"))
        assert_pickle(name, c, has=["GLOBAL collections OrderedDict", "BUILD"])
        expect(
            name,
            c,
            "a module's state dict as Python 2 pickled it: constructor lists, _metadata as BUILD state",
            skipped_extra=["_metadata"],
        )


# 2. The _rebuild functions of torch/_utils.py and torch/_tensor.py.

OLD_REBUILD = "GLOBAL torch._utils _rebuild_tensor"
REBUILD_V2 = "GLOBAL torch._utils _rebuild_tensor_v2"


def rebuilds():
    base_t = torch.arange(24, dtype=torch.float32)
    plain = {
        "base": base_t,
        "part": base_t.view(4, 6)[1:3, ::2],
        "transposed": base_t.view(4, 6).t(),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "long": torch.tensor([[1, -2], [3, 2**40]]),
        "bool": torch.tensor([True, False, True]),
        "empty": torch.zeros(0, 2),
    }
    params = {
        "weight": torch.nn.Parameter(torch.tensor([[0.5, -1.0], [2.0, 0.25]])),
        "frozen": torch.nn.Parameter(torch.tensor([3.0, -3.0]), requires_grad=False),
        "running": torch.tensor([1.5, 2.5]),
    }
    tagged = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0]))
    tagged.tag = "encoder"
    noted = torch.tensor([4.0, 5.0])
    noted.note = "kept"
    era = {
        "epoch": 5,
        "state_dict": block_state_dict(),
        "best": torch.tensor(0.125, dtype=torch.float64),
    }
    for c in ("zip", "legacy"):
        name = f"{c}_rebuild_tensor"
        save(name, plain, c, pickler=containers.old_pickler(tensors="rebuild_tensor"))
        assert_pickle(name, c, has=[OLD_REBUILD], lacks=[REBUILD_V2])
        expect(name, c, "tensors as torch._utils._rebuild_tensor(storage, offset, size, stride) (PyTorch 0.4)")
        name = f"{c}_tensor_setstate"
        save(name, plain, c, pickler=containers.old_pickler(tensors="setstate"))
        assert_pickle(name, c, has=["GLOBAL torch FloatTensor", "GLOBAL torch LongTensor", "BUILD"], lacks=[REBUILD_V2])
        expect(name, c, "tensors as torch.FloatTensor() etc. with BUILD state (storage, offset, size, stride) (before 0.4)")
        name = f"{c}_rebuild_parameter_04"
        save(name, params, c, pickler=containers.old_pickler(tensors="rebuild_tensor"))
        assert_pickle(name, c, has=["GLOBAL torch._utils _rebuild_parameter", OLD_REBUILD], lacks=[REBUILD_V2])
        expect(name, c, "_rebuild_parameter(_rebuild_tensor(...), requires_grad, OrderedDict()) (PyTorch 0.4)")
        name = f"{c}_era04_checkpoint"
        save(name, era, c, pickler=containers.old_pickler(od="lists", tensors="rebuild_tensor"))
        assert_pickle(name, c, has=[OLD_REBUILD, "BUILD"], lacks=[REBUILD_V2])
        expect(
            name,
            c,
            "a PyTorch 0.4 / Python 2 checkpoint: OrderedDict by constructor lists, _metadata, _rebuild_tensor",
            skipped_extra=["state_dict._metadata"],
        )
        name = f"{c}_rebuild_parameter_with_state"
        save(name, {"tagged": tagged, "plain": torch.tensor([7, 8], dtype=torch.int32)}, c)
        assert_pickle(name, c, has=["GLOBAL torch._utils _rebuild_parameter_with_state"])
        expect(
            name,
            c,
            "a Parameter with a Python attribute: _rebuild_parameter_with_state",
            # Its state ({'tag': 'encoder'}) is a value the pickle builds:
            # not loaded, so named.
            skipped_extra=["tagged"],
            skipped_must_name=["tagged"],
        )
        name = f"{c}_rebuild_from_type_v2"
        sub = torch.arange(4, dtype=torch.float32).view(2, 2).as_subclass(classes.TaggedTensor)
        save(name, {"sub": sub, "noted": noted, "plain": torch.tensor([1, 2], dtype=torch.int16)}, c)
        assert_pickle(
            name, c, has=["GLOBAL torch._tensor _rebuild_from_type_v2", "GLOBAL torch_wild_classes TaggedTensor"]
        )
        expect(
            name,
            c,
            "a torch.Tensor subclass and a tensor with a Python attribute: _rebuild_from_type_v2",
            skipped_extra=["sub", "noted"],
            skipped_must_name=["torch_wild_classes.TaggedTensor", "noted"],
            skip_unknown=True,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            special = {
                "quantized": ("_rebuild_qtensor", torch.quantize_per_tensor(torch.tensor([0.5, -1.5]), 0.5, 0, torch.qint8)),
                "sparse_coo": ("_rebuild_sparse_tensor", torch.tensor([[0.0, 1.5], [2.0, 0.0]]).to_sparse()),
                "nested": ("_rebuild_nested_tensor", torch.nested.nested_tensor([torch.arange(3.0), torch.arange(2.0)])),
            }
            if c == "legacy":
                # torch.load rebuilds a nested tensor from its size and
                # stride tensors while unpickling, before the legacy
                # container's storages (after the pickle) are read: torch
                # 2.15 reads garbage sizes from such a file.
                del special["nested"]
            for kind, (func, t) in special.items():
                name = f"{c}_refused_{kind}"
                save(name, {"dense": torch.ones(2), kind: t}, c)
                refuse(name, c, f"a {kind.replace('_', ' ')} tensor beside a dense one", func)


# 3. Byte order.


def many_dtypes():
    f = torch.arange(12, dtype=torch.float32).sub(5.5).mul(1.25)
    return {
        "float32": f,
        "float32_view": f[2:10:3],
        "float64": torch.tensor([1.5, -0.25, 1e300], dtype=torch.float64),
        "int64": torch.tensor([1, -2, 2**40 + 3], dtype=torch.int64),
        "int32": torch.tensor([65536 + 7, -3], dtype=torch.int32),
        "int16": torch.tensor([258, -2, 30000], dtype=torch.int16),
        "float16": torch.tensor([1.0, -2.5, 0.125], dtype=torch.float16),
        "bfloat16": torch.tensor([3.0, -0.5, 100.0], dtype=torch.bfloat16),
        "complex64": torch.tensor([1 + 2j, -3.5j], dtype=torch.complex64),
        "bool": torch.tensor([True, False, True]),
        "uint8": torch.tensor([1, 2, 255], dtype=torch.uint8),
        "int8": torch.tensor([-1, 2, -128], dtype=torch.int8),
    }


def byte_orders():
    little = OUT / "little.tmp.pt"
    torch.save(many_dtypes(), little)
    name = "zip_big_endian"
    containers.big_endian_zip(little, OUT / f"{name}.pt")
    assert same_values(torch_load(little)[0], torch_load(OUT / f"{name}.pt")[0]), name
    expect(name, "zip", "the byteorder record reads big, every storage byte-swapped per element (complex: per part)")
    torch.save(many_dtypes(), little, _use_new_zipfile_serialization=False)
    name = "legacy_big_endian"
    containers.big_endian_legacy(little, OUT / f"{name}.pt")
    assert same_values(torch_load(little)[0], torch_load(OUT / f"{name}.pt")[0]), name
    expect(name, "legacy", "sys_info little_endian False (storages little-endian, as torch always writes them)")
    little.unlink()


# 4. Whole modules.


def net():
    torch.manual_seed(0)
    m = classes.Net()
    for p in m.parameters():
        base.deterministic(p)
    m.train()
    m(base.deterministic(torch.empty(2, 1, 4, 4)))
    return m


def modules():
    m = net()
    for c in ("zip", "legacy"):
        name = f"{c}_module"
        save(name, m, c)
        assert_pickle(name, c, has=["GLOBAL torch_wild_classes Net"] if c == "zip" else ["BINPERSID"])
        loaded, _ = torch_load(OUT / f"{name}.pt")
        names = {f"{type(x).__module__}.{type(x).__qualname__}" for x in loaded.modules()}
        expect(
            name,
            c,
            "torch.save(model) of torch_wild_classes.Net: tensors as model.state_dict() names them",
            value=lambda loaded: loaded.state_dict(keep_vars=True),
            skipped=None,
            skip_unknown=True,
            refused_without_skip_unknown="torch_wild_classes.Net",
            # The classes, the non-persistent buffer and the plain tensor attribute.
            skipped_must_name=sorted(names) + ["scale", "anchor"],
        )


# 5. The tar container (PyTorch before 0.1.10).


def tar():
    a = Storage(94010000000016, torch.arange(12, dtype=torch.float32).div(2))
    view = Storage(94010000000112, view=(a, 6, 4))
    b = Storage(94010000000208, torch.tensor([10, -20, 30], dtype=torch.int64))
    weight = TarTensor(94010000001000, a, 0, (3, 4), (4, 1))
    weight_t = TarTensor(94010000001096, a, 0, (4, 3), (1, 4))
    part = TarTensor(94010000001192, view, 1, (3,), (1,))
    counts = TarTensor(94010000001288, b, 0, (3,), (1,))
    obj = {"weight": weight, "weight_t": weight_t, "part": part, "counts": counts, "same": weight, "epoch": 4}
    name = "tar_state_dict"
    containers.tar_file(OUT / f"{name}.pt", obj, [weight, weight_t, part, counts])
    expect(
        name,
        "tar",
        "torch.save before PyTorch 0.1.10: a tar of sys_info, pickle, tensors, storages; a storage view",
        extra=views_of_earlier_storages,
    )


# 6. Memo sharing and nesting.


def memo():
    t = torch.arange(6, dtype=torch.float32).view(2, 3)
    shared = {"w": torch.tensor([1.0, 2.0]), "n": 3}
    obj = {
        "x": t,
        "y": t,
        "a": shared,
        "b": shared,
        "list": [torch.tensor([1, 2], dtype=torch.int64), t[1], "s"],
        "tuple": (torch.tensor([0.5], dtype=torch.float64), 1.5, None),
        "deep": {"l1": {"l2": {"l3": torch.tensor([[True], [False]])}}},
        "empty": {},
        "int": 7,
        "str": "hello",
        "float": 0.25,
        "none": None,
        "bytes": b"\x00\x01",
    }
    for c, protocols in (("zip", (2, 5)), ("legacy", (2, 4))):
        for p in protocols:
            name = f"{c}_memo_p{p}"
            save(name, obj, c, protocol=p)
            expect(name, c, f"pickle protocol {p}: a tensor and a dict each reached twice, lists, tuples, 3-deep dicts")


# 7. Legacy storage views (PyTorch 0.3 and before).


def legacy_views():
    a = Storage("140250000000016", torch.arange(16, dtype=torch.float32).mul(0.25))
    v1 = Storage("140250000001040", view=(a, 4, 8))
    v2 = Storage("140250000001552", view=(a, 12, 4))
    b = Storage("140250000000528", torch.tensor([258, -2, 7], dtype=torch.int16))
    obj = {
        "whole": OldTensor(a, 0, (16,), (1,)),
        "v1": OldTensor(v1, 2, (2, 3), (3, 1)),
        "v1_again": OldTensor(v1, 0, (4,), (2,)),
        "v2": OldTensor(v2, 0, (2, 2), (1, 2)),
        "shorts": OldTensor(b, 0, (3,), (1,)),
    }
    name = "legacy_storage_views"
    containers.legacy_with_views(OUT / f"{name}.pt", obj)
    assert_pickle(name, "legacy", has=[OLD_REBUILD])
    expect(
        name,
        "legacy",
        "storage views: persistent ids with (view key, offset, numel), tensors by _rebuild_tensor (PyTorch 0.3)",
        extra=views_of_earlier_storages,
    )


def main():
    global OUT
    if len(sys.argv) > 1:
        OUT = pathlib.Path(sys.argv[1])
    OUT.mkdir(parents=True, exist_ok=True)
    ordered_dicts()
    rebuilds()
    byte_orders()
    modules()
    tar()
    memo()
    legacy_views()
    (OUT / "README.md").write_text(
        "# torch_wild\n\n"
        "torch.save files in the layouts of checkpoints from the wild, written with PyTorch "
        f"{torch.__version__} by scripts/make_torch_wild_fixtures.py (which says how each layout "
        "is made, and what the last line of an expected file holds), each with "
        "NAME.expected.jsonl: what torch.load of the file returns (or that tessera refuses it, and "
        "the name its message must hold). tests/torch_wild.rs loads each in tessera, copied and "
        "mapped, and compares. A big-endian GGUF file is beside the other GGUF fixtures: "
        "tests/fixtures/gguf/big_endian.gguf (scripts/make_gguf_fixtures.py; "
        "tests/format_gguf.rs, big_endian_file_loads_swapped).\n\n" + "\n".join(README) + "\n"
    )


if __name__ == "__main__":
    main()
