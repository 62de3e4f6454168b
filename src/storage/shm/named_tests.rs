//! Named segments on every platform (POSIX shm on Unix, named file
//! mappings on Windows): a name opened by another storage and by another
//! process sees the same bytes, and goes with its last storage.

use crate::device::Device;
use crate::error::ErrorKind;
use crate::storage::Storage;
use std::ffi::CString;

// The child goes through TESSERA_TEST_RUNNER where set (qemu-user).
#[path = "../../../tests/common/this_binary.rs"]
mod this_binary;

/// The variable that makes this test binary the child of
/// `another_process_sees_and_writes_the_bytes`: the name to open.
const CHILD: &str = "TESSERA_TEST_SHM_CHILD";

fn filled(n: usize) -> Storage {
    let s = Storage::new(n, Device::CPU, false).unwrap();
    // SAFETY: n writable bytes of a fresh CPU storage.
    let b = unsafe { std::slice::from_raw_parts_mut(s.data() as *mut u8, n) };
    b.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8);
    s
}

fn byte(s: &Storage, i: usize) -> u8 {
    assert!(i < s.nbytes());
    // SAFETY: i < nbytes of a live CPU storage.
    unsafe { *(s.data() as *const u8).add(i) }
}

#[test]
fn a_name_is_shared_in_one_process_and_goes_with_its_last_storage() {
    let s = filled(300);
    // SAFETY: no other thread uses `s`.
    let name = unsafe { s.share_name() }.unwrap();
    assert_eq!(name.as_bytes().len(), super::NEW_NAME_LEN);
    assert_eq!(s.shared_name(), Some(name.clone()));
    let t = Storage::open_shared(&name).unwrap();
    assert_eq!(t.nbytes(), 300);
    assert_eq!(byte(&t, 299), byte(&s, 299));
    // SAFETY: 300 writable bytes of a shared CPU storage.
    unsafe { *(t.data() as *mut u8).add(10) = 200 };
    assert_eq!(byte(&s, 10), 200, "one memory");
    drop(s);
    let u = Storage::open_shared(&name).unwrap();
    assert_eq!(byte(&u, 10), 200, "the name stays while a storage lives");
    drop((t, u));
    let e = Storage::open_shared(&name).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.message().contains("no shared-memory segment"), "{e}");
}

#[test]
fn an_empty_storage_and_bad_names() {
    let s = Storage::new(0, Device::CPU, false).unwrap();
    // SAFETY: no other thread uses `s`.
    let name = unsafe { s.share_name() }.unwrap();
    assert_eq!(Storage::open_shared(&name).unwrap().nbytes(), 0);
    let gone = CString::new(format!("/tessera-{:08x}-unknown", std::process::id())).unwrap();
    let e = Storage::open_shared(&gone).unwrap_err();
    assert!(e.message().contains("no shared-memory segment"), "{e}");
    let e = Storage::open_shared(c"/a/b").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[cfg(windows)]
#[test]
fn descriptors_are_refused_naming_the_platform() {
    let s = filled(8);
    // SAFETY: no other thread uses `s`.
    let e = unsafe { s.share_memory() }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.message().contains("Windows") && e.message().contains("share_memory"),
        "{e}"
    );
    // SAFETY: no other thread uses `s`.
    unsafe { s.share_name() }.unwrap();
    let e = s.share_fd().unwrap_err();
    assert!(e.message().contains("share_fd"), "{e}");
    assert!(Storage::from_fd(3, 0).is_err());
}

/// This test binary run again as a child: it opens the name the parent
/// made, checks byte 5 and writes 77 at byte 6.
#[test]
fn another_process_sees_and_writes_the_bytes() {
    if let Ok(name) = std::env::var(CHILD) {
        let t = Storage::open_shared(&CString::new(name).unwrap()).unwrap();
        assert_eq!(byte(&t, 5), 5);
        // SAFETY: 64 writable bytes of a shared CPU storage.
        unsafe { *(t.data() as *mut u8).add(6) = 77 };
        return;
    }
    let s = filled(64);
    // SAFETY: no other thread uses `s`.
    let name = unsafe { s.share_name() }.unwrap();
    let out = this_binary::command()
        .args([
            "--exact",
            "storage::shm::named_tests::another_process_sees_and_writes_the_bytes",
            "--nocapture",
        ])
        .env(CHILD, name.to_str().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the child: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child ran the test"
    );
    assert_eq!(byte(&s, 6), 77, "the child's write");
}
