#!/usr/bin/env python3
"""Writes tests/corpus/manifest.json: what the reference tools read from
each file of the corpus (tests/corpus/packages.json), never tessera.

    python scripts/make_corpus_manifest.py CACHE_DIR [--check]

Needs torch, numpy and safetensors (and omegaconf: one checkpoint pickles
its classes). The files are fetched into CACHE_DIR by
scripts/corpus/fetch.py first. Each file is read by its package's reader:

- torch.load (map_location="cpu"; weights_only=True, and only when that
  refuses a global, weights_only=False: these are pinned files whose
  sha256 is checked, and the manifest then says skip_unknown, the flag
  tessera needs for such a file);
- torch.jit.load for TorchScript archives: the tensors among the
  module's attributes, recursively (the debug iterator
  torch._C._jit_debug_module_iterators gives every attribute, not only
  parameters and buffers), then the tuple of constants.pkl, which
  torch.jit.load does not expose: read by Python's pickle with torch's
  own _rebuild_tensor_v2, its storages from <archive>/constants/;
- numpy.load for .npz; the safetensors package (framework "pt") for
  .safetensors.

Tensor names follow tessera's loader contract (docs/FORMATS.md): dict
keys, nested dicts joined with ".", lists and tuples by index, a whole
nn.Module by its state_dict() names, TorchScript attribute paths then
constants.N, npz entry names without .npy. For each tensor: its dtype
(c10's name), shape and the CRC-32 (zlib.crc32) of its elements in
row-major order, little-endian. --check compares with the committed
manifest instead of writing it.
"""
import argparse
import io
import json
import pickle
import sys
import warnings
import zipfile
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))
import fetch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "tests" / "corpus" / "manifest.json"

TORCH_C10 = {
    "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
    "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
    "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
    "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
}
NUMPY_C10 = {
    "f4": "Float", "f8": "Double", "f2": "Half", "i8": "Long", "i4": "Int", "i2": "Short",
    "i1": "Char", "u1": "Byte", "b1": "Bool", "c8": "ComplexFloat", "c16": "ComplexDouble",
    "u2": "UInt16", "u4": "UInt32", "u8": "UInt64",
}


def row(name, dtype, shape, data):
    return {"name": name, "dtype": dtype, "shape": list(shape),
            "crc32": f"{zlib.crc32(data):08x}"}


def torch_row(name, t):
    import torch
    t = t.detach().cpu().contiguous()
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in TORCH_C10:
        sys.exit(f"tensor '{name}': dtype {dtype} has no c10 name here")
    data = t.reshape(-1).view(torch.uint8).numpy().tobytes()
    return row(name, TORCH_C10[dtype], t.shape, data)


def numpy_row(name, a):
    import numpy as np
    code = f"{a.dtype.kind}{a.dtype.itemsize}"
    if code not in NUMPY_C10:
        sys.exit(f"array '{name}': dtype {a.dtype} has no c10 name here")
    data = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
    return row(name, NUMPY_C10[code], a.shape, data)


def key_part(key):
    # tessera names a str key as it is and an int key in decimal.
    if isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool)):
        return str(key)
    sys.exit(f"dict key {key!r}: tessera's naming of such keys is not written down")


def walk(value, name, out):
    """Appends the tensors under `value` (named `name`) to `out`."""
    import torch
    if isinstance(value, torch.Tensor):
        out.append(torch_row(name, value))
    elif isinstance(value, torch.nn.Module):
        walk(value.state_dict(), name, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            walk(v, f"{name}.{key_part(k)}" if name else key_part(k), out)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            walk(v, f"{name}.{i}" if name else str(i), out)


def read_torch(path):
    import torch
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
        skip_unknown = False
    except pickle.UnpicklingError:
        obj = torch.load(path, map_location="cpu", weights_only=False)
        skip_unknown = True
    out = []
    if isinstance(obj, torch.Tensor):
        out.append(torch_row("tensor", obj))
    else:
        walk(obj, "", out)
    return out, skip_unknown


def torchscript_constants(path):
    """The tuple of constants.pkl, its storages in <archive>/constants/."""
    import torch
    z = zipfile.ZipFile(path)
    [pkl] = [n for n in z.namelist() if n.count("/") == 1 and n.endswith("/constants.pkl")]
    prefix = pkl.rsplit("/", 1)[0]
    allowed = {
        ("torch._utils", "_rebuild_tensor_v2"): torch._utils._rebuild_tensor_v2,
        ("collections", "OrderedDict"): __import__("collections").OrderedDict,
    }

    class Constants(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in allowed:
                return allowed[(module, name)]
            if module == "torch" and name.endswith("Storage"):
                return getattr(torch, name)
            raise pickle.UnpicklingError(f"constants.pkl names {module}.{name}")

        def persistent_load(self, pid):
            _, storage_type, key, _, numel = pid
            data = bytearray(z.read(f"{prefix}/constants/{key}"))
            untyped = torch.UntypedStorage.from_buffer(data, dtype=torch.uint8) if data \
                else torch.UntypedStorage(0)
            return torch.storage.TypedStorage(
                wrap_storage=untyped, dtype=storage_type.dtype, _internal=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "TypedStorage is deprecated"
        return Constants(io.BytesIO(z.read(pkl))).load()


def read_torchscript(path):
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "torch.jit.load is deprecated"
        m = torch.jit.load(path, map_location="cpu")
    out = []
    attrs = torch._C._jit_debug_module_iterators(m._c)["named_attributes_r"]
    for name, value in attrs:
        if not isinstance(value, torch._C.ScriptModule):
            walk(value, name, out)
    for i, t in enumerate(torchscript_constants(path)):
        walk(t, f"constants.{i}", out)
    return out, False


def read_numpy(path):
    import numpy as np
    with np.load(path, allow_pickle=False) as npz:
        return [numpy_row(name, npz[name]) for name in npz.files], False


def read_safetensors(path):
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        return [torch_row(k, f.get_tensor(k)) for k in f.keys()], False


READERS = {
    "torch.load": read_torch,
    "torch.jit.load": read_torchscript,
    "numpy.load": read_numpy,
    "safetensors": read_safetensors,
}


def format_of(reader, path):
    """tessera's format of the file, from its bytes (as the readers see it)."""
    if reader == "safetensors":
        return "safetensors"
    if reader == "numpy.load":
        return "npz" if zipfile.is_zipfile(path) else "npy"
    if reader == "torch.jit.load":
        return "torchscript"
    return "torch" if zipfile.is_zipfile(path) else "torch_legacy"


def entry(pkg, spec, path):
    tensors, skip_unknown = READERS[spec["reader"]](path)
    fmt = format_of(spec["reader"], path)
    return {
        "package": pkg["name"],
        "version": pkg["version"],
        "path": spec["path"],
        "reader": spec["reader"],
        "format": fmt,
        "sha256": fetch.sha256_of(path),
        "bytes": path.stat().st_size,
        # safetensors' header is a JSON object: its names have no order.
        "ordered": fmt != "safetensors",
        "skip_unknown": skip_unknown,
        "tensors": tensors,
    }


def dump(manifest):
    """JSON with one tensor per line."""
    lines = ["{", f'  "about": {json.dumps(manifest["about"])},', '  "files": [']
    for i, f in enumerate(manifest["files"]):
        head = {k: v for k, v in f.items() if k != "tensors"}
        lines.append("    {")
        for k, v in head.items():
            lines.append(f"      {json.dumps(k)}: {json.dumps(v)},")
        lines.append('      "tensors": [')
        rows = [f"        {json.dumps(t)}" for t in f["tensors"]]
        lines.append(",\n".join(rows))
        lines.append("      ]")
        lines.append("    }" + ("," if i + 1 < len(manifest["files"]) else ""))
    lines += ["  ]", "}", ""]
    return "\n".join(line for line in lines if line != "") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache", help="the corpus cache directory (fetched into)")
    ap.add_argument("--check", action="store_true", help="compare with the committed manifest")
    args = ap.parse_args()
    if sys.byteorder != "little":
        sys.exit("the CRCs are of little-endian bytes: run this on a little-endian machine")
    import numpy
    import safetensors
    import torch
    files = fetch.fetch(args.cache)
    manifest = {
        "about": ("Made by scripts/make_corpus_manifest.py with torch "
                  f"{torch.__version__.split('+')[0]}, numpy {numpy.__version__}, "
                  f"safetensors {safetensors.__version__}; do not edit. Per file: its "
                  "sha256, size, tessera format, whether tessera needs skip_unknown, "
                  "and per tensor (in the reader's order) name, c10 dtype, shape and "
                  "the CRC-32 of its row-major little-endian bytes."),
        "files": [entry(pkg, spec, path) for pkg, spec, path in files],
    }
    text = dump(manifest)
    json.loads(text)  # well-formed
    if args.check:
        old = json.loads(MANIFEST.read_text())
        if old["files"] != manifest["files"]:
            sys.exit("tests/corpus/manifest.json differs from what the readers give")
        print("tests/corpus/manifest.json: as the readers give")
        return
    MANIFEST.write_text(text)
    n = sum(len(f["tensors"]) for f in manifest["files"])
    print(f"wrote {MANIFEST.relative_to(ROOT)}: {len(manifest['files'])} files, {n} tensors")


if __name__ == "__main__":
    main()
