//! CUDA allocator tests: the first runs anywhere; the others need a GPU
//! (#[ignore]d; scripts/gpu/check.sh runs them).

use super::*;
use crate::allocator::registry;

fn assert_unavailable(e: Error) {
    assert_eq!(e.kind(), ErrorKind::Device, "{e}");
    assert!(
        e.message().starts_with("CUDA driver not available: "),
        "{e}"
    );
}

/// Runs where no driver loads (this checks nothing on a machine with
/// one: the GPU tests below cover that).
#[test]
fn without_a_driver_every_call_says_why() {
    if let Ok(d) = driver() {
        eprintln!(
            "a CUDA driver is present ({} devices): skipped",
            d.device_count
        );
        return;
    }
    assert!(!is_available());
    assert_eq!(device_count(), 0);
    assert_unavailable(init().unwrap_err());
    assert_unavailable(device_allocator().allocate(16).unwrap_err());
    assert_unavailable(raw_device_allocator().allocate(16).unwrap_err());
    assert_unavailable(pinned_allocator().allocate(16).unwrap_err());
    let cuda1 = Device::new(DeviceType::Cuda, 1).unwrap();
    assert_unavailable(device_allocator().allocate_on(16, cuda1).unwrap_err());
    let mut x = [0u8; 4];
    let y = [1u8; 4];
    // SAFETY: both are valid for 4 bytes (the call fails first anyway).
    let e = unsafe { device_allocator().copy_data(x.as_mut_ptr().cast(), y.as_ptr().cast(), 4) };
    assert_unavailable(e.unwrap_err());
    // Failures are counted like any allocator's.
    assert!(device_allocator().stats().num_failed >= 2);
    // TSR_CUDA's default is the caching device allocator.
    let registered = registry::get_allocator(DeviceType::Cuda).unwrap();
    assert!(Allocator::ptr_eq(&registered, &device_allocator()));
    assert_eq!(registered.name(), "cuda");
}

fn gpu() -> &'static Driver {
    let d = driver().expect("these tests need a CUDA driver");
    assert!(d.device_count > 0, "these tests need a CUDA device");
    d
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_memory_copies_both_ways() {
    gpu();
    let n = 1 << 20;
    let host: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let mut back = vec![0u8; n];
    let raw = raw_device_allocator();
    let cuda0 = Device::new(DeviceType::Cuda, 0).unwrap();
    // Other tests' caching allocators hold segments of this allocator too.
    let before = raw.stats().allocated_bytes;
    let a = raw.allocate_on(n, cuda0).unwrap();
    let b = raw.allocate_on(n, cuda0).unwrap();
    assert_eq!(a.device(), cuda0);
    // SAFETY: each buffer holds n bytes on its side.
    unsafe {
        raw.copy_data(a.get(), host.as_ptr().cast(), n).unwrap();
        raw.copy_data(b.get(), a.get(), n).unwrap();
        raw.copy_data(back.as_mut_ptr().cast(), b.get(), n).unwrap();
    }
    assert_eq!(host, back);
    assert_eq!(raw.stats().allocated_bytes - before, 2 * n as u64);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_caching_device_allocator_reuses_blocks() {
    gpu();
    let a = device_allocator();
    let p = a.allocate(4096).unwrap();
    assert_eq!(p.device().device_type, DeviceType::Cuda);
    assert!(p.device().index >= 0, "-1 resolved to the current device");
    let addr = p.get();
    drop(p);
    let q = a.allocate(4096).unwrap();
    assert_eq!(q.get(), addr);
    let s = caching::of(&a).unwrap().stats().unwrap();
    assert!(s.all.cache_hits >= 1);
    let host = [42u8; 4096];
    let mut back = [0u8; 4096];
    // SAFETY: both sides hold 4096 bytes.
    unsafe {
        a.copy_data(q.get(), host.as_ptr().cast(), 4096).unwrap();
        a.copy_data(back.as_mut_ptr().cast(), q.get(), 4096)
            .unwrap();
    }
    assert_eq!(back, host);
    drop(q);
    a.empty_cache().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_host_memory_is_usable_from_the_cpu() {
    gpu();
    let pinned = pinned_allocator();
    let p = pinned.allocate(8192).unwrap();
    assert!(p.device().is_cpu());
    assert_eq!(p.get() as usize % 64, 0);
    // SAFETY: p owns 8192 host bytes.
    unsafe { std::ptr::write_bytes(p.get() as *mut u8, 0x33, 8192) };
    let dev = device_allocator().allocate(8192).unwrap();
    let mut back = vec![0u8; 8192];
    // SAFETY: all three hold 8192 bytes.
    unsafe {
        pinned.copy_data(dev.get(), p.get(), 8192).unwrap();
        pinned
            .copy_data(back.as_mut_ptr().cast(), dev.get(), 8192)
            .unwrap();
    }
    assert!(back.iter().all(|&b| b == 0x33));
    drop((p, dev));
    // The pinned cache lives as long as the process; hand its memory back
    // so that compute-sanitizer's leak check sees none at exit.
    pinned.empty_cache().unwrap();
}

fn cuda0() -> Device {
    Device::new(DeviceType::Cuda, 0).unwrap()
}

/// A caching allocator of its own over the raw device allocator, so a
/// test's statistics and pools are its alone.
fn fresh_caching() -> Allocator {
    caching::new(raw_device_allocator(), CachingOptions::default()).unwrap()
}

fn stats_of(a: &Allocator) -> caching::CachingStats {
    caching::of(a).unwrap().stats().unwrap()
}

/// A new non-blocking stream on cuda:0.
fn new_stream() -> usize {
    gpu()
        .on_device(0, || {
            let mut s: sys::CUstream = std::ptr::null_mut();
            // SAFETY: cuda:0's context is current; `s` is an out-pointer.
            check(unsafe { sys::cuStreamCreate(&mut s, 1) }, || {
                "cuStreamCreate".into()
            })?;
            Ok(s as usize)
        })
        .unwrap()
}

/// Runs one driver call with cuda:0's context current; panics on failure.
fn on_cuda0(what: &str, call: impl FnOnce() -> sys::CUresult) {
    gpu()
        .on_device(0, || check(call(), || what.into()))
        .unwrap()
}

fn sync_stream(s: usize) {
    // SAFETY: `s` is a live stream of cuda:0.
    on_cuda0("cuStreamSynchronize", || unsafe {
        sys::cuStreamSynchronize(s as sys::CUstream)
    })
}

fn destroy_stream(s: usize) {
    // SAFETY: `s` is a live stream of cuda:0, destroyed once.
    on_cuda0("cuStreamDestroy", || unsafe {
        sys::cuStreamDestroy_v2(s as sys::CUstream)
    })
}

/// Queues `rounds` memsets of a 1 GiB buffer on stream `s` (about 0.3 ms
/// each at ~3 TB/s): returns the buffer, to be dropped after the stream
/// is synchronized.
fn keep_busy(s: usize, rounds: usize) -> DataPtr {
    let n = 1usize << 30;
    let buf = raw_device_allocator().allocate_on(n, cuda0()).unwrap();
    gpu()
        .on_device(0, || {
            for i in 0..rounds {
                // SAFETY: buf holds n bytes of cuda:0 memory, alive until
                // the caller synchronizes `s`.
                let r = unsafe {
                    sys::cuMemsetD8Async(
                        buf.get() as sys::CUdeviceptr,
                        i as u8,
                        n,
                        s as sys::CUstream,
                    )
                };
                check(r, || "cuMemsetD8Async".into())?;
            }
            Ok(())
        })
        .unwrap();
    buf
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn caching_on_cuda_splits_blocks_and_sizes_segments_as_c10() {
    gpu();
    let a = fresh_caching();
    // Small requests: rounded to 512 bytes, carved from one 2 MiB segment.
    let p1 = a.allocate_on(1000, cuda0()).unwrap();
    let p2 = a.allocate_on(1000, cuda0()).unwrap();
    let s = stats_of(&a);
    assert_eq!(s.small.segments.current, 1);
    assert_eq!(s.small.reserved_bytes.current, 2 << 20);
    assert_eq!(s.small.active_bytes.current, 2 * 1024);
    assert_eq!(
        (p2.get() as usize).abs_diff(p1.get() as usize),
        1024,
        "split from one segment"
    );
    // Large requests below 10 MiB: 20 MiB segments, split.
    let l1 = a.allocate_on(5 << 20, cuda0()).unwrap();
    let l2 = a.allocate_on(5 << 20, cuda0()).unwrap();
    let s = stats_of(&a);
    assert_eq!(s.large.segments.current, 1);
    assert_eq!(s.large.reserved_bytes.current, 20 << 20);
    assert_eq!((l2.get() as usize).abs_diff(l1.get() as usize), 5 << 20);
    // 10 MiB and more: a segment of its own, rounded up to 2 MiB.
    let big = a.allocate_on((12 << 20) + 1, cuda0()).unwrap();
    let s = stats_of(&a);
    assert_eq!(s.large.segments.current, 2);
    assert_eq!(s.large.reserved_bytes.current, (20 << 20) + (14 << 20));
    // Freed blocks merge back: the segments are whole again, and best fit
    // (the smallest free block that fits) picks the 14 MiB one for 5 MiB.
    let addr = big.get();
    drop((p1, p2, l1, l2, big));
    let s = stats_of(&a);
    assert_eq!(s.all.active_bytes.current, 0);
    assert_eq!(s.all.inactive_split_blocks.current, 0, "merged");
    let again = a.allocate_on(5 << 20, cuda0()).unwrap();
    assert_eq!(again.get(), addr);
    drop(again);
    a.empty_cache().unwrap();
    assert_eq!(stats_of(&a).all.reserved_bytes.current, 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_block_freed_on_one_stream_is_not_reused_on_another() {
    gpu();
    let a = fresh_caching();
    let (s1, s2) = (new_stream(), new_stream());
    set_current_stream(0, s1).unwrap();
    let p = a.allocate_on(4096, cuda0()).unwrap();
    let addr = p.get();
    drop(p);
    set_current_stream(0, s2).unwrap();
    let q = a.allocate_on(4096, cuda0()).unwrap();
    assert_ne!(q.get(), addr, "s2 must not get s1's freed block");
    assert_eq!(
        stats_of(&a).small.segments.current,
        2,
        "a segment per stream"
    );
    set_current_stream(0, s1).unwrap();
    let r = a.allocate_on(4096, cuda0()).unwrap();
    assert_eq!(r.get(), addr, "s1 reuses its own block");
    let segments = caching::all_segments();
    let streams: Vec<usize> = segments
        .iter()
        .flat_map(|(_, v)| v.iter().map(|s| s.stream))
        .collect();
    assert!(
        streams.contains(&s1) && streams.contains(&s2),
        "{streams:?}"
    );
    set_current_stream(0, 0).unwrap();
    assert_eq!(current_stream(0), 0);
    drop((q, r));
    a.empty_cache().unwrap();
    destroy_stream(s1);
    destroy_stream(s2);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn record_stream_holds_a_block_until_that_streams_work_is_done() {
    gpu();
    let a = fresh_caching();
    let (home, other) = (new_stream(), new_stream());
    set_current_stream(0, home).unwrap();
    let p = a.allocate_on(1 << 20, cuda0()).unwrap();
    let addr = p.get();
    // Recording the block's own stream changes nothing.
    assert!(caching::record_stream(&p, home).unwrap());
    assert!(caching::record_stream(&p, other).unwrap());
    let busy = keep_busy(other, 400);
    drop(p);
    // The block waits for `other`: still active, not handed out.
    let s = stats_of(&a);
    assert_eq!(
        s.all.active_bytes.current,
        1 << 20,
        "pending blocks stay active"
    );
    let q = a.allocate_on(1 << 20, cuda0()).unwrap();
    assert_ne!(
        q.get(),
        addr,
        "reused while the other stream may still use it"
    );
    assert_eq!(stats_of(&a).all.active_bytes.current, 2 << 20);
    sync_stream(other);
    // The next allocation that reaches the pools polls the event.
    let r = a.allocate_on(3 << 20, cuda0()).unwrap();
    assert_eq!(
        stats_of(&a).all.active_bytes.current,
        (1 << 20) + (3 << 20),
        "the pending block went back once its event completed"
    );
    drop((q, r));
    // A freed block whose stream still works: empty_cache waits for it.
    let p = a.allocate_on(1 << 20, cuda0()).unwrap();
    caching::record_stream(&p, other).unwrap();
    let busy2 = keep_busy(other, 100);
    drop(p);
    a.empty_cache().unwrap();
    let s = stats_of(&a);
    assert_eq!(s.all.active_bytes.current, 0);
    assert_eq!(
        s.all.reserved_bytes.current, 0,
        "every segment returned after the wait"
    );
    sync_stream(other);
    drop((busy, busy2));
    // Memory of other allocators: nothing to record.
    let raw = raw_device_allocator().allocate_on(64, cuda0()).unwrap();
    assert!(!caching::record_stream(&raw, other).unwrap());
    set_current_stream(0, 0).unwrap();
    destroy_stream(home);
    destroy_stream(other);
}

fn free_device_memory() -> usize {
    gpu()
        .on_device(0, || {
            let (mut free, mut total) = (0usize, 0usize);
            // SAFETY: a context is current; out-pointers are valid.
            let r = unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) };
            check(r, || "cuMemGetInfo".into())?;
            Ok(free)
        })
        .unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn out_of_memory_releases_the_cache_and_retries_first() {
    gpu();
    device_allocator().empty_cache().unwrap();
    let a = fresh_caching();
    let chunk = 4usize << 30;
    let mut held = Vec::new();
    while free_device_memory() > chunk + (1 << 30) {
        held.push(a.allocate_on(chunk, cuda0()).unwrap());
    }
    assert!(held.len() >= 2, "a GPU with at least 10 GiB");
    let cached = held.len() as u64;
    drop(held);
    let s = stats_of(&a);
    assert_eq!(
        s.large.segments.current, cached,
        "freed segments are cached"
    );
    assert_eq!(s.all.active_bytes.current, 0);
    // No cached block fits and the device is nearly full: the inner
    // allocator runs out, the cache goes back, and the retry succeeds.
    let big = a.allocate_on(2 * chunk + (1 << 30), cuda0()).unwrap();
    let s = stats_of(&a);
    assert_eq!(s.all.retries, 1, "{s:?}");
    assert_eq!(s.all.ooms, 0);
    assert_eq!(
        s.large.segments.current, 1,
        "the cached segments were released"
    );
    drop(big);
    // A request no device can hold fails, after the same release.
    let e = a.allocate_on(1usize << 50, cuda0()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert!(
        e.message().contains("out of memory") && e.message().contains("retried"),
        "{e}"
    );
    let s = stats_of(&a);
    assert_eq!((s.all.retries, s.all.ooms), (2, 1), "{s:?}");
    assert_eq!(s.all.reserved_bytes.current, 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn memory_history_and_snapshot_of_a_cuda_run() {
    gpu();
    use crate::allocator::{history, snapshot};
    history::start(1000, true).unwrap();
    let a = device_allocator();
    let p = a.allocate_on(3 << 20, cuda0()).unwrap();
    let q = a.allocate_on(4096, cuda0()).unwrap();
    let (pa, qa) = (p.get() as usize, q.get() as usize);
    drop(q);
    let dir = std::env::temp_dir().join(format!("tsr-cuda-snap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("snap.json");
    snapshot::write(&json, snapshot::Format::Json).unwrap();
    snapshot::write(&dir.join("snap.pickle"), snapshot::Format::Torch).unwrap();
    let events = history::events();
    history::stop();
    let ours: Vec<_> = events
        .iter()
        .filter(|e| e.tag.device.device_type == DeviceType::Cuda)
        .collect();
    assert!(
        ours.iter().any(|e| e.addr == pa && e.size >= 3 << 20),
        "{}",
        ours.len()
    );
    assert!(
        ours.iter().filter(|e| e.addr == qa).count() >= 2,
        "alloc and free of q"
    );
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(
        text.contains("\"cuda\""),
        "the snapshot names the CUDA allocator"
    );
    assert!(
        text.contains(&format!("\"{pa:#x}\"")),
        "the live block is in the snapshot"
    );
    assert!(std::fs::metadata(dir.join("snap.pickle")).unwrap().len() > 100);
    drop(p);
    std::fs::remove_dir_all(&dir).unwrap();
}
