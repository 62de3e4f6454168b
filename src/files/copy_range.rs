//! Bytes copied from one file into another inside the kernel
//! (Linux's `copy_file_range`; elsewhere never: platform::fs): what a save does with a tensor whose bytes are a
//! read-only mapping of a file, instead of `write` from the mapped
//! memory, which copies every page through the process (about half the
//! system time of a 1 GiB conversion; `cp` copies this way too).

use crate::platform::fs as os;
use std::fs::File;

/// What [`copy_range`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Copied {
    /// All the bytes are in the destination, which is positioned after
    /// them.
    All,
    /// Nothing was copied: these files cannot be copied between inside
    /// the kernel (another file system, a kernel without the call, a
    /// sandbox refusing it, a file that is not a regular file). The
    /// caller writes the bytes itself.
    Unsupported,
}

/// Bytes copied since the process started (tests check that a save took
/// this path).
#[cfg(test)]
pub(crate) static COPIED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Copies `len` bytes of `src` from `offset` to `dst` at its position,
/// moving that position past them (`src`'s own position does not move).
///
/// Errors: the OS error of a copy that started and failed (ENOSPC, EIO);
/// `UnexpectedEof` when `src` ends before `offset + len` (it was
/// truncated since it was mapped).
pub(crate) fn copy_range(src: &File, offset: u64, dst: &File, len: u64) -> std::io::Result<Copied> {
    let mut off_in = i64::try_from(offset).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    let mut left = len;
    while left > 0 {
        // The kernel copies at most about 2 GiB a call; ask for 1 GiB.
        let chunk = left.min(1 << 30) as usize;
        let n = match os::copy_file_range(src, &mut off_in, dst, chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // platform::fs says which refusals mean "not between these
            // files" (EPERM and EBADF too: a seccomp filter may answer
            // EPERM for a call it does not know; writing instead then
            // meets the real error if there is one).
            Err(e) if os::copy_unsupported(&e) && left == len => return Ok(Copied::Unsupported),
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the file being copied from ended {left} bytes short of byte {}: it was \
                     truncated while it was mapped",
                    offset + len
                ),
            ));
        }
        left -= n as u64;
        #[cfg(test)]
        COPIED.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(Copied::All)
}

// Only Linux copies inside the kernel (platform::fs): elsewhere every copy
// is Unsupported and the callers' tests check the written copies.
#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("tessera-copy-range-{}-{name}", std::process::id()))
    }

    #[test]
    fn copies_a_range_at_the_destinations_position() {
        let (a, b) = (temp("a"), temp("b"));
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(&a, &bytes).unwrap();
        let src = File::open(&a).unwrap();
        let mut dst = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&b)
            .unwrap();
        dst.write_all(b"head").unwrap();
        assert_eq!(copy_range(&src, 1000, &dst, 50_000).unwrap(), Copied::All);
        dst.write_all(b"tail").unwrap();
        let mut out = Vec::new();
        dst.seek(std::io::SeekFrom::Start(0)).unwrap();
        dst.read_to_end(&mut out).unwrap();
        assert_eq!(&out[..4], b"head");
        assert_eq!(&out[4..50_004], &bytes[1000..51_000]);
        assert_eq!(&out[50_004..], b"tail");
        // The source's own position did not move.
        assert_eq!((&src).stream_position().unwrap(), 0);
        std::fs::remove_file(&a).unwrap();
        std::fs::remove_file(&b).unwrap();
    }

    #[test]
    fn a_source_shorter_than_the_range_is_an_error_naming_it() {
        let (a, b) = (temp("short-a"), temp("short-b"));
        std::fs::write(&a, [1u8; 100]).unwrap();
        let src = File::open(&a).unwrap();
        let dst = File::create(&b).unwrap();
        let e = copy_range(&src, 50, &dst, 100).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("50 bytes short of byte 150"), "{e}");
        std::fs::remove_file(&a).unwrap();
        std::fs::remove_file(&b).unwrap();
    }

    #[test]
    fn a_pipe_is_unsupported_and_nothing_is_written() {
        let b = temp("pipe-b");
        let mut fds = [0; 2];
        // SAFETY: fds is a live array of two descriptors for pipe to fill.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: pipe gave these descriptors to this test alone; each
        // File closes its own.
        let (r, w) = unsafe {
            use std::os::fd::FromRawFd;
            (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1]))
        };
        (&w).write_all(&[9u8; 64]).unwrap();
        let dst = File::create(&b).unwrap();
        // A pipe cannot be copied from at an offset.
        assert_eq!(copy_range(&r, 0, &dst, 64).unwrap(), Copied::Unsupported);
        assert_eq!(dst.metadata().unwrap().len(), 0);
        std::fs::remove_file(&b).unwrap();
    }
}
