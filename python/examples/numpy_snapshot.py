#!/usr/bin/env python3
"""A NumPy workload recorded with tessera's memory history.

    python python/examples/numpy_snapshot.py OUT   # writes OUT.json, OUT.pickle

With tessera_numpy's handler installed and tsr_memory_record_history on,
runs a small numerical workload (a growing list of frames, reductions with
temporaries, a matrix product, np.fromiter's realloc growth, a release of
half the frames) and writes tessera's snapshot twice: tessera's JSON
(scripts/snapshot_report.py / docs/memory_viewer.html read it) and the
pickle pytorch.org/memory_viz reads.
"""
import sys

import numpy as np

import tessera_numpy


def workload():
    rng = np.random.default_rng(40)
    frames = []
    for i in range(24):
        f = rng.standard_normal((64, 256))          # 128 KiB each
        f -= f.mean(axis=0)                          # a temporary row of means
        frames.append(f.astype(np.float32))          # a copy, half the size
        if i % 6 == 5:
            stack = np.stack(frames[-6:])            # 6 x 64 KiB in one block
            gram = stack.reshape(6, -1) @ stack.reshape(6, -1).T
            frames.append(gram.astype(np.float32))
    big = np.concatenate([f.ravel() for f in frames])
    grown = np.fromiter((x * x for x in range(20000)), dtype=np.float64)  # realloc growth
    del frames[::2]                                  # free half of them
    small = [np.arange(n) for n in range(1, 200, 9)]
    return big, grown, frames, small


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    tessera_numpy.record_history(True, max_entries=100000)
    with tessera_numpy.installed():
        keep = workload()
        s = tessera_numpy.stats()
        tessera_numpy.snapshot(out + ".json")
        tessera_numpy.snapshot(out + ".pickle")
    tessera_numpy.record_history(False)
    print(f"{out}.json, {out}.pickle: {s['allocations']} allocations, {s['frees']} frees, "
          f"{s['live_blocks']} live ({s['current_bytes']} bytes), peak {s['peak_bytes']} bytes")
    del keep


if __name__ == "__main__":
    main()
