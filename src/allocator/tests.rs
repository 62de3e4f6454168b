use super::*;
use crate::data_ptr::DeleterFn;
use crate::device::DeviceType;
use crate::error::ErrorKind;
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Held by the tests that set the CPU allocator's options and by those
/// that need them off (an allocation with fill options bypasses the
/// thread cache).
fn options_lock() -> std::sync::MutexGuard<'static, ()> {
    static OPTIONS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    OPTIONS.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn cpu_alignment_zero_size_and_stats() {
    let a = Allocator::cpu();
    assert!(Allocator::ptr_eq(&a, &Allocator::cpu()));
    for n in [1usize, 63, 64, 4096, 1 << 20] {
        let p = a.allocate(n).unwrap();
        assert_eq!(p.get() as usize % cpu::ALIGNMENT, 0, "size {n}");
        assert_eq!(p.context(), p.get());
        // the memory is writable over its whole length
        // SAFETY: p owns n bytes.
        unsafe { std::ptr::write_bytes(p.get() as *mut u8, 0xab, n) };
    }
    let z = a.allocate(0).unwrap();
    assert!(z.get().is_null());
    assert!(z.context().is_null());
    assert!(z.deleter().is_none());
}

#[test]
fn cpu_too_large_fails_cleanly() {
    let a = Allocator::cpu();
    let before = a.stats().num_failed;
    let e = a.allocate(usize::MAX).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert!(e.message().contains(&usize::MAX.to_string()), "{e}");
    assert!(
        e.message()
            .starts_with("tsr CPU allocator: can't allocate memory"),
        "{e}"
    );
    assert!(a.stats().num_failed > before);
    let e = a
        .allocate_on(8, Device::new(DeviceType::Cuda, 0).unwrap())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Device);
}

/// A backend over malloc that counts calls and drops.
struct Counting {
    live: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    fail: bool,
}

unsafe extern "C" fn free_ctx(ctx: *mut c_void) {
    // SAFETY: ctx came from libc::malloc in Counting::allocate.
    unsafe { libc::free(ctx) }
}

impl RawAllocator for Counting {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        if self.fail {
            crate::bail!(OutOfMemory, "counting backend refuses {nbytes} bytes");
        }
        self.live.fetch_add(1, Ordering::SeqCst);
        // SAFETY: plain allocation, freed by free_ctx.
        let p = unsafe { libc::malloc(nbytes.max(1)) };
        // SAFETY: free_ctx frees p exactly once.
        Ok(unsafe { DataPtr::from_raw_parts(p, p, Some(free_ctx), device) })
    }
    fn raw_deleter(&self) -> Option<DeleterFn> {
        Some(free_ctx)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting(fail: bool) -> (Allocator, Arc<AtomicUsize>) {
    let dropped = Arc::new(AtomicUsize::new(0));
    let a = Allocator::new(
        "counting",
        Device::CPU,
        Box::new(Counting {
            live: Arc::new(AtomicUsize::new(0)),
            dropped: dropped.clone(),
            fail,
        }),
    );
    (a, dropped)
}

#[test]
fn backend_stats_and_lifetime() {
    let (a, dropped) = counting(false);
    let p1 = a.allocate(100).unwrap();
    let p2 = a.allocate(50).unwrap();
    let s = a.stats();
    assert_eq!(
        (s.allocated_bytes, s.peak_bytes, s.num_allocs, s.num_frees),
        (150, 150, 2, 0)
    );
    drop(p1);
    let s = a.stats();
    assert_eq!((s.allocated_bytes, s.peak_bytes, s.num_frees), (50, 150, 1));
    a.reset_peak();
    assert_eq!(a.stats().peak_bytes, 50);
    // dropping the handle keeps the backend while memory is out
    drop(a);
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    drop(p2);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn backend_failure_is_counted() {
    let (a, _) = counting(true);
    let e = a.allocate(10).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert_eq!(a.stats().num_failed, 1);
    assert_eq!(a.stats().num_allocs, 0);
}

unsafe extern "C" fn other_deleter(_: *mut c_void) {}

#[test]
fn cast_context_sees_through_the_wrapper() {
    let (a, _) = counting(false);
    let mut p = a.allocate(8).unwrap();
    let ctx = p.cast_context(free_ctx).expect("wrapped deleter visible");
    assert_eq!(ctx, p.get());
    assert!(p.cast_context(other_deleter).is_none());
    // swap the inner deleter for one that frees nothing, then free ourselves
    assert!(p.compare_exchange_deleter(Some(free_ctx), Some(other_deleter)));
    let data = p.get();
    drop(p);
    // SAFETY: the deleter no longer frees it; we own it now.
    unsafe { libc::free(data) };
    assert_eq!(a.stats().num_frees, 1);
}

#[test]
fn raw_allocate_round_trip() {
    let (a, _) = counting(false);
    let p = a.raw_allocate(32).unwrap();
    assert_eq!(a.stats().allocated_bytes, 32);
    // SAFETY: p came from raw_allocate.
    unsafe { a.raw_deallocate(p).unwrap() };
    assert_eq!(a.stats().allocated_bytes, 0);
    assert_eq!(a.stats().num_frees, 1);
    let bogus = 0x1000 as *mut c_void;
    // SAFETY: an unknown pointer is detected before any free.
    let e = unsafe { a.raw_deallocate(bogus) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);

    let cpu = Allocator::cpu();
    let p = cpu.raw_allocate(100).unwrap();
    assert_eq!(p as usize % 64, 0);
    // SAFETY: p came from raw_allocate of the CPU allocator.
    unsafe { cpu.raw_deallocate(p).unwrap() };
}

#[test]
fn registry_priorities() {
    let t = DeviceType::PrivateUse1;
    let (a, _) = counting(false);
    let (b, _) = counting(false);
    let (c, _) = counting(false);
    registry::clear_allocator(t);
    assert!(get_allocator(t).is_none());
    assert!(set_allocator(t, &a, 1));
    assert!(!set_allocator(t, &b, 0), "lower priority is refused");
    assert!(Allocator::ptr_eq(&get_allocator(t).unwrap(), &a));
    assert!(set_allocator(t, &b, 1), "equal priority replaces");
    assert!(Allocator::ptr_eq(&get_allocator(t).unwrap(), &b));
    assert!(set_allocator(t, &c, 5), "higher priority replaces");
    assert!(Allocator::ptr_eq(&get_allocator(t).unwrap(), &c));
    assert_eq!(registry::priority(t), 5);
    registry::clear_allocator(t);
}

#[test]
fn cpu_slot_defaults_to_builtin() {
    assert!(Allocator::ptr_eq(
        &get_allocator(DeviceType::Cpu).unwrap(),
        &Allocator::cpu()
    ));
}

#[test]
fn reporter_sees_matching_pairs() {
    let _bits = active::test_lock();
    let (a, _) = counting(false);
    let events: Arc<std::sync::Mutex<Vec<(usize, i64)>>> = Default::default();
    let sink = events.clone();
    set_memory_reporter(Some(Arc::new(move |e: &MemoryEvent| {
        sink.lock().unwrap().push((e.ptr as usize, e.delta_bytes));
    })));
    let p = a.allocate(24).unwrap();
    let addr = p.get() as usize;
    drop(p);
    set_memory_reporter(None);
    let mine: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.0 == addr)
        .copied()
        .collect();
    assert!(
        mine.contains(&(addr, 24)) && mine.contains(&(addr, -24)),
        "{mine:?}"
    );
}

#[test]
fn cpu_fill_options() {
    let _o = options_lock();
    use cpu::{options, set_options, CpuOptions};
    let saved = options();
    let e = set_options(CpuOptions {
        zero_fill: true,
        junk_fill: true,
        huge_pages: false,
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    set_options(CpuOptions {
        junk_fill: true,
        ..saved
    })
    .unwrap();
    let p = Allocator::cpu().allocate(64).unwrap();
    // SAFETY: p owns 64 bytes, just junk-filled.
    let words = unsafe { std::slice::from_raw_parts(p.get() as *const u32, 16) };
    assert!(words.iter().all(|w| *w == cpu::JUNK_PATTERN));
    set_options(CpuOptions {
        zero_fill: true,
        ..saved
    })
    .unwrap();
    let p = Allocator::cpu().allocate(4096).unwrap();
    // SAFETY: p owns 4096 zeroed bytes.
    let bytes = unsafe { std::slice::from_raw_parts(p.get() as *const u8, 4096) };
    assert!(bytes.iter().all(|b| *b == 0));
    set_options(CpuOptions {
        huge_pages: true,
        ..saved
    })
    .unwrap();
    let p = Allocator::cpu().allocate(4 << 20).unwrap();
    assert_eq!(p.get() as usize % (2 << 20), 0);
    drop(p);
    set_options(saved).unwrap();
}

#[test]
fn cpu_cache_reuses_blocks_of_a_class() {
    use crate::allocator::cpu_thread_cache::releases;
    let _o = options_lock();
    // Runs on its own thread so other tests' frees do not touch its cache.
    // Another test's failed allocation empties every thread's cache: a
    // round that one interrupted is run again.
    std::thread::spawn(|| {
        let a = Allocator::cpu();
        for _ in 0..100 {
            let before = releases();
            cpu::release_thread_cache();
            let empty = cpu::thread_cached_bytes();
            let p = a.allocate(3000).unwrap();
            let addr = p.get();
            drop(p);
            let cached = cpu::thread_cached_bytes();
            // another request of the same class gets the same block back
            let q = a.allocate(2900).unwrap();
            let again = q.get();
            assert_eq!(q.get() as usize % cpu::ALIGNMENT, 0);
            // SAFETY: q owns 2900 bytes.
            unsafe { std::ptr::write_bytes(q.get() as *mut u8, 1, 2900) };
            drop(q);
            // a 64 MiB block is reused without mmap/munmap
            let big = a.allocate(64 << 20).unwrap();
            let big_addr = big.get();
            drop(big);
            let big_again = a.allocate(64 << 20).unwrap().get();
            let released = cpu::release_thread_cache();
            if releases() != before {
                continue;
            }
            assert_eq!(empty, 0);
            assert!(cached >= 3000, "the freed block is cached");
            assert_eq!(again, addr);
            assert_eq!(big_again, big_addr);
            assert!(released >= 64 << 20);
            assert_eq!(cpu::thread_cached_bytes(), 0);
            return;
        }
        panic!("100 rounds in a row met another thread's release_all_caches");
    })
    .join()
    .unwrap();
}

#[test]
fn cpu_cache_honours_zero_fill() {
    let _o = options_lock();
    std::thread::spawn(|| {
        let a = Allocator::cpu();
        let p = a.allocate(1000).unwrap();
        // SAFETY: p owns 1000 bytes.
        unsafe { std::ptr::write_bytes(p.get() as *mut u8, 0xff, 1000) };
        drop(p);
        let saved = cpu::options();
        // The options are process-wide: this test owns them while it runs
        // (options_lock).
        cpu::set_options(cpu::CpuOptions {
            zero_fill: true,
            ..saved
        })
        .unwrap();
        let q = a.allocate(1000).unwrap();
        // SAFETY: q owns 1000 bytes.
        let bytes = unsafe { std::slice::from_raw_parts(q.get() as *const u8, 1000) };
        assert!(
            bytes.iter().all(|b| *b == 0),
            "zero-fill bypasses the cache"
        );
        cpu::set_options(saved).unwrap();
        cpu::release_thread_cache();
    })
    .join()
    .unwrap();
}
