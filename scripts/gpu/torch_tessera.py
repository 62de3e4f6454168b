#!/usr/bin/env python3
"""PyTorch (and CuPy) on tessera's CUDA allocator: the GPU half of issue 55.

    torch_tessera.py LIB OUTDIR                 # every check (a GPU, torch)
    torch_tessera.py LIB OUTDIR --symbols-only  # the exports and struct sizes
                                                # (no torch, no GPU)
    torch_tessera.py LIB OUTDIR --train torch|tessera   # (a child process)
    torch_tessera.py LIB OUTDIR --batches torch|tessera # (a child process)
    torch_tessera.py LIB OUTDIR --mempool tessera       # (a child process)

Prints one line per check, "ok <name>: <figures>", "FAIL <name>: why" or
"SKIP <name>: why", and writes the figures to OUTDIR/torch_tessera.json and
the snapshots to OUTDIR. Exit status 0 iff no check failed.

Checks (issue 55, items 5, 6 and 8):
- train: a small MLP trained 60 steps on cuda:0 with a fixed seed and
  deterministic algorithms, once with PyTorch's own caching allocator and
  once (another process) with CUDAPluggableAllocator(LIB,
  "tsr_torch_cuda_malloc", "tsr_torch_cuda_free"); the losses must be
  bit-identical. The tessera run records memory history and writes
  tessera's JSON snapshot and the TORCH pickle (memory_viz) to OUTDIR.
- hooks: the optional hooks' exports called as PyTorch's pluggable
  allocator would (empty_cache, memory fraction, record_stream).
- mempool: torch.cuda.MemPool over the pluggable allocator (torch >= 2.6)
  with PyTorch's own allocator otherwise (another process): tensors made
  under use_mem_pool come from tessera, the others do not.
- cupy: CuPy's allocator hook over the same tessera pool as torch in one
  process; one tessera snapshot holds both frameworks' blocks; the
  allocate+free time of tessera (through ctypes), RMM's pool (rmm-cu13, if
  installed) and torch's caching allocator in the same run.
- batches: a varying-batch workload; peak reserved / peak allocated with
  tessera's expandable segments (TESSERA_ALLOC_CONF) against PyTorch's
  (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): tessera's at most
  PyTorch's and at most 1.1.
"""

import ctypes as C
import json
import os
import subprocess
import sys
import time

# --------------------------------------------------------------------------
# tessera's C structs used here (include/tessera.h)


class Stat(C.Structure):
    _fields_ = [(n, C.c_uint64) for n in ("current", "peak", "allocated", "freed")]


POOL_STATS = ("segments", "reserved_bytes", "active_blocks", "active_bytes",
              "inactive_split_blocks", "inactive_split_bytes", "requested_bytes",
              "oversize_allocations", "oversize_segments")
POOL_COUNTS = ("num_allocs", "num_frees", "cache_hits", "segment_allocs", "segment_frees",
               "retries", "ooms")


class Pool(C.Structure):
    _fields_ = [(n, Stat) for n in POOL_STATS] + [(n, C.c_uint64) for n in POOL_COUNTS]


class MemoryStats(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("all", Pool), ("small", Pool), ("large", Pool),
                ("max_split_size", C.c_uint64), ("memory_limit", C.c_uint64)]


class Device(C.Structure):
    _fields_ = [("type", C.c_int8), ("index", C.c_int8)]


class HistoryOptions(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("max_entries", C.c_size_t),
                ("backtraces", C.c_bool)]


TSR_CUDA = 1
SNAPSHOT_JSON, SNAPSHOT_TORCH = 0, 1
EXPECTED_SIZES = {"TsrCachingMemoryStats": C.sizeof(MemoryStats)}


def load(lib):
    t = C.CDLL(lib)
    t.tsr_torch_cuda_malloc.restype = C.c_void_p
    t.tsr_torch_cuda_malloc.argtypes = [C.c_ssize_t, C.c_int, C.c_void_p]
    t.tsr_torch_cuda_free.restype = None
    t.tsr_torch_cuda_free.argtypes = [C.c_void_p, C.c_ssize_t, C.c_int, C.c_void_p]
    t.tsr_torch_cuda_empty_cache.restype = None
    t.tsr_torch_cuda_set_memory_fraction.restype = None
    t.tsr_torch_cuda_set_memory_fraction.argtypes = [C.c_double, C.c_int]
    t.tsr_torch_cuda_record_stream.restype = None
    t.tsr_torch_cuda_record_stream.argtypes = [C.c_void_p, C.c_void_p]
    t.tsr_torch_cuda_init.restype = None
    t.tsr_torch_cuda_init.argtypes = [C.c_int]
    t.tsr_cuda_allocator.argtypes = [C.POINTER(C.c_void_p)]
    t.tsr_caching_allocator_memory_stats.argtypes = [
        C.c_void_p, C.POINTER(Device), C.POINTER(MemoryStats)]
    t.tsr_caching_allocator_reset_accumulated.argtypes = [C.c_void_p]
    t.tsr_memory_record_history.argtypes = [C.POINTER(HistoryOptions)]
    t.tsr_memory_snapshot.argtypes = [C.c_char_p, C.c_int32]
    t.tsr_last_error_message.restype = C.c_char_p
    t.tsr_allocator_decref.argtypes = [C.c_void_p]
    return t


def last_error(t):
    m = t.tsr_last_error_message()
    return m.decode() if m else ""


def cuda_stats(t, device=0):
    a = C.c_void_p()
    if t.tsr_cuda_allocator(C.byref(a)) != 0:
        raise RuntimeError("tsr_cuda_allocator: " + last_error(t))
    s = MemoryStats()
    s.struct_size = C.sizeof(s)
    d = Device(TSR_CUDA, device)
    rc = t.tsr_caching_allocator_memory_stats(a, C.byref(d), C.byref(s))
    t.tsr_allocator_decref(a)
    if rc != 0:
        raise RuntimeError("tsr_caching_allocator_memory_stats: " + last_error(t))
    return s


# --------------------------------------------------------------------------
# Child processes: the allocator is chosen before CUDA starts.


def use_tessera(lib):
    import torch
    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        lib, "tsr_torch_cuda_malloc", "tsr_torch_cuda_free")
    torch.cuda.memory.change_current_allocator(alloc)
    return alloc


def child_train(lib, outdir, which):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    t = None
    if which == "tessera":
        t = load(lib)
        use_tessera(lib)
        opts = HistoryOptions(C.sizeof(HistoryOptions), 100000, False)
        assert t.tsr_memory_record_history(C.byref(opts)) == 0, last_error(t)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda:0")
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator(device="cpu").manual_seed(1)
    losses = []
    for step in range(60):
        x = torch.randn(64 + (step % 5) * 16, 256, generator=g).to(dev)
        y = torch.randint(0, 10, (x.shape[0],), generator=g).to(dev)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item().hex())
    torch.cuda.synchronize()
    result = {"losses": losses}
    if t is not None:
        for fmt, name in ((SNAPSHOT_JSON, "train_snapshot.json"),
                          (SNAPSHOT_TORCH, "train_snapshot.pickle")):
            path = os.path.join(outdir, name).encode()
            assert t.tsr_memory_snapshot(path, fmt) == 0, last_error(t)
        s = cuda_stats(t)
        result["tessera"] = {"num_allocs": s.all.num_allocs, "cache_hits": s.all.cache_hits,
                             "peak_reserved": s.all.reserved_bytes.peak}
    print(json.dumps(result))


def child_batches(lib, which):
    import torch
    t = None
    if which == "tessera":
        t = load(lib)
        use_tessera(lib)
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    w = torch.randn(1024, 1024, device=dev)
    # A varying batch: activations of a few layers kept for backward, sizes
    # changing every step (as with variable sequence lengths).
    sizes = [int(s) for s in torch.randint(64, 2048, (200,), generator=torch.Generator().manual_seed(3))]
    for n in sizes:
        acts = []
        x = torch.randn(n, 1024, device=dev)
        for _ in range(4):
            x = torch.relu(x @ w)
            acts.append(x)
        del acts, x
    torch.cuda.synchronize()
    if t is not None:
        s = cuda_stats(t)
        reserved, allocated = s.all.reserved_bytes.peak, s.all.requested_bytes.peak
    else:
        reserved, allocated = torch.cuda.max_memory_reserved(), torch.cuda.max_memory_allocated()
    print(json.dumps({"peak_reserved": reserved, "peak_allocated": allocated}))


def run_child(lib, outdir, flag, which, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    p = subprocess.run([sys.executable, __file__, lib, outdir, flag, which], env=env,
                       capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        raise RuntimeError(f"{flag} {which}: rc {p.returncode}: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# The checks (in this process unless said otherwise).

results = {}
failed = False


def report(status, name, detail):
    global failed
    print(f"{status} {name}: {detail}", flush=True)
    if status == "FAIL":
        failed = True


def check_symbols(lib):
    t = load(lib)
    for name in ("tsr_torch_cuda_malloc", "tsr_torch_cuda_free", "tsr_torch_cuda_empty_cache",
                 "tsr_torch_cuda_set_memory_fraction", "tsr_torch_cuda_record_stream",
                 "tsr_torch_cuda_init", "tsr_caching_allocator_memory_stats"):
        getattr(t, name)
    # The struct sizes this script assumes are tessera's: memory_stats
    # writes back the bytes it filled in.
    a = C.c_void_p()
    cpu = t.tsr_cpu_allocator
    cpu.restype = C.c_void_p
    new = t.tsr_caching_allocator_new
    new.argtypes = [C.c_void_p, C.c_void_p, C.POINTER(C.c_void_p)]
    assert new(cpu(), None, C.byref(a)) == 0, last_error(t)
    s = MemoryStats()
    s.struct_size = C.sizeof(s)
    assert t.tsr_caching_allocator_memory_stats(a, None, C.byref(s)) == 0, last_error(t)
    assert s.struct_size == C.sizeof(MemoryStats), (s.struct_size, C.sizeof(MemoryStats))
    t.tsr_allocator_decref(a)
    report("ok", "symbols", f"TsrCachingMemoryStats {C.sizeof(MemoryStats)} bytes")
    return t


def check_train(lib, outdir):
    ref = run_child(lib, outdir, "--train", "torch", {})
    mine = run_child(lib, outdir, "--train", "tessera", {})
    same = ref["losses"] == mine["losses"]
    results["train"] = {"losses_equal": same, "steps": len(ref["losses"]),
                        "tessera": mine.get("tessera")}
    if not same:
        first = next(i for i, (a, b) in enumerate(zip(ref["losses"], mine["losses"])) if a != b)
        report("FAIL", "train", f"losses differ from step {first}: {ref['losses'][first]} "
               f"vs {mine['losses'][first]}")
        return
    with open(os.path.join(outdir, "train_snapshot.json")) as f:
        snap = json.load(f)
    cuda = [a for a in snap.get("allocators", []) if a.get("name") == "cuda"]
    import pickle
    with open(os.path.join(outdir, "train_snapshot.pickle"), "rb") as f:
        torch_snap = pickle.load(f)
    ok = cuda and torch_snap.get("segments") and torch_snap.get("device_traces")
    report("ok" if ok else "FAIL", "train",
           f"{len(ref['losses'])} losses bit-identical; tessera {mine.get('tessera')}; "
           f"snapshot: {len(torch_snap.get('segments', []))} segments")


def check_hooks(t):
    import torch
    t.tsr_torch_cuda_init(0)
    p = t.tsr_torch_cuda_malloc(1 << 20, 0, None)
    assert p, last_error(t)
    s = torch.cuda.Stream()
    t.tsr_torch_cuda_record_stream(p, C.c_void_p(s.cuda_stream))
    t.tsr_torch_cuda_free(p, 1 << 20, 0, None)
    t.tsr_torch_cuda_set_memory_fraction(0.01, 0)
    limit = cuda_stats(t).memory_limit
    total = torch.cuda.get_device_properties(0).total_memory
    big = t.tsr_torch_cuda_malloc(int(total * 0.02), 0, None)
    refused = not big and "limit" in last_error(t)
    if big:
        t.tsr_torch_cuda_free(big, 0, 0, None)
    t.tsr_torch_cuda_set_memory_fraction(0.0, 0)
    t.tsr_torch_cuda_empty_cache()
    s = cuda_stats(t)
    ok = refused and abs(limit - total * 0.01) <= 1 and s.all.active_bytes.current == 0
    report("ok" if ok else "FAIL", "hooks",
           f"fraction 0.01 -> limit {limit} of {total}; past it refused: {refused}")


def child_mempool(lib):
    import torch
    if not hasattr(torch.cuda, "MemPool"):
        print(json.dumps({"skip": f"torch {torch.__version__} has no torch.cuda.MemPool"}))
        return
    t = load(lib)
    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        lib, "tsr_torch_cuda_malloc", "tsr_torch_cuda_free")
    outside = torch.ones(1 << 18, device="cuda:0")  # PyTorch's own allocator
    before = cuda_stats(t).all.num_allocs
    pool = torch.cuda.MemPool(alloc.allocator())
    with torch.cuda.use_mem_pool(pool):
        x = torch.ones(1 << 20, device="cuda:0")
    after = cuda_stats(t).all.num_allocs
    inside = cuda_stats(t).all.active_bytes.current >= 4 << 20
    print(json.dumps({"before": before, "after": after, "inside": inside,
                      "sum": float(x.sum()), "outside_sum": float(outside.sum())}))


def check_mempool(lib, outdir):
    r = run_child(lib, outdir, "--mempool", "tessera", {})
    if "skip" in r:
        report("SKIP", "mempool", r["skip"])
        return
    results["mempool"] = r
    ok = r["after"] > r["before"] and r["inside"] and r["sum"] == float(1 << 20)
    report("ok" if ok else "FAIL", "mempool",
           f"tessera allocations {r['before']} -> {r['after']} under use_mem_pool")


def time_per_op(fn, n=20000):
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e9


def check_cupy(t, outdir):
    import torch
    try:
        import cupy
    except ImportError:
        report("SKIP", "cupy", "CuPy is not installed")
        return

    class Owner:
        def __init__(self, ptr, size):
            self.ptr, self.size = ptr, size

        def __del__(self):
            t.tsr_torch_cuda_free(self.ptr, self.size, 0, None)

    def tessera_malloc(size):
        stream = cupy.cuda.get_current_stream().ptr
        ptr = t.tsr_torch_cuda_malloc(size, 0, C.c_void_p(stream))
        if not ptr and size:
            raise MemoryError(last_error(t))
        mem = cupy.cuda.memory.UnownedMemory(ptr or 0, size, Owner(ptr, size))
        return cupy.cuda.memory.MemoryPointer(mem, 0)

    opts = HistoryOptions(C.sizeof(HistoryOptions), 100000, False)
    t.tsr_memory_record_history(C.byref(opts))
    cupy.cuda.set_allocator(tessera_malloc)
    a = cupy.arange(1 << 20, dtype=cupy.float32)
    b = torch.ones(1 << 20, device="cuda:0")
    ptrs = {int(a.data.ptr), int(b.data_ptr())}
    path = os.path.join(outdir, "two_frameworks.json")
    assert t.tsr_memory_snapshot(path.encode(), SNAPSHOT_JSON) == 0, last_error(t)
    with open(path) as f:
        snap = json.load(f)
    seen = {int(blk["addr"], 16) for al in snap["allocators"] for seg in al.get("segments", [])
            for blk in seg["blocks"] if blk.get("state") == "allocated"}
    both = ptrs <= seen
    figures = {}
    figures["tessera_ns"] = time_per_op(
        lambda: t.tsr_torch_cuda_free(t.tsr_torch_cuda_malloc(4096, 0, None), 0, 0, None))
    figures["torch_ns"] = time_per_op(lambda: torch.empty(1024, device="cuda:0"))
    try:
        import rmm
        mr = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=1 << 28)
        figures["rmm_ns"] = time_per_op(lambda: rmm.DeviceBuffer(size=4096, mr=mr))
    except Exception as e:  # rmm missing or a different API
        figures["rmm"] = f"not measured: {e}"
    cupy.cuda.set_allocator(None)
    del a, b
    results["cupy"] = {"both_in_snapshot": both, **figures}
    report("ok" if both else "FAIL", "cupy",
           f"CuPy and torch blocks in one snapshot: {both}; allocate+free 4 KiB from Python: "
           f"{figures}")


def check_batches(lib, outdir):
    mine = run_child(lib, outdir, "--batches", "tessera",
                     {"TESSERA_ALLOC_CONF": "expandable_segments:true"})
    ref = run_child(lib, outdir, "--batches", "torch",
                    {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    r_mine = mine["peak_reserved"] / mine["peak_allocated"]
    r_ref = ref["peak_reserved"] / ref["peak_allocated"]
    results["batches"] = {"tessera": mine, "torch": ref, "tessera_ratio": r_mine,
                          "torch_ratio": r_ref}
    ok = r_mine <= r_ref and r_mine <= 1.1
    report("ok" if ok else "FAIL", "batches",
           f"peak reserved / peak allocated: tessera {r_mine:.3f}, torch {r_ref:.3f} "
           f"(both with expandable segments; target <= torch and <= 1.1)")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    lib, outdir = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    if len(sys.argv) == 5 and sys.argv[3] == "--train":
        child_train(lib, outdir, sys.argv[4])
        return 0
    if len(sys.argv) == 5 and sys.argv[3] == "--batches":
        child_batches(lib, sys.argv[4])
        return 0
    if len(sys.argv) == 5 and sys.argv[3] == "--mempool":
        child_mempool(lib)
        return 0
    t = check_symbols(lib)
    if len(sys.argv) == 4 and sys.argv[3] == "--symbols-only":
        return 0
    for name, fn in (("train", lambda: check_train(lib, outdir)),
                     ("batches", lambda: check_batches(lib, outdir)),
                     ("mempool", lambda: check_mempool(lib, outdir))):
        try:
            fn()
        except Exception as e:
            report("FAIL", name, repr(e)[:2000])
    # The in-process checks use tessera as CUDA's allocator for torch too.
    try:
        use_tessera(lib)
    except Exception as e:
        report("FAIL", "setup", repr(e))
    for name, fn in (("hooks", lambda: check_hooks(t)), ("cupy", lambda: check_cupy(t, outdir))):
        try:
            fn()
        except Exception as e:
            report("FAIL", name, repr(e)[:2000])
    with open(os.path.join(outdir, "torch_tessera.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
