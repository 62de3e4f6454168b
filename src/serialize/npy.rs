//! NumPy's NPY format (numpy.lib.format, versions 1.0, 2.0 and 3.0): the
//! magic `\x93NUMPY`, a version, a header length (2 bytes in 1.0, 4 in
//! 2.0 and 3.0), a Python dict literal `{'descr': '<f4', 'fortran_order':
//! False, 'shape': (3, 4), }` padded with spaces to a multiple of 64
//! bytes, then the array's bytes.
//!
//! One array per file, named `arr_0` in the dict (np.savez's name for an
//! unnamed array). Every NumPy dtype with a c10 twin loads (the table's
//! NumPy column); little-endian and byte-less (`|`) data are viewed in
//! place (mapped with TSR_LOAD_MMAP), big-endian data are copied and
//! swapped; Fortran order loads as a column-major strided view, no copy.
//! Structured and object dtypes are refused naming the descr. Saving
//! writes version 1.0 (2.0 when the header needs it), little-endian, C
//! order.

use super::ckpt_parts::{Entry, Parts, RecordData, RecordSpec};
use super::dict::TensorDict;
use super::safetensors_format::row_major;
use super::source::Source;
use super::{FileFormat, LoadFlags};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::{layout, Tensor};
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The first six bytes of every NPY file.
const MAGIC: &[u8] = b"\x93NUMPY";
/// The name of the array in the dict.
pub(crate) const ARRAY_NAME: &str = "arr_0";

/// The NPY format.
pub(crate) struct Npy;

/// The NPY format's entry in the format table.
pub(crate) static NPY: Npy = Npy;

/// What an NPY header says.
#[derive(Debug, PartialEq)]
struct Header {
    dtype: DType,
    big_endian: bool,
    fortran: bool,
    shape: Vec<i64>,
    /// Where the array's bytes start.
    data_start: usize,
}

/// The byte order and code of a descr ("<f4" -> little, "f4").
fn parse_descr(descr: &str) -> Result<(DType, bool)> {
    let (big, code) = match descr.as_bytes().first() {
        Some(b'<') | Some(b'|') | Some(b'=') => (false, &descr[1..]),
        Some(b'>') => (true, &descr[1..]),
        _ => (false, descr),
    };
    let dtype = DType::ALL
        .into_iter()
        .find(|d| d.info().numpy == Some(code))
        .ok_or_else(|| {
            crate::err!(
                Format,
                "npy: descr '{descr}' names no dtype tessera holds: expected bool, \
                 (u)int8-64, float16/32/64 or complex64/128 (structured, object, string \
                 and datetime arrays are not tensors)"
            )
        })?;
    Ok((dtype, big && dtype.itemsize() > 1))
}

/// A tiny reader of the header's Python literal.
struct Literal<'a> {
    text: &'a str,
}

impl<'a> Literal<'a> {
    fn skip_space(&mut self) {
        self.text = self.text.trim_start();
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        match self.text.strip_prefix(c) {
            Some(rest) => {
                self.text = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, c: char, what: &str) -> Result<()> {
        crate::ensure!(
            self.eat(c),
            Format,
            "npy: header: expected '{c}' {what}, found {:?}",
            self.text.chars().take(20).collect::<String>()
        );
        Ok(())
    }

    fn string(&mut self) -> Result<&'a str> {
        self.skip_space();
        let quote = self.text.chars().next().filter(|c| *c == '\'' || *c == '"');
        let Some(q) = quote else {
            crate::bail!(
                Format,
                "npy: header: expected a quoted string, found {:?}",
                self.text.chars().take(20).collect::<String>()
            )
        };
        let body = &self.text[1..];
        let end = body
            .find(q)
            .ok_or_else(|| crate::err!(Format, "npy: header: a string is not closed"))?;
        self.text = &body[end + 1..];
        Ok(&body[..end])
    }

    fn word(&mut self) -> &'a str {
        self.skip_space();
        let end = self
            .text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(self.text.len());
        let (w, rest) = self.text.split_at(end);
        self.text = rest;
        w
    }

    fn shape(&mut self) -> Result<Vec<i64>> {
        self.expect('(', "to open the shape")?;
        let mut shape = Vec::new();
        while !self.eat(')') {
            let w = self.word();
            let digits = w.strip_suffix('L').unwrap_or(w);
            let size = digits
                .parse::<i64>()
                .ok()
                .filter(|s| *s >= 0)
                .ok_or_else(|| {
                    crate::err!(
                        Format,
                        "npy: header: shape entry {w:?} is not a size: expected an integer >= 0"
                    )
                })?;
            crate::ensure!(
                shape.len() < 64,
                Format,
                "npy: header: the shape has more than 64 dims"
            );
            shape.push(size);
            if !self.eat(',') {
                self.expect(')', "to close the shape")?;
                break;
            }
        }
        Ok(shape)
    }
}

/// Reads the magic, version, header length and header of an NPY file.
fn parse_header(bytes: &[u8]) -> Result<Header> {
    crate::ensure!(
        bytes.len() >= 10 && bytes.starts_with(MAGIC),
        Format,
        "npy: the {} bytes do not start with NumPy's magic \\x93NUMPY and a version",
        bytes.len()
    );
    let (major, minor) = (bytes[6], bytes[7]);
    let (len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            crate::ensure!(
                bytes.len() >= 12,
                Format,
                "npy: version {major}.{minor} needs a 4-byte header length; the file has {} bytes",
                bytes.len()
            );
            (
                u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize,
                12,
            )
        }
        _ => crate::bail!(
            Format,
            "npy: format version {major}.{minor}: expected 1.0, 2.0 or 3.0"
        ),
    };
    let data_start = start + len;
    crate::ensure!(
        data_start <= bytes.len(),
        Format,
        "npy: the file is truncated: it is {} bytes, and its header alone says it is {len} \
         bytes long (to byte {data_start})",
        bytes.len()
    );
    let text = std::str::from_utf8(&bytes[start..data_start])
        .map_err(|_| crate::err!(Format, "npy: the header is not text (UTF-8)"))?;
    let mut lit = Literal { text };
    lit.expect('{', "to open the header dict")?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    while !lit.eat('}') {
        let key = lit.string()?;
        lit.expect(':', "after a key")?;
        match key {
            "descr" => {
                lit.skip_space();
                crate::ensure!(
                    !lit.text.starts_with('['),
                    Format,
                    "npy: descr is a list (a structured array): expected one scalar type"
                );
                descr = Some(lit.string()?);
            }
            "fortran_order" => {
                fortran = Some(match lit.word() {
                    "True" => true,
                    "False" => false,
                    other => crate::bail!(
                        Format,
                        "npy: fortran_order is {other:?}: expected True or False"
                    ),
                })
            }
            "shape" => shape = Some(lit.shape()?),
            other => crate::bail!(
                Format,
                "npy: unknown header key '{other}': expected descr, fortran_order and shape"
            ),
        }
        if !lit.eat(',') {
            lit.expect('}', "to close the header dict")?;
            break;
        }
    }
    let missing = |k: &str| crate::err!(Format, "npy: the header has no '{k}'");
    let (dtype, big_endian) = parse_descr(descr.ok_or_else(|| missing("descr"))?)?;
    Ok(Header {
        dtype,
        big_endian,
        fortran: fortran.ok_or_else(|| missing("fortran_order"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
        data_start,
    })
}

/// Column-major strides of `shape`.
fn fortran_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = Vec::with_capacity(shape.len());
    let mut step = 1i64;
    for &s in shape {
        strides.push(step);
        step = step.saturating_mul(s.max(1));
    }
    strides
}

/// Reads the NPY file that fills `source`, its array viewed in place.
pub(crate) fn read_array(source: &Source<'_>, name: &str) -> Result<Tensor> {
    read_array_at(source, 0, source.bytes.len(), name)
}

/// Reads the NPY file in the `len` bytes at `start` of `source` (an npz
/// entry; the caller checked they lie within it), its array viewed in
/// place where alignment allows.
pub(crate) fn read_array_at(
    source: &Source<'_>,
    start: usize,
    len: usize,
    name: &str,
) -> Result<Tensor> {
    let (record, entry) = array_parts(&source.bytes[start..start + len], len as u64, name)?;
    let RecordData::Range { offset, .. } = record.data else {
        crate::bail!(Internal, "npy: a record that is not a range");
    };
    let parts = Parts {
        records: vec![RecordSpec {
            data: RecordData::Range {
                source: 0,
                offset: offset + start as u64,
            },
            ..record
        }],
        entries: vec![entry],
        metadata: Vec::new(),
    };
    let dict = parts.over_bytes(source)?;
    Ok(dict.get(name).expect("the one array").clone())
}

/// The record and tensor of an NPY file of `len` bytes from its first
/// bytes `head` (at least its header): the data are a range of source 0
/// from the end of the header, swapped when fetched for a big-endian
/// descr.
pub(crate) fn array_parts(head: &[u8], len: u64, name: &str) -> Result<(RecordSpec, Entry)> {
    let h = parse_header(head)?;
    let strides = if h.fortran {
        fortran_strides(&h.shape)
    } else {
        layout::contiguous_strides(&h.shape).to_vec()
    };
    let data_len = len - h.data_start as u64;
    let numel = h
        .shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64));
    let needed = numel.and_then(|n| n.checked_mul(h.dtype.itemsize() as u64));
    if let Some(needed) = needed.filter(|&n| n > data_len) {
        crate::bail!(
            Format,
            "npy: the array's data are cut short: its header describes {} {:?}, {needed} bytes \
             of data from byte {}, so it should be {} bytes long; it is {}",
            h.dtype.name(),
            h.shape,
            h.data_start,
            h.data_start as u64 + needed,
            h.data_start as u64 + data_len
        );
    }
    let swap = match (h.big_endian, h.dtype.is_complex()) {
        (false, _) => 0,
        (true, true) => h.dtype.itemsize() / 2,
        (true, false) => h.dtype.itemsize(),
    };
    let record = RecordSpec {
        data: RecordData::Range {
            source: 0,
            offset: h.data_start as u64,
        },
        len: data_len,
        swap,
        crc: None,
    };
    super::source::place_in(data_len, 0, name, 0, &h.shape, &strides, h.dtype)?;
    let entry = Entry {
        name: name.to_owned(),
        record: 0,
        offset: 0,
        sizes: h.shape,
        strides,
        dtype: h.dtype,
    };
    Ok((record, entry))
}

/// How many first bytes of an NPY file hold its header (from its first
/// 12 bytes, or fewer when the file is that short): enough to parse it.
pub(crate) fn header_len(first: &[u8]) -> usize {
    match (first.get(6), first.get(8..12)) {
        (Some(1), Some(b)) => 10 + u16::from_le_bytes([b[0], b[1]]) as usize,
        (Some(2 | 3), Some(b)) => 12 + u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize,
        _ => first.len(),
    }
}

/// The NPY header of `t` (version 1.0, or 2.0 when longer than 65535
/// bytes), padded so the data start at a multiple of 64.
fn header_for(name: &str, t: &Tensor) -> Result<Vec<u8>> {
    let code = t.dtype().info().numpy.ok_or_else(|| {
        crate::err!(
            DType,
            "tensor '{name}' has dtype {}, which NumPy has no type for",
            t.dtype()
        )
    })?;
    let order = if t.itemsize() > 1 { '<' } else { '|' };
    let dims: Vec<String> = t.sizes().iter().map(|s| s.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let dict = format!("{{'descr': '{order}{code}', 'fortran_order': False, 'shape': {shape}, }}");
    let mut out = Vec::with_capacity(dict.len() + 80);
    let (version, prefix) = if dict.len() + 11 <= 65535 {
        (1u8, 10)
    } else {
        (2u8, 12)
    };
    let total = (prefix + dict.len() + 1).div_ceil(64) * 64;
    let len = total - prefix;
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    match version {
        1 => out.extend_from_slice(&(len as u16).to_le_bytes()),
        _ => out.extend_from_slice(&(len as u32).to_le_bytes()),
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    Ok(out)
}

/// The one tensor of a dict saved as NPY.
fn only_tensor(dict: &TensorDict) -> Result<(&str, &Tensor)> {
    crate::ensure!(
        dict.len() == 1 && !dict.has_saved_metadata(),
        InvalidArgument,
        "npy holds one array and no metadata: the dict has {} tensors and {} metadata keys or \
         values (save several as npz, or metadata as safetensors or torch)",
        dict.len(),
        dict.saved_metadata_count()
    );
    let (name, t) = dict.iter().next().expect("one tensor");
    super::torch_write::check_saveable(name, t)?;
    Ok((name, t))
}

/// Writes `t` as a whole NPY file to `out`.
pub(crate) fn write_array(name: &str, t: &Tensor, out: &mut dyn Write) -> Result<()> {
    let header = header_for(name, t)?;
    let io = |e: std::io::Error| crate::err!(Io, "{}", crate::files::reason(&e));
    out.write_all(&header).map_err(io)?;
    out.write_all(&row_major(t)).map_err(io)
}

impl FileFormat for Npy {
    fn name(&self) -> &'static str {
        "npy"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["npy"]
    }

    fn detect(&self, bytes: &[u8]) -> bool {
        bytes.starts_with(MAGIC)
    }

    fn read(&self, source: &Source<'_>, _: LoadFlags) -> Result<TensorDict> {
        let mut dict = TensorDict::new();
        // A lone file whose data are cut short is a truncated file.
        let t = read_array(source, ARRAY_NAME).map_err(|e| match e.message() {
            m if m.contains("cut short") => {
                crate::err!(Format, "npy: the file is truncated: {}", &m[5..])
            }
            _ => e,
        })?;
        dict.set(ARRAY_NAME, t)?;
        Ok(dict)
    }

    fn write_bytes(&self, dict: &TensorDict) -> Result<Vec<u8>> {
        let (name, t) = only_tensor(dict)?;
        let mut out = Vec::new();
        write_array(name, t, &mut out)?;
        Ok(out)
    }

    fn size_floor(&self, dict: &TensorDict) -> u64 {
        super::tensor_bytes(dict)
    }

    fn write_file(&self, dict: &TensorDict, file: &mut File, _: &Path, dest: &Path) -> Result<()> {
        let (name, t) = only_tensor(dict)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        write_array(name, t, &mut w)
            .and_then(|_| {
                w.flush()
                    .map_err(|e| crate::err!(Io, "{}", crate::files::reason(&e)))
            })
            .map_err(|e| e.context(format!("cannot write {}", dest.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;

    fn header(dict: &str) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        b.extend_from_slice(dict.as_bytes());
        b
    }

    #[test]
    fn headers_numpy_writes_parse() {
        let h = parse_header(&header(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }\n",
        ))
        .unwrap();
        assert_eq!(
            (h.dtype, h.big_endian, h.fortran),
            (DType::Float, false, false)
        );
        assert_eq!(h.shape, vec![3, 4]);
        let h = parse_header(&header(
            "{'descr': '>c16', 'fortran_order': True, 'shape': (7,)}",
        ))
        .unwrap();
        assert_eq!(
            (h.dtype, h.big_endian, h.fortran),
            (DType::ComplexDouble, true, true)
        );
        assert_eq!(h.shape, vec![7]);
        let h = parse_header(&header(
            "{'descr': '|b1', 'fortran_order': False, 'shape': ()}",
        ))
        .unwrap();
        assert_eq!((h.dtype, h.shape.len()), (DType::Bool, 0));
        // Python 2 files wrote longs with an L.
        let h = parse_header(&header(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 3L), }",
        ))
        .unwrap();
        assert_eq!(h.shape, vec![2, 3]);
    }

    #[test]
    fn bad_headers_are_refused_by_name() {
        for (dict, says) in [
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}",
                "structured",
            ),
            (
                "{'descr': '<U4', 'fortran_order': False, 'shape': (1,)}",
                "'<U4'",
            ),
            (
                "{'descr': '<f4', 'fortran_order': maybe, 'shape': (1,)}",
                "fortran_order",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
                "-1",
            ),
            ("{'descr': '<f4', 'fortran_order': False}", "no 'shape'"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                "'x'",
            ),
            ("{'descr': '<f4", "not closed"),
        ] {
            let e = parse_header(&header(dict)).unwrap_err();
            assert!(e.message().contains(says), "{dict}: {e}");
        }
        let mut long = header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}");
        long[8] = 0xff;
        let e = parse_header(&long).unwrap_err();
        assert!(e.message().contains("truncated"), "{e}");
        long[6] = 9;
        assert!(parse_header(&long)
            .unwrap_err()
            .message()
            .contains("version 9.0"));
    }

    #[test]
    fn written_headers_are_aligned_and_parse_back() {
        for sizes in [vec![], vec![5], vec![2, 3, 4]] {
            let t = Tensor::empty(&sizes, DType::Double, Device::CPU).unwrap();
            let h = header_for("x", &t).unwrap();
            assert_eq!(h.len() % 64, 0);
            let back = parse_header(&h).unwrap();
            assert_eq!(back.shape, sizes);
            assert_eq!(back.data_start, h.len());
        }
    }
}
