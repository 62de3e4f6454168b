//! Fetching ranges of a checkpoint's records into fresh storages: the
//! plan's ranges cut in chunks, read by `concurrency` threads (positioned
//! reads: any thread, any order), each chunk straight into its
//! destination (CPU memory) or through a small staging buffer and the
//! destination allocator's copy (any other device). Progress is reported
//! on the calling thread after each chunk, and the report may cancel:
//! chunks not yet begun are not read, and every destination is freed.
//! A job that reads a whole record the archive gives a CRC-32 (a zip
//! entry's) has each chunk's CRC-32 computed as read (before any byte
//! swap), the chunks' combined in order at the end and compared: a
//! mismatch fails the fetch naming the file, the entry and both CRCs.

use super::ckpt_index::{Index, RecordData};
pub(crate) use super::fetch_plan::Job;
use super::fetch_plan::{Plan, Read};
use crate::device::Device;
use crate::error::Result;
use crate::storage::Storage;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

/// The chunk size when the host sets none: 8 MiB (a multiple of the
/// 2 MiB huge page, so that no two threads fault one). Measured on a
/// 2.1 GiB file of 543 tensors, 2 threads, 9 interleaved rounds: 8 MiB
/// 315 ms, 2 MiB (4 threads) 450 ms, 32 MiB (4 threads) 382 ms; 2 threads
/// 315 ms, 4 threads 360 ms, 8 threads 345 ms (docs/PERFORMANCE.md,
/// "Loading in parts").
pub(crate) const DEFAULT_CHUNK: u64 = 8 << 20;

/// One report: bytes done of the total, and the tensor a chunk finished.
pub struct Progress<'a> {
    /// Bytes read so far by this load.
    pub done: u64,
    /// Bytes this load reads in all.
    pub total: u64,
    /// The tensor whose last bytes the chunk read, if it did.
    pub finished: Option<&'a str>,
}

/// A progress callback: false cancels the fetch.
pub type ProgressFn<'a> = dyn FnMut(&Progress<'_>) -> bool + 'a;

/// How to fetch.
#[derive(Default)]
pub(crate) struct Options<'a> {
    /// Reading threads (0: the parallel-loop thread count).
    pub concurrency: usize,
    /// Bytes a read (0: [`DEFAULT_CHUNK`]; rounded up to a multiple of
    /// 16).
    pub chunk: u64,
    /// Called on the calling thread after each chunk.
    pub progress: Option<&'a mut ProgressFn<'a>>,
}

/// Fetches every job into a new storage on `device` (from the allocator
/// registered for it), in job order. Errors: the first read's error; a
/// cancel from the progress callback is `Cancelled`; nothing fetched is
/// kept on any error.
pub(crate) fn fetch(
    index: &Index,
    jobs: &[Job],
    device: Device,
    opts: Options<'_>,
) -> Result<Vec<Storage>> {
    // Whole 16-byte groups: a byte-swapped record's elements (2, 4 or 8
    // bytes) never straddle two chunks.
    // What the sources ask for when the caller sets nothing (a remote
    // source: more requests in flight than cores).
    let (want_threads, want_chunk) = index
        .sources
        .iter()
        .map(|s| s.fetch_hints())
        .fold((None, None), |(t, c), h| (t.max(h.threads), c.max(h.chunk)));
    let chunk = if opts.chunk == 0 {
        want_chunk.unwrap_or(DEFAULT_CHUNK).next_multiple_of(16)
    } else {
        opts.chunk.next_multiple_of(16)
    };
    let mut dests = Vec::with_capacity(jobs.len());
    for job in jobs {
        let len = usize::try_from(job.len).map_err(|_| {
            crate::err!(OutOfMemory, "a record of {} bytes cannot be held", job.len)
        })?;
        let s = Storage::new(len, device, true)?;
        if device.is_cpu() && len > 0 {
            super::read_file::advise_huge_pages(s.data() as *mut u8, len);
        }
        dests.push(s);
    }
    let plan = super::fetch_plan::plan(index, jobs, chunk, |job| checks_crc(index, job));
    let crcs: Vec<AtomicU32> = plan.reads.iter().map(|_| AtomicU32::new(0)).collect();
    let total: u64 = jobs.iter().map(|j| j.len).sum();
    let threads = match opts.concurrency {
        0 => want_threads.unwrap_or_else(crate::parallel::get_num_threads),
        n => n,
    }
    .clamp(1, plan.reads.len().max(1));
    let left: Vec<AtomicU64> = jobs.iter().map(|j| AtomicU64::new(j.len)).collect();
    let run = Run {
        index,
        jobs,
        dests: &dests,
        plan: &plan,
        crcs: &crcs,
        left: &left,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        error: Mutex::new(None),
    };
    let reporting = opts.progress.is_some();
    let mut progress = opts.progress;
    let mut done = 0u64;
    let mut cancelled = false;
    // Reports a finished read (and the tensors of the jobs it finished):
    // false when the host cancels.
    let mut report = |len: u64, finished: &[usize]| -> bool {
        done += len;
        let Some(cb) = progress.as_mut() else {
            return true;
        };
        let mut names: Vec<Option<&str>> = finished
            .iter()
            .flat_map(|&j| &jobs[j].entries)
            .map(|&e| Some(index.entries[e].name.as_str()))
            .collect();
        if names.is_empty() {
            names.push(None);
        }
        names.into_iter().all(|finished| {
            cb(&Progress {
                done,
                total,
                finished,
            })
        })
    };
    if !reporting && threads > 1 {
        // No reports to make: the calling thread reads too, beside
        // threads - 1 others.
        std::thread::scope(|s| {
            for _ in 1..threads {
                let run = &run;
                s.spawn(move || run.drain());
            }
            run.drain();
        });
    } else if threads == 1 {
        let mut staging = Vec::new();
        while let Some((len, finished)) = run.next_read(&mut staging) {
            if !report(len, finished) {
                cancelled = true;
                run.stop.store(true, Ordering::Relaxed);
            }
        }
    } else {
        let (tx, rx) = mpsc::channel::<(u64, &[usize])>();
        std::thread::scope(|s| {
            for _ in 0..threads {
                let tx = tx.clone();
                let run = &run;
                s.spawn(move || {
                    let mut staging = Vec::new();
                    while let Some(msg) = run.next_read(&mut staging) {
                        let _ = tx.send(msg);
                    }
                });
            }
            drop(tx);
            for (len, finished) in rx {
                if !cancelled && !report(len, finished) {
                    cancelled = true;
                    run.stop.store(true, Ordering::Relaxed);
                }
            }
        });
    }
    if let Some(e) = run.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    crate::ensure!(
        !cancelled,
        Cancelled,
        "the load was cancelled by its progress callback after {done} of {total} bytes"
    );
    for (j, job) in jobs.iter().enumerate() {
        let parts = plan.parts[j].clone();
        check_crc(index, job, &plan.reads[parts.clone()], &crcs[parts])?;
    }
    Ok(dests)
}

/// Whether `job` reads the whole of a range record that has a CRC-32.
fn checks_crc(index: &Index, job: &Job) -> bool {
    let record = &index.records[job.record];
    matches!(record.data, RecordData::Range { .. })
        && record.crc.is_some()
        && job.start == 0
        && job.len == record.len
}

/// Refuses a whole record whose chunks' CRC-32s (`crcs`, of `chunks`,
/// in order) do not combine to the one its archive gives.
fn check_crc(index: &Index, job: &Job, parts: &[Read], crcs: &[AtomicU32]) -> Result<()> {
    // A joined job's CRC-32 was checked as it was read.
    if !checks_crc(index, job) || parts.is_empty() {
        return Ok(());
    }
    let mut all = crc32fast::Hasher::new();
    for (part, crc) in parts.iter().zip(crcs) {
        if let Read::Part { len, .. } = *part {
            all.combine(&crc32fast::Hasher::new_with_initial_len(
                crc.load(Ordering::Relaxed),
                len,
            ));
        }
    }
    check_record_crc(index, job.record, &all)
}

/// Refuses record `record` when `bytes`, the hash of all its bytes as
/// read, does not give (after the entry's bytes before it) the CRC-32
/// its archive gives; nothing for a record without one.
pub(crate) fn check_record_crc(
    index: &Index,
    record: usize,
    bytes: &crc32fast::Hasher,
) -> Result<()> {
    let record = &index.records[record];
    let (Some(want), RecordData::Range { source, .. }) = (&record.crc, &record.data) else {
        return Ok(());
    };
    let mut all = want.prefix.clone();
    all.combine(bytes);
    let got = all.finalize();
    crate::ensure!(
        got == want.expected,
        Format,
        "{}: record '{}': CRC-32 {got:#010x} of its bytes as read, the archive says {:#010x}: \
         the record is damaged",
        index.sources[*source].name(),
        want.entry,
        want.expected
    );
    Ok(())
}

/// The state the reading threads share.
struct Run<'a> {
    index: &'a Index,
    jobs: &'a [Job],
    dests: &'a [Storage],
    plan: &'a Plan,
    /// Per read: its CRC-32 once read (a part whose `crc` is set).
    crcs: &'a [AtomicU32],
    left: &'a [AtomicU64],
    next: AtomicUsize,
    stop: AtomicBool,
    error: Mutex<Option<crate::error::Error>>,
}

impl<'a> Run<'a> {
    /// Reads until nothing is left (or a stop).
    fn drain(&self) {
        let mut staging = Vec::new();
        while self.next_read(&mut staging).is_some() {}
    }

    /// Makes the next read not yet taken: its bytes, and the jobs it
    /// finished; None when none is left, or after a stop.
    fn next_read(&self, staging: &mut Vec<u8>) -> Option<(u64, &'a [usize])> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let read = self.plan.reads.get(i)?;
        let done = match *read {
            Read::Part { job, off, len, crc } => self
                .read_part(job, off, len, crc.then_some(&self.crcs[i]), staging)
                .map(|()| (len, self.left[job].fetch_sub(len, Ordering::AcqRel) == len)),
            Read::Joined { .. } => self.read_joined(read, staging).map(|len| (len, true)),
        };
        match done {
            Ok((len, last)) => Some((len, self.plan.finished(read, last))),
            Err(e) => {
                self.stop.store(true, Ordering::Relaxed);
                self.error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(e);
                None
            }
        }
    }

    /// Reads bytes [off, off + len) of job `job` (their CRC-32 into `crc`
    /// where given).
    fn read_part(
        &self,
        job: usize,
        off: u64,
        len: u64,
        crc: Option<&AtomicU32>,
        staging: &mut Vec<u8>,
    ) -> Result<()> {
        let dest = &self.dests[job];
        let job = &self.jobs[job];
        let at = job.start + off;
        let len = len as usize;
        let dst = (dest.data() as *mut u8).wrapping_add(off as usize);
        let record = &self.index.records[job.record];
        if dest.device().is_cpu() {
            // SAFETY: dest is a fresh CPU storage of job.len bytes that
            // only this fetch holds; the parts of one job are disjoint byte
            // ranges within it, each read by one thread.
            let out = unsafe { std::slice::from_raw_parts_mut(dst, len) };
            return read_record(self.index, job.record, at, out, crc);
        }
        let src: &[u8] = match &record.data {
            RecordData::Resident(s) => resident(s, at, len)?,
            _ => {
                staging.resize(len, 0);
                read_record(self.index, job.record, at, staging, crc)?;
                staging
            }
        };
        copy_out(dest, off, src)
    }

    /// Makes joined read `read`: its span into `staging`, then each job's
    /// bytes checked (a whole record's CRC-32), made native and copied
    /// into its storage. The jobs' bytes (gaps not counted).
    fn read_joined(&self, read: &Read, staging: &mut Vec<u8>) -> Result<u64> {
        let Read::Joined {
            source,
            offset,
            len,
            ..
        } = *read
        else {
            return Ok(0);
        };
        staging.resize(len as usize, 0);
        self.index.sources[source].read_at(offset, staging)?;
        let mut bytes = 0;
        for &j in self.plan.finished(read, true) {
            let job = &self.jobs[j];
            let RecordData::Range { offset: at, .. } = self.index.records[job.record].data else {
                crate::bail!(Internal, "a joined job of a record that is no range");
            };
            let from = (at + job.start - offset) as usize;
            let mine = &mut staging[from..from + job.len as usize];
            if checks_crc(self.index, job) {
                let mut hash = crc32fast::Hasher::new();
                hash.update(mine);
                check_record_crc(self.index, job.record, &hash)?;
            }
            swap(mine, self.index.records[job.record].swap);
            copy_out(&self.dests[j], 0, mine)?;
            bytes += job.len;
        }
        Ok(bytes)
    }
}

/// `src` into bytes [off, off + src.len()) of `dest`, a fresh storage
/// this fetch holds (through its allocator off the CPU).
fn copy_out(dest: &Storage, off: u64, src: &[u8]) -> Result<()> {
    let len = src.len();
    crate::ensure!(
        off.checked_add(len as u64)
            .is_some_and(|e| e <= dest.nbytes() as u64),
        Internal,
        "bytes [{off}, +{len}) of a fetched storage of {} bytes",
        dest.nbytes()
    );
    if len == 0 {
        return Ok(());
    }
    let dst = (dest.data() as *mut u8).wrapping_add(off as usize);
    if dest.device().is_cpu() {
        // SAFETY: dst is len bytes inside dest's CPU allocation (checked
        // above) that only this fetch writes, at a range no other read
        // writes; src is other memory (a staging buffer or a record).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, len) };
        return Ok(());
    }
    let alloc = dest.allocator().ok_or_else(|| {
        crate::err!(
            Internal,
            "a fetched storage on {} has no allocator",
            dest.device()
        )
    })?;
    // SAFETY: dst is len bytes inside dest's allocation (checked above),
    // src len bytes of host memory; they are distinct allocations.
    unsafe { alloc.copy_data(dst.cast(), src.as_ptr().cast(), len) }
}

/// Bytes [at, at + out.len()) of record `record` of `index` into `out`,
/// swapped where the record is stored big-endian.
fn read_record(
    index: &Index,
    record: usize,
    at: u64,
    out: &mut [u8],
    crc: Option<&AtomicU32>,
) -> Result<()> {
    let record = &index.records[record];
    match &record.data {
        RecordData::Range { source, offset } => {
            index.sources[*source].read_at(offset + at, out)?;
        }
        RecordData::Resident(s) => out.copy_from_slice(resident(s, at, out.len())?),
        RecordData::Pieces(pieces) => {
            let end = at + out.len() as u64;
            let first = pieces.partition_point(|p| p.at + p.len <= at);
            for p in pieces[first..].iter().take_while(|p| p.at < end) {
                let (lo, hi) = (p.at.max(at), (p.at + p.len).min(end));
                let dst = &mut out[(lo - at) as usize..(hi - at) as usize];
                index.sources[p.source].read_at(p.offset + (lo - p.at), dst)?;
            }
        }
    }
    // The bytes as stored: before any swap.
    if let Some(crc) = crc {
        crc.store(crc32fast::hash(out), Ordering::Relaxed);
    }
    swap(out, record.swap);
    Ok(())
}

/// Reverses every `width`-byte group of `bytes` (big-endian data made
/// native; a chunk starts and ends on a group: chunks and ranges are
/// whole elements); nothing for a width of 0 or 1.
fn swap(bytes: &mut [u8], width: usize) {
    if width > 1 {
        bytes.chunks_exact_mut(width).for_each(<[u8]>::reverse);
    }
}

/// Bytes [at, at + len) of a resident record's CPU storage.
fn resident(s: &Storage, at: u64, len: usize) -> Result<&[u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    crate::ensure!(
        at.checked_add(len as u64)
            .is_some_and(|e| e <= s.nbytes() as u64)
            && !s.data().is_null(),
        Internal,
        "bytes [{at}, +{len}) of a resident record of {} bytes",
        s.nbytes()
    );
    // SAFETY: a resident record is a CPU storage the index holds and
    // nothing writes (a copy the reader made); [at, at + len) lies within
    // its nbytes (checked above).
    Ok(unsafe { std::slice::from_raw_parts((s.data() as *const u8).add(at as usize), len) })
}
