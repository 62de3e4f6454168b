#!/usr/bin/env python3
"""Writes the sharded-checkpoint fixtures of tests/data/shards/ with real
PyTorch, and reads back what tessera wrote (issue 53).

Run by hand with PyTorch 2.15 and the safetensors package (torch needs its
CUDA dependency wheels to import, several GB, so CI does not run it; the
files it writes are committed):

    python3 -m venv /tmp/pt && /tmp/pt/bin/pip install torch==2.15.0 numpy safetensors
    /tmp/pt/bin/python scripts/make_shard_fixtures.py [OUT_DIR]
    /tmp/pt/bin/python scripts/make_shard_fixtures.py --check DIR

Writing, under OUT_DIR (default tests/data/shards/):

- hf_safetensors/: a Hugging Face checkpoint in 3 safetensors shards
  (written with safetensors.torch.save_file, split as transformers'
  save_pretrained splits: tensors in order, a new shard when the next
  would pass the limit) and model.safetensors.index.json;
- hf_bin/: the same as torch .bin shards (torch.save per shard, a tied
  weight sharing its storage) and pytorch_model.bin.index.json;
- dcp_1rank/: torch.distributed.checkpoint.save from one process of a
  nested state dict (model, optimizer state, an int step, a bytes value);
- dcp_2ranks/: the same saved by two processes (gloo on 127.0.0.1) of
  DTensors on a 2-device mesh: Shard(0) (uneven: 5 rows), Shard(1),
  Replicate(), a tensor one rank holds no rows of, and plain tensors.

Each checkpoint's NAME.expected.jsonl (beside its directory) has one line
per tensor tessera should load, as tests/common/torch_expected.rs reads:
name, dtype, sizes, contiguous strides, offset, storage group and the
bytes in row-major order, from what torch itself loads back (the
safetensors package / torch.load for HF shards; for DCP,
torch.distributed.checkpoint's own loader into full tensors); the last
line lists the non-tensor entries tessera skips.

--check DIR reads what tessera wrote there (tests/format_shards.rs with
TESSERA_SHARDS_OUT=DIR): DIR/dcp (TSR_FORMAT_DCP) with
torch.distributed.checkpoint.load on one process and on two ranks loading
into DTensors sharded on dim 0; DIR/hf_safetensors and DIR/hf_bin
(tsr_save_sharded) with the safetensors package and torch.load; and
compares each with DIR/expected.jsonl (tessera's own source values).
"""

import argparse
import io
import json
import os
import pathlib
import shutil
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp

warnings.filterwarnings("ignore")
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "shards"


def values(shape, dtype, start=0):
    """Small exact values: (i % 23 - 11) / 4 + start, in dtype."""
    n = 1
    for s in shape:
        n *= s
    v = ((torch.arange(n, dtype=torch.float64) % 23) - 11).div(4).add(start)
    return v.reshape(shape).to(dtype)


def row_major_hex(t):
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes().hex()


def contiguous_strides(sizes):
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= max(s, 1)
    return list(reversed(strides))


def expected_line(name, t, group, strides=None, offset=0):
    return json.dumps({
        "name": name,
        "dtype": str(t.dtype).removeprefix("torch."),
        "sizes": list(t.shape),
        "strides": strides if strides is not None else contiguous_strides(list(t.shape)),
        "offset": offset,
        "group": group,
        "bytes": row_major_hex(t),
    })


def write_expected(path, lines, skipped):
    lines = list(lines) + [json.dumps({"skipped": sorted(skipped)})]
    path.write_text("\n".join(lines) + "\n")
    print(f"{path.name}: {len(lines) - 1} tensors, skipped {sorted(skipped)}")


# ---------------------------------------------------------------- HF shards

def hf_model():
    """An ordered state dict of a small model: 7 tensors, float32 and
    bfloat16 and int64, a tied weight (lm_head.weight is embed.weight)."""
    sd = {}
    sd["embed.weight"] = values((16, 8), torch.float32)
    for i in range(2):
        sd[f"layers.{i}.attn.weight"] = values((8, 8), torch.bfloat16, i)
        sd[f"layers.{i}.mlp.weight"] = values((12, 8), torch.float32, i + 0.5)
    sd["norm.weight"] = values((8,), torch.float32, 1)
    sd["position_ids"] = torch.arange(6, dtype=torch.int64).reshape(1, 6)
    return sd


def split(sd, max_bytes):
    """transformers' rule: tensors in order, each shard closed when the
    next tensor would take it past max_bytes."""
    shards, cur, size = [], {}, 0
    for k, t in sd.items():
        n = t.numel() * t.element_size()
        if cur and size + n > max_bytes:
            shards.append(cur)
            cur, size = {}, 0
        cur[k] = t
        size += n
    if cur:
        shards.append(cur)
    return shards


def write_hf(out, kind):
    from safetensors.torch import save_file, load_file
    d = out / f"hf_{kind}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    sd = hf_model()
    if kind == "bin":
        sd["lm_head.weight"] = sd["embed.weight"]  # tied: one storage in torch.save
    shards = split(sd, 700)
    n = len(shards)
    stem, ext = ("model", "safetensors") if kind == "safetensors" else ("pytorch_model", "bin")
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        fname = f"{stem}-{i + 1:05d}-of-{n:05d}.{ext}"
        if kind == "safetensors":
            save_file(shard, str(d / fname), metadata={"format": "pt"})
        else:
            torch.save(shard, d / fname)
        for k, t in shard.items():
            weight_map[k] = fname
            total += t.numel() * t.element_size()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (d / f"{stem}.{ext}.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    # Expected: what the reference readers give back, in the weight map's
    # (sorted) order; a tied pair shares a storage group.
    lines, groups = [], {}
    loaded = {}
    for fname in sorted(set(weight_map.values())):
        part = load_file(str(d / fname)) if kind == "safetensors" else torch.load(d / fname)
        loaded.update(part)
    for k in sorted(weight_map):
        t = loaded[k]
        key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        g = groups.setdefault(key, len(groups))
        lines.append(expected_line(k, t, g, list(t.stride()), t.storage_offset()))
    write_expected(out / f"hf_{kind}.expected.jsonl", lines, [])


# ---------------------------------------------------------------- DCP

def dcp_state(rank, world, mesh=None):
    """The state dict each rank saves: with a mesh, DTensors of the full
    tensors `full_dcp()` gives; without, the full tensors."""
    full = full_dcp()
    sd = {"model": {}, "optim": {"state": {0: {}}, "param_groups": [{"lr": 0.5, "params": [0]}]},
          "step": 7, "blob": b"tessera"}
    if mesh is None:
        for k in ("row", "col", "rep", "thin", "plain"):
            sd["model"][k] = full[k]
        sd["optim"]["state"][0]["exp_avg"] = full["exp_avg"]
        sd["model"]["scalar"] = full["scalar"]
        return sd
    from torch.distributed.tensor import distribute_tensor, Shard, Replicate
    sd["model"]["row"] = distribute_tensor(full["row"], mesh, [Shard(0)])
    sd["model"]["col"] = distribute_tensor(full["col"], mesh, [Shard(1)])
    sd["model"]["rep"] = distribute_tensor(full["rep"], mesh, [Replicate()])
    sd["model"]["thin"] = distribute_tensor(full["thin"], mesh, [Shard(0)])
    sd["model"]["plain"] = full["plain"]
    sd["model"]["scalar"] = full["scalar"]
    sd["optim"]["state"][0]["exp_avg"] = distribute_tensor(full["exp_avg"], mesh, [Shard(0)])
    return sd


def full_dcp():
    return {
        "row": values((5, 3), torch.float32),
        "col": values((4, 6), torch.bfloat16, 1),
        "rep": values((3, 2), torch.float64, 2),
        "thin": values((1, 4), torch.float32, 3),
        "plain": torch.arange(10, dtype=torch.int64),
        "scalar": torch.tensor(2.5, dtype=torch.float32),
        "exp_avg": values((6,), torch.float32, -1),
    }


DCP_ORDER = ["model.row", "model.col", "model.rep", "model.thin", "model.plain", "model.scalar",
             "optim.state.0.exp_avg"]
DCP_SKIPPED = ["optim.param_groups.0.lr", "optim.param_groups.0.params", "step", "blob"]


def init_gloo(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def save_2ranks(rank, world, port, path):
    init_gloo(rank, world, port)
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (world,))
    dcp.save(dcp_state(rank, world, mesh), checkpoint_id=path)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_reads_dcp(path):
    """Every entry of the DCP checkpoint at `path` as torch's own loader
    gives it in one process: full tensors, flattened names."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    with tempfile.TemporaryDirectory() as tmp:
        dcp_to_torch_save(path, os.path.join(tmp, "all.pt"))
        sd = torch.load(os.path.join(tmp, "all.pt"), weights_only=False)
    flat = {}

    def walk(prefix, v):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(f"{prefix}.{i}" if prefix else str(i), x)
        else:
            flat[prefix] = v
    walk("", sd)
    return flat


def write_dcp(out, ranks):
    name = f"dcp_{ranks}rank" + ("s" if ranks > 1 else "")
    d = out / name
    shutil.rmtree(d, ignore_errors=True)
    if ranks == 1:
        dcp.save(dcp_state(0, 1), checkpoint_id=str(d))
    else:
        mp.spawn(save_2ranks, args=(ranks, free_port(), str(d)), nprocs=ranks, join=True)
    flat = torch_reads_dcp(str(d))
    full = full_dcp()
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata
    md = dcp.FileSystemReader(str(d)).read_metadata().state_dict_metadata
    # tessera keeps the metadata's order (ranks' plans merged).
    order = [k for k, v in md.items() if not isinstance(v, BytesStorageMetadata)]
    assert sorted(order) == sorted(DCP_ORDER), order
    lines = []
    for i, k in enumerate(order):
        t = flat[k]
        assert torch.equal(t, full[k.split(".")[-1]]), k
        lines.append(expected_line(k, t, i))
    skipped = [k for k, v in md.items() if isinstance(v, BytesStorageMetadata)]
    assert sorted(skipped) == sorted(DCP_SKIPPED), skipped
    write_expected(out / f"{name}.expected.jsonl", lines, skipped)


# ---------------------------------------------------------------- hostile

class _Call:
    """Pickles as a call of `fn(*args)`: a global tessera must refuse."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def write_hostile(out):
    """hostile/: copies of real checkpoints with one thing wrong each,
    for tests/format_shards.rs and the bad-input table (tsr_load must
    refuse each naming what is wrong). Only the files a case needs are
    there: a case refused from its metadata has no .distcp file."""
    import copy
    import pickle
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex
    h = out / "hostile"
    shutil.rmtree(h, ignore_errors=True)
    h.mkdir()
    src = out / "dcp_2ranks"
    base = pickle.loads((src / ".metadata").read_bytes())

    def dcp_case(name, change, files=()):
        d = h / name
        d.mkdir()
        m = copy.deepcopy(base)
        change(m)
        (d / ".metadata").write_bytes(pickle.dumps(m))
        for f in files:
            shutil.copy(src / f, d / f)

    def move_chunk(m, fqn, i, offsets=None, sizes=None):
        md = m.state_dict_metadata[fqn]
        old = md.chunks[i]
        new = ChunkStorageMetadata(offsets=torch.Size(offsets or old.offsets),
                                   sizes=torch.Size(sizes or old.sizes))
        md.chunks[i] = new
        key = next(k for k in m.storage_data if k.fqn == fqn and k.offset == old.offsets)
        info = m.storage_data.pop(key)
        m.storage_data[MetadataIndex(fqn, new.offsets, i)] = info

    # model.row is [5, 3] in chunks [3, 3] at [0, 0] and [2, 3] at [3, 0].
    dcp_case("dcp_overlap", lambda m: move_chunk(m, "model.row", 1, offsets=[2, 0]))
    dcp_case("dcp_hole", lambda m: move_chunk(m, "model.row", 1, sizes=[1, 3]))
    dcp_case("dcp_past_tensor", lambda m: move_chunk(m, "model.row", 1, sizes=[3, 3]))

    def past_file(m):
        key = next(k for k in m.storage_data if k.fqn == "model.plain")
        m.storage_data[key].length += 1 << 20
    dcp_case("dcp_past_file", past_file, files=["__0_0.distcp", "__1_0.distcp"])
    dcp_case("dcp_missing_file", lambda m: None, files=["__0_0.distcp"])

    def outside(m):
        for info in m.storage_data.values():
            if info.relative_path == "__1_0.distcp":
                info.relative_path = "../dcp_past_file/__1_0.distcp"
    dcp_case("dcp_outside", outside)

    def layout(m):
        m.state_dict_metadata["model.rep"].properties.layout = torch.sparse_coo
    dcp_case("dcp_layout", layout)

    def transform(m):
        key = next(k for k in m.storage_data if k.fqn == "model.rep")
        m.storage_data[key].transform_descriptors = ["stream.zstd"]
    dcp_case("dcp_transform", transform)

    def unknown_global(m):
        m.storage_meta.checkpoint_id = _Call(os.system, "echo pwned")
    dcp_case("dcp_unknown_global", unknown_global)

    # A symbolic link out of the directory: the files are links to the
    # real checkpoint's.
    d = h / "dcp_symlink_out"
    d.mkdir()
    shutil.copy(src / ".metadata", d / ".metadata")
    for f in ("__0_0.distcp", "__1_0.distcp"):
        os.symlink(f"../../dcp_2ranks/{f}", d / f)

    # Hugging Face indexes, over copies of hf_safetensors' shards.
    hs = out / "hf_safetensors"
    index = json.loads((hs / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))

    def hf_case(name, change, copy_shards=True):
        d = h / name
        d.mkdir()
        if copy_shards:
            for f in shards:
                shutil.copy(hs / f, d / f)
        ix = copy.deepcopy(index)
        change(ix, d)
        (d / "model.safetensors.index.json").write_text(json.dumps(ix, indent=2, sort_keys=True))

    def set_file(ix, fname):
        first = sorted(ix["weight_map"])[0]
        ix["weight_map"][first] = fname
    hf_case("hf_dotdot", lambda ix, d: set_file(ix, "../../hf_safetensors/" + shards[0]), False)
    hf_case("hf_absolute", lambda ix, d: set_file(ix, "/etc/passwd"), False)
    hf_case("hf_missing_file", lambda ix, d: set_file(ix, "model-00009-of-00009.safetensors"))

    def two_shards(ix, d):
        # embed.weight listed in shard 1 and also written into shard 2.
        from safetensors.torch import load_file, save_file
        p2 = d / shards[1]
        t2 = load_file(str(p2))
        t2["embed.weight"] = load_file(str(d / shards[0]))["embed.weight"]
        save_file(t2, str(p2), metadata={"format": "pt"})
    hf_case("hf_two_shards", two_shards)

    def missing_tensor(ix, d):
        ix["weight_map"]["lm_head.weight"] = shards[0]
    hf_case("hf_missing_tensor", missing_tensor)

    def total(ix, d):
        ix["metadata"]["total_size"] += 4
    hf_case("hf_total_size", total)

    d = h / "hf_symlink_out"
    d.mkdir()
    shutil.copy(hs / "model.safetensors.index.json", d / "model.safetensors.index.json")
    for f in shards:
        os.symlink(f"../../hf_safetensors/{f}", d / f)
    print(f"hostile/: {len(list(h.iterdir()))} cases")


# ---------------------------------------------------------------- --check

def read_expected(path):
    rows = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    return [r for r in rows if "name" in r]


def tensor_of(row):
    dtype = getattr(torch, row["dtype"])
    b = bytearray.fromhex(row["bytes"])
    t = torch.frombuffer(b, dtype=torch.uint8) if b else torch.empty(0, dtype=torch.uint8)
    return t.view(dtype).reshape(row["sizes"]).clone()


def check_dcp_1(path, rows):
    sd = {r["name"]: torch.zeros(r["sizes"], dtype=getattr(torch, r["dtype"])) for r in rows}
    dcp.load(sd, checkpoint_id=path)
    for r in rows:
        assert torch.equal(sd[r["name"]], tensor_of(r)), f"one process: {r['name']} differs"
    flat = torch_reads_dcp(path)
    assert sorted(flat) == sorted(r["name"] for r in rows), sorted(flat)
    print(f"dcp, one process: {len(rows)} tensors equal (dcp.load and dcp_to_torch_save)")


def load_2ranks(rank, world, port, path, rows):
    init_gloo(rank, world, port)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard
    mesh = init_device_mesh("cpu", (world,))
    sd = {}
    for r in rows:
        z = torch.zeros(r["sizes"], dtype=getattr(torch, r["dtype"]))
        sd[r["name"]] = distribute_tensor(z, mesh, [Shard(0)]) if z.dim() > 0 else z
    dcp.load(sd, checkpoint_id=path)
    for r in rows:
        t = sd[r["name"]]
        want = tensor_of(r)
        if hasattr(t, "to_local"):
            local = t.to_local()
            full = t.full_tensor()
            assert torch.equal(full, want), f"rank {rank}: {r['name']} differs"
            # The local shard is this rank's rows of the full tensor.
            rows_per = -(-want.shape[0] // world)
            mine = want[rank * rows_per:(rank + 1) * rows_per]
            assert torch.equal(local, mine), f"rank {rank}: local shard of {r['name']} differs"
        else:
            assert torch.equal(t, want), f"rank {rank}: {r['name']} differs"
    dist.barrier()
    if rank == 0:
        print(f"dcp, two ranks (DTensors Shard(0)): {len(rows)} tensors equal on both ranks")
    dist.destroy_process_group()


def check_hf(d, kind, rows):
    from safetensors.torch import load_file
    stem, ext = ("model", "safetensors") if kind == "safetensors" else ("pytorch_model", "bin")
    index = json.loads((d / f"{stem}.{ext}.index.json").read_text())
    loaded, total = {}, 0
    for fname in sorted(set(index["weight_map"].values())):
        assert not os.path.isabs(fname) and ".." not in fname, fname
        part = load_file(str(d / fname)) if kind == "safetensors" else torch.load(d / fname)
        for k, t in part.items():
            assert index["weight_map"][k] == fname, (k, fname)
            assert k not in loaded, k
            loaded[k] = t
            total += t.numel() * t.element_size()
    assert total == index["metadata"]["total_size"], (total, index["metadata"])
    assert sorted(loaded) == sorted(r["name"] for r in rows), sorted(loaded)
    for r in rows:
        assert torch.equal(loaded[r["name"]], tensor_of(r)), f"{kind}: {r['name']} differs"
    files = sorted(set(index["weight_map"].values()))
    print(f"hf {kind}: {len(rows)} tensors equal in {len(files)} shards ({', '.join(files)})")


def check(dir_):
    d = pathlib.Path(dir_)
    rows = read_expected(d / "expected.jsonl")
    check_dcp_1(str(d / "dcp"), rows)
    mp.spawn(load_2ranks, args=(2, free_port(), str(d / "dcp"), rows), nprocs=2, join=True)
    for kind in ("safetensors", "bin"):
        check_hf(d / f"hf_{kind}", kind, rows)
    print("check: done")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", nargs="?", default=str(OUT))
    p.add_argument("--check", metavar="DIR")
    a = p.parse_args()
    if a.check:
        check(a.check)
        return
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}")
    write_hf(out, "safetensors")
    write_hf(out, "bin")
    write_dcp(out, 1)
    write_dcp(out, 2)
    write_hostile(out)


if __name__ == "__main__":
    main()
