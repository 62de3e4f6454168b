"""Issue 67's row: `tessera.load` of checkpoints of >= 1 GiB into NumPy
against the tool a Python user would pick for each format, in one
process, sides interleaved round by round, page cache warm:

- safetensors (checkpoint_loads.py's 2.1 GiB of 543 float16 tensors):
  tessera.load against safetensors.numpy.load_file;
- npy (one 1 GiB float32 array): tessera.load against np.load;
- torch zip (the same 543 tensors, torch.save): tessera.load against
  torch.load(mmap=False) with .numpy() of every tensor.

Each sample is one load and the release of what it loaded. Prints a
markdown table per format (median, quartiles, slowest) and the ratio of
tessera's median to the fastest peer's (target <= 1.0x).

    /work/venv-torch/bin/python benches/python_load.py

with the package installed there (`pip install .` or the wheel of
`maturin build --release`). ROUNDS=n (default 7); BENCH_DIR=dir for the
files (default $TMPDIR).
"""

import gc
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_loads import measure, model_tensors  # noqa: E402

import numpy as np  # noqa: E402
import safetensors.numpy  # noqa: E402
import torch  # noqa: E402

import tessera  # noqa: E402


def torch_numpy(path):
    return {k: v.numpy() for k, v in torch.load(path, mmap=False).items()}


def main():
    rounds = int(os.environ.get("ROUNDS", "7"))
    d = tempfile.mkdtemp(dir=os.environ.get("BENCH_DIR"))
    try:
        tensors = model_tensors()
        st = os.path.join(d, "model.safetensors")
        safetensors.numpy.save_file(tensors, st)
        pt = os.path.join(d, "model.pt")
        torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, pt)
        del tensors
        npy = os.path.join(d, "big.npy")
        np.save(npy, np.random.default_rng(67).random((1 << 28,), dtype=np.float32))
        gc.collect()
        cases = [
            ("safetensors, 2.1 GiB in 543 tensors", st,
             "safetensors.numpy.load_file", safetensors.numpy.load_file),
            ("npy, one 1 GiB array", npy, "np.load", np.load),
            ("torch zip, 2.1 GiB in 543 tensors", pt,
             "torch.load + .numpy()", torch_numpy),
        ]
        for title, path, peer_name, peer in cases:
            sides = [("tessera.load", lambda p=path: tessera.load(p)),
                     (peer_name, lambda p=path, f=peer: f(p))]
            measure(title, sides, rounds,
                    [("tessera.load / " + peer_name, 0, 1, 1.0),
                     ("tessera's slowest / median", 0, None, 1.5)])
    finally:
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)


if __name__ == "__main__":
    main()
