"""CI's check of tessera's sharded safetensors save with the safetensors
package (numpy; no torch), .ci/serialization-interop.sh:

    python3 shards_safetensors_check.py DIR

DIR is what `TESSERA_SHARDS_OUT=DIR cargo test --test format_shards`
wrote: DIR/hf_safetensors (tsr_save_sharded) and DIR/expected.jsonl (the
saved dict's values). The index must name every shard file inside its
directory, every tensor once, and total_size must be the tensors' bytes;
each tensor's bytes must equal the expected ones (bfloat16, which numpy
lacks, is compared through the raw header and bytes).
"""
import json
import os
import struct
import sys

import numpy as np
from safetensors.numpy import load_file


def raw_tensors(path):
    """name -> (dtype, shape, bytes) read from the file's header."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = (v["dtype"], v["shape"], data[a:b])
    return out


def main():
    d = sys.argv[1]
    rows = [json.loads(l) for l in open(os.path.join(d, "expected.jsonl")) if l.strip()]
    hf = os.path.join(d, "hf_safetensors")
    index = json.load(open(os.path.join(hf, "model.safetensors.index.json")))
    files = sorted(set(index["weight_map"].values()))
    seen, total = {}, 0
    for f in files:
        assert os.path.dirname(f) == "" and not os.path.isabs(f), f
        path = os.path.join(hf, f)
        raw = raw_tensors(path)
        try:
            arrays = load_file(path)
        except TypeError:  # bfloat16: numpy has no such dtype
            arrays = {}
        for k, (dtype, shape, data) in raw.items():
            assert index["weight_map"][k] == f, (k, f)
            assert k not in seen, k
            if k in arrays:
                assert list(arrays[k].shape) == shape and arrays[k].tobytes() == data, k
            seen[k] = (shape, data)
            total += len(data)
    assert total == index["metadata"]["total_size"], (total, index["metadata"])
    assert sorted(seen) == sorted(r["name"] for r in rows), sorted(seen)
    for r in rows:
        shape, data = seen[r["name"]]
        assert shape == r["sizes"] and data.hex() == r["bytes"], r["name"]
    print(f"safetensors {len(rows)} tensors equal in {len(files)} shards of tessera's sharded save")


main()
