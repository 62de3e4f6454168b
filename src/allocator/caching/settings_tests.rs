//! Tests of c10's settings in the caching layer: rounding, the oversize
//! reuse bound, the memory limit and fraction, garbage collection, and the
//! statistics c10's memory_stats has (per device, cumulative, oversize).

use super::tests::{audit, cached_with, stats, MIB};
use super::*;
use crate::device::DeviceType;
use crate::error::ErrorKind;
use std::sync::atomic::Ordering::SeqCst;

/// An inner allocator with no hooks, over the CPU allocator.
pub(super) struct PlainCpu;

impl RawAllocator for PlainCpu {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        Allocator::cpu().allocate_on(nbytes, device)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[test]
fn roundup_power2_divisions_rounds_requests() {
    let (a, _counts) = cached_with(CachingOptions {
        roundup_power2_divisions: Some(RoundupDivisions::uniform(4).unwrap()),
        ..Default::default()
    });
    // 5 MiB + 1 lies in [4, 8) MiB: rounded to the next quarter, 6 MiB.
    let p = a.allocate(5 * MIB + 1).unwrap();
    assert_eq!(stats(&a).large.active_bytes.current, 6 * MIB as u64);
    // 3000 bytes: 4 divisions of [2048, 4096) are 512 bytes apart.
    let q = a.allocate(3000).unwrap();
    assert_eq!(stats(&a).small.active_bytes.current, 3072);
    drop((p, q));
    // The list form: 1 division below 512 MiB, so plain 512-byte rounding.
    let (b, _counts) = cached_with(CachingOptions {
        roundup_power2_divisions: Some(RoundupDivisions::parse("[512:1,>:8]").unwrap()),
        ..Default::default()
    });
    let p = b.allocate(5 * MIB + 1).unwrap();
    assert_eq!(stats(&b).large.active_bytes.current, (5 * MIB + 512) as u64);
    drop(p);
}

#[test]
fn max_non_split_rounding_bounds_oversize_reuse() {
    for (rounding, reused) in [(0, false), (64 * MIB, true)] {
        let (a, counts) = cached_with(CachingOptions {
            max_split_size: 4 * MIB,
            max_non_split_rounding: rounding,
            ..Default::default()
        });
        let big = a.allocate(80 * MIB).unwrap();
        let addr = big.get() as usize;
        drop(big);
        // 80 MiB is 50 MiB more than 30: within 64 MiB, not within 20.
        let p = a.allocate(30 * MIB).unwrap();
        assert_eq!(p.get() as usize == addr, reused, "rounding {rounding}");
        assert_eq!(counts.allocs.load(SeqCst), if reused { 1 } else { 2 });
    }
    let err = new(
        Allocator::cpu(),
        CachingOptions {
            max_non_split_rounding: 8 * MIB,
            ..Default::default()
        },
    )
    .expect_err("8 MiB is below c10's smallest");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        err.message().contains("max_non_split_rounding 8388608"),
        "{err}"
    );
}

#[test]
fn a_memory_limit_fails_requests_past_it_after_returning_unused_segments() {
    let (a, counts) = cached_with(CachingOptions {
        memory_limit: 30 * MIB as u64,
        ..Default::default()
    });
    assert_eq!(
        of(&a).unwrap().memory_limit(Device::CPU).unwrap(),
        Some(30 * MIB as u64)
    );
    let p = a.allocate(3 * MIB).unwrap(); // a 20 MiB segment
    let e = a.allocate(18 * MIB).expect_err("20 + 18 MiB pass 30 MiB");
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert!(
        e.message()
            .contains("would pass the limit of 31457280 bytes"),
        "{e}"
    );
    assert_eq!(
        counts.allocs.load(SeqCst),
        1,
        "the inner allocator was not asked"
    );
    assert_eq!(stats(&a).all.ooms, 1);
    drop(p);
    // 25 MiB (a 26 MiB segment) does not fit the cached 20 MiB segment,
    // and both pass 30 MiB: the unused one goes back first, then it fits.
    let q = a.allocate(25 * MIB).unwrap();
    assert_eq!(counts.frees.load(SeqCst), 1);
    assert_eq!(stats(&a).all.reserved_bytes.current, 26 * MIB as u64);
    assert_eq!(stats(&a).all.retries, 2);
    drop(q);
}

#[test]
fn a_memory_fraction_takes_the_devices_total() {
    let total = crate::allocator::cpu_vmm::memory_info(Device::CPU)
        .unwrap()
        .total;
    let fraction = (64 * MIB) as f64 / total as f64;
    let a = new(
        Allocator::cpu(),
        CachingOptions {
            memory_fraction: fraction,
            ..Default::default()
        },
    )
    .unwrap();
    let c = of(&a).unwrap();
    let limit = c.memory_limit(Device::CPU).unwrap().unwrap();
    assert!(limit.abs_diff(64 * MIB as u64) <= 1, "{limit}");
    let e = a.allocate(80 * MIB).expect_err("past the fraction");
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    c.set_memory_fraction(Device::CPU, 0.0).unwrap();
    assert_eq!(c.memory_limit(Device::CPU).unwrap(), None);
    drop(a.allocate(80 * MIB).unwrap());
    c.set_memory_fraction(Device::CPU, fraction / 2.0).unwrap();
    a.empty_cache().unwrap();
    assert!(a.allocate(40 * MIB).is_err());
    assert!(c.set_memory_fraction(Device::CPU, 1.5).is_err());
    // An inner allocator that cannot tell its device's memory.
    let (b, _counts) = cached_with(CachingOptions::default());
    let e = of(&b)
        .unwrap()
        .set_memory_fraction(Device::CPU, 0.5)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    let inner = Allocator::new("plain", Device::CPU, Box::new(PlainCpu));
    let e = new(
        inner,
        CachingOptions {
            memory_fraction: 0.5,
            ..Default::default()
        },
    )
    .expect_err("no total to take a fraction of");
    assert!(e.message().contains("memory_limit"), "{e}");
}

#[test]
fn garbage_collection_returns_the_oldest_cached_segments_past_the_threshold() {
    for gc in [false, true] {
        let (a, counts) = cached_with(CachingOptions {
            memory_limit: 100 * MIB as u64,
            garbage_collection_threshold: if gc { 0.6 } else { 0.0 },
            ..Default::default()
        });
        let mut blocks: Vec<DataPtr> = (0..4).map(|_| a.allocate(12 * MIB).unwrap()).collect();
        let oldest = blocks[0].get() as usize;
        drop(blocks.remove(0));
        // A small request (a 2 MiB segment) flushes the front cache: the
        // freed segment is in the pool from now on, and ages with each
        // large lookup.
        drop(a.allocate(512).unwrap());
        for _ in 0..5 {
            // 13 MiB: served by a 14 MiB segment of its own, freed and
            // found again (one lookup each time); 12 MiB blocks are too small.
            drop(a.allocate(13 * MIB).unwrap());
        }
        drop(blocks.remove(0));
        assert_eq!(stats(&a).all.reserved_bytes.current, 64 * MIB as u64);
        // A miss with 64 MiB reserved, past 60% of 100 MiB: the oldest
        // free segment goes (12 MiB, enough to get below 60 MiB); the
        // segments freed later stay.
        let p = a.allocate(30 * MIB).unwrap();
        let live = counts.live.lock().unwrap().clone();
        assert_eq!(!live.contains_key(&oldest), gc, "gc {gc}");
        let expect = if gc { 82 } else { 94 };
        assert_eq!(stats(&a).all.reserved_bytes.current, expect * MIB as u64);
        assert_eq!(counts.frees.load(SeqCst), usize::from(gc));
        audit(&a);
        drop((p, blocks));
    }
    let e = new(
        Allocator::cpu(),
        CachingOptions {
            garbage_collection_threshold: 1.0,
            ..Default::default()
        },
    )
    .expect_err("1.0 is not in (0, 1)");
    assert!(
        e.message().contains("garbage_collection_threshold 1"),
        "{e}"
    );
}

#[test]
fn statistics_per_device_cumulative_and_oversize() {
    let (a, _counts) = cached_with(CachingOptions {
        max_split_size: 4 * MIB,
        ..Default::default()
    });
    let c = of(&a).unwrap();
    let d1 = Device::new(DeviceType::PrivateUse1, 1).unwrap();
    let p = a.allocate(1000).unwrap();
    let q = a.allocate_on(5 * MIB, d1).unwrap();
    let cpu = c.device_stats(Device::CPU).unwrap();
    let other = c.device_stats(d1).unwrap();
    assert_eq!(cpu.all.active_bytes.current, 1024);
    assert_eq!(cpu.all.reserved_bytes.current, 2 * MIB as u64);
    assert_eq!(other.all.active_bytes.current, 6 * MIB as u64);
    assert_eq!(other.all.oversize_allocations.current, 1);
    assert_eq!(other.all.oversize_segments.current, 1);
    assert_eq!(cpu.all.oversize_segments.current, 0);
    assert_eq!(c.devices().unwrap(), vec![Device::CPU, d1]);
    assert_eq!(
        c.device_stats(Device::new(DeviceType::PrivateUse1, 2).unwrap())
            .unwrap(),
        CachingStats::default(),
        "a device never served"
    );
    let all = stats(&a).all;
    assert_eq!(all.active_bytes.current, (6 * MIB + 1024) as u64);
    drop(q);
    let other = c.device_stats(d1).unwrap().all;
    assert_eq!(other.oversize_allocations.current, 0);
    assert_eq!(other.oversize_segments.current, 1, "cached");
    assert_eq!(
        (other.active_bytes.allocated, other.active_bytes.freed),
        (6 * MIB as u64, 6 * MIB as u64)
    );
    // Round trips through the front cache are counted too.
    for _ in 0..3 {
        drop(a.allocate(1000).unwrap());
    }
    let cpu = c.device_stats(Device::CPU).unwrap().all;
    assert_eq!(cpu.active_bytes.current, 1024);
    assert_eq!(cpu.active_bytes.allocated, 4 * 1024);
    assert_eq!(cpu.active_bytes.freed, 3 * 1024);
    assert_eq!(cpu.requested_bytes.allocated, 4000);
    assert_eq!(cpu.active_blocks.allocated, 4);
    assert_eq!(cpu.num_allocs, 4);
    c.reset_accumulated().unwrap();
    let cpu = c.device_stats(Device::CPU).unwrap().all;
    assert_eq!(
        (
            cpu.active_bytes.allocated,
            cpu.active_bytes.freed,
            cpu.num_allocs
        ),
        (0, 0, 0)
    );
    assert_eq!(cpu.active_bytes.current, 1024, "current values stay");
    assert_eq!(cpu.active_bytes.peak, 2048, "and peaks");
    a.empty_cache().unwrap();
    assert_eq!(c.device_stats(d1).unwrap().all.oversize_segments.current, 0);
    assert_eq!(stats(&a).all.segment_frees, 1);
    drop(p);
}
