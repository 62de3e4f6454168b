#!/usr/bin/env python3
"""Writes the torch.save fixtures of tests/data/torch_save/ with Python's torch.

Run once, by hand, with PyTorch 2.15 (it needs torch's CUDA dependency
wheels to import, several GB, so CI does not run it; the files it writes
are committed):

    python3 -m venv /tmp/pt && /tmp/pt/bin/pip install torch==2.15.0 numpy
    /tmp/pt/bin/python scripts/make_torch_fixtures.py [OUT_DIR]

For every file it writes FILE.pt and FILE.expected.jsonl: one line per
tensor tessera should load, in order, with its name (nested dicts joined
with "."), dtype (c10's name), sizes, strides, storage offset, the
storage group it shares (tensors with the same group share one storage
in the file) and its elements' bytes in row-major order, in hex, as torch
itself reads them back; and a last line {"skipped": [...]} with the
names of the non-tensor values tessera skips. tests/torch_fixtures.rs
loads each file and compares.
"""

import argparse
import collections
import json
import pathlib
import sys

import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_save"


def deterministic(t):
    """Fills a float tensor with small exact binary fractions."""
    with torch.no_grad():
        n = t.numel()
        t.copy_((torch.arange(n, dtype=torch.float64) % 17 - 8).div(8).reshape(t.shape))
    return t


def module():
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Linear(4, 3),
        torch.nn.ReLU(),
        torch.nn.BatchNorm1d(3),
        torch.nn.Linear(3, 2),
    )
    for p in m.parameters():
        deterministic(p)
    m.train()
    m(deterministic(torch.empty(5, 4)))  # updates BatchNorm's running stats
    return m


def row_major_hex(t):
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes().hex()


def describe(obj, prefix, tensors, skipped):
    """Walks what torch.load returned as tessera names it: dict keys and
    list / tuple indices joined with "."; each tensor into `tensors` as
    (name, tensor), each other value's name into `skipped` (an empty dict,
    list or tuple holds no value and adds nothing)."""
    if isinstance(obj, torch.Tensor):
        tensors.append((prefix, obj))
        return
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        skipped.append(prefix)
        return
    for k, v in items:
        describe(v, f"{prefix}.{k}" if prefix else str(k), tensors, skipped)


def storage_key(t):
    """What tells a tensor's storage from another: its address and length
    (a view storage of a legacy file shares its root's memory at another
    address, or at the same address with another length)."""
    s = t.untyped_storage()
    return (s.data_ptr(), s.nbytes())


def expected_lines(tensors, last, extra=None):
    """The lines of NAME.expected.jsonl: one per (name, tensor) of
    `tensors`, then the dict `last` (its "skipped" key at least), and the
    number of storages. extra(name, tensor, groups), when given, returns
    more fields for a tensor's line (groups: storage_key -> group)."""
    groups = {}
    lines = []
    for tname, t in tensors:
        group = groups.setdefault(storage_key(t), len(groups))
        row = {
            "name": tname,
            "dtype": str(t.dtype).removeprefix("torch."),
            "parameter": isinstance(t, torch.nn.Parameter),
            "sizes": list(t.shape),
            "strides": list(t.stride()),
            "offset": t.storage_offset(),
            "group": group,
            "bytes": row_major_hex(t),
        }
        if extra is not None:
            row.update(extra(tname, t, groups))
        lines.append(json.dumps(row))
    lines.append(json.dumps(last))
    return lines, len(groups)


def write_expected(path, tensors, last, extra=None):
    """Writes `path` (NAME.expected.jsonl, see expected_lines) and says
    what it holds."""
    lines, storages = expected_lines(tensors, last, extra)
    path.write_text("\n".join(lines) + "\n")
    print(f"{path.name}: {len(tensors)} tensors, {storages} storages, {json.dumps(last)}")


def write(name, obj, legacy=False, script=None):
    """Saves obj (torch.save; legacy: the pre-1.6 format) or the scripted
    module `script` (torch.jit.save), and what torch reads back. For a
    scripted module the reference is its state dict, and the skipped
    values are not listed (null): its attributes are many."""
    path = OUT / f"{name}.pt"
    if script is not None:
        torch.jit.save(script, path)
        back = dict(torch.jit.load(path).state_dict())
    else:
        # legacy: the format torch.save wrote before PyTorch 1.6 (pickles
        # and raw storages in a row, no zip), still written on request.
        torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
        # What torch itself reads back is the reference (a file with
        # globals outside weights_only's list is read in full).
        try:
            back = torch.load(path, weights_only=True)
        except Exception:
            back = torch.load(path, weights_only=False)
    tensors, skipped = [], []
    describe(back, "", tensors, skipped)
    if script is not None or any(not isinstance(v, (dict, torch.Tensor, int, str, float)) for v in back.values()):
        skipped = None
    write_expected(OUT / f"{name}.expected.jsonl", tensors, {"skipped": skipped})


def training_checkpoint(m):
    """A checkpoint as training scripts write it: the epoch, the argparse
    options (a global outside torch.load's weights_only allowlist), the
    model's and the optimizer's state dicts."""
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    loss = m(deterministic(torch.empty(5, 4))).square().sum()
    loss.backward()
    opt.step()
    return {
        "epoch": 3,
        "args": argparse.Namespace(lr=0.1, batch_size=32, arch="mlp"),
        "model": m.state_dict(),
        "optimizer": opt.state_dict(),
    }


def main():
    global OUT
    if len(sys.argv) > 1:
        OUT = pathlib.Path(sys.argv[1])
    OUT.mkdir(parents=True, exist_ok=True)
    m = module()

    # 1. A module's state dict with its Parameters (keep_vars: the
    #    parameters are saved as nn.Parameter, rebuilt by
    #    torch._utils._rebuild_parameter), buffers as plain tensors.
    write("module_parameters", m.state_dict(keep_vars=True))
    write("legacy_module_parameters", m.state_dict(keep_vars=True), legacy=True)

    # 2. An OrderedDict of tensors of several dtypes, views sharing one
    #    storage (a transpose, a slice), a 0-dim and a 0-size tensor.
    base = torch.arange(24, dtype=torch.float32)
    od = collections.OrderedDict()
    od["base"] = base
    od["transposed"] = base.view(4, 6).t()
    od["slice"] = base[5:17:3]
    od["half"] = torch.linspace(-2, 2, 9, dtype=torch.float16)
    od["bfloat16"] = torch.linspace(-3, 3, 7, dtype=torch.bfloat16)
    od["float64"] = torch.tensor([1.5, -0.25, 1e300], dtype=torch.float64)
    od["int64"] = torch.tensor([[1, -2], [3, 2**40]], dtype=torch.int64)
    od["uint8"] = torch.arange(0, 250, 25, dtype=torch.uint8)
    od["bool"] = torch.tensor([True, False, True])
    od["complex64"] = torch.tensor([1 + 2j, -3.5j], dtype=torch.complex64)
    od["scalar"] = torch.tensor(3.5)
    od["empty"] = torch.zeros(0, 3)
    write("ordered_dict", od)
    write("legacy_ordered_dict", od, legacy=True)

    # 3. A training checkpoint: nested dicts, an int epoch and other
    #    non-tensor values (skipped by tessera, their names in metadata).
    ckpt = {
        "model": m.state_dict(),
        "ema": {"decay": torch.tensor(0.999, dtype=torch.float64), "shadow": {"w": deterministic(torch.empty(2, 2))}},
        "epoch": 7,
        "tag": "run-1",
        "lr": 0.05,
    }
    write("nested_checkpoint", ckpt)
    write("legacy_nested_checkpoint", ckpt, legacy=True)

    # 4. A scripted module (torch.jit.save): __torch__.* objects in
    #    data.pkl, tensors named by attribute path; code/ is never read.
    m.eval()
    write("torchscript_module", None, script=torch.jit.script(m))

    # 5. A training checkpoint with argparse.Namespace (needs
    #    TSR_LOAD_SKIP_UNKNOWN) and an optimizer's state.
    write("training_checkpoint", training_checkpoint(module()))


if __name__ == "__main__":
    main()
