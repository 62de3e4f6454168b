//! Tests of the thread front (thread_front.rs): round trips without the
//! lock, what other threads see, and the allocator's lifetime.

use super::tests::{cached, stats, KIB};
use super::*;
use crate::allocator::active;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::time::Duration;

#[test]
fn round_trips_take_no_lock() {
    let _bits = active::test_lock();
    let (a, _counts) = cached();
    let first = a.allocate(4 * KIB).unwrap();
    let addr = first.get() as usize;
    drop(first); // parked in this thread's front
    let barrier = Barrier::new(2);
    let released = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let guard = of(&a).unwrap().shared().lock.lock().unwrap();
            barrier.wait();
            std::thread::sleep(Duration::from_millis(300));
            released.store(true, SeqCst);
            drop(guard);
        });
        barrier.wait();
        // Fewer than 1024: the counts are added under the lock then.
        for _ in 0..1000 {
            let p = a.allocate(4 * KIB).unwrap();
            assert_eq!(p.get() as usize, addr, "the same block");
            drop(p);
        }
        assert!(
            !released.load(SeqCst),
            "1000 round trips while another thread held the lock"
        );
    });
    let s = stats(&a).small;
    assert_eq!(
        (s.num_allocs, s.num_frees, s.cache_hits),
        (1001, 1001, 1000)
    );
    assert_eq!(s.active_blocks.allocated, 1001);
    assert_eq!(s.active_bytes.freed, 1001 * 4 * KIB as u64);
    assert_eq!(s.requested_bytes.current, 0);
    assert_eq!(a.stats().num_allocs, 1001, "the owner's counts too");
}

#[test]
fn other_threads_see_parked_blocks_as_allocated_until_flushed() {
    let _bits = active::test_lock();
    let (a, _counts) = cached();
    let parked = Arc::new(Barrier::new(2));
    let checked = Arc::new(Barrier::new(2));
    // A thread of its own (joined: its thread-locals are gone after).
    let t = {
        let (a, parked, checked) = (a.clone(), parked.clone(), checked.clone());
        std::thread::spawn(move || {
            drop(a.allocate(1000).unwrap());
            for _ in 0..2048 {
                drop(a.allocate(1000).unwrap());
            }
            parked.wait();
            checked.wait();
            // Exits: its front is flushed.
        })
    };
    parked.wait();
    let s = stats(&a).small;
    assert_eq!(
        s.active_blocks.current, 1,
        "parked in the other thread's front"
    );
    assert_eq!(s.requested_bytes.current, 1000);
    // Round trips reach the statistics every 1024.
    assert_eq!(s.num_allocs, 2049);
    assert_eq!(s.cache_hits, 2048);
    checked.wait();
    t.join().unwrap();
    let s = stats(&a).small;
    assert_eq!(
        (s.active_blocks.current, s.num_allocs, s.num_frees),
        (0, 2049, 2049)
    );
}

#[test]
fn a_front_keeps_a_dropped_allocators_state_until_its_thread_exits() {
    let _bits = active::test_lock();
    let (a, counts) = cached();
    let go = Arc::new(Barrier::new(2));
    let dropped = Arc::new(Barrier::new(2));
    let t = {
        let (a, go, dropped) = (a.clone(), go.clone(), dropped.clone());
        std::thread::spawn(move || {
            drop(a.allocate(512).unwrap()); // parked here
            drop(a);
            go.wait();
            dropped.wait();
        })
    };
    go.wait();
    drop(a);
    assert!(
        !counts.dropped.load(SeqCst),
        "a block is parked in the other front"
    );
    dropped.wait();
    t.join().unwrap();
    assert!(
        counts.dropped.load(SeqCst),
        "the thread's exit flushed the front"
    );
    assert_eq!(counts.live_count(), 0);
}

#[test]
fn a_block_of_another_allocator_flushes_the_front() {
    let _bits = active::test_lock();
    let (a, _) = cached();
    let (b, _) = cached();
    drop(a.allocate(512).unwrap());
    drop(b.allocate(512).unwrap()); // a's block goes back to a's pool
    let sa = of(&a).unwrap().shared().lock.lock().unwrap().stats_now();
    assert_eq!(
        sa.all.active_blocks.current, 0,
        "flushed without a's own read"
    );
    assert_eq!(stats(&b).all.num_frees, 1);
    // Dropping an allocator flushes its blocks from this thread's front.
    let p = b.allocate(512).unwrap();
    drop(p);
    drop(b);
}

/// The allocator's own statistics (tsr_allocator_stats, the wrapper's
/// counts) see the thread's frees, as the caching statistics do: reading
/// them gives the front back first. Before, a freed 48-byte output parked
/// in the front stayed in `allocated_bytes` (c_tests/test_iter.c).
#[test]
fn the_allocators_own_statistics_see_the_threads_frees() {
    let _bits = active::test_lock();
    let (a, _counts) = cached();
    let before = a.stats();
    let p = a.allocate(48).unwrap();
    assert_eq!(a.stats().allocated_bytes, before.allocated_bytes + 48);
    drop(p); // parked in this thread's front
    assert_eq!(a.stats().allocated_bytes, before.allocated_bytes);
    let q = a.allocate(48).unwrap();
    drop(q);
    a.reset_peak();
    assert_eq!(
        a.stats().peak_bytes,
        before.allocated_bytes,
        "the peak reset to what is allocated"
    );
}
