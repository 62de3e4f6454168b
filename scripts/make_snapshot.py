#!/usr/bin/env python3
"""Write a synthetic tessera memory snapshot (docs/snapshot.schema.json).

Until tessera's own producer (tsr_memory_snapshot) writes them, the viewer's
tests and screenshot use these. A seeded simulation of a small training
loop allocates and frees across three allocators: "cpu" (tessera's CPU
allocator: tokenizer buffers, some of which leak, and short-lived logging
strings), "pinned" (a plugin allocator for host staging buffers) and
"caching(cuda)" (a caching allocator on cuda:0 that cuts 2 MiB / 20 MiB
segments into blocks, first fit, and merges free neighbours). The history
ring keeps the newest --events events (one fewer when the last operation
would not fit); about --dropped more happen before them.
The same arguments always give the same file.

    scripts/make_snapshot.py OUT.json [--events N] [--dropped D] [--seed S]
    scripts/make_snapshot.py OUT.json --events 0      # an empty snapshot
"""

import argparse
import json
import random
import sys

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

CPU = {"type": 0, "index": -1}
CUDA0 = {"type": 1, "index": 0}

# Frames inside tessera, above the allocation site in every stack.
INTERNAL = [
    ("tessera::allocator::registry::allocate", "src/allocator/registry.rs", 212),
    ("tsr_storage_new", "src/ffi/storage.rs", 88),
]
# Allocation sites and their callers: (function, file, line).
SITES = {
    "weights": ("Model::init_weights", "model.cpp", 31),
    "linear": ("Linear::forward", "layers.cpp", 120),
    "attention": ("Attention::forward", "attention.cpp", 57),
    "gelu": ("gelu", "activations.cpp", 14),
    "grad": ("autograd::backward", "autograd.cpp", 402),
    "optim": ("Adam::step", "optim.cpp", 203),
    "batch": ("DataLoader::next_batch", "data.cpp", 41),
    "tokens": ("Tokenizer::encode", "tokenizer.cpp", 19),
    "log": ("log_metrics", "train.cpp", 140),
}
CALLERS = {
    "weights": [("main", "train.cpp", 12)],
    "batch": [("train_step", "train.cpp", 88), ("main", "train.cpp", 20)],
    "tokens": [("DataLoader::next_batch", "data.cpp", 37), ("train_step", "train.cpp", 88), ("main", "train.cpp", 20)],
    "log": [("train_step", "train.cpp", 97), ("main", "train.cpp", 20)],
}
DEFAULT_CALLERS = [("Model::forward", "model.cpp", 66), ("train_step", "train.cpp", 90), ("main", "train.cpp", 20)]


class StopSimulation(Exception):
    pass


class Simulation:
    def __init__(self, seed, total_events, backtraces):
        self.rng = random.Random(seed)
        self.total = total_events
        self.backtraces = backtraces
        self.events = []
        self.time_ns = 1_000_000
        self.frames = []
        self.frame_index = {}
        self.stacks = {}
        # Per allocator: live blocks {addr: (size, requested, time, stack)} and stats.
        self.allocs = {}
        for name, device, kind, base in [
            ("cpu", CPU, "cpu", 0x7F3A_0000_0000),
            ("pinned", CPU, "plugin", 0x7F80_0000_0000),
            ("caching(cuda)", CUDA0, "caching", 0x7A00_0000_0000),
        ]:
            self.allocs[name] = {
                "name": name, "device": device, "kind": kind, "next": base,
                "live": {}, "allocated": 0, "peak": 0, "num_allocs": 0,
                "num_frees": 0, "num_failed": 0,
            }
        # The caching allocator's segments: [addr, size, pool, blocks] with
        # blocks [[addr, size, requested or None if free]] in address order.
        self.segments = []
        self.seg_next = 0x7A00_0000_0000

    # -- plumbing ---------------------------------------------------------
    def stack(self, site):
        if not self.backtraces:
            return None
        if site not in self.stacks:
            frames = INTERNAL + [SITES[site]] + CALLERS.get(site, DEFAULT_CALLERS)
            ids = []
            for f in frames:
                if f not in self.frame_index:
                    self.frame_index[f] = len(self.frames)
                    self.frames.append({"function": f[0], "file": f[1], "line": f[2]})
                ids.append(self.frame_index[f])
            self.stacks[site] = ids
        return self.stacks[site]

    def need(self, k):
        # Stop before an operation whose events would not all fit, so that
        # the live blocks and segments always match the recorded events.
        if len(self.events) + k > self.total:
            raise StopSimulation

    def event(self, action, name, addr, size, stack=None):
        assert len(self.events) < self.total
        self.time_ns += self.rng.randint(800, 30_000)
        e = {"action": action, "allocator": name, "device": self.allocs[name]["device"],
             "addr": "0x%x" % addr, "size": size, "time_ns": self.time_ns}
        if stack is not None:
            e["stack"] = stack
        self.events.append(e)

    def pause(self, ns):
        self.time_ns += ns

    # -- the allocators -----------------------------------------------------
    def alloc(self, name, site, requested):
        a = self.allocs[name]
        self.need(2 if a["kind"] == "caching" else 1)
        stack = self.stack(site)
        if a["kind"] == "caching":
            size = (requested + 511) // 512 * 512
            addr = self.caching_alloc(size, requested, stack)
        else:
            size = (requested + 63) // 64 * 64
            addr = a["next"]
            a["next"] += size + 4096 * self.rng.randint(0, 3)
        self.event("alloc", name, addr, size, stack)
        a["live"][addr] = (size, requested, self.time_ns, stack)
        a["allocated"] += size
        a["peak"] = max(a["peak"], a["allocated"])
        a["num_allocs"] += 1
        return (name, addr)

    def free(self, handle):
        name, addr = handle
        a = self.allocs[name]
        self.need(1)
        size = a["live"].pop(addr)[0]
        self.event("free", name, addr, size)
        a["allocated"] -= size
        a["num_frees"] += 1
        if a["kind"] == "caching":
            self.caching_free(addr)

    def oom(self, name, site, requested):
        self.need(1)
        self.event("oom", name, 0, requested, self.stack(site))
        self.allocs[name]["num_failed"] += 1

    def caching_alloc(self, size, requested, stack):
        for seg in self.segments:
            blocks = seg[3]
            for i, b in enumerate(blocks):
                if b[2] is None and b[1] >= size:
                    rest = b[1] - size
                    blocks[i] = [b[0], size, requested]
                    if rest:
                        blocks.insert(i + 1, [b[0] + size, rest, None])
                    return b[0]
        if size <= 1 * MiB:
            seg_size, pool = 2 * MiB, "small"
        elif size < 10 * MiB:
            seg_size, pool = 20 * MiB, "large"
        else:
            seg_size, pool = (size + 2 * MiB - 1) // (2 * MiB) * (2 * MiB), "oversize"
        addr = self.seg_next
        self.seg_next += seg_size + 2 * MiB
        self.event("segment_alloc", "caching(cuda)", addr, seg_size)
        blocks = [[addr, size, requested]]
        if seg_size > size:
            blocks.append([addr + size, seg_size - size, None])
        self.segments.append([addr, seg_size, pool, blocks])
        return addr

    def caching_free(self, addr):
        for seg in self.segments:
            if seg[0] <= addr < seg[0] + seg[1]:
                blocks = seg[3]
                i = next(i for i, b in enumerate(blocks) if b[0] == addr)
                blocks[i][2] = None
                if i + 1 < len(blocks) and blocks[i + 1][2] is None:
                    blocks[i][1] += blocks.pop(i + 1)[1]
                if i > 0 and blocks[i - 1][2] is None:
                    blocks[i - 1][1] += blocks.pop(i)[1]
                return
        raise AssertionError("free of an unknown caching block")

    def empty_cache(self):
        for seg in list(self.segments):
            if len(seg[3]) == 1 and seg[3][0][2] is None:
                self.need(1)
                self.event("segment_free", "caching(cuda)", seg[0], seg[1])
                self.segments.remove(seg)

    # -- the workload ---------------------------------------------------------
    def run(self):
        r = self.rng
        try:
            for _ in range(6):
                self.alloc("caching(cuda)", "weights", r.choice([4, 8, 16, 24]) * MiB + r.randint(0, 64) * KiB)
            step = 0
            while True:
                step += 1
                staging = [self.alloc("pinned", "batch", r.randint(4, 12) * MiB) for _ in range(2)]
                tokens = [self.alloc("cpu", "tokens", r.randint(16, 400) * 4 * KiB) for _ in range(r.randint(2, 5))]
                for t in tokens:
                    if r.random() < 0.12:
                        continue  # kept by a cache that never shrinks: a slow leak
                    self.free(t)
                acts = []
                for layer in range(r.randint(6, 10)):
                    acts.append(self.alloc("caching(cuda)", "linear", r.randint(1, 6) * MiB + r.randint(0, 1023) * 512))
                    acts.append(self.alloc("caching(cuda)", "attention", r.randint(2, 12) * MiB))
                    acts.append(self.alloc("caching(cuda)", "gelu", r.randint(64, 900) * KiB))
                    if layer % 3 == 0:
                        self.free(acts.pop(r.randrange(len(acts))))
                for s in staging:
                    self.free(s)
                grads = []
                while acts:
                    self.free(acts.pop())
                    if r.random() < 0.35:
                        grads.append(self.alloc("caching(cuda)", "grad", r.randint(256, 4096) * KiB))
                tmp = [self.alloc("caching(cuda)", "optim", r.randint(1, 8) * MiB) for _ in range(3)]
                for t in tmp + grads:
                    self.free(t)
                log = self.alloc("cpu", "log", r.randint(1, 8) * 256)
                self.free(log)
                if step % 25 == 0:
                    self.oom("caching(cuda)", "attention", 48 * GiB)
                if step % 10 == 0:
                    self.empty_cache()
                self.pause(r.randint(1_000_000, 3_000_000))
        except StopSimulation:
            pass


def snapshot(args):
    total = args.events + args.dropped
    sim = Simulation(args.seed, total, not args.no_backtraces)
    if total:
        sim.run()
    kept = sim.events[max(0, len(sim.events) - args.events):]
    allocators = []
    for a in sim.allocs.values():
        blocks = []
        for addr, (size, requested, t, stack) in sorted(a["live"].items()):
            b = {"addr": "0x%x" % addr, "size": size, "time_ns": t}
            if requested != size:
                b["requested"] = requested
            if stack is not None:
                b["stack"] = stack
            blocks.append(b)
        out = {
            "name": a["name"], "device": a["device"], "kind": a["kind"],
            "stats": {"allocated_bytes": a["allocated"], "peak_bytes": a["peak"],
                      "num_allocs": a["num_allocs"], "num_frees": a["num_frees"],
                      "num_failed": a["num_failed"]},
            "blocks": blocks,
        }
        if a["kind"] == "caching":
            out["inner"] = "cuda"
            out["segments"] = []
            for addr, size, pool, seg_blocks in sim.segments:
                sb = []
                for baddr, bsize, requested in seg_blocks:
                    entry = {"addr": "0x%x" % baddr, "size": bsize,
                             "state": "free" if requested is None else "allocated"}
                    if requested is not None and requested != bsize:
                        entry["requested"] = requested
                    sb.append(entry)
                out["segments"].append({"addr": "0x%x" % addr, "size": size, "pool": pool, "blocks": sb})
        allocators.append(out)
    return {
        "format": "tessera-memory-snapshot",
        "version": 1,
        "producer": {"name": "make_snapshot.py", "version": "1"},
        "process": {"pid": 4242, "executable": "/opt/demo/train"},
        "taken": {"unix_time_ms": 1_790_000_000_000, "time_ns": sim.time_ns + 1000},
        "history": {
            "recording": total > 0,
            "max_entries": args.max_entries if args.max_entries is not None else (args.events if total else 0),
            "backtraces": total > 0 and not args.no_backtraces,
            "recorded": len(sim.events),
            "dropped": len(sim.events) - len(kept),
        },
        "allocators": allocators,
        "frames": sim.frames,
        "events": kept,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="the JSON file to write ('-': stdout)")
    p.add_argument("--events", type=int, default=2000, help="events kept in the ring (default 2000)")
    p.add_argument("--dropped", type=int, default=0, help="older events the ring dropped (default 0)")
    p.add_argument("--max-entries", type=int, help="the ring's capacity (default: --events)")
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--no-backtraces", action="store_true", help="events without stacks")
    args = p.parse_args()
    if args.events < 0 or args.dropped < 0:
        p.error("--events and --dropped must be >= 0")
    snap = snapshot(args)
    text = json.dumps(snap, separators=(",", ":"))
    if args.out == "-":
        sys.stdout.write(text + "\n")
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
