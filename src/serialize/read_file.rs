//! Reading a whole file into a fresh storage for copy loading.
//!
//! The cost of a copy load on Linux is mostly the kernel's: new pages are
//! zeroed before the file's bytes are copied into them (about 40 ms per
//! GiB with 2 MiB pages, and about 1 us per 4 KiB page without them on
//! the VM of docs/PERFORMANCE.md). So the buffer is advised for
//! transparent huge pages, and a file over 64 MiB is read by the
//! parallel-loop threads ([`crate::parallel`]), each with `pread` into
//! its own 2 MiB aligned part, so that the zeroing and the copying of the
//! parts run on every core.

use super::io_err;
use crate::device::Device;
use crate::error::Result;
use crate::storage::Storage;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The unit the buffer is split in: a transparent huge page, so that no
/// two threads fault the same huge page.
const UNIT: usize = 2 << 20;
/// A file is split in at most one part per `MIN_PART` bytes begun, so
/// files up to this size are read by the calling thread alone (a
/// thread's wake-up is not worth less).
const MIN_PART: usize = 64 << 20;

/// Reads the opened file (`path` for messages) into a fresh storage
/// from the CPU allocator.
pub(super) fn read_file(file: File, path: &Path) -> Result<Storage> {
    let mut all = read_opened(&[(file, path.to_path_buf())])?;
    Ok(all.pop().expect("one file read"))
}

/// Reads each opened file (`path` for messages) into a fresh storage
/// from the CPU allocator, all of them at once: their parts are read in
/// parallel across the files (a checkpoint's shards), so that a few big
/// files and many small ones keep every thread busy alike.
pub(super) fn read_opened(files: &[(File, PathBuf)]) -> Result<Vec<Storage>> {
    let mut storages = Vec::with_capacity(files.len());
    for (file, path) in files {
        let meta = file
            .metadata()
            .map_err(|e| io_err(path, "cannot stat", e))?;
        let len = usize::try_from(meta.len())
            .map_err(|_| crate::err!(OutOfMemory, "{} is too large to load", path.display()))?;
        let s = Storage::new(len, Device::CPU, false)?;
        if len > 0 {
            advise_huge_pages(s.data() as *mut u8, len);
        }
        storages.push(s);
    }
    let mut bufs: Vec<(&File, &mut [u8])> = files
        .iter()
        .zip(&storages)
        .map(|((file, _), s)| {
            let buf: &mut [u8] = if s.nbytes() == 0 {
                &mut []
            } else {
                // SAFETY: s is a fresh CPU storage of nbytes bytes that
                // nothing else holds yet; each gets one slice.
                unsafe { std::slice::from_raw_parts_mut(s.data() as *mut u8, s.nbytes()) }
            };
            (file, buf)
        })
        .collect();
    read_all(&mut bufs, UNIT, MIN_PART).map_err(|(i, e)| io_err(&files[i].1, "cannot read", e))?;
    Ok(storages)
}

/// Fills `buf` with the file's bytes from offset 0 ([`read_all`] of one
/// file).
#[cfg(test)]
fn read_parts(file: &File, buf: &mut [u8], unit: usize, min_part: usize) -> std::io::Result<()> {
    read_all(&mut [(file, buf)], unit, min_part).map_err(|(_, e)| e)
}

/// Fills each buffer with its file's bytes from offset 0, split in parts
/// of whole `unit`s read in parallel: the units of all files in one
/// range, cut in one part per parallel-loop thread and at most one per
/// `min_part` bytes begun (up to `min_part` bytes in all, or loops with
/// one thread: one part, on the calling thread). The first error wins,
/// with its file's index; a file shorter than its buffer is an
/// UnexpectedEof error.
fn read_all(
    bufs: &mut [(&File, &mut [u8])],
    unit: usize,
    min_part: usize,
) -> std::result::Result<(), (usize, std::io::Error)> {
    // The first unit of each file in the one range, and the range's end.
    let mut first = Vec::with_capacity(bufs.len() + 1);
    let mut units = 0i64;
    for (_, buf) in bufs.iter() {
        first.push(units);
        units += buf.len().div_ceil(unit) as i64;
    }
    first.push(units);
    let grain = (min_part / unit).max(1) as i64;
    let parts: Vec<(&File, usize, usize)> = bufs
        .iter_mut()
        .map(|(f, b)| (*f, b.as_mut_ptr() as usize, b.len()))
        .collect();
    let first_error = std::sync::Mutex::new(None);
    crate::parallel::parallel_for(0, units, grain, |b, e| {
        // The files this range of units touches.
        let mut i = first.partition_point(|&u| u <= b) - 1;
        while i < parts.len() && first[i] < e {
            let (file, base, len) = parts[i];
            let lo = (b.max(first[i]) - first[i]) as usize * unit;
            let hi = ((e.min(first[i + 1]) - first[i]) as usize * unit).min(len);
            if lo < hi {
                // SAFETY: parallel_for hands out disjoint unit ranges of
                // [0, units), and unit u of file i is bytes [u*unit,
                // (u+1)*unit) of its buffer only, so the byte ranges are
                // disjoint parts of the buffers, borrowed mutably for the
                // whole call.
                let part =
                    unsafe { std::slice::from_raw_parts_mut((base + lo) as *mut u8, hi - lo) };
                if let Err(err) = read_at(file, part, lo) {
                    first_error
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert((i, err));
                }
            }
            i += 1;
        }
    });
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

fn read_at(file: &File, part: &mut [u8], offset: usize) -> std::io::Result<()> {
    crate::platform::fs::read_exact_at(file, part, offset as u64)
}

/// Advises transparent huge pages for the 2 MiB-aligned part of a fresh
/// buffer the file is about to be read into: reading 1 GiB into fresh
/// memory otherwise takes a page fault per 4 KiB (measured: 488 ms
/// against 83 ms for a 1 GiB file in the page cache).
pub(super) fn advise_huge_pages(data: *mut u8, len: usize) {
    let start = (data as usize).next_multiple_of(UNIT);
    let end = (data as usize + len) & !(UNIT - 1);
    if end > start {
        // SAFETY: [start, end) lies inside the caller's fresh allocation.
        unsafe { crate::platform::heap::advise_huge_pages(start as *mut u8, end - start) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(tag: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "tessera-read-parts-{tag}-{}.bin",
            std::process::id()
        ));
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(bytes))
            .expect("writing a temporary file");
        path
    }

    #[test]
    fn read_parts_fills_every_part_in_place() {
        // 5 units of 4 KiB and a tail of 123 bytes, on 2 threads: two
        // parts (min_part 1 unit or 2 units) and one (1 MiB).
        crate::parallel::set_num_threads(2);
        let bytes: Vec<u8> = (0..5 * 4096 + 123)
            .map(|i| (i * 7 + i / 4096) as u8)
            .collect();
        let path = temp_file("fill", &bytes);
        let file = File::open(&path).unwrap();
        for min_part in [1, 4096, 8192, 1 << 20] {
            let mut buf = vec![0u8; bytes.len()];
            read_parts(&file, &mut buf, 4096, min_part).unwrap();
            assert!(buf == bytes, "min_part {min_part}: the bytes differ");
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn read_parts_of_a_short_file_is_an_eof_error() {
        let path = temp_file("short", &[1u8; 3 * 4096]);
        let file = File::open(&path).unwrap();
        let mut buf = vec![0u8; 5 * 4096];
        let err = read_parts(&file, &mut buf, 4096, 1).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn read_all_fills_several_files_in_one_range() {
        // Files of 3 units and a tail, none, less than a unit and 6
        // units: the threads' parts cross from one file into the next.
        crate::parallel::set_num_threads(2);
        let sizes = [3 * 4096 + 17, 0, 100, 6 * 4096];
        let contents: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(f, &n)| (0..n).map(|i| (i * 13 + f * 101) as u8).collect())
            .collect();
        let paths: Vec<_> = contents
            .iter()
            .enumerate()
            .map(|(f, c)| temp_file(&format!("multi{f}"), c))
            .collect();
        let files: Vec<File> = paths.iter().map(|p| File::open(p).unwrap()).collect();
        for min_part in [1, 4096, 3 * 4096, 1 << 20] {
            let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0u8; n]).collect();
            let mut parts: Vec<(&File, &mut [u8])> = files
                .iter()
                .zip(bufs.iter_mut())
                .map(|(f, b)| (f, b.as_mut_slice()))
                .collect();
            read_all(&mut parts, 4096, min_part).unwrap();
            assert!(bufs == contents, "min_part {min_part}: the bytes differ");
        }
        // A file shorter than its buffer: the error names its index.
        let mut short = vec![0u8; 200];
        let mut ok = vec![0u8; sizes[0]];
        let mut parts: Vec<(&File, &mut [u8])> =
            vec![(&files[0], &mut ok), (&files[2], &mut short)];
        let (i, e) = read_all(&mut parts, 4096, 1).unwrap_err();
        assert_eq!((i, e.kind()), (1, std::io::ErrorKind::UnexpectedEof));
        for p in paths {
            std::fs::remove_file(p).unwrap();
        }
    }

    #[test]
    fn read_file_loads_the_whole_file() {
        let bytes: Vec<u8> = (0..70_001u32).map(|i| (i % 251) as u8).collect();
        let path = temp_file("whole", &bytes);
        let file = File::open(&path).unwrap();
        let s = read_file(file, &path).unwrap();
        assert_eq!(s.nbytes(), bytes.len());
        // SAFETY: a CPU storage of nbytes bytes.
        let got = unsafe { std::slice::from_raw_parts(s.data() as *const u8, s.nbytes()) };
        assert!(got == &bytes[..]);
        std::fs::remove_file(&path).unwrap();
    }
}
