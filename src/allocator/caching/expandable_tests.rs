//! Tests of expandable segments over the built-in CPU allocator (its
//! address space: allocator/cpu_vmm.rs).

use super::tests::{audit, stats, Rng, MIB};
use super::*;
use crate::error::ErrorKind;

fn expandable(options: CachingOptions) -> Allocator {
    new(
        Allocator::cpu(),
        CachingOptions {
            expandable_segments: true,
            ..options
        },
    )
    .unwrap()
}

/// The growing-request workload: i x 4 MiB + 512 bytes allocated and freed,
/// i = 1..16. Returns (peak reserved, peak active) bytes.
fn growing_workload(a: &Allocator) -> (u64, u64, u64) {
    let mut requested = 0;
    for i in 1..=16 {
        let n = i * 4 * MIB + 512;
        let p = a.allocate(n).unwrap();
        // The memory is usable from end to end.
        // SAFETY: p owns n bytes.
        unsafe {
            *(p.get() as *mut u8) = 1;
            *(p.get() as *mut u8).add(n - 1) = 2;
        }
        requested += n as u64;
        drop(p);
    }
    let s = stats(a).all;
    (s.reserved_bytes.peak, s.active_bytes.peak, requested)
}

#[test]
fn a_growing_request_grows_one_segment() {
    let a = expandable(CachingOptions::default());
    assert!(of(&a).unwrap().expandable_segments());
    let (reserved, active, _) = growing_workload(&a);
    assert_eq!(active, (64 * MIB + 512) as u64);
    assert!(
        reserved as f64 <= 1.1 * active as f64 + (2 * MIB) as f64,
        "peak reserved {reserved} > 1.1 x peak active {active} + 2 MiB"
    );
    assert_eq!(reserved, 66 * MIB as u64, "pages of 2 MiB");
    let s = stats(&a).large;
    assert_eq!(s.segments.current, 1, "one segment all along");
    // Without expandable segments each larger request needs a segment of
    // its own: the sum is reserved.
    let b = new(Allocator::cpu(), CachingOptions::default()).unwrap();
    let (reserved, active, requested) = growing_workload(&b);
    assert_eq!(active, (64 * MIB + 512) as u64);
    assert!(
        reserved >= requested,
        "reserved {reserved} < the sum {requested}"
    );
    // 20 MiB for i = 1..4, then i x 4 + 2 MiB for each i from 5 on.
    assert_eq!(reserved, 548 * MIB as u64);
}

#[test]
fn empty_cache_unmaps_free_pages_and_releases_empty_segments() {
    let a = expandable(CachingOptions::default());
    let p = a.allocate(3 * MIB).unwrap();
    let q = a.allocate(5 * MIB).unwrap();
    let r = a.allocate(100).unwrap();
    // Large blocks follow each other in one segment.
    assert_eq!(q.get() as usize, p.get() as usize + 3 * MIB);
    assert_eq!(stats(&a).large.reserved_bytes.current, 8 * MIB as u64);
    assert_eq!(stats(&a).small.reserved_bytes.current, 2 * MIB as u64);
    drop(p);
    a.empty_cache().unwrap();
    // p's first 2 MiB page is unmapped; its last MiB shares a page with q.
    let s = stats(&a);
    assert_eq!(s.large.reserved_bytes.current, 6 * MIB as u64);
    assert_eq!(s.large.segments.current, 1);
    let au = audit(&a);
    assert_eq!(au.unmapped_bytes + 8 * MIB as u64, au.address_space);
    // A request that fits the unmapped hole plus the free MiB maps it back.
    let p = a.allocate(3 * MIB).unwrap();
    assert_eq!(stats(&a).large.reserved_bytes.current, 8 * MIB as u64);
    drop((p, q));
    a.empty_cache().unwrap();
    let s = stats(&a);
    assert_eq!(s.large.reserved_bytes.current, 0);
    assert_eq!(s.large.segments.current, 0, "the empty segment is released");
    assert_eq!(s.small.segments.current, 1, "r still holds the small one");
    drop(r);
    a.empty_cache().unwrap();
    let s = stats(&a).all;
    assert_eq!((s.segments.current, s.reserved_bytes.current), (0, 0));
    assert_eq!(audit(&a).address_space, 0);
}

#[test]
fn the_limit_counts_mapped_pages() {
    let a = expandable(CachingOptions {
        memory_limit: 16 * MIB as u64,
        ..Default::default()
    });
    let p = a.allocate(10 * MIB).unwrap();
    let e = a.allocate(10 * MIB).expect_err("20 MiB pass 16 MiB");
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert!(e.message().contains("limit of 16777216 bytes"), "{e}");
    assert!(e.message().contains("expandable segment"), "{e}");
    drop(p);
    // The free pages go back on the retry; then 10 MiB fit again.
    let q = a.allocate(12 * MIB).unwrap();
    assert_eq!(stats(&a).all.reserved_bytes.current, 12 * MIB as u64);
    drop(q);
}

#[test]
fn snapshots_show_each_mapped_run_as_a_segment() {
    let a = expandable(CachingOptions::default());
    let p = a.allocate(3 * MIB).unwrap();
    let q = a.allocate(4 * MIB).unwrap();
    let r = a.allocate(3 * MIB).unwrap();
    drop(q);
    a.empty_cache().unwrap();
    let c = of(&a).unwrap();
    let segs = c.shared().lock.lock().unwrap().segments();
    let large: Vec<_> = segs.iter().filter(|s| s.pool == "large").collect();
    assert_eq!(large.len(), 2, "{segs:?}");
    assert!(large.iter().all(|s| s.expandable));
    assert_eq!(large[0].addr, p.get() as usize);
    assert_eq!(
        large[0].size,
        4 * MIB,
        "p and the free MiB of q's first page"
    );
    assert_eq!(
        large[1].addr,
        r.get() as usize - MIB,
        "the free MiB before r"
    );
    assert_eq!(large[1].addr + large[1].size, r.get() as usize + 3 * MIB);
    drop((p, r));
}

#[test]
fn options_need_a_backend_with_address_space() {
    let (inner, _) = (
        Allocator::new(
            "plain",
            Device::CPU,
            Box::new(super::settings_tests::PlainCpu),
        ),
        (),
    );
    let e = new(
        inner,
        CachingOptions {
            expandable_segments: true,
            ..Default::default()
        },
    )
    .expect_err("no address space to reserve");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(
        e.message()
            .contains("expandable_segments: allocator 'plain'"),
        "{e}"
    );
}

#[test]
fn random_operations_keep_the_pools_consistent() {
    let a = expandable(CachingOptions::default());
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut live: Vec<(DataPtr, usize, u8)> = Vec::new();
    for op in 0..20_000u32 {
        let r = rng.below(100);
        if r < 52 || live.is_empty() {
            let n = rng.size();
            let p = a.allocate(n).unwrap();
            let tag = op as u8;
            // SAFETY: p owns n >= 1 bytes.
            unsafe {
                *(p.get() as *mut u8) = tag;
                *(p.get() as *mut u8).add(n - 1) = tag;
            }
            live.push((p, n, tag));
        } else if r < 99 {
            let (p, n, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
            // Nothing else wrote over it.
            // SAFETY: p owns n bytes.
            unsafe {
                assert_eq!(*(p.get() as *const u8), tag);
                assert_eq!(*(p.get() as *const u8).add(n - 1), tag);
            }
            drop(p);
        } else {
            a.empty_cache().unwrap();
        }
        if op % 2_000 == 0 {
            let au = audit(&a);
            let s = stats(&a).all;
            assert_eq!(
                s.reserved_bytes.current + au.unmapped_bytes,
                au.address_space
            );
        }
    }
    drop(live);
    a.empty_cache().unwrap();
    let s = stats(&a).all;
    assert_eq!((s.reserved_bytes.current, s.segments.current), (0, 0));
}
