"""Issue 64's rows: a checkpoint of several hundred tensors (2.1 GiB in
543 tensors, a 36-layer model's shapes) loaded whole into fresh CPU
memory, page cache warm, in one process, sides interleaved round by
round; then parts of it. Sections (an argument picks some, "|"-joined):

safetensors:

- tessera: tsr_checkpoint_open + tsr_checkpoint_load_many (every tensor
  into its own storage, `concurrency` threads of positioned reads in
  8 MiB chunks), then the dict freed and the checkpoint closed;
- tessera tsr_load (copy): the one-call load, printed for reference;
- runai-model-streamer's SafetensorsStreamer (its C++ core's readers,
  16 by default), each tensor cloned into owned memory as a loader must
  hand it out (the streamer's tensors are views of its reused buffer);
- the storage's limit: N threads of pread into fresh memory (one fresh
  NumPy buffer a tensor, 8 MiB reads taken from a shared queue, N =
  tsr_get_num_threads()).

torch: the same tensors in torch.save's zip archive: tessera's
load_many against torch.load(mmap=False) and the pread limit.

gguf: the same tensors in a GGUF file gguf-py wrote: tessera's load_many
against GGUFReader with every tensor copied (np.array) and the limit.

partial (safetensors): one tensor (lm_head, 156 MiB) and 1% of the rows
of another (embed_tokens, rows 1000..1320), by tessera's load and
load_rows against safetensors' safe_open(...).get_tensor and
get_slice(name)[a:b] (framework "np"); with the bytes tessera read.

Each sample is one load and the release of what it loaded. Prints a
markdown table per section: median, quartiles and the slowest round of
each side, the ratios of the medians, the verdicts (tessera <= 1.0x the
peer and <= 1.1x the pread limit; its slowest round <= 1.5x its median).

    /work/venv-torch/bin/python benches/checkpoint_loads.py [SECTIONS]

ROUNDS=n (default 7); BUSY=n: n busy processes beside the run (the
"two busy processes" row: BUSY=2); COLD=1: the page cache dropped before
every sample (root; /proc/sys/vm/drop_caches), untimed; BENCH_DIR=dir for the file (default
$TMPDIR); TESSERA_LIB=path (default target/release/libtessera.so:
`cargo build --release --lib`). Needs numpy, safetensors, torch, gguf
and runai-model-streamer (pip).
"""

import concurrent.futures
import ctypes
import gc
import multiprocessing
import os
import queue
import shutil
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHUNK = 8 << 20


def refuse(message):
    sys.stderr.write("checkpoint_loads.py: " + message + "\n")
    sys.exit(2)


try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file
    import torch
    from gguf import GGUFReader, GGUFWriter
    from runai_model_streamer import SafetensorsStreamer
except ImportError as e:
    refuse("%s: run with a Python that has numpy, safetensors, torch, gguf and "
           "runai-model-streamer (/work/venv-torch/bin/python)" % e)


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int8), ("index", ctypes.c_int8)]


def open_tessera():
    path = os.environ.get("TESSERA_LIB",
                          os.path.join(ROOT, "target", "release", "libtessera.so"))
    if not os.path.isfile(path):
        refuse("%s not found: `cargo build --release --lib`, or set TESSERA_LIB" % path)
    lib = ctypes.CDLL(path)
    vp, u32 = ctypes.c_void_p, ctypes.c_uint32
    sigs = {
        "tsr_checkpoint_open": ([ctypes.c_char_p, ctypes.c_int32, u32,
                                 ctypes.POINTER(vp)], ctypes.c_int32),
        "tsr_checkpoint_load_many": ([vp, vp, ctypes.c_size_t, Device, u32,
                                      ctypes.POINTER(vp)], ctypes.c_int32),
        "tsr_checkpoint_close": ([vp], None),
        "tsr_checkpoint_load": ([vp, ctypes.c_char_p, Device, u32, ctypes.POINTER(vp)],
                                ctypes.c_int32),
        "tsr_checkpoint_load_rows": ([vp, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64,
                                      Device, u32, ctypes.POINTER(vp)], ctypes.c_int32),
        "tsr_checkpoint_bytes_read": ([vp], ctypes.c_uint64),
        "tsr_tensor_decref": ([vp], ctypes.c_int32),
        "tsr_load": ([ctypes.c_char_p, ctypes.c_int32, u32, ctypes.POINTER(vp)],
                     ctypes.c_int32),
        "tsr_dict_size": ([vp], ctypes.c_size_t),
        "tsr_dict_free": ([vp], None),
        "tsr_last_error_message": ([], ctypes.c_char_p),
        "tsr_get_num_threads": ([], ctypes.c_int32),
    }
    for name, (args, res) in sigs.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = args, res
    return path, lib


LIB_PATH, LIB = open_tessera()
CPU = Device(0, -1)


def check(status, what):
    if status != 0:
        raise RuntimeError("%s failed (status %d): %s"
                           % (what, status, LIB.tsr_last_error_message().decode()))


def tessera_checkpoint(path, expect):
    c, d = ctypes.c_void_p(), ctypes.c_void_p()
    check(LIB.tsr_checkpoint_open(path.encode(), 0, 0, ctypes.byref(c)), "open")
    try:
        check(LIB.tsr_checkpoint_load_many(c, None, 0, CPU, 0, ctypes.byref(d)), "load_many")
    finally:
        LIB.tsr_checkpoint_close(c)
    n = LIB.tsr_dict_size(d)
    LIB.tsr_dict_free(d)
    assert n == expect, (n, expect)


def tessera_load(path, expect):
    d = ctypes.c_void_p()
    check(LIB.tsr_load(path.encode(), 0, 0, ctypes.byref(d)), "tsr_load")
    n = LIB.tsr_dict_size(d)
    LIB.tsr_dict_free(d)
    assert n == expect, (n, expect)


def runai(path, expect):
    out = {}
    with SafetensorsStreamer() as s:
        s.stream_file(path)
        for name, t in s.get_tensors():
            out[name] = t.clone()
    assert len(out) == expect, (len(out), expect)
    del out


def tessera_part(path, name, rows=None):
    """One tensor (or rows [a, b) of it) of a checkpoint opened for it;
    the bytes the checkpoint read."""
    c, t = ctypes.c_void_p(), ctypes.c_void_p()
    check(LIB.tsr_checkpoint_open(path.encode(), 0, 0, ctypes.byref(c)), "open")
    try:
        if rows is None:
            check(LIB.tsr_checkpoint_load(c, name.encode(), CPU, 0, ctypes.byref(t)), "load")
        else:
            check(LIB.tsr_checkpoint_load_rows(c, name.encode(), rows[0], rows[1], CPU, 0,
                                               ctypes.byref(t)), "load_rows")
        LIB.tsr_tensor_decref(t)
        return LIB.tsr_checkpoint_bytes_read(c)
    finally:
        LIB.tsr_checkpoint_close(c)


def safe_open_part(path, name, rows=None):
    with safe_open(path, framework="np") as f:
        if rows is None:
            a = f.get_tensor(name)
        else:
            a = f.get_slice(name)[rows[0]:rows[1]]
    del a


def torch_load(path, expect):
    d = torch.load(path, mmap=False, weights_only=True)
    assert len(d) == expect, (len(d), expect)
    del d


def gguf_copy(path, expect):
    r = GGUFReader(path)
    d = {t.name: np.array(t.data) for t in r.tensors}
    assert len(d) == expect, (len(d), expect)
    del d, r


def layout(path):
    """(offset, nbytes) of each tensor of the safetensors file."""
    import json
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    base = 8 + n
    return [(base + v["data_offsets"][0], v["data_offsets"][1] - v["data_offsets"][0])
            for k, v in header.items() if k != "__metadata__"]


def pread_limit(path, spans, threads):
    """Every tensor's bytes into a fresh buffer of its own, N threads of
    8 MiB preads from a shared queue of chunks."""
    fd = os.open(path, os.O_RDONLY)
    try:
        bufs = [np.empty(n, np.uint8) for _, n in spans]
        work = queue.SimpleQueue()
        for (off, n), b in zip(spans, bufs):
            for at in range(0, n, CHUNK):
                work.put((memoryview(b)[at:at + CHUNK], off + at))

        def reader():
            while True:
                try:
                    view, off = work.get_nowait()
                except queue.Empty:
                    return
                while len(view):
                    got = os.preadv(fd, [view], off)
                    view, off = view[got:], off + got

        ts = [threading.Thread(target=reader) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        del bufs
    finally:
        os.close(fd)


def model_tensors():
    """The peers' kind of checkpoint: 2.1 GiB in 543 tensors, a 36-layer
    model's shapes (big projections, small norms and biases), pseudo-random
    float16 bytes."""
    rng = np.random.default_rng(64)
    tensors = {}
    hidden, ffn = 2560, 5632

    def rand(*shape):
        return rng.integers(0, 2 ** 16, size=shape, dtype=np.uint16).view(np.float16)

    tensors["model.embed_tokens.weight"] = rand(32000, hidden)
    for i in range(36):
        p = "model.layers.%d." % i
        for w in ("q_proj", "k_proj", "v_proj", "o_proj"):
            cols = hidden // 4 if w in ("k_proj", "v_proj") else hidden
            tensors[p + "self_attn.%s.weight" % w] = rand(hidden, cols)
        tensors[p + "mlp.gate_proj.weight"] = rand(ffn, hidden // 4)
        tensors[p + "mlp.up_proj.weight"] = rand(ffn, hidden // 4)
        tensors[p + "mlp.down_proj.weight"] = rand(hidden, ffn // 4)
        for n in ("input_layernorm", "post_attention_layernorm"):
            tensors[p + n + ".weight"] = rand(hidden)
        for b in ("q_bias", "v_bias", "o_bias", "gate_bias", "up_bias", "down_bias"):
            tensors[p + b] = rand(hidden)
    tensors["model.norm.weight"] = rand(hidden)
    tensors["lm_head.weight"] = rand(32000, hidden)
    return tensors


def write_checkpoint(path):
    """model_tensors() as safetensors at `path`; the tensor count."""
    tensors = model_tensors()
    save_file(tensors, path)
    return len(tensors)


def write_torch(path):
    tensors = {k: torch.from_numpy(v) for k, v in model_tensors().items()}
    torch.save(tensors, path)
    return len(tensors)


def write_gguf(path):
    w = GGUFWriter(path, "llama")
    tensors = model_tensors()
    for name, a in tensors.items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return len(tensors)


def busy():
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def quartiles(s):
    s = sorted(s)
    return s[len(s) // 2], s[len(s) // 4], s[3 * len(s) // 4], s[-1]


def drop_caches():
    """Empties the page cache (COLD=1): every sample reads from the disk."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")


def measure(title, sides, rounds, limits):
    """Rounds of every side in turn (after one untimed pass each); prints
    the table and the verdicts. limits: [(what, ours, other, bound)] by
    side index (other None: ours' slowest round over its median)."""
    for _, f in sides:
        f()
        gc.collect()
    samples = {name: [] for name, _ in sides}
    cold = os.environ.get("COLD") == "1"
    for _ in range(rounds):
        for name, f in sides:
            if cold:
                drop_caches()
            t = time.perf_counter()
            f()
            samples[name].append((time.perf_counter() - t) * 1e3)
            gc.collect()
    print()
    print("### " + title)
    print()
    print("| side | median ms [q1-q3] | slowest | slowest / median |")
    print("|---|---|---|---|")
    stats = []
    for name, _ in sides:
        m, q1, q3, mx = quartiles(samples[name])
        stats.append((m, mx))
        print("| %s | %.1f [%.1f-%.1f] | %.1f | %.2fx |" % (name, m, q1, q3, mx, mx / m))
    print()
    print("| target | ratio | verdict |")
    print("|---|---|---|")
    for what, ours, other, bound in limits:
        ratio = stats[ours][1] / stats[ours][0] if other is None else \
            stats[ours][0] / stats[other][0]
        print("| %s | %.2fx | %s |" % (what, ratio, "PASS" if ratio <= bound else "FAIL"))


def whole(title, path, count, peer_name, peer, rounds, threads):
    spans = layout(path) if path.endswith(".safetensors") else None
    sides = [("tessera checkpoint load_many", lambda: tessera_checkpoint(path, count)),
             ("tessera tsr_load (copy)", lambda: tessera_load(path, count)),
             (peer_name, lambda: peer(path, count))]
    limits = [("<= 1.0x " + peer_name, 0, 2, 1.0)]
    if spans is not None:
        sides.append(("%d threads of pread into fresh memory" % threads,
                      lambda: pread_limit(path, spans, threads)))
        limits.append(("<= 1.1x N threads of pread", 0, 3, 1.1))
    limits.append(("slowest round <= 1.5x the median", 0, None, 1.5))
    measure(title, sides, rounds, limits)


def partial(path, rounds):
    one, rows = "lm_head.weight", ("model.embed_tokens.weight", (1000, 1320))
    print()
    print("bytes read by tessera: one tensor %d, 1%% of the rows %d"
          % (tessera_part(path, one), tessera_part(path, rows[0], rows[1])))
    measure("partial loads (safetensors)", [
        ("tessera load (one tensor)", lambda: tessera_part(path, one)),
        ("safe_open get_tensor", lambda: safe_open_part(path, one)),
        ("tessera load_rows (1% of rows)", lambda: tessera_part(path, rows[0], rows[1])),
        ("safe_open get_slice[a:b]", lambda: safe_open_part(path, rows[0], rows[1])),
    ], rounds, [("one tensor <= 1.0x safe_open", 0, 1, 1.0),
                ("rows <= 1.0x get_slice", 2, 3, 1.0)])


def main():
    rounds = max(3, int(os.environ.get("ROUNDS", "7")))
    busy_n = int(os.environ.get("BUSY", "0"))
    threads = LIB.tsr_get_num_threads()
    wanted = sys.argv[1].split("|") if len(sys.argv) > 1 else \
        ["safetensors", "partial", "torch", "gguf"]
    base = tempfile.mkdtemp(prefix="tsr-ckpt-bench-", dir=os.environ.get("BENCH_DIR"))
    hogs = []
    try:
        for _ in range(busy_n):
            p = multiprocessing.Process(target=busy, daemon=True)
            p.start()
            hogs.append(p)
        print("%d rounds, %d busy processes, %d threads, page cache %s, %s"
              % (rounds, busy_n, threads,
                 "dropped before each sample" if os.environ.get("COLD") == "1" else "warm",
                 LIB_PATH))
        st = os.path.join(base, "model.safetensors")
        if "safetensors" in wanted or "partial" in wanted:
            count = write_checkpoint(st)
            if "safetensors" in wanted:
                whole("safetensors, %d tensors, %.2f GiB" % (count, os.path.getsize(st) / 2**30),
                      st, count, "runai SafetensorsStreamer + clone", runai, rounds, threads)
            if "partial" in wanted:
                partial(st, rounds)
            os.remove(st)
        for name, writer, peer_name, peer in [
                ("torch", write_torch, "torch.load(mmap=False)", torch_load),
                ("gguf", write_gguf, "GGUFReader + np.array copies", gguf_copy)]:
            if name in wanted:
                path = os.path.join(base, "model." + ("pt" if name == "torch" else name))
                count = writer(path)
                whole("%s, %d tensors, %.2f GiB" % (name, count, os.path.getsize(path) / 2**30),
                      path, count, peer_name, peer, rounds, threads)
                os.remove(path)
    finally:
        for p in hogs:
            p.terminate()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
