//! A checkpoint opened once and loaded in parts ([`Checkpoint`]): its
//! index read at open, then any tensor, rows of one, or a set, fetched
//! when asked, into memory from the allocator registered for the device
//! the caller names, or into the caller's buffer. Thread-safe: loads
//! from several threads share the index and the sources (positioned
//! reads, atomic counts).

use super::byte_source::FileSource;
use super::ckpt_index::{Index, RecordData};
use super::fetch::{self, Job, Options};
use super::formats::Format;
use super::remote::RemoteSettings;
use super::source::{place_in, Source};
use super::{LoadFlags, TensorDict};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::files::Opened;
use crate::storage::Storage;
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

pub use super::fetch::{Progress, ProgressFn};

/// How to fetch a set of tensors ([`Checkpoint::load_many`]).
#[derive(Default)]
pub struct FetchOptions<'a> {
    /// Reading threads (0: the parallel-loop thread count).
    pub concurrency: usize,
    /// Bytes a read (0: 8 MiB).
    pub chunk_bytes: u64,
    /// Called on the calling thread after each chunk read; returning
    /// false cancels the load (`Cancelled`, nothing kept).
    pub progress: Option<&'a mut ProgressFn<'a>>,
}

/// A checkpoint opened for loading in parts.
pub struct Checkpoint {
    index: Index,
    flags: LoadFlags,
    /// Per source: its mapping, made at the first load under `mmap`.
    maps: Vec<OnceLock<Storage>>,
}

/// A tensor asked for: entry, first row, rows (all: 0 and sizes[0]).
#[derive(Clone, Copy)]
struct Want {
    entry: usize,
    first: i64,
    count: i64,
}

impl Checkpoint {
    /// Opens the checkpoint at `path` (a file, a shard index, a DCP
    /// directory) in `format` (Auto: told by its content), reading only
    /// its index. `flags.mmap`: loads into CPU memory view a mapping of
    /// the file where the format allows; `flags.read_only` with it: a
    /// read-only mapping and read-only tensors; `flags.skip_unknown`: as
    /// for [`super::load`].
    pub fn open(path: &Path, format: Format, flags: LoadFlags) -> Result<Checkpoint> {
        Checkpoint::open_with(path, format, flags, &RemoteSettings::default())
    }

    /// [`Checkpoint::open`] with `settings` over the environment's for a
    /// URL (its requests, S3's endpoint and credentials; a local path
    /// ignores them).
    pub fn open_with(
        path: &Path,
        format: Format,
        flags: LoadFlags,
        settings: &RemoteSettings,
    ) -> Result<Checkpoint> {
        // A URL (docs/FORMATS.md, "Remote checkpoints"): fetched, never
        // mapped.
        let flags = match super::remote::url_of(path) {
            Some(_) => LoadFlags {
                mmap: false,
                ..flags
            },
            None => flags,
        };
        let index = open_index(path, format, flags, settings).map_err(|e| {
            let shown = super::shown_path(path);
            if e.message().contains(&shown) {
                e
            } else {
                e.context(shown)
            }
        })?;
        let maps = index.sources.iter().map(|_| OnceLock::new()).collect();
        Ok(Checkpoint { index, flags, maps })
    }

    /// The format it was read as.
    pub fn format(&self) -> Format {
        self.index.format
    }

    /// The number of tensors.
    pub fn len(&self) -> usize {
        self.index.entries.len()
    }

    /// Whether it holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.index.entries.is_empty()
    }

    /// The name of tensor `i` (in the order a load gives them).
    pub fn name(&self, i: usize) -> Option<&str> {
        self.index.entries.get(i).map(|e| e.name.as_str())
    }

    /// The position of the tensor named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.index.find(name)
    }

    /// Tensor `i`'s dtype, sizes and bytes (row-major), without reading
    /// it.
    pub fn info(&self, i: usize) -> Option<(DType, &[i64], u64)> {
        let e = self.index.entries.get(i)?;
        Some((e.dtype, &e.sizes, e.nbytes()))
    }

    /// The checkpoint's metadata pairs (the skipped list included, and
    /// the values as the JSON object under `tessera.values`; a loaded
    /// dict has them as values).
    pub fn metadata(&self) -> &[(String, String)] {
        &self.index.metadata
    }

    /// The bytes read from its sources since open (the index's reads
    /// included where the format is indexed by reads: safetensors).
    pub fn bytes_read(&self) -> u64 {
        self.index.sources.iter().map(|s| s.bytes_read()).sum()
    }

    fn entry(&self, name: &str) -> Result<usize> {
        self.index.find(name).ok_or_else(|| {
            crate::err!(
                InvalidArgument,
                "no tensor named '{name}' in the checkpoint: expected one of its {} names",
                self.index.entries.len()
            )
        })
    }

    /// The tensor named `name`, in memory from the allocator registered
    /// for `device`.
    pub fn load(&self, name: &str, device: Device) -> Result<Tensor> {
        let entry = self.entry(name)?;
        let count = self.index.entries[entry]
            .sizes
            .first()
            .copied()
            .unwrap_or(1);
        let want = Want {
            entry,
            first: 0,
            count,
        };
        Ok(self
            .load_wants(&[want], device, Options::default())?
            .remove(0))
    }

    /// Rows `[start, stop)` along dim 0 of the tensor named `name`,
    /// reading only the bytes those rows span.
    pub fn load_rows(&self, name: &str, start: i64, stop: i64, device: Device) -> Result<Tensor> {
        let entry = self.entry(name)?;
        let sizes = &self.index.entries[entry].sizes;
        let Some(&rows) = sizes.first() else {
            crate::bail!(
                Shape,
                "tensor '{name}' is 0-d: rows need a tensor of at least one dim"
            );
        };
        crate::ensure!(
            0 <= start && start <= stop && stop <= rows,
            InvalidArgument,
            "rows [{start}, {stop}) of tensor '{name}' with {rows} rows: expected 0 <= start <= \
             stop <= {rows}"
        );
        let want = Want {
            entry,
            first: start,
            count: stop - start,
        };
        Ok(self
            .load_wants(&[want], device, Options::default())?
            .remove(0))
    }

    /// The tensors named in `names` (None: all, in the checkpoint's
    /// order) as a dict with the checkpoint's metadata, fetched in
    /// parallel; records several of them share are fetched once and
    /// shared again.
    pub fn load_many(
        &self,
        names: Option<&[&str]>,
        device: Device,
        opts: FetchOptions<'_>,
    ) -> Result<TensorDict> {
        let entries: Vec<usize> = match names {
            None => (0..self.index.entries.len()).collect(),
            Some(names) => {
                let mut seen = std::collections::HashSet::new();
                let mut out = Vec::with_capacity(names.len());
                for name in names {
                    crate::ensure!(
                        seen.insert(*name),
                        InvalidArgument,
                        "tensor '{name}' is asked for twice: expected each name once"
                    );
                    out.push(self.entry(name)?);
                }
                out
            }
        };
        let wants: Vec<Want> = entries
            .iter()
            .map(|&entry| Want {
                entry,
                first: 0,
                count: self.index.entries[entry]
                    .sizes
                    .first()
                    .copied()
                    .unwrap_or(1),
            })
            .collect();
        let options = Options {
            concurrency: opts.concurrency,
            chunk: opts.chunk_bytes,
            progress: opts.progress,
        };
        let tensors = self.load_wants(&wants, device, options)?;
        let mut dict = TensorDict::new();
        for (w, t) in wants.iter().zip(tensors) {
            dict.set(&self.index.entries[w.entry].name, t)?;
        }
        for (k, v) in &self.index.metadata {
            dict.set_stored_metadata(k, v)?;
        }
        Ok(dict)
    }

    /// The elements of the tensor named `name` in row-major order into
    /// `out`, which must be exactly its size: read straight into it when
    /// the file holds it row-major, no allocation.
    pub fn read_into(&self, name: &str, out: &mut [u8]) -> Result<()> {
        let i = self.entry(name)?;
        let e = &self.index.entries[i];
        crate::ensure!(
            out.len() as u64 == e.nbytes(),
            InvalidArgument,
            "a buffer of {} bytes for tensor '{name}' of {} bytes ({} {:?}): expected exactly \
             its size",
            out.len(),
            e.nbytes(),
            e.dtype.name(),
            e.sizes
        );
        let contiguous = e.strides == crate::tensor::layout::contiguous_strides(&e.sizes).to_vec();
        let record = &self.index.records[e.record];
        if let (true, 0, RecordData::Range { source, offset }) =
            (contiguous, record.swap, &record.data)
        {
            let src = &self.index.sources[*source];
            src.check_unchanged()?;
            let at = e.offset as u64 * e.dtype.itemsize() as u64;
            src.read_at(offset + at, out)?;
            if at == 0 && out.len() as u64 == record.len {
                let mut crc = crc32fast::Hasher::new();
                crc.update(out);
                fetch::check_record_crc(&self.index, e.record, &crc)?;
            }
            return src.check_unchanged();
        }
        let t = self.load(name, Device::CPU)?;
        out.copy_from_slice(&super::row_major(&t));
        Ok(())
    }

    /// Refuses a load when a source changed since open.
    fn check_sources(&self, jobs: &[Job]) -> Result<()> {
        let mut checked = vec![false; self.index.sources.len()];
        for job in jobs {
            for source in self.index.records[job.record].data.sources() {
                if !std::mem::replace(&mut checked[source], true) {
                    self.index.sources[source].check_unchanged()?;
                }
            }
        }
        Ok(())
    }

    /// The tensors `wants` asks for: one job per record (the covering
    /// range of what is asked of it), fetched or (mmap) viewed.
    fn load_wants(&self, wants: &[Want], device: Device, opts: Options<'_>) -> Result<Vec<Tensor>> {
        let mut jobs: Vec<Job> = Vec::new();
        let mut job_of_record: HashMap<usize, usize> = HashMap::new();
        let mut ranges = Vec::with_capacity(wants.len());
        for (w_i, w) in wants.iter().enumerate() {
            let e = &self.index.entries[w.entry];
            let (start, len) = e.covering(w.first, w.count);
            ranges.push((start, len));
            match job_of_record.get(&e.record) {
                Some(&j) => {
                    // A record shared by several tensors: one range over
                    // all of them, starting at a multiple of 16 bytes so
                    // that each tensor's offset is whole elements.
                    let job = &mut jobs[j];
                    let lo = job.start.min(start) / 16 * 16;
                    let hi = (job.start + job.len).max(start + len);
                    job.start = lo;
                    job.len = hi - lo;
                    job.entries.push(w_i);
                }
                None => {
                    job_of_record.insert(e.record, jobs.len());
                    jobs.push(Job {
                        record: e.record,
                        start,
                        len,
                        entries: vec![w_i],
                    });
                }
            }
        }
        // Progress names tensors by entry.
        let mut named: Vec<Job> = Vec::with_capacity(jobs.len());
        for job in &jobs {
            named.push(Job {
                record: job.record,
                start: job.start,
                len: job.len,
                entries: job.entries.iter().map(|&w| wants[w].entry).collect(),
            });
        }
        self.check_sources(&named)?;
        let storages = if self.flags.mmap && device.is_cpu() {
            self.view_or_fetch(&named, device, opts)?
        } else {
            fetch::fetch(&self.index, &named, device, opts)?
        };
        self.check_sources(&named)?;
        let mut out: Vec<Option<Tensor>> = wants.iter().map(|_| None).collect();
        for (job, storage) in jobs.iter().zip(&storages) {
            for &w_i in &job.entries {
                let w = wants[w_i];
                let e = &self.index.entries[w.entry];
                let item = e.dtype.itemsize() as u64;
                let offset = ((ranges[w_i].0 - job.start) / item) as i64;
                let mut sizes = e.sizes.clone();
                if let Some(rows) = sizes.first_mut() {
                    *rows = w.count;
                }
                let offset = place_in(job.len, 0, &e.name, offset, &sizes, &e.strides, e.dtype)?;
                let t = Tensor::from_storage(storage, offset, &sizes, Some(&e.strides), e.dtype)?;
                out[w_i] = Some(t);
            }
        }
        Ok(out
            .into_iter()
            .map(|t| t.expect("every want has a job"))
            .collect())
    }

    /// Under `mmap`: each job over a file range a view of the file's
    /// mapping (a copy where the range is not aligned for its tensors),
    /// the others fetched.
    fn view_or_fetch(
        &self,
        jobs: &[Job],
        device: Device,
        opts: Options<'_>,
    ) -> Result<Vec<Storage>> {
        let mut out: Vec<Option<Storage>> = jobs.iter().map(|_| None).collect();
        let mut rest = Vec::new();
        let mut rest_at = Vec::new();
        for (j, job) in jobs.iter().enumerate() {
            let record = &self.index.records[job.record];
            let (RecordData::Range { source, offset }, 0) = (&record.data, record.swap) else {
                rest.push(Job {
                    record: job.record,
                    start: job.start,
                    len: job.len,
                    entries: job.entries.clone(),
                });
                rest_at.push(j);
                continue;
            };
            let (source, offset) = (*source, *offset);
            let map = self.mapping(source)?;
            let bytes = super::storage_bytes(map)?;
            let item = job
                .entries
                .iter()
                .map(|&e| self.index.entries[e].dtype.itemsize())
                .max()
                .unwrap_or(1);
            let view = Source {
                bytes,
                backing: Some(map),
                direct: false,
                lazy: None,
            };
            let at = usize::try_from(offset + job.start).map_err(|_| {
                crate::err!(
                    OutOfMemory,
                    "offset {} past the address space",
                    offset + job.start
                )
            })?;
            out[j] = Some(view.record(at, job.len as usize, item)?.storage);
        }
        let fetched = fetch::fetch(&self.index, &rest, device, opts)?;
        for (j, s) in rest_at.into_iter().zip(fetched) {
            out[j] = Some(s);
        }
        Ok(out
            .into_iter()
            .map(|s| s.expect("every job placed"))
            .collect())
    }

    /// The mapping of source `i` (made once).
    fn mapping(&self, i: usize) -> Result<&Storage> {
        if let Some(m) = self.maps[i].get() {
            return Ok(m);
        }
        let src = &self.index.sources[i];
        let file = src.file().ok_or_else(|| {
            crate::err!(
                Unsupported,
                "{} cannot be mapped: it is not a file",
                src.name()
            )
        })?;
        let dup = file.try_clone().map_err(|e| {
            crate::err!(
                Io,
                "cannot map {}: {}",
                src.name(),
                crate::files::reason(&e)
            )
        })?;
        let map = super::map_file(dup, src.len(), Path::new(src.name()), self.flags.read_only)?;
        Ok(self.maps[i].get_or_init(|| map))
    }
}

/// The whole file `file` at `path` loaded into fresh memory when it can
/// be indexed by reads (`ckpt_open`: safetensors, npy, GGUF, the zip-based
/// formats, a shard index over them; `format` Auto or one of them): its
/// index, then every tensor fetched in parallel. The file back for any
/// other: the caller reads it whole. What a copy load is
/// (`serialize::load`).
pub(crate) fn load_indexed(
    file: std::fs::File,
    path: &Path,
    format: Format,
    flags: LoadFlags,
) -> Result<std::result::Result<(Format, TensorDict), std::fs::File>> {
    let source = FileSource::new(file, path)?;
    match super::ckpt_open::index_by_reads(source, path, format, flags)? {
        Ok(index) => Ok(Ok((index.format, load_all(index)?))),
        Err(source) => Ok(Err(source.into_file())),
    }
}

/// The DCP checkpoint `path` names (its directory, or its `.metadata`)
/// loaded into fresh memory through its index ([`super::dcp_index`]), when
/// `format` (Auto or DCP) allows and that way indexes it; None otherwise.
pub(crate) fn load_dcp_indexed(
    path: &Path,
    format: Format,
    flags: LoadFlags,
) -> Result<Option<TensorDict>> {
    match dcp_dir(path, format) {
        Some(dir) => super::dcp_index::index(&dir, flags)?
            .map(load_all)
            .transpose(),
        None => Ok(None),
    }
}

/// The directory of the DCP checkpoint `path` names for `format` (Auto or
/// DCP): `path` when it is a directory holding `.metadata`, the directory
/// of a path named `.metadata`.
fn dcp_dir(path: &Path, format: Format) -> Option<std::path::PathBuf> {
    use super::dcp_items::METADATA;
    if !matches!(format, Format::Auto | Format::Dcp) {
        return None;
    }
    if path.join(METADATA).is_file() {
        return Some(path.to_path_buf());
    }
    match (path.file_name(), path.parent()) {
        (Some(n), Some(dir)) if n == METADATA => Some(if dir.as_os_str().is_empty() {
            Path::new(".").to_path_buf()
        } else {
            dir.to_path_buf()
        }),
        _ => None,
    }
}

/// Every tensor of `index` fetched into fresh CPU memory.
pub(crate) fn load_all(index: Index) -> Result<TensorDict> {
    let ckpt = Checkpoint {
        maps: index.sources.iter().map(|_| OnceLock::new()).collect(),
        index,
        flags: LoadFlags::default(),
    };
    ckpt.load_many(None, Device::CPU, FetchOptions::default())
}

/// The index of the checkpoint at `path`.
fn open_index(
    path: &Path,
    format: Format,
    flags: LoadFlags,
    settings: &RemoteSettings,
) -> Result<Index> {
    if let Some(url) = super::remote::url_of(path) {
        return super::remote::open_index(url, format, flags, settings);
    }
    if let Some(dir) = dcp_dir(path, format) {
        if let Some(index) = super::dcp_index::index(&dir, flags)? {
            return Ok(index);
        }
    } else if let Opened::File(file, _) = crate::files::open_for_reading(path, "cannot open")? {
        if let Ok(index) =
            super::ckpt_open::index_by_reads(FileSource::new(file, path)?, path, format, flags)?
        {
            return Ok(index);
        }
    }
    let mapped = LoadFlags {
        mmap: true,
        read_only: true,
        skip_unknown: flags.skip_unknown,
    };
    let (format, dict) = super::load_as(path, format, mapped)?;
    Index::from_mapped(format, &dict)
}
