//! GPU tests of what this round added on CUDA (all #[ignore]d: they need
//! a GPU; scripts/gpu/check.sh runs them): expandable segments over the
//! driver's virtual memory management, the device's memory for fractions
//! and out-of-memory observers, and PyTorch's pluggable-allocator entry
//! points. Compiled on every `cargo test --features cuda`.

use super::*;
use crate::allocator::{oom, MemoryInfo, VirtualMemory};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

const MIB: usize = 1 << 20;

fn cuda0() -> Device {
    Device::new(DeviceType::Cuda, 0).unwrap()
}

fn gpu() {
    init().expect("these tests need a CUDA GPU");
}

fn expandable() -> Allocator {
    caching::new(
        raw_device_allocator(),
        CachingOptions {
            expandable_segments: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Writes `n` bytes at `p` on the device and reads them back.
fn round_trip(a: &Allocator, p: &DataPtr, n: usize, byte: u8) {
    let host = vec![byte; n];
    let mut back = vec![0u8; n];
    // SAFETY: p holds n bytes of device memory; host and back n each.
    unsafe {
        a.copy_data(p.get(), host.as_ptr().cast(), n).unwrap();
        a.copy_data(back.as_mut_ptr().cast(), p.get(), n).unwrap();
    }
    assert!(back.iter().all(|&b| b == byte));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_devices_memory_and_page_size() {
    gpu();
    let MemoryInfo { free, total } = vmm::memory_info(cuda0()).unwrap();
    assert!(total > 0 && free <= total, "{free} of {total}");
    let current = vmm::memory_info(Device::new(DeviceType::Cuda, -1).unwrap()).unwrap();
    assert_eq!(current.total, total, "-1 is the current device, 0 here");
    let page = vmm::DEVICE_VM.page_size(cuda0()).unwrap();
    assert!(page >= 2 * MIB && page.is_power_of_two(), "{page}");
    assert!(vmm::DEVICE_VM.reservation_size(cuda0()).unwrap() as u64 >= total);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_growing_request_grows_one_expandable_segment_on_the_gpu() {
    gpu();
    let a = expandable();
    assert!(caching::of(&a).unwrap().expandable_segments());
    let mut requested = 0u64;
    for i in 1..=16 {
        let n = i * 4 * MIB + 512;
        let p = a.allocate_on(n, cuda0()).unwrap();
        assert_eq!(p.device(), cuda0());
        round_trip(&a, &p, n, i as u8);
        requested += n as u64;
    }
    let s = caching::of(&a).unwrap().device_stats(cuda0()).unwrap();
    let (reserved, active) = (s.all.reserved_bytes.peak, s.all.active_bytes.peak);
    assert_eq!(active, (64 * MIB + 512) as u64);
    assert!(
        reserved as f64 <= 1.1 * active as f64 + (2 * MIB) as f64,
        "peak reserved {reserved} for peak active {active}"
    );
    assert!(requested > reserved);
    assert_eq!(s.large.segments.current, 1);
    eprintln!("cuda expandable: peak reserved {reserved}, peak active {active}");
    a.empty_cache().unwrap();
    let s = caching::of(&a).unwrap().stats().unwrap();
    assert_eq!(
        (s.all.reserved_bytes.current, s.all.segments.current),
        (0, 0)
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_memory_fraction_of_the_gpu() {
    gpu();
    let a = caching::new(raw_device_allocator(), CachingOptions::default()).unwrap();
    let c = caching::of(&a).unwrap();
    let total = vmm::memory_info(cuda0()).unwrap().total;
    c.set_memory_fraction(cuda0(), 0.01).unwrap();
    let limit = c.memory_limit(cuda0()).unwrap().unwrap();
    assert_eq!(limit, (0.01 * total as f64) as u64);
    let seen = Arc::new(AtomicU64::new(0));
    let sink = seen.clone();
    oom::add_oom_observer(Arc::new(move |e: &oom::OomEvent<'_>| {
        if let Some(m) = e.device_memory {
            sink.store(m.total, SeqCst);
        }
    }));
    let e = a.allocate_on(limit as usize + 1, cuda0()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert!(e.message().contains("limit"), "{e}");
    assert_eq!(
        seen.load(SeqCst),
        total,
        "the observer got cuMemGetInfo's total"
    );
    c.set_memory_fraction(cuda0(), 0.0).unwrap();
    drop(a.allocate_on(limit as usize + 1, cuda0()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pytorch_entry_points_allocate_on_the_named_stream() {
    gpu();
    let before = torch::live_blocks();
    let p = torch::malloc(1 << 20, 0, 0).unwrap();
    assert!(!p.is_null());
    assert_eq!(torch::live_blocks(), before + 1);
    let mut s: sys::CUstream = std::ptr::null_mut();
    driver()
        .unwrap()
        .on_device(0, || {
            // SAFETY: cuda:0's context is current; `s` is an out-pointer.
            check(unsafe { sys::cuStreamCreate(&mut s, 1) }, || {
                "cuStreamCreate".into()
            })
        })
        .unwrap();
    let q = torch::malloc(4096, 0, s as usize).unwrap();
    torch::record_stream(q, 0).unwrap();
    assert!(torch::free(p));
    assert!(torch::free(q));
    assert!(!torch::free(q), "freed once");
    assert_eq!(torch::live_blocks(), before);
    assert!(torch::malloc(-1, 0, 0).is_err());
    assert!(torch::malloc(16, -1, 0).is_err());
    assert!(torch::malloc(0, 0, 0).unwrap().is_null());
    torch::empty_cache().unwrap();
    torch::set_memory_fraction(0.5, 0).unwrap();
    torch::set_memory_fraction(0.0, 0).unwrap();
    driver()
        .unwrap()
        .on_device(0, || {
            // SAFETY: `s` is a live stream of cuda:0, destroyed once.
            check(unsafe { sys::cuStreamDestroy_v2(s) }, || {
                "cuStreamDestroy".into()
            })
        })
        .unwrap();
}
