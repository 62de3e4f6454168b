//! Stress: allocators under concurrency, through the C API with C-style
//! plugins (Rust `extern "C"` callbacks in TsrAllocatorVTable tables).
//! - The registry slot of a device type is replaced again and again while
//!   other threads allocate, resize and clone storages from it: every
//!   plugin's release runs exactly once, and only after its last
//!   allocation is freed (storages keep the allocator that made them).
//! - A caching allocator over a counting plugin serves several threads at
//!   once: exact statistics afterwards, its segments are exactly the
//!   plugin's live allocations, and empty_cache returns them all.
//!
//! Each test takes about a second on two cores in a debug build; the
//! operation counts are printed (`cargo test --test stress_alloc --
//! --nocapture`).

use std::alloc::Layout;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use tessera::ffi::allocator::*;
use tessera::ffi::allocator_plugin::*;
use tessera::ffi::caching::*;
use tessera::ffi::data_ptr::tsr_data_ptr_free;
use tessera::ffi::refcount_exports::*;
use tessera::ffi::storage::*;
use tessera::ffi::*;

const THREADS: usize = 3;
/// The registry slot this test replaces (nothing else in this binary uses it).
const SLOT: TsrDeviceType = TSR_PRIVATE_USE1;
const SLOT_DEVICE: TsrDevice = TsrDevice {
    device_type: SLOT,
    index: 0,
};
/// Room before the data for the block's header.
const HEADER: usize = 64;

/// What a counting plugin knows; its `self` pointer.
#[derive(Default)]
struct Counts {
    live: AtomicI64,
    live_bytes: AtomicI64,
    allocs: AtomicUsize,
    frees: AtomicUsize,
    released: AtomicUsize,
    /// Set when release ran while an allocation was still live.
    released_early: AtomicBool,
}

fn ok(status: TsrStatus) {
    assert_eq!(status, TSR_OK, "{}", unsafe {
        // SAFETY: a valid C string.
        std::ffi::CStr::from_ptr(tsr_last_error_message()).to_string_lossy()
    });
}

/// Each block starts with a header holding its plugin's Counts and size.
unsafe extern "C" fn counting_free(ctx: *mut c_void) {
    // SAFETY: ctx is a block made by counting_allocate.
    unsafe {
        let base = ctx as *mut u8;
        let counts = &*(*(base as *const *const Counts));
        let size = *(base.add(8) as *const usize);
        counts.live.fetch_sub(1, Ordering::SeqCst);
        counts.live_bytes.fetch_sub(size as i64, Ordering::SeqCst);
        counts.frees.fetch_add(1, Ordering::SeqCst);
        std::alloc::dealloc(base, Layout::from_size_align(size + HEADER, 64).unwrap());
    }
}

unsafe extern "C" fn counting_allocate(
    self_: *mut c_void,
    nbytes: usize,
    device: TsrDevice,
    out: *mut TsrDataPtr,
) -> TsrStatus {
    let counts = self_ as *const Counts;
    // SAFETY: a non-zero size; the header fits in HEADER bytes; out is
    // tessera's writable TsrDataPtr.
    unsafe {
        let base = std::alloc::alloc(Layout::from_size_align(nbytes + HEADER, 64).unwrap());
        assert!(!base.is_null());
        *(base as *mut *const Counts) = counts;
        *(base.add(8) as *mut usize) = nbytes;
        (*counts).live.fetch_add(1, Ordering::SeqCst);
        (*counts)
            .live_bytes
            .fetch_add(nbytes as i64, Ordering::SeqCst);
        (*counts).allocs.fetch_add(1, Ordering::SeqCst);
        *out = TsrDataPtr {
            data: base.add(HEADER) as *mut c_void,
            ctx: base as *mut c_void,
            deleter: Some(counting_free),
            device,
        };
    }
    TSR_OK
}

unsafe extern "C" fn counting_release(self_: *mut c_void) {
    // SAFETY: self_ is the Counts the plugin was made with (kept alive by
    // the test until after the check).
    let counts = unsafe { &*(self_ as *const Counts) };
    if counts.live.load(Ordering::SeqCst) != 0 {
        counts.released_early.store(true, Ordering::SeqCst);
    }
    counts.released.fetch_add(1, Ordering::SeqCst);
}

const VTABLE: TsrAllocatorVTable = TsrAllocatorVTable {
    struct_size: std::mem::size_of::<TsrAllocatorVTable>() as u32,
    name: c"counting".as_ptr(),
    allocate: Some(counting_allocate),
    raw_deleter: None,
    copy_data: None,
    release: Some(counting_release),
};

/// A new allocator over `counts` (a new reference).
fn plugin(counts: &Counts) -> *mut TsrAllocator {
    let mut a = ptr::null_mut();
    // SAFETY: a valid table; counts outlives the allocator (checked by the
    // callers, which wait for release).
    unsafe {
        ok(tsr_allocator_new(
            &VTABLE,
            counts as *const Counts as *mut c_void,
            &mut a,
        ))
    };
    a
}

#[derive(Clone, Copy)]
struct SendPtr(*mut TsrStorage);
// SAFETY: storages may be used and released from any thread.
unsafe impl Send for SendPtr {}

#[test]
fn replacing_the_registered_allocator_while_threads_allocate() {
    const REPLACEMENTS: usize = 200;
    const KEEP: usize = 8;
    // Boxed so their addresses stay put; kept until the end.
    let plugins: Vec<Box<Counts>> = (0..=REPLACEMENTS).map(|_| Box::default()).collect();
    let stop = AtomicBool::new(false);
    let (made, resized, cloned) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let start = Barrier::new(THREADS + 1);
    // The first plugin, before any thread allocates.
    let a = plugin(&plugins[0]);
    // SAFETY: our reference; the registry takes its own.
    unsafe {
        ok(tsr_set_allocator(SLOT, a, 0));
        ok(tsr_allocator_decref(a));
    }
    thread::scope(|scope| {
        for k in 0..THREADS {
            let (stop, made, resized, cloned, start) = (&stop, &made, &resized, &cloned, &start);
            scope.spawn(move || {
                let mut keep: Vec<SendPtr> = Vec::new();
                let mut i = 0usize;
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let n = 64 + (i * 37 + k * 11) % 2000;
                    let mut s = ptr::null_mut();
                    // SAFETY: out writable; the storages are ours.
                    unsafe {
                        ok(tsr_storage_new(n, SLOT_DEVICE, true, &mut s));
                        made.fetch_add(1, Ordering::Relaxed);
                        // Resize and clone use the storage's own allocator,
                        // even after the registry moved on.
                        if i % 3 == 0 {
                            ok(tsr_storage_resize(s, n / 2 + 1));
                            resized.fetch_add(1, Ordering::Relaxed);
                        }
                        if i % 5 == 0 {
                            let mut c = ptr::null_mut();
                            ok(tsr_storage_clone(s, &mut c));
                            let (a, b) = (tsr_storage_allocator(s), tsr_storage_allocator(c));
                            assert_eq!(a, b, "a clone comes from its original's allocator");
                            ok(tsr_allocator_decref(a));
                            ok(tsr_allocator_decref(b));
                            keep.push(SendPtr(c));
                            cloned.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    keep.push(SendPtr(s));
                    while keep.len() > KEEP {
                        let old = keep.remove(0);
                        // SAFETY: ours.
                        unsafe { ok(tsr_storage_decref(old.0)) };
                    }
                }
                for s in keep {
                    // SAFETY: ours.
                    unsafe { ok(tsr_storage_decref(s.0)) };
                }
            });
        }
        start.wait();
        for counts in &plugins[1..] {
            let a = plugin(counts);
            // SAFETY: our reference; equal priority replaces.
            unsafe {
                ok(tsr_set_allocator(SLOT, a, 0));
                let got = tsr_get_allocator(SLOT);
                assert_eq!(got, a);
                ok(tsr_allocator_decref(got));
                ok(tsr_allocator_decref(a));
            }
            thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
    });
    // Every plugin but the registered one is gone, each released once,
    // after its last allocation.
    let last = plugins.last().unwrap();
    for (i, c) in plugins.iter().enumerate() {
        assert_eq!(
            c.live.load(Ordering::SeqCst),
            0,
            "plugin {i}: allocations left"
        );
        assert_eq!(
            c.live_bytes.load(Ordering::SeqCst),
            0,
            "plugin {i}: bytes left"
        );
        assert_eq!(
            c.allocs.load(Ordering::SeqCst),
            c.frees.load(Ordering::SeqCst),
            "plugin {i}"
        );
        assert!(
            !c.released_early.load(Ordering::SeqCst),
            "plugin {i} released while in use"
        );
        let expected = if std::ptr::eq(&**c, &**last) { 0 } else { 1 };
        assert_eq!(
            c.released.load(Ordering::SeqCst),
            expected,
            "plugin {i}: releases"
        );
    }
    // Replacing the last one releases it too (the new one never allocates).
    let spare = Box::<Counts>::default();
    let a = plugin(&spare);
    // SAFETY: ours.
    unsafe {
        ok(tsr_set_allocator(SLOT, a, 0));
        ok(tsr_allocator_decref(a));
    }
    assert_eq!(last.released.load(Ordering::SeqCst), 1);
    let used = plugins
        .iter()
        .filter(|c| c.allocs.load(Ordering::SeqCst) > 0)
        .count();
    let allocs: usize = plugins
        .iter()
        .map(|c| c.allocs.load(Ordering::SeqCst))
        .sum();
    println!(
        "registry: {REPLACEMENTS} replacements while {THREADS} threads made {} storages \
         ({} resized, {} cloned; {allocs} plugin allocations over {used} plugins), every \
         release once, after the last free",
        made.load(Ordering::Relaxed),
        resized.load(Ordering::Relaxed),
        cloned.load(Ordering::Relaxed)
    );
    // `spare` stays registered for the rest of the process: leak its
    // counts so the release callback never sees freed memory.
    std::mem::forget(spare);
}

#[test]
fn caching_allocator_under_contention() {
    const OPS: usize = 6000;
    let counts = Box::<Counts>::default();
    let inner = plugin(&counts);
    let mut caching = ptr::null_mut();
    // SAFETY: live handle; out writable. The caching allocator keeps the
    // inner one.
    unsafe {
        ok(tsr_caching_allocator_new(inner, ptr::null(), &mut caching));
        ok(tsr_allocator_decref(inner));
    }
    let caching = SendAlloc(caching);
    let (allocs, storages, bytes) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let start = Barrier::new(THREADS);
    thread::scope(|scope| {
        for k in 0..THREADS {
            let (allocs, storages, bytes, start) = (&allocs, &storages, &bytes, &start);
            scope.spawn(move || {
                let a = caching.get();
                let mut live: Vec<TsrDataPtr> = Vec::new();
                let mut seed = 0x9e37_79b9u32.wrapping_mul(k as u32 + 1);
                start.wait();
                for i in 0..OPS {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    let pick = seed % 100;
                    if pick < 55 && live.len() < 24 {
                        // Mostly small blocks, some large and oversize ones.
                        let size = match seed % 20 {
                            0 => 3 << 20,
                            1 => 11 << 20,
                            2..=5 => 64 * 1024 + (seed as usize % 300_000),
                            _ => 1 + (seed as usize % 8192),
                        };
                        let mut p = TsrDataPtr {
                            data: ptr::null_mut(),
                            ctx: ptr::null_mut(),
                            deleter: None,
                            device: SLOT_DEVICE,
                        };
                        // SAFETY: a live allocator; out writable.
                        unsafe { ok(tsr_allocator_allocate(a, size, &mut p)) };
                        // The block is ours alone: write its first and last byte.
                        // SAFETY: the block holds `size` bytes.
                        unsafe {
                            *(p.data as *mut u8) = i as u8;
                            *(p.data as *mut u8).add(size - 1) = k as u8;
                        }
                        bytes.fetch_add(size, Ordering::Relaxed);
                        allocs.fetch_add(1, Ordering::Relaxed);
                        live.push(p);
                    } else if pick < 90 && !live.is_empty() {
                        let mut p = live.swap_remove(seed as usize % live.len());
                        // SAFETY: an allocation we own.
                        unsafe { tsr_data_ptr_free(&mut p) };
                    } else {
                        // A resizable storage from the caching allocator.
                        let mut s = ptr::null_mut();
                        // SAFETY: live handle; the storage is ours.
                        unsafe {
                            ok(tsr_storage_new_with_allocator(1000, a, true, &mut s));
                            ok(tsr_storage_resize(s, 5000 + (seed as usize % 50_000)));
                            ok(tsr_storage_decref(s));
                        }
                        storages.fetch_add(1, Ordering::Relaxed);
                        allocs.fetch_add(2, Ordering::Relaxed);
                    }
                }
                for mut p in live {
                    // SAFETY: ours.
                    unsafe { tsr_data_ptr_free(&mut p) };
                }
                // The thread's own statistics read gives back the blocks
                // its front parked: a scoped thread's join returns before
                // its thread-locals' destructors, which would (and did
                // not yet under ASan's slower exits).
                let mut mine = TsrAllocatorStats::default();
                // SAFETY: live handle; out writable.
                unsafe { ok(tsr_allocator_stats(a, &mut mine)) };
            });
        }
    });
    let a = caching.get();
    let mut stats = TsrAllocatorStats::default();
    // SAFETY: TsrCachingStats is a repr(C) struct of u32 and u64 fields
    // only (through TsrCachingPoolStats and TsrCachingStat), for which all
    // zero bytes are a valid value.
    let mut cs: TsrCachingStats = unsafe { std::mem::zeroed() };
    cs.struct_size = std::mem::size_of::<TsrCachingStats>() as u32;
    // SAFETY: live handle; out-pointers writable.
    unsafe {
        ok(tsr_allocator_stats(a, &mut stats));
        ok(tsr_caching_allocator_stats(a, &mut cs));
    }
    let n = allocs.load(Ordering::Relaxed) as u64;
    assert_eq!(stats.allocated_bytes, 0, "every block was freed");
    assert_eq!((stats.num_allocs, stats.num_frees), (n, n));
    assert_eq!(stats.num_failed, 0);
    assert_eq!((cs.all.num_allocs, cs.all.num_frees), (n, n));
    assert_eq!(cs.all.active_blocks.current, 0);
    assert_eq!(cs.all.active_bytes.current, 0);
    assert_eq!(cs.all.requested_bytes.current, 0);
    assert_eq!(
        cs.all.inactive_split_blocks.current, 0,
        "freed segments are whole again"
    );
    assert_eq!(cs.all.num_allocs, cs.all.cache_hits + cs.all.segment_allocs);
    // What the caching layer holds is exactly what the plugin has out.
    let live = counts.live.load(Ordering::SeqCst) as u64;
    assert_eq!(cs.all.segments.current, live);
    assert_eq!(
        cs.all.reserved_bytes.current,
        counts.live_bytes.load(Ordering::SeqCst) as u64
    );
    assert_eq!(cs.all.segment_allocs - cs.all.segment_frees, live);
    assert_eq!(
        counts.allocs.load(Ordering::SeqCst) as u64,
        cs.all.segment_allocs
    );
    // SAFETY: live handle.
    unsafe { ok(tsr_caching_allocator_empty_cache(a)) };
    assert_eq!(
        counts.live.load(Ordering::SeqCst),
        0,
        "empty_cache returned every segment"
    );
    assert_eq!(counts.live_bytes.load(Ordering::SeqCst), 0);
    // SAFETY: `a` is the caching allocator made by
    // tsr_caching_allocator_new above, whose reference this thread still
    // holds (the decref comes below); `cs` is a writable local with its
    // struct_size set.
    unsafe { ok(tsr_caching_allocator_stats(a, &mut cs)) };
    assert_eq!(
        (cs.all.segments.current, cs.all.reserved_bytes.current),
        (0, 0)
    );
    assert_eq!(counts.released.load(Ordering::SeqCst), 0);
    // SAFETY: our last reference: the inner plugin goes with it.
    unsafe { ok(tsr_allocator_decref(a)) };
    assert_eq!(
        counts.released.load(Ordering::SeqCst),
        1,
        "the plugin's release ran once"
    );
    assert!(!counts.released_early.load(Ordering::SeqCst));
    println!(
        "caching: {THREADS} threads, {n} allocations ({} storages made and resized, {} MiB \
         asked for), {} cache hits, {} segments from the plugin, peak {} segments; exact \
         statistics afterwards",
        storages.load(Ordering::Relaxed),
        bytes.load(Ordering::Relaxed) >> 20,
        cs.all.cache_hits,
        cs.all.segment_allocs,
        cs.all.segments.peak
    );
}

#[derive(Clone, Copy)]
struct SendAlloc(*mut TsrAllocator);
// SAFETY: allocators may be used from any thread.
unsafe impl Send for SendAlloc {}
// SAFETY: as Send.
unsafe impl Sync for SendAlloc {}

impl SendAlloc {
    fn get(self) -> *mut TsrAllocator {
        self.0
    }
}
