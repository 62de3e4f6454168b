use super::*;
use crate::allocator::RawAllocator;
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Counting {
    live: Arc<AtomicUsize>,
}

unsafe extern "C" fn free_ctx(ctx: *mut c_void) {
    // SAFETY: ctx came from libc::malloc below.
    unsafe { libc::free(ctx) }
}

impl RawAllocator for Counting {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        self.live.fetch_add(1, Ordering::SeqCst);
        // SAFETY: plain allocation freed by free_ctx.
        let p = unsafe { libc::malloc(nbytes.max(1)) };
        // SAFETY: free_ctx frees p once.
        Ok(unsafe { DataPtr::from_raw_parts(p, p, Some(free_ctx), device) })
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn counting() -> Allocator {
    Allocator::new(
        "counting",
        Device::CPU,
        Box::new(Counting {
            live: Arc::new(AtomicUsize::new(0)),
        }),
    )
}

#[test]
fn new_fill_copy_clone() {
    let s = Storage::new(16, Device::CPU, false).unwrap();
    assert_eq!(s.nbytes(), 16);
    assert!(!s.resizable());
    assert!(s.device().is_cpu());
    s.fill(7).unwrap();
    let c = s.clone_storage().unwrap();
    assert!(!Storage::ptr_eq(&s, &c));
    assert_ne!(c.data(), s.data());
    // SAFETY: c owns 16 bytes.
    let bytes = unsafe { std::slice::from_raw_parts(c.data() as *const u8, 16) };
    assert!(bytes.iter().all(|b| *b == 7));
    let d = Storage::new(8, Device::CPU, false).unwrap();
    let e = d.copy_from(&s).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Shape);
}

#[test]
fn resize_keeps_prefix() {
    let a = counting();
    let s = Storage::with_allocator(4, &a, true).unwrap();
    // SAFETY: s owns 4 bytes.
    unsafe { std::ptr::copy_nonoverlapping([1u8, 2, 3, 4].as_ptr(), s.data() as *mut u8, 4) };
    // SAFETY: no other thread uses s.
    unsafe { s.resize(8).unwrap() };
    assert_eq!(s.nbytes(), 8);
    // SAFETY: s owns 8 bytes now.
    let bytes = unsafe { std::slice::from_raw_parts(s.data() as *const u8, 4) };
    assert_eq!(bytes, &[1, 2, 3, 4]);
    assert_eq!(a.stats().allocated_bytes, 8);
    // SAFETY: no other thread uses s.
    unsafe { s.resize(2).unwrap() };
    assert_eq!(a.stats().allocated_bytes, 2);
    let fixed = Storage::new(4, Device::CPU, false).unwrap();
    // SAFETY: no other thread uses it.
    let e = unsafe { fixed.resize(8) }.unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::NotResizable);
}

#[test]
fn weak_storage_frees_data() {
    let a = counting();
    let s = Storage::with_allocator(100, &a, false).unwrap();
    let w = s.downgrade();
    assert_eq!(a.stats().allocated_bytes, 100);
    drop(s);
    assert!(w.expired());
    assert!(w.lock().is_none());
    assert_eq!(
        a.stats().allocated_bytes,
        0,
        "the data is freed while a weak ref remains"
    );
    assert_eq!(a.stats().num_frees, 1);
}

#[test]
fn share_external_needs_unique() {
    let s = Storage::new(4, Device::CPU, true).unwrap();
    let other = s.clone();
    let mut buf = [0u8; 8];
    // SAFETY: buf is a live local; share_external below refuses (s has a
    // second reference) and drops this borrowed DataPtr, which runs no
    // deleter, without reading through it.
    let dp = unsafe { DataPtr::borrowed(buf.as_mut_ptr() as *mut c_void, Device::CPU) };
    // SAFETY: no other thread uses s.
    let e = unsafe { s.share_external(dp, 8) }.unwrap_err();
    assert!(e.message().contains("2 strong references"), "{e}");
    drop(other);
    // SAFETY: buf is a local that stays valid until the test returns, and
    // nothing reads through this pointer after the asserts below (dropping
    // a borrowed DataPtr, at the storage's drop, runs no deleter).
    let dp = unsafe { DataPtr::borrowed(buf.as_mut_ptr() as *mut c_void, Device::CPU) };
    // SAFETY: no other thread uses s.
    unsafe { s.share_external(dp, 8).unwrap() };
    assert_eq!(s.data(), buf.as_mut_ptr() as *mut c_void);
    assert!(!s.resizable());
    assert!(s.allocator().is_none());
}

#[test]
fn meta_storage_has_no_data() {
    let s = Storage::new(1 << 40, Device::new(DeviceType::Meta, -1).unwrap(), true).unwrap();
    assert!(s.data().is_null());
    assert_eq!(s.nbytes(), 1 << 40);
}

static SWAP_FREES: AtomicUsize = AtomicUsize::new(0);
unsafe extern "C" fn count_free(ctx: *mut c_void) {
    SWAP_FREES.fetch_add(1, Ordering::SeqCst);
    // SAFETY: ctx came from libc::malloc in external().
    unsafe { libc::free(ctx) }
}

fn external(n: usize) -> DataPtr {
    // SAFETY: plain allocation, freed once by count_free.
    let p = unsafe { libc::malloc(n.max(1)) };
    // SAFETY: count_free frees p once.
    unsafe { DataPtr::from_raw_parts(p, p, Some(count_free), Device::CPU) }
}

#[test]
fn set_data_ptr_swaps_and_hands_back_the_old_pointer() {
    let before = SWAP_FREES.load(Ordering::SeqCst);
    let s = Storage::new(16, Device::CPU, true).unwrap();
    s.fill(7).unwrap();
    let old_addr = s.data();
    let new = external(32);
    let new_addr = new.get();
    // SAFETY: no other thread uses s.
    let old = unsafe { s.set_data_ptr(new, 32) }.unwrap();
    assert_eq!(old.get(), old_addr);
    assert_eq!((s.data(), s.nbytes()), (new_addr, 32));
    assert!(s.resizable(), "c10 keeps the resizable flag");
    assert_eq!(s.data_ptr().get(), new_addr);
    drop(old);
    assert_eq!(SWAP_FREES.load(Ordering::SeqCst), before);
    drop(s);
    assert_eq!(SWAP_FREES.load(Ordering::SeqCst), before + 1);
}

#[test]
fn set_data_ptr_refusals() {
    let s = Storage::new(16, Device::CPU, true).unwrap();
    let meta = DataPtr::empty(Device::new(DeviceType::Meta, -1).unwrap());
    // SAFETY: no other thread uses s.
    let e = unsafe { s.set_data_ptr(meta, 0) }.unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("meta"), "{e}");
    // SAFETY: `s` is this test's alone (no clone, no other thread) and no
    // tensor is on it; the call is refused anyway (NULL data, nbytes 8).
    let e = unsafe { s.set_data_ptr(DataPtr::empty(Device::CPU), 8) }.unwrap_err();
    assert!(e.to_string().contains("nbytes is 8"), "{e}");
    s.export_started();
    // SAFETY: `s` is still this test's alone, with no tensor on it; the
    // call is refused anyway (a live export).
    let e = unsafe { s.set_data_ptr(DataPtr::empty(Device::CPU), 0) }.unwrap_err();
    assert!(e.to_string().contains("1 live DLPack export"), "{e}");
    s.export_ended();
    s.make_read_only();
    // SAFETY: `s` is still this test's alone, with no tensor on it; the
    // call is refused anyway (read-only).
    let e = unsafe { s.set_data_ptr(DataPtr::empty(Device::CPU), 0) }.unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::ReadOnly);
    assert_eq!(s.nbytes(), 16);
}

#[test]
fn read_only_refuses_every_storage_write() {
    use crate::error::ErrorKind::ReadOnly;
    let s = Storage::new(16, Device::CPU, true).unwrap();
    let src = Storage::new(16, Device::CPU, true).unwrap();
    s.fill(1).unwrap();
    s.make_read_only();
    assert!(s.is_read_only());
    assert_eq!(s.fill(0).unwrap_err().kind(), ReadOnly);
    assert_eq!(s.copy_from(&src).unwrap_err().kind(), ReadOnly);
    // SAFETY: no other thread uses s.
    assert_eq!(unsafe { s.resize(32) }.unwrap_err().kind(), ReadOnly);
    // SAFETY: `s` is used by this thread only (never cloned or sent); the
    // refused external(4) is dropped, freed once by count_free.
    let e = unsafe { s.share_external(external(4), 4) }.unwrap_err();
    assert_eq!(e.kind(), ReadOnly);
    assert!(e.to_string().contains("read-only"), "{e}");
    // Reading still works, and the bytes are unchanged.
    let copy = s.clone_storage().unwrap();
    assert!(!copy.is_read_only());
    // SAFETY: 16 bytes of host memory.
    let b = unsafe { std::slice::from_raw_parts(copy.data() as *const u8, 16) };
    assert!(b.iter().all(|&x| x == 1));
}
