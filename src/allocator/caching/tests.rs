//! Tests of the caching layer against a counting backend that records
//! every segment it hands out and takes back.

use super::*;
use crate::device::DeviceType;
use crate::error::ErrorKind;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

pub(super) const KIB: usize = 1 << 10;
pub(super) const MIB: usize = 1 << 20;

/// What the counting backend saw.
#[derive(Default)]
pub(super) struct Counts {
    /// Live segments: address -> size.
    pub(super) live: Mutex<HashMap<usize, usize>>,
    pub(super) allocs: AtomicUsize,
    pub(super) frees: AtomicUsize,
    /// Fail this many of the next allocations with OutOfMemory.
    fail_next: AtomicUsize,
    /// Fail every allocation with a Device error.
    broken: AtomicBool,
    pub(super) dropped: AtomicBool,
}

impl Counts {
    pub(super) fn live_count(&self) -> usize {
        self.live.lock().unwrap().len()
    }
    pub(super) fn live_bytes(&self) -> usize {
        self.live.lock().unwrap().values().sum()
    }
}

struct Counting(Arc<Counts>);

struct Segment {
    ptr: *mut c_void,
    counts: Arc<Counts>,
}

unsafe extern "C" fn counting_free(ctx: *mut c_void) {
    // SAFETY: ctx is the Box made in Counting::allocate, freed once here.
    let seg = unsafe { Box::from_raw(ctx as *mut Segment) };
    seg.counts.live.lock().unwrap().remove(&(seg.ptr as usize));
    seg.counts.frees.fetch_add(1, SeqCst);
    // SAFETY: ptr came from libc::malloc.
    unsafe { libc::free(seg.ptr) };
}

impl RawAllocator for Counting {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        if self.0.broken.load(SeqCst) {
            crate::bail!(Device, "counting backend is broken");
        }
        if self
            .0
            .fail_next
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            crate::bail!(OutOfMemory, "counting backend refuses {nbytes} bytes");
        }
        // SAFETY: plain allocation (large ones stay untouched virtual
        // memory), freed by counting_free.
        let ptr = unsafe { libc::malloc(nbytes) };
        assert!(!ptr.is_null());
        self.0.allocs.fetch_add(1, SeqCst);
        self.0.live.lock().unwrap().insert(ptr as usize, nbytes);
        let ctx = Box::into_raw(Box::new(Segment {
            ptr,
            counts: self.0.clone(),
        }));
        // SAFETY: counting_free frees exactly this segment, once.
        Ok(
            unsafe {
                DataPtr::from_raw_parts(ptr, ctx as *mut c_void, Some(counting_free), device)
            },
        )
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.0.dropped.store(true, SeqCst);
    }
}

fn counting() -> (Allocator, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let inner = Allocator::new("counting", Device::CPU, Box::new(Counting(counts.clone())));
    (inner, counts)
}

pub(super) fn cached_with(options: CachingOptions) -> (Allocator, Arc<Counts>) {
    let (inner, counts) = counting();
    (new(inner, options).unwrap(), counts)
}

pub(super) fn cached() -> (Allocator, Arc<Counts>) {
    cached_with(CachingOptions::default())
}

pub(super) fn stats(a: &Allocator) -> CachingStats {
    of(a).unwrap().stats().unwrap()
}

pub(super) fn audit(a: &Allocator) -> pool::Audit {
    of(a).unwrap().audit()
}

#[test]
fn rounding_and_zero_bytes() {
    let (a, counts) = cached();
    let p = a.allocate(1).unwrap();
    let s = stats(&a);
    assert_eq!(s.small.active_bytes.current, 512);
    assert_eq!(s.small.requested_bytes.current, 1);
    assert_eq!(
        a.stats().allocated_bytes,
        1,
        "the owner counts what was asked"
    );
    let q = a.allocate(513).unwrap();
    assert_eq!(q.get() as usize - p.get() as usize, 512, "1 byte took 512");
    assert_eq!(stats(&a).small.active_bytes.current, 512 + 1024);
    let z = a.allocate(0).unwrap();
    assert!(z.get().is_null() && z.deleter().is_none());
    assert_eq!(stats(&a).all.num_allocs, 2, "0 bytes allocates nothing");
    assert_eq!(counts.allocs.load(SeqCst), 1);
    drop((p, q));
    assert_eq!(stats(&a).all.active_bytes.current, 0);
    assert_eq!(a.stats().allocated_bytes, 0);
}

#[test]
fn second_allocation_of_a_size_hits_the_cache() {
    let (a, counts) = cached();
    let p = a.allocate(4096).unwrap();
    let addr = p.get();
    drop(p);
    assert_eq!(counts.allocs.load(SeqCst), 1);
    let q = a.allocate(4096).unwrap();
    assert_eq!(q.get(), addr, "same block again");
    assert_eq!(counts.allocs.load(SeqCst), 1, "inner allocator not called");
    let s = stats(&a);
    assert_eq!((s.all.num_allocs, s.all.cache_hits), (2, 1));
    assert_eq!((s.small.segment_allocs, s.all.segments.current), (1, 1));
    assert_eq!(s.all.reserved_bytes.current, 2 * MIB as u64);
    // The owner's statistics see every allocation.
    let o = a.stats();
    assert_eq!((o.num_allocs, o.num_frees, o.allocated_bytes), (2, 1, 4096));
}

#[test]
fn split_then_merge_makes_the_segment_whole() {
    let (a, _) = cached();
    let x = a.allocate(64 * KIB).unwrap();
    let y = a.allocate(64 * KIB).unwrap();
    let z = a.allocate(64 * KIB).unwrap();
    let base = x.get() as usize;
    assert_eq!(y.get() as usize, base + 64 * KIB);
    assert_eq!(z.get() as usize, base + 128 * KIB);
    let s = stats(&a).small;
    assert_eq!(s.segments.current, 1);
    assert_eq!(
        s.inactive_split_blocks.current, 1,
        "the rest of the segment"
    );
    assert_eq!(s.inactive_split_bytes.current, (2 * MIB - 192 * KIB) as u64);

    drop(y);
    let s = stats(&a).small;
    assert_eq!(s.inactive_split_blocks.current, 2, "the hole and the rest");
    assert_eq!(s.inactive_split_bytes.current, (2 * MIB - 128 * KIB) as u64);
    audit(&a);

    drop(x);
    let s = stats(&a).small;
    assert_eq!(s.inactive_split_blocks.current, 2, "x merged into the hole");
    assert_eq!(s.inactive_split_bytes.current, (2 * MIB - 64 * KIB) as u64);
    audit(&a);

    drop(z);
    let s = stats(&a).small;
    assert_eq!(s.inactive_split_blocks.current, 0, "one whole segment");
    assert_eq!(s.inactive_split_blocks.peak, 2);
    assert_eq!(audit(&a).whole_segments, 1);
    // The whole segment serves a request as large as the pool allows,
    // from its start.
    let big = a.allocate(MIB).unwrap();
    assert_eq!(big.get() as usize, base);
    assert_eq!(stats(&a).all.segment_allocs, 1);
}

#[test]
fn best_fit_takes_the_smallest_free_block() {
    let (a, _) = cached();
    let keep: Vec<_> = (0..6).map(|_| a.allocate(4 * KIB).unwrap()).collect();
    let hole_big = a.allocate(32 * KIB).unwrap();
    let sep = a.allocate(4 * KIB).unwrap();
    let hole_small = a.allocate(8 * KIB).unwrap();
    let sep2 = a.allocate(4 * KIB).unwrap();
    let (big_addr, small_addr) = (hole_big.get(), hole_small.get());
    drop((hole_big, hole_small));
    // 6 KiB fits both holes and the tail; the 8 KiB hole is the best fit.
    let p = a.allocate(6 * KIB).unwrap();
    assert_eq!(p.get(), small_addr);
    // 16 KiB fits only the 32 KiB hole and the tail: the hole.
    let q = a.allocate(16 * KIB).unwrap();
    assert_eq!(q.get(), big_addr);
    audit(&a);
    drop((keep, sep, sep2, p, q));
}

#[test]
fn large_pool_segments_and_split_rule() {
    let (a, counts) = cached();
    // Below 10 MiB: a 20 MiB segment, split (the rest is over 1 MiB).
    let p = a.allocate(3 * MIB).unwrap();
    let s = stats(&a).large;
    assert_eq!(s.reserved_bytes.current, 20 * MIB as u64);
    assert_eq!(s.active_bytes.current, 3 * MIB as u64);
    assert_eq!(s.inactive_split_bytes.current, 17 * MIB as u64);
    // The rest serves the next large request.
    let q = a.allocate(12 * MIB).unwrap();
    assert_eq!(q.get() as usize, p.get() as usize + 3 * MIB);
    assert_eq!(counts.allocs.load(SeqCst), 1);
    // 10 MiB and up: a segment of the size rounded to 2 MiB; a rest of at
    // most 1 MiB is not split off, the block is handed out whole.
    let r = a.allocate(19 * MIB + 512 * KIB).unwrap();
    let s = stats(&a).large;
    assert_eq!(s.segments.current, 2);
    assert_eq!(s.reserved_bytes.current, 40 * MIB as u64);
    assert_eq!(
        s.active_bytes.current,
        (3 + 12 + 20) as u64 * MIB as u64,
        "r holds its whole 20 MiB segment"
    );
    assert_eq!(
        s.requested_bytes.current,
        (3 * MIB + 12 * MIB + 19 * MIB + 512 * KIB) as u64
    );
    // Just over 1 MiB goes to the large pool.
    let t = a.allocate(MIB + 1).unwrap();
    assert_eq!(stats(&a).large.active_blocks.current, 4);
    audit(&a);
    drop((p, q, r, t));
    assert_eq!(audit(&a).whole_segments, 2);
}

#[test]
fn oversize_blocks_are_never_split() {
    let (a, counts) = cached_with(CachingOptions {
        max_split_size: 4 * MIB,
        ..Default::default()
    });
    // Oversize: a segment of its own, rounded to 2 MiB, not split.
    let p = a.allocate(5 * MIB).unwrap();
    let seg = p.get();
    let s = stats(&a).large;
    assert_eq!(s.reserved_bytes.current, 6 * MIB as u64);
    assert_eq!(s.active_bytes.current, 6 * MIB as u64);
    assert_eq!(s.inactive_split_blocks.current, 0);
    drop(p);
    // An ordinary request never takes the cached oversize block.
    let q = a.allocate(3 * MIB).unwrap();
    assert_ne!(q.get(), seg);
    assert_eq!(stats(&a).large.reserved_bytes.current, 26 * MIB as u64);
    // A smaller oversize request takes it whole.
    let r = a.allocate(4 * MIB).unwrap();
    assert_eq!(r.get(), seg);
    assert_eq!(
        stats(&a).large.active_bytes.current,
        (3 + 6) as u64 * MIB as u64
    );
    assert_eq!(counts.allocs.load(SeqCst), 2);
    drop(r);
    // A cached oversize block 20 MiB or more larger than the request is
    // left alone.
    let big = a.allocate(30 * MIB).unwrap();
    drop(big);
    let small = a.allocate(9 * MIB).unwrap();
    assert_eq!(counts.allocs.load(SeqCst), 4, "30 MiB is too big for 9 MiB");
    assert_eq!(
        stats(&a).large.active_bytes.current,
        (3 + 10) as u64 * MIB as u64
    );
    drop((q, small));
    audit(&a);

    let e = new(
        counting().0,
        CachingOptions {
            max_split_size: MIB,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("max_split_size 1048576"), "{e}");
}

#[test]
fn empty_cache_returns_exactly_the_unused_segments() {
    let (a, counts) = cached();
    let x1 = a.allocate(MIB).unwrap(); // small segment S1
    let x2 = a.allocate(MIB).unwrap(); // fills S1
    let x3 = a.allocate(MIB).unwrap(); // small segment S2
    let x4 = a.allocate(MIB).unwrap(); // fills S2
    let l = a.allocate(3 * MIB).unwrap(); // large segment L1 (20 MiB)
    let m = a.allocate(12 * MIB).unwrap(); // L1's rest (17 MiB) fits it
    let n = a.allocate(14 * MIB).unwrap(); // large segment L2 (14 MiB)
    let (s2, l2) = (x3.get() as usize, n.get() as usize);
    assert_eq!(counts.live_count(), 4);
    drop((x3, x4, n));
    drop(x2); // S1 stays in use (x1), only split
    let before = stats(&a);
    assert_eq!(before.all.segments.current, 4);
    a.empty_cache().unwrap();
    let after = stats(&a);
    assert_eq!(after.all.segments.current, 2);
    assert_eq!(after.all.segment_frees, 2);
    assert_eq!(after.small.reserved_bytes.current, 2 * MIB as u64);
    assert_eq!(after.large.reserved_bytes.current, 20 * MIB as u64);
    assert_eq!(
        after.all.inactive_split_bytes,
        before.all.inactive_split_bytes
    );
    let live = counts.live.lock().unwrap().clone();
    assert!(
        !live.contains_key(&s2) && !live.contains_key(&l2),
        "{live:?}"
    );
    assert_eq!(counts.frees.load(SeqCst), 2);
    // Nothing more to return while the rest is in use.
    a.empty_cache().unwrap();
    assert_eq!(counts.frees.load(SeqCst), 2);
    drop((x1, l, m));
    a.empty_cache().unwrap();
    assert_eq!(counts.live_count(), 0);
    assert_eq!(stats(&a).all.reserved_bytes.current, 0);
}

#[test]
fn inner_failure_frees_the_cache_and_retries_once() {
    let (a, counts) = cached();
    drop(a.allocate(3 * MIB).unwrap()); // a cached 20 MiB segment
    drop(a.allocate(4 * KIB).unwrap()); // a cached 2 MiB segment
    let keep = a.allocate(8 * KIB).unwrap(); // reuses the small segment
    counts.fail_next.store(1, SeqCst);
    // 22 MiB does not fit the cached 20 MiB segment: the inner allocator
    // is asked, fails, the unused segment goes back, the retry succeeds.
    let p = a.allocate(22 * MIB).unwrap();
    let s = stats(&a);
    assert_eq!(s.large.retries, 1);
    assert_eq!(s.all.ooms, 0);
    assert_eq!(s.all.segment_frees, 1, "only the unused 20 MiB segment");
    assert_eq!(counts.live_count(), 2);
    assert_eq!(counts.allocs.load(SeqCst), 3);

    // Two failures in a row: the request fails and says why.
    counts.fail_next.store(2, SeqCst);
    let failed_before = a.stats().num_failed;
    let e = a.allocate(13 * MIB).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    let msg = e.message();
    assert!(msg.contains(&(13 * MIB).to_string()), "{msg}");
    assert!(msg.contains("large pool"), "{msg}");
    assert!(msg.contains("counting backend refuses"), "{msg}");
    assert!(msg.contains("bytes reserved in 2 segments"), "{msg}");
    let s = stats(&a);
    assert_eq!((s.large.retries, s.large.ooms), (2, 1));
    assert_eq!(a.stats().num_failed, failed_before + 1);

    // Other errors are passed on without a retry.
    counts.broken.store(true, SeqCst);
    let e = a.allocate(30 * MIB).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Device);
    assert!(e.message().contains("counting backend is broken"), "{e}");
    assert_eq!(stats(&a).all.retries, 2);
    counts.broken.store(false, SeqCst);
    drop((p, keep));
    audit(&a);
}

#[test]
fn pools_are_per_device() {
    let (a, counts) = cached();
    let d0 = Device::new(DeviceType::PrivateUse1, 0).unwrap();
    let d1 = Device::new(DeviceType::PrivateUse1, 1).unwrap();
    let p = a.allocate_on(4096, d0).unwrap();
    let q = a.allocate_on(4096, d1).unwrap();
    assert_eq!((p.device(), q.device()), (d0, d1));
    assert_eq!(counts.allocs.load(SeqCst), 2, "one segment per device");
    drop(p);
    let r = a.allocate_on(4096, d1).unwrap();
    assert_eq!(counts.allocs.load(SeqCst), 2);
    assert_eq!(
        r.get() as usize,
        q.get() as usize + 4096,
        "from d1's segment"
    );
    // CPU index -1 and 0 are one device.
    let c = a
        .allocate_on(4096, Device::new(DeviceType::Cpu, 0).unwrap())
        .unwrap();
    let d = a.allocate_on(4096, Device::CPU).unwrap();
    assert_eq!(counts.allocs.load(SeqCst), 3);
    drop((q, r, c, d));
}

#[test]
fn the_allocator_outlives_its_handles_while_blocks_are_out() {
    let (a, counts) = cached();
    let p = a.allocate(100).unwrap();
    let q = a.allocate(5 * MIB).unwrap();
    drop(a);
    assert!(!counts.dropped.load(SeqCst), "blocks are out");
    assert_eq!(counts.live_count(), 2);
    drop(p);
    assert!(!counts.dropped.load(SeqCst));
    drop(q);
    assert!(
        counts.dropped.load(SeqCst),
        "the last free released the inner allocator"
    );
    assert_eq!(counts.live_count(), 0, "and returned its segments");

    let (a, counts) = cached();
    drop(a.allocate(100).unwrap());
    drop(a);
    assert!(counts.dropped.load(SeqCst));
    assert_eq!(counts.live_count(), 0);
}

#[test]
fn reset_peak_and_raw_allocation() {
    let (a, _) = cached();
    let p = a.allocate(8 * KIB).unwrap();
    drop(a.allocate(64 * KIB).unwrap());
    let s = stats(&a).all;
    assert_eq!(
        (s.active_bytes.current, s.active_bytes.peak),
        (8 * KIB as u64, 72 * KIB as u64)
    );
    assert_eq!(a.stats().peak_bytes, 72 * KIB as u64);
    of(&a).unwrap().reset_peak().unwrap();
    let s = stats(&a).all;
    assert_eq!(s.active_bytes.peak, 8 * KIB as u64);
    assert_eq!(s.requested_bytes.peak, 8 * KIB as u64);
    assert_eq!(s.segments.peak, 1);
    assert_eq!(a.stats().peak_bytes, 8 * KIB as u64);
    let e = a.raw_allocate(16).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    drop(p);
    assert!(of(&Allocator::cpu()).is_none());
}

#[test]
fn copies_and_names_go_through_the_inner_allocator() {
    let a = new(Allocator::cpu(), CachingOptions::default()).unwrap();
    assert_eq!(a.name(), "caching(cpu)");
    assert!(Allocator::ptr_eq(
        of(&a).unwrap().inner(),
        &Allocator::cpu()
    ));
    let src = a.allocate(1000).unwrap();
    let dst = a.allocate(1000).unwrap();
    assert_eq!(
        src.get() as usize % 64,
        0,
        "512-byte blocks in 64-byte aligned segments"
    );
    // SAFETY: both own 1000 bytes.
    unsafe {
        std::ptr::write_bytes(src.get() as *mut u8, 0x5a, 1000);
        a.copy_data(dst.get(), src.get(), 1000).unwrap();
        assert!(std::slice::from_raw_parts(dst.get() as *const u8, 1000)
            .iter()
            .all(|&b| b == 0x5a));
    }
    let named = new(
        Allocator::cpu(),
        CachingOptions {
            name: Some("pool".into()),
            default_device: Some(Device::new(DeviceType::Cpu, 0).unwrap()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(named.name(), "pool");
    assert_eq!(named.default_device().index, 0);
}

/// A small deterministic generator (xorshift64*).
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Mostly small sizes, some large, a few oversize.
    pub(super) fn size(&mut self) -> usize {
        match self.below(100) {
            0..=69 => 1 + self.below(64 * KIB as u64) as usize,
            70..=89 => 1 + self.below(MIB as u64) as usize,
            90..=97 => MIB + 1 + self.below(12 * MIB as u64) as usize,
            _ => 24 * MIB + self.below(16 * MIB as u64) as usize,
        }
    }
}

/// What the statistics must say, computed from the sequence of requests
/// alone.
#[derive(Default)]
pub(super) struct Model {
    allocs: [u64; 2],
    frees: [u64; 2],
    active: [u64; 2],
    active_peak_all: u64,
    requested: [u64; 2],
    requested_peak_all: u64,
    small_bytes: u64,
    small_bytes_peak: u64,
}

impl Model {
    fn pool(n: usize) -> usize {
        usize::from(n.next_multiple_of(512) > MIB)
    }
    pub(super) fn alloc(&mut self, n: usize) {
        let p = Self::pool(n);
        self.allocs[p] += 1;
        self.active[p] += 1;
        self.requested[p] += n as u64;
        self.active_peak_all = self.active_peak_all.max(self.active[0] + self.active[1]);
        self.requested_peak_all = self
            .requested_peak_all
            .max(self.requested[0] + self.requested[1]);
        if p == 0 {
            self.small_bytes += n.next_multiple_of(512) as u64;
            self.small_bytes_peak = self.small_bytes_peak.max(self.small_bytes);
        }
    }
    pub(super) fn free(&mut self, n: usize) {
        let p = Self::pool(n);
        self.frees[p] += 1;
        self.active[p] -= 1;
        self.requested[p] -= n as u64;
        if p == 0 {
            self.small_bytes -= n.next_multiple_of(512) as u64;
        }
    }
    /// What `reset_peak` does: every peak becomes the current value.
    pub(super) fn reset_peak(&mut self) {
        self.active_peak_all = self.active[0] + self.active[1];
        self.requested_peak_all = self.requested[0] + self.requested[1];
        self.small_bytes_peak = self.small_bytes;
    }
    pub(super) fn check(&self, a: &Allocator, counts: &Counts) {
        let s = stats(a);
        for (p, ps) in [(0, &s.small), (1, &s.large)] {
            assert_eq!(ps.num_allocs, self.allocs[p]);
            assert_eq!(ps.num_frees, self.frees[p]);
            assert_eq!(ps.active_blocks.current, self.active[p]);
            assert_eq!(ps.requested_bytes.current, self.requested[p]);
            assert_eq!(ps.cache_hits + ps.segment_allocs, ps.num_allocs);
        }
        assert_eq!(s.all.active_blocks.peak, self.active_peak_all);
        assert_eq!(s.all.requested_bytes.peak, self.requested_peak_all);
        assert_eq!(s.small.active_bytes.current, self.small_bytes);
        assert_eq!(s.small.active_bytes.peak, self.small_bytes_peak);
        assert!(s.large.active_bytes.current >= self.requested[1]);
        // Reserved memory is exactly what the inner allocator has out.
        assert_eq!(s.all.reserved_bytes.current, counts.live_bytes() as u64);
        assert_eq!(s.all.segments.current, counts.live_count() as u64);
        assert_eq!(s.all.segment_allocs, counts.allocs.load(SeqCst) as u64);
        assert_eq!(s.all.segment_frees, counts.frees.load(SeqCst) as u64);
        // The owner's view.
        let o = a.stats();
        let requested = self.requested[0] + self.requested[1];
        assert_eq!(o.allocated_bytes, requested);
        assert_eq!(o.peak_bytes, self.requested_peak_all);
        assert_eq!(o.num_allocs, self.allocs[0] + self.allocs[1]);
        assert_eq!(o.num_frees, self.frees[0] + self.frees[1]);
        let audit = audit(a);
        assert_eq!(
            audit.whole_segments + audit.split_blocks,
            audit.free_blocks,
            "every free block is whole or split"
        );
    }
}

#[test]
fn statistics_are_exact_after_100k_random_operations() {
    let (a, counts) = cached_with(CachingOptions {
        max_split_size: 24 * MIB,
        ..Default::default()
    });
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut model = Model::default();
    let mut live: Vec<(DataPtr, usize)> = Vec::new();
    for op in 0..100_000u32 {
        let r = rng.below(100);
        if r < 52 || live.is_empty() {
            let n = rng.size();
            let p = a.allocate(n).unwrap();
            // Blocks never overlap: write a tag at both ends.
            // SAFETY: p owns n >= 1 bytes.
            unsafe {
                *(p.get() as *mut u8) = op as u8;
                *(p.get() as *mut u8).add(n - 1) = op as u8;
            }
            model.alloc(n);
            live.push((p, n));
        } else if r < 99 {
            let (p, n) = live.swap_remove(rng.below(live.len() as u64) as usize);
            model.free(n);
            drop(p);
        } else {
            a.empty_cache().unwrap();
        }
        if op % 10_000 == 0 {
            model.check(&a, &counts);
        }
    }
    model.check(&a, &counts);
    for (p, n) in live.drain(..) {
        model.free(n);
        drop(p);
    }
    model.check(&a, &counts);
    let s = stats(&a).all;
    assert_eq!(
        s.inactive_split_blocks.current, 0,
        "every segment whole again"
    );
    assert_eq!(s.active_bytes.current, 0);
    a.empty_cache().unwrap();
    assert_eq!(counts.live_count(), 0);
    assert_eq!(stats(&a).all.reserved_bytes.current, 0);
}

#[test]
fn two_threads_hammering_leave_exact_statistics() {
    let (a, counts) = cached();
    const OPS: usize = 20_000;
    let (tx, rx) = std::sync::mpsc::channel::<DataPtr>();
    // Threads of their own, joined: a thread's front is flushed when it
    // exits, after a scoped thread's join would return.
    let threads: Vec<_> = [1u64, 2]
        .into_iter()
        .map(|seed| {
            let a = a.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(seed * 0x1234_5678_9abc_def1);
                let mut live = Vec::new();
                for i in 0..OPS {
                    if rng.below(2) == 0 || live.is_empty() {
                        let max = if rng.below(10) == 0 {
                            3 * MIB
                        } else {
                            64 * KIB
                        };
                        let n = 1 + rng.below(max as u64);
                        live.push(a.allocate(n as usize).unwrap());
                    } else {
                        let p = live.swap_remove(rng.below(live.len() as u64) as usize);
                        // Every 7th free happens on the other side.
                        if i % 7 == 0 {
                            tx.send(p).unwrap();
                        } else {
                            drop(p);
                        }
                    }
                }
            })
        })
        .collect();
    drop(tx);
    // This thread frees what the others sent while they run.
    for p in rx {
        drop(p);
    }
    for t in threads {
        t.join().unwrap();
    }
    // Everything still out was dropped with the threads' vectors.
    let s = stats(&a);
    let o = a.stats();
    assert_eq!(s.all.num_allocs, s.all.num_frees);
    assert_eq!(o.num_allocs, s.all.num_allocs);
    assert_eq!(o.num_frees, s.all.num_frees);
    assert_eq!(o.allocated_bytes, 0);
    assert_eq!(s.all.active_blocks.current, 0);
    assert_eq!(s.all.requested_bytes.current, 0);
    assert_eq!(s.all.active_bytes.current, 0);
    assert_eq!(s.all.inactive_split_bytes.current, 0);
    assert_eq!(s.all.reserved_bytes.current, counts.live_bytes() as u64);
    assert!(s.all.num_allocs >= OPS as u64);
    audit(&a);
}
