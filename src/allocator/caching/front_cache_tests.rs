//! Tests of the front cache (front_cache.rs): exact-size reuse without the pool's
//! best fit, statistics that count parked blocks as freed, and every path
//! that must empty it.

use super::tests::{audit, cached, stats, Model, Rng, KIB, MIB};
use super::*;
use std::sync::atomic::Ordering::SeqCst;

fn parked_bytes(a: &Allocator) -> usize {
    of(a).unwrap().shared().lock.lock().unwrap().front_bytes()
}

#[test]
fn a_freed_block_is_parked_whole_and_reused_for_its_size() {
    // The locked front cache, behind the thread front.
    super::thread_front::disable_for_this_thread();
    let (a, counts) = cached();
    let keep = a.allocate(4 * KIB).unwrap();
    let p = a.allocate(4 * KIB).unwrap();
    let addr = p.get();
    drop(p);
    assert_eq!(parked_bytes(&a), 4 * KIB, "parked, not merged");
    let q = a.allocate(4000).unwrap();
    assert_eq!(q.get(), addr, "the parked block again");
    assert_eq!(parked_bytes(&a), 0);
    assert_eq!(counts.allocs.load(SeqCst), 1);
    let s = stats(&a).small;
    assert_eq!((s.num_allocs, s.num_frees, s.cache_hits), (3, 1, 2));
    assert_eq!((s.active_blocks.current, s.active_bytes.current), (2, 8192));
    assert_eq!(s.requested_bytes.current, 4096 + 4000);
    let o = a.stats();
    assert_eq!((o.allocated_bytes, o.peak_bytes), (8096, 8192));
    drop((keep, q));
}

#[test]
fn statistics_count_parked_blocks_as_freed_and_read_as_merged() {
    // The locked front cache, behind the thread front.
    super::thread_front::disable_for_this_thread();
    let (a, _) = cached();
    let x = a.allocate(64 * KIB).unwrap();
    let y = a.allocate(64 * KIB).unwrap();
    drop(x);
    // Owner statistics need no flush: the free was recorded at once.
    let o = a.stats();
    assert_eq!((o.allocated_bytes, o.num_frees), (64 * KIB as u64, 1));
    assert_eq!(parked_bytes(&a), 64 * KIB);
    // Reading the caching statistics merges parked blocks into the pool,
    // so they read exactly as without a front cache.
    let s = stats(&a).small;
    assert_eq!(parked_bytes(&a), 0);
    assert_eq!((s.active_blocks.current, s.active_blocks.peak), (1, 2));
    assert_eq!(s.inactive_split_blocks.current, 2, "x's hole and the rest");
    assert_eq!(s.inactive_split_bytes.current, (2 * MIB - 64 * KIB) as u64);
    drop(y);
    let s = stats(&a).small;
    assert_eq!(s.inactive_split_blocks.current, 0, "one whole segment");
    assert_eq!(audit(&a).whole_segments, 1);
}

#[test]
fn a_request_that_misses_the_front_cache_sees_the_merged_pool() {
    // The locked front cache, behind the thread front.
    super::thread_front::disable_for_this_thread();
    let (a, counts) = cached();
    let x = a.allocate(512 * KIB).unwrap();
    let y = a.allocate(512 * KIB).unwrap();
    let base = x.get() as usize;
    drop((x, y));
    assert_eq!(parked_bytes(&a), MIB);
    // 1 MiB is no parked size: the parked halves merge first and serve it
    // from the segment's start, as best fit would without a front cache.
    let z = a.allocate(MIB).unwrap();
    assert_eq!(z.get() as usize, base);
    assert_eq!(counts.allocs.load(SeqCst), 1, "no new segment");
    assert_eq!(parked_bytes(&a), 0);
}

#[test]
fn empty_cache_returns_parked_blocks() {
    // The locked front cache, behind the thread front.
    super::thread_front::disable_for_this_thread();
    let (a, counts) = cached();
    drop(a.allocate(4 * KIB).unwrap());
    drop(a.allocate(MIB).unwrap());
    assert!(parked_bytes(&a) > 0);
    a.empty_cache().unwrap();
    assert_eq!(parked_bytes(&a), 0);
    assert_eq!(counts.live_count(), 0, "every segment went back");
    assert_eq!(stats(&a).all.reserved_bytes.current, 0);
}

#[test]
fn the_front_cache_is_bounded_per_size() {
    // The locked front cache, behind the thread front.
    super::thread_front::disable_for_this_thread();
    let (a, _) = cached();
    let blocks: Vec<_> = (0..pool::front_cache::SLOTS + 2)
        .map(|_| a.allocate(8 * KIB).unwrap())
        .collect();
    drop(blocks);
    assert_eq!(parked_bytes(&a), pool::front_cache::SLOTS * 8 * KIB);
    let s = stats(&a).small;
    assert_eq!((s.active_blocks.current, s.num_frees), (0, 6));
    assert_eq!(audit(&a).whole_segments, 1);
}

#[test]
fn parked_blocks_go_back_when_the_allocator_is_destroyed() {
    // The locked front cache, behind the thread front.
    super::thread_front::disable_for_this_thread();
    let (a, counts) = cached();
    let p = a.allocate(4 * KIB).unwrap();
    drop(a.allocate(8 * KIB).unwrap());
    drop(a);
    assert!(!counts.dropped.load(SeqCst), "a block is out");
    drop(p); // the last block: parked, then the state is destroyed
    assert!(counts.dropped.load(SeqCst));
    assert_eq!(counts.live_count(), 0);

    let (a, counts) = cached();
    drop(a.allocate(4 * KIB).unwrap());
    drop(a);
    assert!(counts.dropped.load(SeqCst));
    assert_eq!(counts.live_count(), 0);
}

#[test]
fn blocks_freed_by_another_thread_are_reused() {
    // The locked front cache, behind the thread front.
    super::thread_front::disable_for_this_thread();
    let (a, counts) = cached();
    let p = a.allocate(16 * KIB).unwrap();
    let addr = p.get() as usize;
    std::thread::spawn(move || drop(p)).join().unwrap();
    let q = a.allocate(16 * KIB).unwrap();
    assert_eq!(q.get() as usize, addr);
    assert_eq!(counts.allocs.load(SeqCst), 1);
    let s = stats(&a).small;
    assert_eq!(
        (s.num_allocs, s.num_frees, s.active_blocks.current),
        (2, 1, 1)
    );
}

#[test]
fn peaks_stay_exact_while_parked_blocks_are_reused_for_other_requests() {
    // With the thread front (parked blocks taken back without the lock)...
    peaks_stay_exact();
    // ... and with the locked front cache alone.
    std::thread::spawn(|| {
        super::thread_front::disable_for_this_thread();
        peaks_stay_exact();
    })
    .join()
    .unwrap();
}

fn peaks_stay_exact() {
    // Parked blocks keep counting as active until flushed or reused; a
    // reuse for a larger or smaller request must still leave the requested
    // bytes' peak at the real maximum, checked against a model after every
    // operation. A few rounded sizes, so nearly every request is a front
    // hit, each with a request anywhere inside its 512-byte step.
    let (a, counts) = cached();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut model = Model::default();
    let mut live: Vec<(DataPtr, usize)> = Vec::new();
    for op in 0..20_000u32 {
        if rng.below(2) == 0 || live.is_empty() {
            let n = (1 + rng.below(4) as usize) * 512 - rng.below(512) as usize;
            model.alloc(n);
            live.push((a.allocate(n).unwrap(), n));
        } else {
            let (p, n) = live.swap_remove(rng.below(live.len() as u64) as usize);
            model.free(n);
            drop(p);
        }
        if op % 97 == 0 {
            model.check(&a, &counts);
        }
        if op % 1_013 == 0 {
            // A reset with blocks parked: the peaks become the real
            // current values, not the ones still counting parked blocks.
            of(&a).unwrap().reset_peak().unwrap();
            model.reset_peak();
            model.check(&a, &counts);
        }
    }
    assert!(stats(&a).small.cache_hits > 19_000 / 2);
    for (p, n) in live.drain(..) {
        model.free(n);
        drop(p);
    }
    model.check(&a, &counts);
}
