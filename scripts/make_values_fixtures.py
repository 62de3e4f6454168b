"""Writes tests/data/values/: a training checkpoint saved by torch.save with
non-tensor values beside its tensors (tests/values.rs reads it).

Run with the venv that has torch: /work/venv-torch/bin/python
scripts/make_values_fixtures.py. The values and what each must load as
are in tests/values.rs.
"""

import argparse
import os

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "values")


def nested(depth):
    v = [1]
    for _ in range(depth - 1):
        v = [v]
    return v


def main():
    os.makedirs(OUT, exist_ok=True)
    ckpt = {
        "model": {"w": torch.arange(4, dtype=torch.float32).reshape(2, 2)},
        "global_step": 1234,
        "lr": 0.001,
        "name": "run-7",
        "done": False,
        "note": None,
        "hidden_dims": [64, 128, 256],
        "shape": (3, 4),
        "config_dict": {
            "n_layers": 4,
            "act": "gelu",
            "dropout": 0.1,
            "tied": True,
            "sizes": [1, 2],
        },
        "mixed": [1, "a", 2.5],
        "empty": [],
        "nan": float("nan"),
        "args": argparse.Namespace(lr=0.1),
        "deep": nested(40),
        "state": {"epoch": 3, "buf": torch.ones(2)},
    }
    torch.save(ckpt, os.path.join(OUT, "checkpoint.pt"))


if __name__ == "__main__":
    main()
