#!/usr/bin/env python3
"""A NumPy workload recorded with tessera's memory history.

    python python/examples/numpy_snapshot.py OUT   # writes OUT.json, OUT.pickle

With numpy_allocator's handler installed and tsr_memory_record_history on,
runs a small numerical workload (a growing list of frames, reductions with
temporaries, a matrix product, np.fromiter's realloc growth, a release of
half the frames; a list keeping a small copy of every frame, the kind of
slow leak the viewer's "small long-lived blocks" shows) and writes
tessera's snapshot twice, each allocation with its Python stack
(numpy_allocator records it while history takes backtraces): tessera's JSON
(scripts/snapshot_report.py / docs/memory_viewer.html read it) and the
pickle pytorch.org/memory_viz reads.
"""
import sys

import numpy as np

from tessera import numpy_allocator


def load_frame(rng):
    f = rng.standard_normal((64, 256))              # 128 KiB
    f -= f.mean(axis=0)                              # a temporary row of means
    return f


def remember(seen, f):
    seen.append(f[0, :96].copy())                    # 768 bytes per frame, never freed


def summarize(frames):
    stack = np.stack(frames[-6:])                    # 6 x 64 KiB in one block
    gram = stack.reshape(6, -1) @ stack.reshape(6, -1).T
    return gram.astype(np.float32)


def workload():
    rng = np.random.default_rng(40)
    frames = []
    seen = []                                        # kept on purpose: a slow leak
    for i in range(24):
        f = load_frame(rng)
        frames.append(f.astype(np.float32))          # a copy, half the size
        remember(seen, f)
        if i % 6 == 5:
            frames.append(summarize(frames))
    big = np.concatenate([f.ravel() for f in frames])
    grown = np.fromiter((x * x for x in range(20000)), dtype=np.float64)  # realloc growth
    del frames[::2]                                  # free half of them
    small = [np.arange(n) for n in range(1, 200, 9)]
    return big, grown, frames, small, seen


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    numpy_allocator.record_history(True, max_entries=100000)
    with numpy_allocator.installed():
        keep = workload()
        s = numpy_allocator.stats()
        numpy_allocator.snapshot(out + ".json")
        numpy_allocator.snapshot(out + ".pickle")
    numpy_allocator.record_history(False)
    print(f"{out}.json, {out}.pickle: {s['allocations']} allocations, {s['frees']} frees, "
          f"{s['live_blocks']} live ({s['current_bytes']} bytes), peak {s['peak_bytes']} bytes")
    del keep


if __name__ == "__main__":
    main()
