//! The SAFETENSORS format through the `safetensors` crate: an 8-byte
//! header length, a JSON header (name -> dtype, shape, data offsets, and
//! `__metadata__` strings), then each tensor's bytes, row-major.
//!
//! Saving writes every tensor contiguously (strides are not kept), refuses
//! tensors whose bytes overlap in one storage (naming both, as
//! safetensors' save_file) and dtypes the format lacks. The crate orders
//! the tensors in the file (by dtype alignment, then name); loading gives
//! them in file order. Loading checks the header with the crate (offsets
//! in range, each tensor's bytes starting where the one before ends, so
//! none overlap, sizes matching shapes: `safetensors_header`) and names
//! what is wrong.

use super::dict::TensorDict;
use super::dtypes;
use super::kernel_copy;
use super::source::Source;
use super::torch_write::check_saveable;
use crate::error::Result;
use crate::tensor::{layout, Tensor};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

pub(crate) struct TensorBytes<'a> {
    dtype: safetensors::Dtype,
    shape: Vec<usize>,
    data: Cow<'a, [u8]>,
    /// The storage and byte offset `data` borrows from (a contiguous
    /// tensor), for `kernel_copy`.
    source: Option<(&'a crate::storage::Storage, usize)>,
}

impl safetensors::View for &TensorBytes<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// The bytes of `t` in row-major order (borrowed when it is contiguous).
pub fn row_major(t: &Tensor) -> Cow<'_, [u8]> {
    let item = t.itemsize();
    let n = t.numel() as usize;
    if n == 0 {
        return Cow::Borrowed(&[]);
    }
    let base = t.data_ptr() as *const u8;
    if t.is_contiguous(crate::tensor::MemoryFormat::Contiguous) {
        // SAFETY: a contiguous CPU tensor's n elements start at data_ptr
        // and lie in its storage (checked when the tensor was made).
        return Cow::Borrowed(unsafe { std::slice::from_raw_parts(base, n * item) });
    }
    let (sizes, strides) = (t.sizes(), t.strides());
    let mut out = Vec::with_capacity(n * item);
    let mut index = vec![0i64; sizes.len()];
    for _ in 0..n {
        let off: i64 = index.iter().zip(strides).map(|(i, s)| i * s).sum();
        // SAFETY: every index is within sizes, so the element lies in the
        // tensor's storage (checked when the tensor was made).
        let elem =
            unsafe { std::slice::from_raw_parts(base.offset(off as isize * item as isize), item) };
        out.extend_from_slice(elem);
        for d in (0..sizes.len()).rev() {
            index[d] += 1;
            if index[d] < sizes[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Cow::Owned(out)
}

/// The byte range of `t` in its storage (empty tensors: none).
fn byte_range(t: &Tensor) -> Option<(usize, usize)> {
    let end =
        layout::storage_nbytes_needed(t.sizes(), t.strides(), t.storage_offset(), t.itemsize())
            .ok()?;
    let start = t.storage_offset() as usize * t.itemsize();
    (end > start).then_some((start, end))
}

/// The tensors of a dict as safetensors views, with its metadata.
pub(crate) type Prepared<'a> = (
    Vec<(&'a str, TensorBytes<'a>)>,
    Option<HashMap<String, String>>,
);

/// The tensors of `dict` as safetensors views, and its metadata, after
/// the checks (CPU, dtypes, no overlapping tensors).
pub(crate) fn prepare(dict: &TensorDict) -> Result<Prepared<'_>> {
    let entries: Vec<(&str, &Tensor)> = dict.iter().collect();
    // Byte ranges by storage (`super::ranges`: one sort, not a
    // comparison of every pair), and whose tensor each is.
    let mut ranges = Vec::new();
    let mut owners = Vec::new();
    for (i, (name, t)) in entries.iter().enumerate() {
        check_saveable(name, t)?;
        if let Some((start, end)) = byte_range(t) {
            let storage = crate::refcount::Ref::as_ptr(&t.storage().0) as usize;
            ranges.push((storage, start as u64, end as u64));
            owners.push(i);
        }
    }
    if let Some((x, y)) = super::ranges::first_overlap(&ranges) {
        let (a, b) = (owners[x].min(owners[y]), owners[x].max(owners[y]));
        crate::bail!(
            InvalidArgument,
            "tensors '{}' and '{}' share memory: safetensors stores each tensor's own bytes (save a clone of one)",
            entries[a].0,
            entries[b].0
        );
    }
    let mut tensors = Vec::with_capacity(entries.len());
    for (name, t) in &entries {
        let dtype = dtypes::safetensors_dtype(t.dtype()).ok_or_else(|| {
            crate::err!(
                DType,
                "tensor '{name}' has dtype {}, which safetensors cannot hold",
                t.dtype().name()
            )
        })?;
        tensors.push((
            *name,
            TensorBytes {
                dtype,
                shape: t.sizes().iter().map(|&s| s as usize).collect(),
                data: row_major(t),
                source: t
                    .is_contiguous(crate::tensor::MemoryFormat::Contiguous)
                    .then(|| (t.storage(), t.storage_offset() as usize * t.itemsize())),
            },
        ));
    }
    let mut meta: HashMap<String, String> = dict
        .saved_metadata()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    if let Some(values) = dict.values_text(|_| true) {
        meta.insert(super::values::VALUES_KEY.to_owned(), values);
    }
    Ok((tensors, (!meta.is_empty()).then_some(meta)))
}

/// The file's bytes for `dict`.
pub(crate) fn write(dict: &TensorDict) -> Result<Vec<u8>> {
    let (tensors, meta) = prepare(dict)?;
    safetensors::serialize(tensors.iter().map(|(n, t)| (*n, t)), meta)
        .map_err(|e| crate::err!(InvalidArgument, "safetensors: {e}"))
}

/// A tensor's header entry without its bytes: the crate makes the header
/// from it, tessera writes the bytes into its own file.
struct HeaderOnly<'a>(&'a TensorBytes<'a>);

impl safetensors::View for HeaderOnly<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        self.0.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.0.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&[])
    }
    fn data_len(&self) -> usize {
        self.0.data.len()
    }
}

/// The indices of `tensors` in the order of their data offsets in the
/// JSON `header` the crate made (it orders tensors by alignment, then
/// name); each must start where the one before ends.
fn data_order(header: &[u8], tensors: &[(&str, TensorBytes<'_>)]) -> Result<Vec<usize>> {
    let bad = || {
        crate::err!(
            Internal,
            "safetensors: the header the crate made is unreadable"
        )
    };
    let index: HashMap<&str, usize> = tensors
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (*n, i))
        .collect();
    let json: serde_json::Value = serde_json::from_slice(header).map_err(|_| bad())?;
    let mut order = Vec::with_capacity(tensors.len());
    for (name, entry) in json.as_object().ok_or_else(bad)? {
        if name == "__metadata__" {
            continue;
        }
        let begin = entry["data_offsets"][0].as_u64().ok_or_else(bad)?;
        let end = entry["data_offsets"][1].as_u64().ok_or_else(bad)?;
        order.push((begin, end, *index.get(name.as_str()).ok_or_else(bad)?));
    }
    // By byte range: an empty tensor shares its offset with the tensor
    // after it, and must come first.
    order.sort_unstable();
    let mut at = 0u64;
    for &(begin, _, i) in &order {
        crate::ensure!(
            begin == at,
            Internal,
            "safetensors: tensor '{}' at {begin}, expected {at}",
            tensors[i].0
        );
        at += tensors[i].1.data.len() as u64;
    }
    crate::ensure!(
        order.len() == tensors.len(),
        Internal,
        "safetensors: the header lists {} of {} tensors",
        order.len(),
        tensors.len()
    );
    Ok(order.into_iter().map(|(_, _, i)| i).collect())
}

/// Writes the prepared tensors into `file` (tsr_save's new file, for the
/// destination `dest`): the header the crate makes, then each tensor's
/// bytes straight from its storage, in the header's order (no copy of
/// the whole file in memory).
pub(crate) fn write_file(
    prepared: Prepared<'_>,
    file: &mut std::fs::File,
    dest: &Path,
) -> Result<()> {
    let (tensors, meta) = prepared;
    let head = safetensors::serialize(tensors.iter().map(|(n, t)| (*n, HeaderOnly(t))), meta)
        .map_err(|e| crate::err!(InvalidArgument, "safetensors: {e}"))?;
    let order = data_order(&head[8..], &tensors)?;
    let sources: Vec<_> = order
        .iter()
        .map(|&i| {
            let t = &tensors[i].1;
            t.source
                .and_then(|(storage, start)| kernel_copy::source(storage, start, t.data.len()))
        })
        .collect();
    let kernel: Vec<Option<u64>> = sources
        .iter()
        .zip(&order)
        .map(|(s, &i)| {
            s.filter(|_| kernel_copy::Src::worth_kernel(tensors[i].1.data.len()))
                .map(|s| s.offset)
        })
        .collect();
    let head = congruent_head(head, &order, &tensors, &kernel);
    let io = |e: std::io::Error| {
        crate::err!(
            Io,
            "cannot write {}: {}",
            dest.display(),
            crate::files::reason(&e)
        )
    };
    let file: &std::fs::File = file;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    w.write_all(&head).map_err(io)?;
    // Bytes a read-only mapping of a file holds are read from the file,
    // never from the mapping (kernel_copy: it may have shrunk).
    for (&i, source) in order.iter().zip(&sources) {
        let t = &tensors[i].1;
        let len = t.data.len() as u64;
        match source {
            Some(src) if kernel_copy::Src::worth_kernel(t.data.len()) => {
                w.flush().map_err(io)?;
                kernel_copy::copy(src, len, file, false).map_err(io)?;
            }
            Some(src) => kernel_copy::write_from(src, len, &mut w, &mut |_| {}).map_err(io)?,
            None => w.write_all(&t.data).map_err(io)?,
        }
    }
    w.flush().map_err(io)
}

/// `head` (the 8-byte length and the JSON header) padded with spaces, in
/// steps of 8, so that the first tensor copied from a file starts at the
/// same offset within a page as in that file (the kernel copies whole
/// pages fastest); as it was when no tensor is copied, or when its
/// source offset is not a multiple of 8 (the data stays 8-aligned).
/// `kernel`: per tensor in data order, its offset in the file it is
/// copied from by the kernel.
fn congruent_head(
    mut head: Vec<u8>,
    order: &[usize],
    tensors: &[(&str, TensorBytes<'_>)],
    kernel: &[Option<u64>],
) -> Vec<u8> {
    const PAGE: u64 = 4096;
    let Some(first) = kernel.iter().position(Option::is_some) else {
        return head;
    };
    let offset = kernel[first].expect("a source");
    let before: u64 = order[..first]
        .iter()
        .map(|&i| tensors[i].1.data.len() as u64)
        .sum();
    let at = head.len() as u64 + before;
    if offset % 8 != 0 || at % 8 != 0 {
        return head;
    }
    let pad = (offset % PAGE + PAGE - at % PAGE) % PAGE;
    head.resize(head.len() + pad as usize, b' ');
    let json_len = head.len() as u64 - 8;
    head[..8].copy_from_slice(&json_len.to_le_bytes());
    head
}

/// Reads a safetensors file from `source`: the header's parts (the one
/// reader a checkpoint handle indexes with too) over its bytes.
pub(crate) fn read(source: &Source<'_>) -> Result<TensorDict> {
    super::safetensors_header::parts(source.bytes, source.bytes.len() as u64)?
        .over_bytes(source)
        .map_err(|e| crate::err!(Format, "safetensors: {}", e.message()))
}

/// The SAFETENSORS format's entry in the format table.
pub(crate) struct SafetensorsFormat;

/// The SAFETENSORS format.
pub(crate) static SAFETENSORS: SafetensorsFormat = SafetensorsFormat;

impl super::FileFormat for SafetensorsFormat {
    fn name(&self) -> &'static str {
        "safetensors"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["safetensors"]
    }

    /// An 8-byte little-endian header length, then a JSON object that
    /// fits the file.
    fn detect(&self, bytes: &[u8]) -> bool {
        bytes.len() >= 10
            && bytes[8] == b'{'
            && u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
                <= (bytes.len() - 8) as u64
    }

    fn read(&self, source: &Source<'_>, _: super::LoadFlags) -> Result<TensorDict> {
        read(source)
    }

    fn write_bytes(&self, dict: &TensorDict) -> Result<Vec<u8>> {
        write(dict)
    }

    fn size_floor(&self, dict: &TensorDict) -> u64 {
        super::tensor_bytes(dict)
    }

    fn write_file(
        &self,
        dict: &TensorDict,
        file: &mut std::fs::File,
        _: &Path,
        dest: &Path,
    ) -> Result<()> {
        write_file(prepare(dict)?, file, dest)
    }
}
