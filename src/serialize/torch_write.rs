//! Writing the TORCH format: the zip archive torch.save writes.
//!
//! The pickle is a dict (name -> `_rebuild_tensor_v2` / `_v3` call).
//! Records, in torch.save's order, under `<archive>/`: `data.pkl` (the
//! pickle), `.format_version` ("1"), `.storage_alignment` ("64"),
//! `byteorder` ("little"), `data/<key>` (one per storage, its whole
//! bytes), `version` ("3\n"), `.data/serialization_id`; plus
//! `tessera_metadata.pkl` (a pickled dict of str) when the dict has
//! metadata. Every entry is stored (no compression) with its data aligned
//! to 64 bytes, as PyTorch's writer does, so readers can map them.

use super::dict::TensorDict;
use super::dtypes;
use super::kernel_copy;
use crate::error::{Error, Result};
use crate::pickle::{self, Value};
use crate::storage::Storage;
use crate::tensor::Tensor;
use std::io::{Seek, Write};
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

/// Alignment of every record's data (PyTorch's kFieldAlignment).
pub(crate) const ALIGNMENT: u16 = 64;

fn zip_err(e: zip::result::ZipError) -> Error {
    match e {
        zip::result::ZipError::Io(io) => crate::err!(
            Io,
            "writing the archive failed: {}",
            crate::files::reason(&io)
        ),
        other => crate::err!(Io, "writing the archive failed: {other}"),
    }
}

/// One storage to write: its key and bytes.
struct Record {
    storage: Storage,
    key: String,
}

/// The bytes of a CPU storage.
fn storage_bytes(s: &Storage) -> &[u8] {
    let n = s.nbytes();
    if n == 0 || s.data().is_null() {
        return &[];
    }
    // SAFETY: a CPU storage's data is valid for nbytes while `s` holds a
    // reference (c10's contract: no thread resizes it during the save).
    unsafe { std::slice::from_raw_parts(s.data() as *const u8, n) }
}

pub(crate) fn check_saveable(name: &str, t: &Tensor) -> Result<()> {
    crate::ensure!(
        t.device().is_cpu(),
        Device,
        "tensor '{name}' is on {}: only CPU tensors can be saved (copy it to the CPU first)",
        t.device()
    );
    // A storage shrunk under the tensor: its record would name bytes the
    // file does not hold (and safetensors would read past the memory).
    t.data_in_storage()
        .map_err(|e| e.context(format!("tensor '{name}'")))?;
    Ok(())
}

/// The pickled value of one tensor, its storage given by `storage` (a
/// memoized persistent id or a memo get).
fn tensor_value(t: &Tensor, storage: Value, v3_dtype: Option<&str>) -> Value {
    let ints = |v: &[i64]| Value::Tuple(v.iter().map(|&i| Value::Int(i)).collect());
    let mut args = vec![
        storage,
        Value::Int(t.storage_offset()),
        ints(t.sizes()),
        ints(t.strides()),
        Value::Bool(false),
        Value::call(Value::global("collections", "OrderedDict"), vec![]),
    ];
    let rebuild = match v3_dtype {
        Some(py) => {
            args.push(Value::global("torch", py));
            "_rebuild_tensor_v3"
        }
        None => "_rebuild_tensor_v2",
    };
    Value::call(Value::global("torch._utils", rebuild), args)
}

/// Writes `dict` as torch.save does, the records under `archive/`.
pub(crate) fn write<W: Write + Seek>(dict: &TensorDict, archive: &str, out: W) -> Result<W> {
    write_prepared(&prepare(dict)?, archive, out, None)
}

/// What a torch file of a dict holds, checked and pickled, before
/// anything is written: its records and pickles.
pub(crate) struct Prepared {
    records: Vec<Record>,
    pkl: Vec<u8>,
    meta_pkl: Option<Vec<u8>>,
}

/// Writes the one tensor of `dict` as torch.save writes a lone tensor
/// (the pickle's root is the tensor, not a dict; DCP's chunks), the
/// records under `archive/`.
pub(crate) fn write_lone<W: Write + Seek>(dict: &TensorDict, archive: &str, out: W) -> Result<W> {
    write_prepared(&prepare_root(dict, true)?, archive, out, None)
}

/// Checks `dict` (CPU tensors, dtypes the format holds, one dtype per
/// storage) and pickles it.
pub(crate) fn prepare(dict: &TensorDict) -> Result<Prepared> {
    prepare_root(dict, false)
}

/// [`prepare`]; with `lone`, the pickle's root is the dict's one tensor.
fn prepare_root(dict: &TensorDict, lone: bool) -> Result<Prepared> {
    let mut records: Vec<Record> = Vec::new();
    // The first tensor of each storage, to name both when dtypes differ.
    let mut first: Vec<(&str, &Tensor)> = Vec::new();
    // Storage block address -> its record (one lookup per tensor).
    let mut record_of: std::collections::HashMap<usize, usize> = Default::default();
    let mut items = Vec::with_capacity(dict.len());
    for (name, t) in dict.iter() {
        check_saveable(name, t)?;
        let dtype = t.dtype();
        let Some((py, legacy)) = dtypes::torch_names(dtype) else {
            crate::bail!(
                DType,
                "tensor '{name}' has dtype {}, which the torch format cannot hold",
                dtype.name()
            );
        };
        let storage_id = crate::refcount::Ref::as_ptr(&t.storage().0) as usize;
        let found = record_of.get(&storage_id).copied();
        let index = match found {
            Some(i) => {
                let (other, ot) = first[i];
                crate::ensure!(
                    ot.dtype() == dtype,
                    DType,
                    "tensors '{other}' ({}) and '{name}' ({}) share a storage with different dtypes: torch files keep one dtype per storage",
                    ot.dtype().name(),
                    dtype.name()
                );
                i
            }
            None => {
                record_of.insert(storage_id, records.len());
                records.push(Record {
                    storage: t.storage().clone(),
                    key: records.len().to_string(),
                });
                first.push((name, t));
                records.len() - 1
            }
        };
        let nbytes = records[index].storage.nbytes();
        let (storage_class, numel, v3) = match legacy {
            Some(class) => (class, nbytes / dtype.itemsize(), None),
            None => ("UntypedStorage", nbytes, Some(py)),
        };
        // The storage's persistent id, memoized at its first use and
        // fetched from the memo after: libtorch's unpickler shares a
        // storage between tensors only through the memo (torch.load also
        // caches by key).
        let pid = if found.is_some() {
            Value::MemoGet(index as u32)
        } else {
            Value::Memo {
                id: index as u32,
                value: Box::new(Value::PersistentId(Box::new(Value::Tuple(vec![
                    Value::str("storage"),
                    Value::global("torch", storage_class),
                    Value::str(&records[index].key),
                    Value::str("cpu"),
                    Value::Int(numel as i64),
                ])))),
            }
        };
        items.push((Value::str(name), tensor_value(t, pid, v3)));
    }
    // A plain dict, not an OrderedDict: libtorch's unpickler turns
    // `collections.OrderedDict()` into None (it only expects the empty
    // backward-hooks dict), so torch::pickle_load cannot read an
    // OrderedDict with items; torch.load reads a dict the same way and
    // Python dicts keep insertion order.
    // Values as the Python values they were (torch.load gives back
    // `global_step` as an int, a config as a dict), beside the tensors.
    for (name, v) in dict.values_iter() {
        crate::ensure!(
            dict.get(name).is_none(),
            InvalidArgument,
            "value '{name}' has the name of a tensor: expected names of no tensor"
        );
        items.push((Value::str(name), super::values::to_pickle(name, v)?));
    }
    let root = match items.pop() {
        Some((_, tensor)) if lone && items.is_empty() && dict.value_count() == 0 => tensor,
        last => {
            items.extend(last);
            Value::Dict(items)
        }
    };
    let pkl = pickle::write(&root)?;
    let meta_pkl = if dict.saved_metadata().next().is_some() {
        let meta = Value::Dict(
            dict.saved_metadata()
                .map(|(k, v)| (Value::str(k), Value::str(v)))
                .collect(),
        );
        Some(pickle::write(&meta)?)
    } else {
        None
    };
    Ok(Prepared {
        records,
        pkl,
        meta_pkl,
    })
}

/// Writes a prepared dict, the records under `archive/`. `direct` is the
/// file `out` writes to, when it is one: a record that is a read-only
/// mapping of a file is then copied from that file inside the kernel
/// (`kernel_copy`).
pub(crate) fn write_prepared<W: Write + Seek>(
    p: &Prepared,
    archive: &str,
    out: W,
    direct: Option<&std::fs::File>,
) -> Result<W> {
    let mut zip = zip::ZipWriter::new(QuietAfterError::new(out));
    let io = |name: &str, e: std::io::Error| {
        crate::err!(
            Io,
            "writing record {name} failed: {}",
            crate::files::reason(&e)
        )
    };
    let mut put = |name: &str, bytes: &[u8], storage: Option<&Storage>| -> Result<()> {
        let path = format!("{archive}/{name}");
        let large = bytes.len() as u64 >= u32::MAX as u64;
        // Bytes a read-only mapping of a file holds are read from the
        // file, never from the mapping (kernel_copy: it may have shrunk).
        let src = storage.and_then(|s| kernel_copy::source(s, 0, bytes.len()));
        let len = bytes.len() as u64;
        let Some((dst, src)) = direct
            .zip(src)
            .filter(|_| kernel_copy::Src::worth_kernel(bytes.len()))
        else {
            zip.start_file(path, options(large)).map_err(zip_err)?;
            return match src {
                Some(src) => kernel_copy::write_from(&src, len, &mut zip, &mut |_| {}),
                None => zip.write_all(bytes),
            }
            .map_err(|e| io(name, e));
        };
        start_congruent(&mut zip, &path, large, dst, src.offset).map_err(|e| match e {
            Start::Zip(e) => zip_err(e),
            Start::Io(e) => io(name, e),
        })?;
        let crc32 = kernel_copy::copy(&src, len, dst, true).map_err(|e| io(name, e))?;
        // SAFETY: the entry's bytes went into the file `zip` writes to, at
        // its position, by the copy: len of them, whose CRC-32 (read back
        // from that file) is crc32. The zip writer reads the position back
        // from the file when it finishes the entry.
        unsafe { zip.set_file_metadata(len, crc32) }.map_err(zip_err)
    };
    put("data.pkl", &p.pkl, None)?;
    put(".format_version", b"1", None)?;
    put(".storage_alignment", b"64", None)?;
    put("byteorder", b"little", None)?;
    for r in &p.records {
        let name = format!("data/{}", r.key);
        put(&name, storage_bytes(&r.storage), Some(&r.storage))?;
    }
    if let Some(meta) = &p.meta_pkl {
        put("tessera_metadata.pkl", meta, None)?;
    }
    put("version", b"3\n", None)?;
    put(
        ".data/serialization_id",
        b"0000000000000000000000000000000000000000",
        None,
    )?;
    zip.finish().map(|w| w.inner).map_err(zip_err)
}

/// A stored entry's options: data aligned to [`ALIGNMENT`].
fn options(large: bool) -> SimpleFileOptions {
    SimpleFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .with_alignment(ALIGNMENT)
        .large_file(large)
}

/// The page size that record copies are congruent to.
const PAGE: u64 = 4096;

/// What starting an entry met.
enum Start {
    Zip(zip::result::ZipError),
    Io(std::io::Error),
}

/// Starts the entry `path`, whose data the kernel copies from byte
/// `offset` of a file, so that its data starts at the same offset
/// within a page of `dst` (the file `zip` writes to) as in the source,
/// when `offset` is a multiple of [`ALIGNMENT`] (so the data stays
/// aligned): the kernel then copies whole pages (1 GiB: 340 ms against
/// 470 ms at another offset within the page, measured). A local-header
/// extra field of zeros (APPNOTE's 0xa11e, alignment padding) moves the
/// data; where its length is found by starting the entry once without
/// it and reading where its data would start. Otherwise the usual
/// [`ALIGNMENT`]. Either way the local header is flushed to `dst`, so
/// the copy lands after it.
fn start_congruent<W: Write + Seek>(
    zip: &mut zip::ZipWriter<W>,
    path: &str,
    large: bool,
    dst: &std::fs::File,
    offset: u64,
) -> std::result::Result<(), Start> {
    use std::io::Seek as _;
    if offset % ALIGNMENT as u64 != 0 {
        zip.start_file(path, options(large)).map_err(Start::Zip)?;
        return zip.flush().map_err(Start::Io);
    }
    let bare = options(large).with_alignment(1);
    zip.start_file(path, bare).map_err(Start::Zip)?;
    zip.flush().map_err(Start::Io)?;
    let natural = (&*dst).stream_position().map_err(Start::Io)?;
    let mut pad = (offset % PAGE + PAGE - natural % PAGE) % PAGE;
    if pad == 0 {
        return Ok(());
    }
    if pad < 6 {
        pad += PAGE;
    }
    zip.abort_file().map_err(Start::Zip)?;
    let mut padded = zip::write::FullFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .with_alignment(1)
        .large_file(large);
    let mut body = vec![0u8; pad as usize - 4];
    body[..2].copy_from_slice(&ALIGNMENT.to_le_bytes());
    padded
        .add_extra_data(0xa11e, body, false)
        .map_err(Start::Zip)?;
    zip.start_file(path, padded).map_err(Start::Zip)?;
    zip.flush().map_err(Start::Io)
}

/// The archive's output: after its first error every write and seek is
/// dropped silently (positions still move as if they happened). An error
/// is reported by the call that met it; the zip writer dropped after it
/// then finalizes into nothing instead of printing "failed to finalize
/// archive" to stderr (the caller discards the output).
struct QuietAfterError<W> {
    inner: W,
    failed: bool,
    /// The position and the end of the output, as the zip writer sees it.
    pos: u64,
    end: u64,
}

impl<W> QuietAfterError<W> {
    fn new(inner: W) -> Self {
        QuietAfterError {
            inner,
            failed: false,
            pos: 0,
            end: 0,
        }
    }

    fn moved(&mut self, pos: u64) -> u64 {
        self.pos = pos;
        self.end = self.end.max(pos);
        pos
    }
}

impl<W: Write> Write for QuietAfterError<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.failed {
            self.moved(self.pos + buf.len() as u64);
            return Ok(buf.len());
        }
        let n = self.inner.write(buf).inspect_err(|_| self.failed = true)?;
        self.moved(self.pos + n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.failed {
            return Ok(());
        }
        self.inner.flush().inspect_err(|_| self.failed = true)
    }
}

impl<W: Seek> Seek for QuietAfterError<W> {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        if self.failed {
            let to = match pos {
                std::io::SeekFrom::Start(n) => n as i128,
                std::io::SeekFrom::Current(d) => self.pos as i128 + d as i128,
                std::io::SeekFrom::End(d) => self.end as i128 + d as i128,
            };
            return Ok(self.moved(to.clamp(0, u64::MAX as i128) as u64));
        }
        let to = self.inner.seek(pos).inspect_err(|_| self.failed = true)?;
        Ok(self.moved(to))
    }
}
