use super::*;
#[cfg_attr(not(unix), allow(unused_imports))]
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-files-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir(&d).unwrap();
    d
}

#[cfg(unix)]
fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn entries(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[cfg(unix)]
#[test]
fn open_regular_refuses_a_fifo_without_blocking() {
    let d = scratch("fifo");
    let f = d.join("f");
    mkfifo(&f);
    for options in [
        OpenOptions::new().read(true).clone(),
        OpenOptions::new().write(true).clone(),
    ] {
        let e = open_regular(&f, &options, "cannot open").unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Io);
        assert!(e.message().contains("FIFO"), "{}", e.message());
        assert!(
            e.message().contains(&*f.to_string_lossy()),
            "{}",
            e.message()
        );
    }
    let e = open_regular(&d, OpenOptions::new().read(true), "cannot open").unwrap_err();
    assert!(
        e.message().contains("a directory, not a regular file"),
        "{}",
        e.message()
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn replace_file_keeps_the_destination_on_error_and_leaves_no_temp() {
    let d = scratch("replace");
    let f = d.join("x.bin");
    std::fs::write(&f, b"old").unwrap();
    let e = replace_file(&f, false, "the test", |file, _| {
        std::io::Write::write_all(file, b"partial").unwrap();
        Err(crate::err!(DType, "refused"))
    })
    .unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::DType);
    assert_eq!(std::fs::read(&f).unwrap(), b"old");
    assert_eq!(entries(&d), ["x.bin"]);
    replace_file(&f, true, "the test", |file, _| {
        std::io::Write::write_all(file, b"new").map_err(|e| crate::err!(Io, "{e}"))
    })
    .unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"new");
    assert_eq!(entries(&d), ["x.bin"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[cfg(unix)]
#[test]
fn replace_file_follows_a_link_and_refuses_a_fifo() {
    let d = scratch("link");
    std::fs::write(d.join("target"), b"old").unwrap();
    std::os::unix::fs::symlink("target", d.join("link")).unwrap();
    replace_file(&d.join("link"), false, "the test", |file, _| {
        std::io::Write::write_all(file, b"new").map_err(|e| crate::err!(Io, "{e}"))
    })
    .unwrap();
    assert!(std::fs::symlink_metadata(d.join("link"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(d.join("target")).unwrap(), b"new");
    mkfifo(&d.join("fifo"));
    let e = replace_file(&d.join("fifo"), false, "the test", |_, _| Ok(())).unwrap_err();
    assert!(e.message().contains("a FIFO"), "{}", e.message());
    assert_eq!(entries(&d), ["fifo", "link", "target"]);
    std::fs::remove_dir_all(&d).unwrap();
}

// Windows names its error codes by message only (platform::fs).
#[cfg(unix)]
#[test]
fn reason_names_the_errno() {
    let e = std::io::Error::from_raw_os_error(libc::ENOSPC);
    assert!(reason(&e).contains("ENOSPC"), "{}", reason(&e));
}

/// `reserve` allocates the disk blocks (where the file system has
/// fallocate) and leaves the size 0, so a smaller write than reserved
/// leaves nothing past its end; below 1 MiB it reserves nothing.
#[cfg(unix)]
#[test]
fn reserve_allocates_blocks_and_keeps_the_size() {
    use std::os::unix::fs::MetadataExt;
    let d = scratch("reserve");
    let f = File::create(d.join("big")).unwrap();
    reserve(&f, 8 << 20).unwrap();
    let m = f.metadata().unwrap();
    assert_eq!(m.len(), 0);
    if m.blocks() == 0 {
        println!(
            "SKIPPED: the file system of {} has no fallocate",
            d.display()
        );
    } else {
        assert!(m.blocks() * 512 >= 8 << 20, "{} blocks", m.blocks());
    }
    let small = File::create(d.join("small")).unwrap();
    reserve(&small, 4096).unwrap();
    assert_eq!(small.metadata().unwrap().blocks(), 0);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A destination name of 230-255 bytes (valid: NAME_MAX is 255) is saved
/// through a short temporary name: `.NAME.tsr-tmp-PID-N` would pass the
/// limit. The long temporary name is kept where it fits.
// Windows: a path holds at most 260 characters (MAX_PATH) unless the
// program opts into long paths, so the 250-byte name fails there.
#[cfg(unix)]
#[test]
fn replace_file_saves_a_name_near_name_max() {
    let d = scratch("long");
    for len in [200, 230, 250, 255] {
        let f = d.join("n".repeat(len));
        let mut seen = None;
        replace_file(&f, false, "the test", |file, temp| {
            seen = Some(temp.file_name().unwrap().len());
            std::io::Write::write_all(file, b"new").map_err(|e| crate::err!(Io, "{e}"))
        })
        .unwrap_or_else(|e| panic!("{len} bytes: {e}"));
        assert_eq!(std::fs::read(&f).unwrap(), b"new", "{len} bytes");
        let temp_len = seen.unwrap();
        assert!(
            temp_len <= 255,
            "{len} bytes: a temporary name of {temp_len}"
        );
        // The long form where it fits, the short one where it cannot.
        match len {
            200 => assert!(temp_len > len, "{len} bytes: temp {temp_len}"),
            250 | 255 => assert!(temp_len < 40, "{len} bytes: temp {temp_len}"),
            _ => {}
        }
        // Replacing an existing file works the same.
        replace_file(&f, false, "the test", |file, _| {
            std::io::Write::write_all(file, b"again").map_err(|e| crate::err!(Io, "{e}"))
        })
        .unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"again", "{len} bytes");
    }
    assert_eq!(entries(&d).len(), 4, "{:?}", entries(&d));
    std::fs::remove_dir_all(&d).unwrap();
}
