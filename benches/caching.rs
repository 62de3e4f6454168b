//! Bench of the caching allocator against the uncached built-in CPU
//! allocator it wraps: allocate + free of one block in a loop, both sides
//! measured in one run (as every case of docs/PERFORMANCE.md). One line per case:
//! case, uncached ns, cached ns, ratio (cached / uncached; the issue's
//! target is <= 0.5).
//!
//! Cases:
//! - "alone": the block is the only one in its pool, so every allocation
//!   splits a whole segment and every free merges it back (the caching
//!   allocator's most expensive steady state);
//! - "between live blocks": neighbours stay allocated, so the block is
//!   reused exactly, with no split or merge (the common steady state of a
//!   busy pool); the uncached side keeps the same neighbours alive;
//! - two threads: both allocate and free through the same allocator at
//!   once; the figure is the wall time per allocate + free pair of one
//!   thread (1.0x the one-thread figure would mean no contention).
//!
//! The last line is the floor: the same loop through the `Allocator` API
//! over a backend that does nothing but hand out a static pointer. No
//! backend outside tessera can beat it (it includes the statistics
//! wrapper every such backend gets; tessera's own CPU and caching
//! allocators count their statistics themselves and skip it).
//!
//! `cargo bench --bench caching [-- <iterations> [<threads>]]` (threads 1
//! or 2 runs only those cases).

use std::any::Any;
use std::ffi::c_void;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;
use tessera::allocator::caching::{self, CachingOptions};
use tessera::allocator::RawAllocator;
use tessera::{Allocator, DataPtr, Device, Result};

const ROUNDS: usize = 9;

/// One run: ns per allocate + free pair on each of `threads` threads
/// (started together through a barrier), averaged over the threads.
fn run(a: &Allocator, size: usize, iters: usize, threads: usize) -> f64 {
    let barrier = Barrier::new(threads);
    let per_thread: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let barrier = &barrier;
                s.spawn(move || {
                    for _ in 0..iters / 10 {
                        drop(black_box(a.allocate(black_box(size)).unwrap()));
                    }
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        drop(black_box(a.allocate(black_box(size)).unwrap()));
                    }
                    start.elapsed().as_nanos() as f64 / iters as f64
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    per_thread.iter().sum::<f64>() / threads as f64
}

/// Both sides, run alternately ROUNDS times; each side's best run. On a
/// shared, noisy machine the minimum is the figure least disturbed by
/// other processes, and alternating exposes both sides to the same load.
fn compare(a: &Allocator, b: &Allocator, size: usize, iters: usize, threads: usize) -> (f64, f64) {
    let (mut best_a, mut best_b) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        best_a = best_a.min(run(a, size, iters, threads));
        best_b = best_b.min(run(b, size, iters, threads));
    }
    (best_a, best_b)
}

/// Allocates three blocks of `size` and frees the middle one: the next
/// allocation of `size` lands between two live blocks.
fn hole(a: &Allocator, size: usize) -> [DataPtr; 2] {
    let x = a.allocate(size).unwrap();
    let y = a.allocate(size).unwrap();
    let z = a.allocate(size).unwrap();
    drop(y);
    [x, z]
}

/// A backend that hands out one static pointer and frees nothing.
struct Noop;

static mut SLOT: [u8; 64] = [0; 64];

unsafe extern "C" fn noop_free(_: *mut c_void) {}

impl RawAllocator for Noop {
    fn allocate(&self, _: usize, device: Device) -> Result<DataPtr> {
        let p = &raw mut SLOT as *mut c_void;
        // SAFETY: noop_free frees nothing; SLOT lives forever.
        Ok(unsafe { DataPtr::from_raw_parts(p, p, Some(noop_free), device) })
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let iters = args.first().copied().unwrap_or(1_000_000);
    let thread_counts: Vec<usize> = match args.get(1) {
        Some(&t) => vec![t],
        None => vec![1, 2],
    };
    let cpu = Allocator::cpu();
    let new_cached = || caching::new(Allocator::cpu(), CachingOptions::default()).unwrap();
    let cached = new_cached();
    let noop = Allocator::new("noop", Device::CPU, Box::new(Noop));
    println!("case, uncached ns, cached ns, ratio");
    let mut first = None;
    for threads in thread_counts {
        let t = if threads == 1 {
            "1 thread"
        } else {
            "2 threads"
        };
        for (size, label) in [(4 << 10, "4 KiB"), (1 << 20, "1 MiB")] {
            let (uncached, alone) = compare(&cpu, &cached, size, iters, threads);
            first.get_or_insert(uncached);
            println!(
                "alloc+free {label} alone, {t}, {uncached:.1}, {alone:.1}, {:.2}x",
                alone / uncached
            );
            if threads == 1 {
                let busy = new_cached();
                let _keep = (hole(&cpu, size), hole(&busy, size));
                let (uncached, reuse) = compare(&cpu, &busy, size, iters, threads);
                println!(
                    "alloc+free {label} between live blocks, {t}, {uncached:.1}, {reuse:.1}, \
                     {:.2}x",
                    reuse / uncached
                );
            }
        }
    }
    let (floor, _) = compare(&noop, &noop, 4096, iters, 1);
    let base = first.unwrap_or(f64::NAN);
    println!(
        "floor: allocate+free through the Allocator API over a no-op backend, 1 thread: \
         {floor:.1} ns ({:.2}x of the first uncached case: no backend can go below that)",
        floor / base
    );
    let s = caching::of(&cached).unwrap().stats().unwrap();
    println!(
        "caching stats: {} allocations, {} cache hits, {} segment(s) reserved ({} bytes)",
        s.all.num_allocs, s.all.cache_hits, s.all.segments.current, s.all.reserved_bytes.current
    );
}
