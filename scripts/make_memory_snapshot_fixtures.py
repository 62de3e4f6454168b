#!/usr/bin/env python3
"""Writes the PyTorch memory snapshots of tests/data/memory_snapshot/.

Run once, by hand, with PyTorch 2.15 (CPU is enough; the files it writes
are committed):

    /tmp/pt/bin/python scripts/make_memory_snapshot_fixtures.py [OUT_DIR]

- torch_profile.pickle: written by PyTorch itself. Three training steps
  of a small model run under torch.profiler with profile_memory=True;
  torch.cuda._memory_viz._profile_to_snapshot turns the profile into the
  dictionary memory_viz loads (the same layout as
  torch.cuda.memory._snapshot(), which needs a GPU): one segment whose
  blocks have sizes but no addresses, and one device trace of alloc /
  free_requested / free_completed entries without times.
- torch_cuda_layout.pickle: the dictionary torch.cuda.memory._snapshot()
  returns on a GPU, built here field by field as PyTorch 2.15 writes it
  (no GPU on the machine that made it): two devices; segments with
  addresses, segment types and blocks in the three states (one block in
  the layout of PyTorch before 2.1, its frames under "history"); traces
  with Unix times in microseconds, segment_alloc, free_requested before
  free_completed, a block still pending free, an oom and a "snapshot"
  entry. As PyTorch's allocator, trace entries carry the size the caller
  asked for (a block's requested_size), blocks the rounded size.
  tests/cli.rs checks what `tessera memory-view` makes of both
  (`memory_view_reads_pytorch_snapshots`).
"""

import pathlib
import pickle
import sys

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "memory_snapshot"


def profile_snapshot():
    import torch
    from torch.cuda import _memory_viz
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        for _ in range(3):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    return _memory_viz._profile_to_snapshot(prof)


def frame(name, filename, line):
    return {"filename": filename, "line": line, "name": name}


def cuda_layout_snapshot():
    train = [frame("forward", "model.py", 12), frame("train_step", "train.py", 40)]
    load = [frame("load_weights", "train.py", 8)]
    t0 = 1_790_000_000_000_000  # Unix time, microseconds
    mib = 1 << 20
    base0, base1 = 0x7F0000000000, 0x7F8000000000
    segments = [
        {"device": 0, "address": base0, "total_size": 2 * mib, "allocated_size": mib + 512,
         "active_size": mib + 512, "requested_size": mib + 500, "stream": 0,
         "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
         "frames": train,
         "blocks": [
             {"address": base0, "size": mib, "requested_size": mib, "state": "active_allocated",
              "frames": load},
             {"address": base0 + mib, "size": 512, "requested_size": 500,
              "state": "active_pending_free", "frames": train},
             {"address": base0 + mib + 512, "size": mib - 512, "requested_size": 0,
              "state": "inactive", "frames": []},
         ]},
        {"device": 1, "address": base1, "total_size": 2 * mib, "allocated_size": 4096,
         "active_size": 4096, "requested_size": 4096, "stream": 7,
         "segment_type": "small", "segment_pool_id": (0, 0), "is_expandable": False,
         "frames": [],
         "blocks": [
             # PyTorch before 2.1: frames and the size asked for under "history".
             {"address": base1, "size": 4096, "state": "active_allocated",
              "history": [{"addr": base1, "real_size": 4000, "frames": train}]},
             {"address": base1 + 4096, "size": 2 * mib - 4096, "state": "inactive"},
         ]},
    ]
    trace0 = [
        {"action": "segment_alloc", "addr": base0, "size": 2 * mib, "stream": 0, "time_us": t0,
         "frames": load},
        {"action": "alloc", "addr": base0, "size": mib, "stream": 0, "time_us": t0 + 10,
         "frames": load},
        {"action": "alloc", "addr": base0 + mib, "size": 500, "stream": 0, "time_us": t0 + 20,
         "frames": train},
        {"action": "alloc", "addr": base0 + mib + 512, "size": 1024, "stream": 0,
         "time_us": t0 + 30, "frames": train},
        {"action": "free_requested", "addr": base0 + mib + 512, "size": 1024, "stream": 0,
         "time_us": t0 + 40, "frames": train},
        {"action": "free_completed", "addr": base0 + mib + 512, "size": 1024, "stream": 0,
         "time_us": t0 + 41, "frames": train},
        # Still pending at snapshot time: its block is active_pending_free.
        {"action": "free_requested", "addr": base0 + mib, "size": 500, "stream": 0,
         "time_us": t0 + 50, "frames": train},
        {"action": "oom", "addr": 0, "size": 80 * mib, "stream": 0, "time_us": t0 + 60,
         "device_free": 1024, "frames": train},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": t0 + 70,
         "frames": []},
    ]
    trace1 = [
        {"action": "alloc", "addr": base1, "size": 4000, "stream": 7, "time_us": t0 + 25,
         "frames": train},
    ]
    return {
        "segments": segments,
        "device_traces": [trace0, trace1],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1},
    }


def main():
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    out.mkdir(parents=True, exist_ok=True)
    for name, snap in (("torch_cuda_layout.pickle", cuda_layout_snapshot()),
                       ("torch_profile.pickle", profile_snapshot())):
        data = pickle.dumps(snap)  # the default protocol, as pickle.dump writes
        (out / name).write_bytes(data)
        print("%s: %d bytes" % (out / name, len(data)))


if __name__ == "__main__":
    main()
