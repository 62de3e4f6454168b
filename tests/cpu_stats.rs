//! The built-in CPU allocator's byte statistics, which threads keep in
//! shards of their own and add to the shared total only past 1 MiB either
//! way (src/allocator/stats.rs): exact bytes and peak while one thread
//! allocates, exact bytes and a peak within the documented bound with
//! several, and totals that stay whole across threads that exit and blocks
//! freed on another thread than the one that made them.
//!
//! One test function: the figures are process-wide, so nothing else may
//! allocate through tessera while the exact checks run.

use tessera::allocator::StatsSnapshot;
use tessera::{Allocator, DataPtr};

/// What a thread may hold back from the shared total, either way.
const FLUSH: u64 = 1 << 20;

fn stats() -> StatsSnapshot {
    Allocator::cpu().stats()
}

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Random allocations and frees on one thread, sizes from 1 byte to
/// 3 MiB (so the shard's remainder crosses the threshold both ways and some
/// blocks pass it alone), checked against a model after every step,
/// with a reset_peak in the middle.
fn one_thread_is_exact() {
    let cpu = Allocator::cpu();
    cpu.reset_peak();
    let base = stats().allocated_bytes;
    assert_eq!(
        stats().peak_bytes,
        base,
        "reset_peak sets the peak to the current bytes"
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut live: Vec<(DataPtr, u64)> = Vec::new();
    let (mut bytes, mut peak) = (0u64, 0u64);
    for step in 0..4000 {
        if step == 2000 {
            cpu.reset_peak();
            peak = bytes;
        }
        if live.is_empty() || rng.next() % 5 < 3 {
            let size = match rng.next() % 10 {
                0 => 1 + rng.next() % (3 << 20),
                1..=3 => 1 + rng.next() % (256 << 10),
                _ => 1 + rng.next() % 4096,
            };
            live.push((cpu.allocate(size as usize).unwrap(), size));
            bytes += size;
            peak = peak.max(bytes);
        } else {
            let i = (rng.next() % live.len() as u64) as usize;
            let (block, size) = live.swap_remove(i);
            drop(block);
            bytes -= size;
        }
        let s = stats();
        assert_eq!(
            s.allocated_bytes,
            base + bytes,
            "allocated bytes at step {step}"
        );
        assert_eq!(s.peak_bytes, base + peak, "peak at step {step}");
    }
    drop(live);
    assert_eq!(stats().allocated_bytes, base);
}

/// Four threads at once, each with up to 48 blocks of 1 to 64 KiB live
/// (so each crosses the threshold), then exit: the bytes and counts are
/// exact afterwards, and the peak lies between the largest one thread had
/// live and everything every thread had live, within the bound.
fn several_threads_stay_whole() {
    let cpu = Allocator::cpu();
    cpu.reset_peak();
    let before = stats();
    let maxima: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4u64)
            .map(|t| {
                scope.spawn(move || {
                    let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ (t + 1));
                    let mut live: Vec<(DataPtr, u64)> = Vec::new();
                    let (mut bytes, mut most) = (0u64, 0u64);
                    for _ in 0..20_000 {
                        if live.len() < 48 && (live.is_empty() || rng.next() % 2 == 0) {
                            let size = 1 + rng.next() % (64 << 10);
                            live.push((Allocator::cpu().allocate(size as usize).unwrap(), size));
                            bytes += size;
                            most = most.max(bytes);
                        } else {
                            let i = (rng.next() % live.len() as u64) as usize;
                            bytes -= live.swap_remove(i).1;
                        }
                    }
                    most
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let after = stats();
    assert_eq!(
        after.allocated_bytes, before.allocated_bytes,
        "every block was freed"
    );
    let (allocs, frees) = (
        after.num_allocs - before.num_allocs,
        after.num_frees - before.num_frees,
    );
    assert_eq!(allocs, frees);
    assert!(allocs >= 4 * 10_000, "{allocs} allocations counted");
    let largest = *maxima.iter().max().unwrap();
    let all: u64 = maxima.iter().sum();
    let peak = after.peak_bytes - before.allocated_bytes;
    assert!(
        peak + 4 * FLUSH >= largest && peak <= all + 4 * FLUSH,
        "peak {peak}: one thread's largest {largest}, all threads' {all}, bound 4 MiB (the main thread's remainder too)"
    );
    cpu.reset_peak();
    assert_eq!(stats().peak_bytes, after.allocated_bytes);
}

/// Blocks made on one thread and freed on another, each side below the
/// threshold and then past it: the total never reads as a wrapped-around
/// figure and ends exact, and the remainders of exited threads count.
fn cross_thread_frees_stay_whole() {
    let base = stats().allocated_bytes;
    for count in [10usize, 400] {
        let blocks: Vec<DataPtr> = std::thread::spawn(move || {
            (0..count)
                .map(|_| Allocator::cpu().allocate(8 << 10).unwrap())
                .collect()
        })
        .join()
        .unwrap();
        let made = (count as u64) * (8 << 10);
        assert_eq!(
            stats().allocated_bytes,
            base + made,
            "{count} blocks from an exited thread"
        );
        std::thread::spawn(move || {
            for (i, b) in blocks.into_iter().enumerate() {
                drop(b);
                let now = stats().allocated_bytes;
                assert_eq!(now, base + made - (i as u64 + 1) * (8 << 10));
            }
        })
        .join()
        .unwrap();
        assert_eq!(stats().allocated_bytes, base);
    }
}

#[test]
fn cpu_statistics_kept_in_thread_shards() {
    one_thread_is_exact();
    several_threads_stay_whole();
    cross_thread_frees_stay_whole();
}
