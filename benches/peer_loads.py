"""Issue 56's NumPy and GGUF rows of "loads against the peers users have".

tessera's tsr_load (libtessera.so through ctypes) against the loaders
Python users have, in one process, same files, same page-cache state (each
file is loaded once by every side before the timed rounds), sides
interleaved round by round:

- npy (1 GiB, one float32 array, written by np.save): np.load (copy) and
  np.load(mmap_mode='c' / 'r') against tessera's copy load, TSR_LOAD_MMAP
  (a private mapping, as 'c') and TSR_LOAD_MMAP | TSR_LOAD_READ_ONLY
  (as 'r').
- npz (1 GiB, 8 float32 arrays of 128 MiB, written by np.savez): np.load
  returns a lazy NpzFile, so its side reads every array
  ({k: z[k] for k in z.files}). NumPy has no mapped npz load: tessera's
  TSR_LOAD_MMAP is compared with that same copy read.
- gguf (1 GiB, 8 float32 tensors of 128 MiB, written by gguf-py's
  GGUFWriter): GGUFReader (a numpy memmap of the file and views of the
  tensors) against TSR_LOAD_MMAP, and GGUFReader + np.array(t.data) for
  every tensor (a copy) against tessera's copy load.

The files are written one format at a time into a directory under $TMPDIR
(BENCH_DIR=dir: under dir), each removed when its rows are done, the
directory at the end (also on an error). Each sample is one load and the
release of what it loaded. Prints a markdown table: medians and quartiles,
the ratio of the medians tessera / peer, the verdict (at most 1.0x the
fastest peer of the row, judged on medians; quartiles printed, not
judged) and whether the peer touched the tensors' bytes.

    /work/venv-torch/bin/python benches/peer_loads.py [FILTER[|FILTER...]]

ROUNDS=n (default 7); TESSERA_LIB=path (default target/release/libtessera.so,
else target/dist/libtessera.so: `cargo build --release --lib`).
"""

import ctypes
import gc
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TSR_FORMAT_AUTO = 0
TSR_LOAD_MMAP = 1
TSR_LOAD_READ_ONLY = 4
TENSORS = 8
TENSOR_BYTES = 128 << 20


def refuse(message):
    sys.stderr.write("peer_loads.py: " + message + "\n")
    sys.exit(2)


try:
    import numpy as np
except ImportError:
    refuse("NumPy is missing: run with a Python that has numpy "
           "(/work/venv-torch/bin/python)")
try:
    from gguf import GGUFReader, GGUFWriter
except ImportError:
    refuse("gguf-py is missing (pip package 'gguf'): run with a Python "
           "that has it (/work/venv-torch/bin/python)")


def open_tessera():
    candidates = [os.environ["TESSERA_LIB"]] if "TESSERA_LIB" in os.environ else [
        os.path.join(ROOT, "target", "release", "libtessera.so"),
        os.path.join(ROOT, "target", "dist", "libtessera.so"),
    ]
    for path in candidates:
        if os.path.isfile(path):
            lib = ctypes.CDLL(path)
            lib.tsr_load.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_uint32,
                                     ctypes.POINTER(ctypes.c_void_p)]
            lib.tsr_load.restype = ctypes.c_int32
            lib.tsr_dict_free.argtypes = [ctypes.c_void_p]
            lib.tsr_dict_free.restype = None
            lib.tsr_dict_size.argtypes = [ctypes.c_void_p]
            lib.tsr_dict_size.restype = ctypes.c_size_t
            lib.tsr_last_error_message.argtypes = []
            lib.tsr_last_error_message.restype = ctypes.c_char_p
            lib.tsr_get_num_threads.argtypes = []
            lib.tsr_get_num_threads.restype = ctypes.c_int32
            return path, lib
    refuse("libtessera.so not found (looked at %s): build it with "
           "`cargo build --release --lib`, or set TESSERA_LIB" % ", ".join(candidates))


LIB_PATH, LIB = open_tessera()


def tessera_load(path, flags, expect):
    """tsr_load of path with flags; checks the tensor count, frees the dict."""
    out = ctypes.c_void_p()
    status = LIB.tsr_load(path.encode(), TSR_FORMAT_AUTO, flags, ctypes.byref(out))
    if status != 0:
        raise RuntimeError("tsr_load(%s) failed (status %d): %s"
                           % (path, status, LIB.tsr_last_error_message().decode()))
    n = LIB.tsr_dict_size(out)
    LIB.tsr_dict_free(out)
    if n != expect:
        raise RuntimeError("tsr_load(%s) gave %d tensors, expected %d" % (path, n, expect))


def arrays(rng, count):
    """count float32 arrays of TENSOR_BYTES pseudo-random bytes each."""
    return {"layers.%d.weight" % i:
            rng.integers(0, 2**32, TENSOR_BYTES // 4, dtype=np.uint32).view(np.float32)
            for i in range(count)}


def write_npy(path, rng):
    np.save(path, np.concatenate(list(arrays(rng, TENSORS).values())))


def write_npz(path, rng):
    np.savez(path, **arrays(rng, TENSORS))


def write_gguf(path, rng):
    w = GGUFWriter(path, "llama")
    for name, a in arrays(rng, TENSORS).items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def np_load(path, mmap_mode=None):
    a = np.load(path, mmap_mode=mmap_mode)
    return a.shape


def npz_read_all(path):
    with np.load(path) as z:
        d = {k: z[k] for k in z.files}
    return len(d)


def gguf_views(path):
    r = GGUFReader(path)
    return sum(t.data.shape[0] for t in r.tensors)


def gguf_copy(path):
    r = GGUFReader(path)
    d = {t.name: np.array(t.data) for t in r.tensors}
    return len(d)


# Each group: its file name, writer, tensor count, and rows
# (case, tessera flags, peer name, peer function of the path, note).
GROUPS = [
    ("model.npy", write_npy, 1, [
        ("npy copy", 0, "np.load", np_load,
         "peer copies every byte"),
        ("npy mmap", TSR_LOAD_MMAP, "np.load(mmap_mode='c')", lambda p: np_load(p, "c"),
         "peer maps, touches only the header"),
        ("npy mmap read-only", TSR_LOAD_MMAP | TSR_LOAD_READ_ONLY,
         "np.load(mmap_mode='r')", lambda p: np_load(p, "r"),
         "peer maps, touches only the header"),
    ]),
    ("model.npz", write_npz, TENSORS, [
        ("npz copy", 0, "np.load + every array", npz_read_all,
         "peer copies every byte"),
        ("npz mmap", TSR_LOAD_MMAP, "np.load + every array", npz_read_all,
         "NumPy has no mapped npz load: peer copies every byte"),
    ]),
    ("model.gguf", write_gguf, TENSORS, [
        ("gguf copy", 0, "GGUFReader + np.array(t.data)", gguf_copy,
         "peer copies every byte"),
        ("gguf mmap", TSR_LOAD_MMAP, "GGUFReader", gguf_views,
         "peer maps, touches only the header"),
        ("gguf mmap read-only", TSR_LOAD_MMAP | TSR_LOAD_READ_ONLY, "GGUFReader",
         gguf_views, "peer maps, touches only the header"),
    ]),
]


def quartiles(samples):
    s = sorted(samples)
    return s[len(s) // 2], s[len(s) // 4], s[3 * len(s) // 4]


def timed(f):
    t = time.perf_counter()
    f()
    t = (time.perf_counter() - t) * 1e3
    # What a cycle keeps (none expected) is freed outside the timing.
    gc.collect()
    return t


def main():
    filters = [f for f in sys.argv[1:2] for f in f.split("|")]
    rounds = max(1, int(os.environ.get("ROUNDS", "7")))
    base = os.environ.get("BENCH_DIR") or tempfile.gettempdir()
    rng = np.random.default_rng(56)
    results = []
    directory = tempfile.mkdtemp(prefix="tsr-peer-loads-", dir=base)
    try:
        for file_name, write, count, rows in GROUPS:
            rows = [r for r in rows if not filters or any(f in r[0] for f in filters)]
            if not rows:
                continue
            path = os.path.join(directory, file_name)
            write(path, rng)
            gc.collect()
            sides = []
            for case, flags, peer, peer_load, note in rows:
                sides.append((case, note, peer,
                              lambda flags=flags: tessera_load(path, flags, count),
                              lambda peer_load=peer_load: peer_load(path)))
            # Once each, untimed: the file in the page cache, allocators warm.
            for _, _, _, t, p in sides:
                t()
                p()
            samples = {case: ([], []) for case, *_ in sides}
            for _ in range(rounds):
                for case, _, _, t, p in sides:
                    samples[case][0].append(timed(t))
                    samples[case][1].append(timed(p))
            for case, note, peer, _, _ in sides:
                results.append((case, peer, note) + samples[case])
            os.remove(path)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print("tessera: %s (%d parallel-loop threads); NumPy %s; %d rounds; %d CPUs"
          % (LIB_PATH, LIB.tsr_get_num_threads(), np.__version__, rounds, os.cpu_count()))
    print()
    print("| case | tessera median [q1-q3] | peer | peer median [q1-q3] | ratio "
          "| target | result | peer touched the bytes? |")
    print("|---|---|---|---|---|---|---|---|")
    for case, peer, note, ts, ps in results:
        tm, tq1, tq3 = quartiles(ts)
        pm, pq1, pq3 = quartiles(ps)
        verdict = "PASS" if tm <= pm else "FAIL"
        print("| %s | %.2f ms [%.2f-%.2f] | %s | %.2f ms [%.2f-%.2f] | %.2fx "
              "| <= 1.0x the fastest peer | %s | %s |"
              % (case, tm, tq1, tq3, peer, pm, pq1, pq3, tm / pm, verdict, note))


if __name__ == "__main__":
    main()
