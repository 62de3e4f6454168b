#!/usr/bin/env python3
"""NumPy small-array creation with tessera's handler vs NumPy's default.

    python benches/numpy_handler.py [--rounds 15] [--number 200000]

For each n in SIZES, times `np.empty(n)` (float64; n elements, 8n bytes)
and `np.zeros(n)` under NumPy's default handler and under tessera's,
alternating the two handlers round by round in one process so that both
see the same machine state. Each round is one timeit call of `number`
creations (each array freed at once, as in a loop); the figure is the
median over the rounds of ns per creation, the spread the min..max of
the rounds. The ratio is tessera's median over the default's median; the
issue's bar is <= 1.15 for np.empty(n), n <= 1024.
"""
import argparse
import json
import platform
import statistics
import timeit

import numpy as np

from tessera import numpy_allocator

SIZES = [0, 1, 8, 64, 256, 1024]


def rounds_of(stmt, n, number, rounds):
    t = {"default": [], "tessera": []}
    g = {"np": np, "n": n}
    for r in range(rounds):
        order = ("default", "tessera") if r % 2 == 0 else ("tessera", "default")
        for name in order:
            if name == "tessera":
                numpy_allocator.install()
            else:
                numpy_allocator.uninstall()
            t[name].append(timeit.timeit(stmt, number=number, globals=g) / number * 1e9)
    numpy_allocator.uninstall()
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--number", type=int, default=200_000)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    print(f"numpy {np.__version__}, tessera {numpy_allocator.TESSERA_VERSION}, "
          f"python {platform.python_version()}, {platform.machine()}; "
          f"{args.rounds} rounds x {args.number} creations, ns per creation")
    print(f"{'stmt':<14} {'n':>5} {'default median (min..max)':>28} "
          f"{'tessera median (min..max)':>28} {'ratio':>6}")
    results = []
    worst = 0.0
    for stmt in ("np.empty(n)", "np.zeros(n)"):
        for n in SIZES:
            t = rounds_of(stmt, n, args.number, args.rounds)
            md, mt = statistics.median(t["default"]), statistics.median(t["tessera"])
            ratio = mt / md
            # Spread of the ratio: the per-round ratios (same round, both handlers).
            per_round = sorted(a / b for a, b in zip(t["tessera"], t["default"]))
            if stmt == "np.empty(n)":
                worst = max(worst, ratio)
            print(f"{stmt:<14} {n:>5} {md:>9.1f} ({min(t['default']):6.1f}..{max(t['default']):6.1f})"
                  f"   {mt:>9.1f} ({min(t['tessera']):6.1f}..{max(t['tessera']):6.1f})"
                  f" {ratio:6.3f}  rounds' ratios {per_round[0]:.3f}..{per_round[-1]:.3f}")
            results.append({"stmt": stmt, "n": n, "default_ns": t["default"],
                            "tessera_ns": t["tessera"], "ratio_of_medians": ratio})
    print(f"worst np.empty ratio (n <= 1024): {worst:.3f} (bar: 1.15)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
