//! GGUF, llama.cpp's format (versions 3 and 2, either byte order): the magic
//! `GGUF`, a version, the tensor and key-value counts, the key-value
//! metadata, the tensor infos (name, dims in ggml's order, ggml type,
//! offset), then the tensor data from the first multiple of the alignment
//! (`general.alignment`, default 32).
//!
//! Loading: each key-value pair becomes a metadata entry (strings as
//! they are, numbers and booleans as text, arrays as JSON), with every
//! key's GGUF type in `gguf.types` (a JSON object) so the dict saves
//! back with its types. Dims are reversed into c10's order (ggml's ne[0]
//! is the innermost). F32, F16, BF16, F64, I8, I16, I32 and I64 tensors
//! load as tensors of their dtype (the dtype table's gguf column); any
//! other ggml type (Q4_0, Q8_0, the K-quants, IQ*, ...) loads as a uint8
//! tensor of its raw blocks, shaped `[..., ne[1], bytes per row]`, with
//! `NAME.ggml_type` (the type's name) and `NAME.ggml_shape` (the logical
//! shape in c10's order, JSON) in the metadata. Tensors view the file's
//! bytes (a mapping under TSR_LOAD_MMAP) where aligned for their dtype.
//!
//! Every count and length is checked against the bytes left before
//! anything is allocated for it, every size product and offset with
//! checked arithmetic. Tensors whose data share a byte are refused naming
//! both (ggml refuses them too), as is a key `NAME.ggml_type` or
//! `NAME.ggml_shape` beside a tensor NAME (it would collide with the
//! metadata above).

use super::ckpt_parts::{Entry, Parts, RecordData, RecordSpec};
use super::dict::TensorDict;
use super::gguf_types::{
    ggml_type, FullType, GgmlType, ValueType, ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGML_SHAPE_SUFFIX,
    GGML_TYPE_SUFFIX, MAGIC, MAX_DIMS, TYPES_KEY,
};
use super::gguf_values::{value, Reader};
use super::gguf_write::typed_value;
use super::source::Source;
use super::values::{parse_values, GGUF_VALUE_PREFIX, VALUES_KEY};
use super::{FileFormat, LoadFlags};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::layout;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The GGUF format.
pub(crate) struct Gguf;

/// The GGUF format's entry in the format table.
pub(crate) static GGUF: Gguf = Gguf;

/// One tensor info.
struct Info {
    name: String,
    /// ggml's dims, ne[0] innermost.
    ne: Vec<u64>,
    ty: GgmlType,
    offset: u64,
}

fn tensor_info(r: &mut Reader<'_>, i: u64) -> Result<Info> {
    let name = r.string(&format_args!("tensor info {i}: its name"))?;
    let what = format!("tensor '{name}'");
    let n_dims = r.u32(&format_args!("{what}: its number of dims"))?;
    crate::ensure!(
        n_dims as usize <= MAX_DIMS,
        Format,
        "gguf: {what} has {n_dims} dims: expected at most {MAX_DIMS} (ggml's GGML_MAX_DIMS)"
    );
    let ne = (0..n_dims)
        .map(|d| r.u64(&format_args!("{what}: dim {d}")))
        .collect::<Result<Vec<u64>>>()?;
    let number = r.u32(&format_args!("{what}: its ggml type"))?;
    let ty = ggml_type(number).ok_or_else(|| {
        crate::err!(
            Format,
            "gguf: {what} has ggml type {number}, which ggml does not define: expected one of \
             F32 (0) .. Q1_0 (41) but the removed 4, 5, 31-33, 36-38"
        )
    })?;
    let offset = r.u64(&format_args!("{what}: its data offset"))?;
    Ok(Info {
        name,
        ne,
        ty,
        offset,
    })
}

/// The bytes of `info`'s data, and its c10 shape as stored: the
/// logical shape for a plain type, rows of bytes for a quantized one.
fn geometry(info: &Info, plain: bool) -> Result<(u64, Vec<i64>)> {
    let name = &info.name;
    let overflow = || {
        crate::err!(
            Format,
            "gguf: tensor '{name}': dims {:?} of {}: the size overflows",
            info.ne,
            info.ty.name
        )
    };
    let mut shape = Vec::with_capacity(info.ne.len());
    for &d in info.ne.iter().rev() {
        shape.push(i64::try_from(d).map_err(|_| overflow())?);
    }
    let row = info.ne.first().copied().unwrap_or(1);
    crate::ensure!(
        row % info.ty.block == 0,
        Format,
        "gguf: tensor '{name}': a row of {row} elements of {}: expected a multiple of its \
         block of {}",
        info.ty.name,
        info.ty.block
    );
    let row_bytes = (row / info.ty.block)
        .checked_mul(info.ty.size)
        .ok_or_else(overflow)?;
    let nbytes = info
        .ne
        .iter()
        .skip(1)
        .try_fold(row_bytes, |n, &d| n.checked_mul(d))
        .ok_or_else(overflow)?;
    if !plain {
        match shape.last_mut() {
            Some(last) => *last = i64::try_from(row_bytes).map_err(|_| overflow())?,
            None => shape.push(i64::try_from(row_bytes).map_err(|_| overflow())?),
        }
    }
    Ok((nbytes, shape))
}

/// The dtype of a plain ggml type (the dtype table's gguf column).
pub(crate) fn plain_dtype(ty: GgmlType) -> Option<DType> {
    DType::ALL
        .into_iter()
        .find(|d| d.info().gguf == Some(ty.number))
}

fn set_meta(dict: &mut TensorDict, key: &str, value: &str) -> Result<()> {
    dict.set_metadata(key, value)
        .map_err(|e| crate::err!(Format, "gguf: key '{key}': {}", e.message()))
}

/// Reads the header and the key-value metadata into `dict`; returns the
/// reader after them (knowing the file's byte order), the tensor count
/// and the alignment.
fn read_header(r: &mut Reader<'_>, dict: &mut TensorDict) -> Result<(u64, u64)> {
    let magic = r.array::<4>(&"the magic")?;
    crate::ensure!(
        &magic == MAGIC,
        Format,
        "gguf: the file starts with {magic:?}: expected the magic \"GGUF\""
    );
    let mut version = r.u32(&"the version")?;
    // A big-endian file's version reads byte-swapped (gguf-py and
    // llama.cpp tell the order this way too).
    if version > 0xffff && version.swap_bytes() <= 0xffff {
        r.big = true;
        version = version.swap_bytes();
    }
    crate::ensure!(
        version == 2 || version == 3,
        Format,
        "gguf: version {version}: expected 3 or 2 (version 1's 32-bit counts are not read)"
    );
    let n_tensors = r.count(&"the tensor count", 24)?;
    let n_kv = r.count(&"the key-value count", 13)?;
    let mut types = serde_json::Map::new();
    let mut values: Vec<(String, serde_json::Value)> = Vec::new();
    let mut value_names = std::collections::HashSet::new();
    let mut json_values = None;
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..n_kv {
        let key = r.string(&format_args!("key {i}"))?;
        crate::ensure!(
            dict.metadata(&key).is_none() && key != TYPES_KEY,
            Format,
            "gguf: key '{key}' appears twice (or is tessera's own '{TYPES_KEY}')"
        );
        let t = r.value_type(&format_args!("key '{key}'"))?;
        let mut text = String::new();
        let full = value(r, &key, t, false, 0, &mut text)?;
        if key == ALIGNMENT_KEY {
            let a = text.parse::<u64>().ok().filter(|a| a.is_power_of_two());
            match (full == FullType::Scalar(ValueType::U32), a) {
                (true, Some(a)) => alignment = a,
                _ => crate::bail!(
                    Format,
                    "gguf: {ALIGNMENT_KEY} is {text} ({}): expected a uint32 power of two",
                    full.text()
                ),
            }
        }
        if let Some(name) = key.strip_prefix(GGUF_VALUE_PREFIX) {
            let v = typed_value(&key, &text, &full)?;
            crate::ensure!(
                value_names.insert(name.to_owned()),
                Format,
                "gguf: key '{key}' appears twice"
            );
            values.push((name.to_owned(), v));
            continue;
        }
        if key == VALUES_KEY && full == FullType::Scalar(ValueType::String) {
            // Read after the typed keys: one object of the rest.
            json_values = Some(text);
            continue;
        }
        set_meta(dict, &key, &text)?;
        types.insert(key, serde_json::Value::String(full.text()));
    }
    if !types.is_empty() {
        let json = serde_json::Value::Object(types).to_string();
        set_meta(dict, TYPES_KEY, &json)?;
    }
    // The values, as one JSON object (a dict's metadata `tessera.values`,
    // which the parts' dict reads back as values).
    if let Some(text) = json_values {
        let rest = parse_values(&text)
            .map_err(|e| crate::err!(Format, "gguf: key '{VALUES_KEY}': {}", e.message()))?;
        for (name, v) in rest {
            crate::ensure!(
                value_names.insert(name.clone()),
                Format,
                "gguf: the value '{name}' is both a key {GGUF_VALUE_PREFIX}{name} and in \
                 '{VALUES_KEY}': expected one"
            );
            values.push((name, v));
        }
    }
    if !values.is_empty() {
        // The pairs as one JSON object in the file's order.
        let items: Vec<String> = values
            .iter()
            .map(|(n, v)| format!("{}:{v}", serde_json::Value::from(n.as_str())))
            .collect();
        set_meta(dict, VALUES_KEY, &format!("{{{}}}", items.join(",")))?;
    }
    Ok((n_tensors, alignment))
}

/// Where a tensor's data lie: its file offset and bytes, its c10 shape
/// as stored and its dtype (uint8 blocks for a quantized type).
struct Placed {
    start: u64,
    nbytes: u64,
    shape: Vec<i64>,
    dtype: Option<DType>,
}

/// Checks `info`'s geometry and data range (aligned, within the file)
/// and where its data start.
fn place(info: &Info, data_start: u64, alignment: u64, len: u64) -> Result<Placed> {
    let name = &info.name;
    let dtype = plain_dtype(info.ty);
    let (nbytes, shape) = geometry(info, dtype.is_some())?;
    crate::ensure!(
        info.offset % alignment == 0,
        Format,
        "gguf: tensor '{name}': data offset {}: expected a multiple of the alignment \
         {alignment}",
        info.offset
    );
    let start = data_start.checked_add(info.offset);
    let end = start.and_then(|s| s.checked_add(nbytes));
    let (Some(start), Some(_)) = (start, end.filter(|&e| e <= len)) else {
        crate::bail!(
            Format,
            "gguf: the file is truncated: tensor '{name}' ({nbytes} bytes at data offset {}, \
             byte {data_start} + {} of the file) runs past the end of the {len}-byte file",
            info.offset,
            info.offset
        )
    };
    Ok(Placed {
        start,
        nbytes,
        shape,
        dtype,
    })
}

/// Refuses two tensors whose data share a byte, naming both (ggml
/// refuses them too: it requires each tensor's data to follow the one
/// before). Tensors over the same bytes would load as separate storages
/// of one memory, which nothing expects (a copy from one into the other
/// overwrites its own source).
fn check_overlaps(infos: &[Info], placed: &[Placed], data_start: u64) -> Result<()> {
    let ranges: Vec<((), u64, u64)> = placed
        .iter()
        .map(|p| ((), p.start, p.start + p.nbytes))
        .collect();
    let Some((a, b)) = super::ranges::first_overlap(&ranges) else {
        return Ok(());
    };
    let what = |i: usize| {
        let (s, e) = (ranges[i].1 - data_start, ranges[i].2 - data_start);
        format!("'{}' (data bytes {s}..{e})", infos[i].name)
    };
    crate::bail!(
        Format,
        "gguf: tensors {} and {} overlap: expected each tensor's data on bytes of its own",
        what(a),
        what(b)
    )
}

/// The parts of a GGUF file of `len` bytes from its first bytes `head`:
/// None when its header runs past them (read more and ask again).
/// Records are ranges of source 0; a big-endian file's plain data are
/// swapped when fetched.
pub(crate) fn parts(head: &[u8], len: u64) -> Result<Option<Parts>> {
    let mut r = Reader {
        bytes: head,
        pos: 0,
        file_len: len,
        short: false,
        big: false,
    };
    match header_parts(&mut r) {
        Err(_) if r.short => Ok(None),
        other => other.map(Some),
    }
}

fn header_parts(r: &mut Reader<'_>) -> Result<Parts> {
    let mut dict = TensorDict::new();
    let (n_tensors, alignment) = read_header(r, &mut dict)?;
    let infos = (0..n_tensors)
        .map(|i| tensor_info(r, i))
        .collect::<Result<Vec<Info>>>()?;
    let len = r.file_len;
    let data_start = (r.pos as u64).div_ceil(alignment) * alignment;
    let mut names = std::collections::HashSet::with_capacity(infos.len());
    for info in &infos {
        let name = &info.name;
        crate::ensure!(
            names.insert(name.as_str()),
            Format,
            "gguf: tensor '{name}' appears twice"
        );
        for suffix in [GGML_TYPE_SUFFIX, GGML_SHAPE_SUFFIX] {
            let key = format!("{name}{suffix}");
            crate::ensure!(
                dict.metadata(&key).is_none(),
                Format,
                "gguf: key '{key}' is named as tessera's metadata of tensor '{name}' (a \
                 quantized tensor's ggml type and shape load as NAME{GGML_TYPE_SUFFIX} and \
                 NAME{GGML_SHAPE_SUFFIX}): expected no such key beside a tensor '{name}'"
            );
        }
    }
    let placed = infos
        .iter()
        .map(|info| place(info, data_start, alignment, len))
        .collect::<Result<Vec<Placed>>>()?;
    check_overlaps(&infos, &placed, data_start)?;
    let mut records = Vec::with_capacity(infos.len());
    let mut entries = Vec::with_capacity(infos.len());
    for (info, p) in infos.iter().zip(placed) {
        let name = &info.name;
        let dtype = p.dtype.unwrap_or(DType::Byte);
        // Plain data as the machine holds it; quantized blocks are bytes,
        // kept as stored (gguf-py swaps neither).
        let swap = if r.big && p.dtype.is_some_and(|d| d.itemsize() > 1) {
            dtype.itemsize()
        } else {
            0
        };
        records.push(RecordSpec {
            data: RecordData::Range {
                source: 0,
                offset: p.start,
            },
            len: p.nbytes,
            swap,
            crc: None,
        });
        if p.dtype.is_none() {
            let logical: Vec<String> = info.ne.iter().rev().map(|d| d.to_string()).collect();
            set_meta(
                &mut dict,
                &format!("{name}{GGML_TYPE_SUFFIX}"),
                info.ty.name,
            )?;
            set_meta(
                &mut dict,
                &format!("{name}{GGML_SHAPE_SUFFIX}"),
                &format!("[{}]", logical.join(", ")),
            )?;
        }
        entries.push(Entry {
            name: name.clone(),
            record: records.len() - 1,
            offset: 0,
            strides: layout::contiguous_strides(&p.shape).to_vec(),
            sizes: p.shape,
            dtype,
        });
    }
    let metadata = dict
        .metadata_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    Ok(Parts {
        records,
        entries,
        metadata,
    })
}

/// Reads a GGUF file: its parts over its bytes.
fn read(source: &Source<'_>) -> Result<TensorDict> {
    let parts = parts(source.bytes, source.bytes.len() as u64)?
        .ok_or_else(|| crate::err!(Internal, "gguf: a whole file read as a prefix"))?;
    parts.over_bytes(source).map_err(|e| match e.kind() {
        crate::error::ErrorKind::Format => e,
        _ => crate::err!(Format, "gguf: {}", e.message()),
    })
}

impl FileFormat for Gguf {
    fn name(&self) -> &'static str {
        "gguf"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["gguf"]
    }

    fn detect(&self, bytes: &[u8]) -> bool {
        bytes.starts_with(MAGIC)
    }

    fn read(&self, source: &Source<'_>, _: LoadFlags) -> Result<TensorDict> {
        read(source)
    }

    fn write_bytes(&self, dict: &TensorDict) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        super::gguf_write::write(dict, &mut out)?;
        Ok(out)
    }

    fn size_floor(&self, dict: &TensorDict) -> u64 {
        super::tensor_bytes(dict)
    }

    fn write_file(&self, dict: &TensorDict, file: &mut File, _: &Path, dest: &Path) -> Result<()> {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        super::gguf_write::write(dict, &mut w)
            .and_then(|_| {
                w.flush()
                    .map_err(|e| crate::err!(Io, "{}", crate::files::reason(&e)))
            })
            .map_err(|e| match e.kind() {
                crate::error::ErrorKind::Io => {
                    e.context(format!("cannot write {}", dest.display()))
                }
                _ => e,
            })
    }
}
