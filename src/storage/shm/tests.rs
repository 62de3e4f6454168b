use super::*;
use crate::allocator::{Allocator, RawAllocator};
use crate::error::ErrorKind;
use std::any::Any;
use std::os::fd::AsRawFd;
use std::sync::Arc;

struct Malloc;

unsafe extern "C" fn free_ctx(ctx: *mut c_void) {
    // SAFETY: ctx came from libc::malloc below.
    unsafe { libc::free(ctx) }
}

impl RawAllocator for Malloc {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        // SAFETY: plain allocation freed by free_ctx.
        let p = unsafe { libc::malloc(nbytes.max(1)) };
        // SAFETY: free_ctx frees p once.
        Ok(unsafe { DataPtr::from_raw_parts(p, p, Some(free_ctx), device) })
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Held by every test of this file: some count this process's
/// descriptors, and the others make segments (no other test of the
/// library does).
static FDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fds_lock() -> std::sync::MutexGuard<'static, ()> {
    FDS.lock().unwrap_or_else(|p| p.into_inner())
}

fn fd_links() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .map(|p| p.to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn memfds() -> usize {
    fd_links()
        .iter()
        .filter(|l| l.starts_with("/memfd:tessera"))
        .count()
}

fn filled(n: usize) -> Storage {
    let s = Storage::new(n, Device::CPU, true).unwrap();
    for i in 0..n {
        // SAFETY: i < n bytes of host memory.
        unsafe { *(s.data() as *mut u8).add(i) = i as u8 };
    }
    s
}

fn bytes(s: &StorageImpl) -> Vec<u8> {
    if s.nbytes() == 0 {
        return Vec::new();
    }
    // SAFETY: the storage holds nbytes of host memory.
    unsafe { std::slice::from_raw_parts(s.data() as *const u8, s.nbytes()) }.to_vec()
}

#[test]
fn share_memory_moves_in_place_once() {
    let _l = fds_lock();
    let s = filled(1000);
    let want = bytes(&s);
    let old = s.data();
    assert!(!s.is_shared() && s.resizable());
    // SAFETY: no other thread uses `s`.
    unsafe { s.share_memory() }.unwrap();
    assert!(s.is_shared() && !s.resizable() && s.allocator().is_none());
    assert_ne!(s.data(), old);
    assert_eq!(bytes(&s), want);
    let moved = s.data();
    // SAFETY: `s` is still this test's alone (made by filled, never cloned
    // or sent); `old` and `moved` are only compared, never read.
    unsafe { s.share_memory() }.unwrap();
    assert_eq!(s.data(), moved, "a second share_memory is a no-op");
    // SAFETY: no other thread has `s` (never cloned or sent), resize's
    // requirement; it fails here anyway, the storage being shared.
    assert!(unsafe { s.resize(10) }.is_err());
}

#[test]
fn concurrent_share_memory_moves_once() {
    let _l = fds_lock();
    let s = filled(1 << 16);
    let want = bytes(&s);
    let barrier = Arc::new(std::sync::Barrier::new(4));
    let seen: Vec<usize> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (s, b) = (s.clone(), barrier.clone());
                sc.spawn(move || {
                    b.wait();
                    // SAFETY: the other threads only call share_memory.
                    unsafe { s.share_memory() }.unwrap();
                    s.data() as usize
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(seen.iter().all(|&a| a == s.data() as usize), "{seen:?}");
    assert_eq!(bytes(&s), want);
}

#[test]
fn empty_storage_shares() {
    let _l = fds_lock();
    let s = Storage::new(0, Device::CPU, true).unwrap();
    // SAFETY: no other thread uses `s`.
    unsafe { s.share_memory() }.unwrap();
    assert!(s.is_shared() && s.data().is_null());
    let fd = s.share_fd().unwrap();
    let t = Storage::from_fd(fd.as_raw_fd(), 0).unwrap();
    assert_eq!(t.nbytes(), 0);
}

#[test]
fn fd_round_trip_sees_writes_and_closes() {
    let _l = fds_lock();
    let before = memfds();
    {
        let s = filled(4096 + 7);
        // SAFETY: no other thread uses `s`.
        unsafe { s.share_memory() }.unwrap();
        let fd = s.share_fd().unwrap();
        let t = Storage::from_fd(fd.as_raw_fd(), 0).unwrap();
        drop(fd);
        assert_eq!(t.nbytes(), s.nbytes());
        assert!(t.is_shared());
        assert_ne!(t.data(), s.data());
        // SAFETY: 4103 bytes of host memory each.
        unsafe { *(t.data() as *mut u8).add(4100) = 0xAB };
        assert_eq!(bytes(&s)[4100], 0xAB);
        let part = Storage::from_fd(t.share_fd().unwrap().as_raw_fd(), 10).unwrap();
        assert_eq!(part.nbytes(), 10);
        assert!(memfds() > before);
    }
    assert_eq!(memfds(), before, "{:?}", fd_links());
}

#[test]
fn name_round_trip_unlinks_with_the_last_user() {
    let _l = fds_lock();
    let s = filled(300);
    // SAFETY: no other thread uses `s`.
    let name = unsafe { s.share_name() }.unwrap();
    assert_eq!(name.as_bytes().len(), NEW_NAME_LEN);
    // SAFETY: `s` is still used by this thread only: nothing cloned or
    // sent it since the call above.
    assert_eq!(unsafe { s.share_name() }.unwrap(), name, "same name again");
    let path = format!("/dev/shm{}", name.to_str().unwrap());
    let t = Storage::open_shared(&name).unwrap();
    assert_eq!(bytes(&t), bytes(&s));
    // SAFETY: 300 bytes of host memory.
    unsafe { *(t.data() as *mut u8).add(299) = 7 };
    assert_eq!(bytes(&s)[299], 7);
    drop(s);
    assert!(std::path::Path::new(&path).exists());
    drop(t);
    assert!(!std::path::Path::new(&path).exists());
    let e = Storage::open_shared(&name).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Io);
    assert!(e.message().contains("no shared-memory segment"), "{e}");
}

#[test]
fn anonymous_then_named_moves_again() {
    let _l = fds_lock();
    let s = filled(64);
    // SAFETY: no other thread uses `s`.
    unsafe { s.share_memory() }.unwrap();
    assert!(s.shared_name().is_none());
    let a = s.data();
    // SAFETY: `s` is still used by this thread only; `a`, a pointer to the
    // data about to move, is only compared afterwards, never read.
    let name = unsafe { s.share_name() }.unwrap();
    assert_ne!(s.data(), a);
    assert_eq!(s.shared_name().unwrap(), name);
    assert_eq!(bytes(&s), (0..64u8).collect::<Vec<_>>());
}

#[test]
fn allocator_memory_is_freed_by_the_move() {
    let _l = fds_lock();
    let a = Allocator::new("malloc", Device::CPU, Box::new(Malloc));
    let s = Storage::with_allocator(4096, &a, true).unwrap();
    let w = s.downgrade();
    assert_eq!(a.stats().allocated_bytes, 4096);
    // SAFETY: no other thread uses `s`.
    unsafe { s.share_memory() }.unwrap();
    let st = a.stats();
    assert_eq!((st.allocated_bytes, st.num_frees), (0, 1));
    assert!(
        Storage::ptr_eq(&w.lock().unwrap(), &s),
        "weak refs unaffected"
    );
}

#[test]
fn bad_inputs() {
    let _l = fds_lock();
    let before = memfds();
    let e = Storage::from_fd(-1, 0).unwrap_err();
    assert!(e.message().contains("descriptor -1"), "{e}");
    let e = Storage::from_fd(100_000, 0).unwrap_err();
    assert!(e.message().contains("100000 is not open"), "{e}");
    let mut p = [0; 2];
    // SAFETY: a writable array of two descriptors.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    let e = Storage::from_fd(p[0], 0).unwrap_err();
    assert!(e.message().contains("is a pipe"), "{e}");
    // SAFETY: the pipe's own descriptors.
    unsafe { libc::close(p[0]) };
    // SAFETY: p[1] is the pipe's write end, which nothing else took or
    // closed (from_fd only borrowed p[0]), so this closes our own fd once.
    unsafe { libc::close(p[1]) };
    let s = filled(8);
    // SAFETY: no other thread uses `s`.
    unsafe { s.share_memory() }.unwrap();
    let fd = s.share_fd().unwrap();
    let e = Storage::from_fd(fd.as_raw_fd(), 9).unwrap_err();
    assert!(e.message().contains("nbytes 9"), "{e}");
    drop((fd, s));
    let long = CString::new(format!("/{}", "x".repeat(300))).unwrap();
    let e = Storage::open_shared(&long).unwrap_err();
    assert!(e.message().contains("300 bytes is too long"), "{e}");
    let e = Storage::open_shared(c"/a/b").unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
    let e = filled(3).share_fd().unwrap_err();
    assert!(e.message().contains("not in shared memory"), "{e}");
    assert_eq!(memfds(), before);
}

#[test]
fn read_only_storage_is_not_moved() {
    let _l = fds_lock();
    let s = filled(64);
    s.make_read_only();
    let before = s.data();
    // SAFETY: this test is the storage's only user.
    let e = unsafe { s.share_memory() }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
    assert!(e.message().contains("share_memory"), "{e}");
    assert_eq!(s.data(), before);
    assert!(!s.is_shared());
}

#[test]
fn live_dlpack_export_blocks_the_move() {
    let _l = fds_lock();
    let s = filled(64);
    s.export_started();
    let before = s.data();
    // SAFETY: this test is the storage's only user.
    let e = unsafe { s.share_memory() }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("1 live DLPack export"), "{e}");
    assert_eq!(s.data(), before);
    // SAFETY: still this test's only user of `s`: no other thread has it.
    let e = unsafe { s.share_name() }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    s.export_ended();
    // SAFETY: still this test's only user of `s`; no pointer to the old
    // data (`before` was only compared) is used after the move.
    unsafe { s.share_memory() }.unwrap();
    assert!(s.is_shared());
    assert_eq!(bytes(&s), (0..64u8).collect::<Vec<_>>());
}

#[test]
fn shared_file_storage_is_shared() {
    let _l = fds_lock();
    use crate::storage::file::FileMode;
    let path = std::env::temp_dir().join(format!("tsr-shm-is-shared-{}", std::process::id()));
    let shared = Storage::from_file(&path, FileMode::Shared, 4096).unwrap();
    assert!(shared.is_shared());
    let private = Storage::from_file(&path, FileMode::Private, 0).unwrap();
    assert!(!private.is_shared());
    let before = shared.data();
    // SAFETY: this test is the storages' only user.
    unsafe { shared.share_memory() }.unwrap();
    assert_eq!(
        shared.data(),
        before,
        "a SHARED file storage is shared already: no move"
    );
    drop((shared, private));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn truncated_named_segment_releases_without_a_fault() {
    let _l = fds_lock();
    let s = filled(5000);
    // SAFETY: no other thread uses `s`.
    let name = unsafe { s.share_name() }.unwrap();
    let t = Storage::open_shared(&name).unwrap();
    // A peer takes the memory away (the same process, through a
    // descriptor of its own).
    // SAFETY: a NUL-terminated name and valid flags.
    let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR, 0) };
    assert!(fd >= 0);
    // SAFETY: the descriptor just opened, closed once.
    unsafe {
        assert_eq!(libc::ftruncate(fd, 0), 0);
        libc::close(fd);
    }
    let e = Storage::open_shared(&name).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Format, "{e}");
    let path = format!("/dev/shm{}", name.to_str().unwrap());
    drop(s);
    assert!(std::path::Path::new(&path).exists(), "`t` still holds it");
    drop(t);
    assert!(!std::path::Path::new(&path).exists());
}

#[test]
fn read_only_storage_hands_out_no_alias() {
    let _l = fds_lock();
    let s = filled(64);
    // SAFETY: no other thread uses `s`.
    unsafe { s.share_memory() }.unwrap();
    s.make_read_only();
    let e = s.share_fd().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
    assert!(e.message().contains("share_fd would hand out"), "{e}");
    // SAFETY: still this test's only user of `s`.
    let e = unsafe { s.share_name() }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
    assert!(s.shared_name().is_none());
}
