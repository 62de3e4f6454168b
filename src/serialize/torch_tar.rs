//! Reading torch.save's first container (PyTorch before 0.1.10), which
//! torch.load still reads: a tar archive of four entries,
//!
//! - `sys_info`: a pickle of the saving machine's facts (not needed);
//! - `storages`: a pickle of the storage count, then per storage a pickle
//!   of `(key, location, storage type)` followed by its element count (8
//!   bytes, little-endian) and its bytes; then a pickle of the list of
//!   storage views `(view key, root key, offset, numel)`;
//! - `tensors`: a pickle of the tensor count, then per tensor a pickle of
//!   `(key, storage key, tensor type)` followed by its geometry: the
//!   number of dims (4 bytes, then 4 unused), the sizes and the strides
//!   (8 bytes each) and the storage offset (8 bytes), little-endian;
//! - `pickle`: the object, whose persistent ids are tensor (or storage)
//!   keys, or `(class, source file, source)` of a module's class.
//!
//! The tensors are built first; the object is then walked as the other
//! torch formats' (`torch_read`). Ustar headers are read, with pax
//! headers' `path` and `size`; anything else in the archive is ignored.

use super::dict::TensorDict;
use super::dtypes;
use super::source::Source;
use super::torch_loader::{Context, TarObjects};
use super::torch_pickle::{self, Records};
use super::torch_read;
use super::torch_values::key_name;
use super::LoadFlags;
use crate::error::Result;
use crate::pickle::{self, Limits, Pickle};
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::rc::Rc;

/// Whether `bytes` are a tar archive.
pub(crate) fn is_tar(bytes: &[u8]) -> bool {
    bytes.get(257..262) == Some(b"ustar")
}

/// The tar entries' data ranges by name.
fn entries(bytes: &[u8]) -> Result<HashMap<String, (usize, usize)>> {
    let mut out = HashMap::new();
    let mut pos = 0;
    let mut pax: HashMap<String, String> = HashMap::new();
    while pos + 512 <= bytes.len() {
        let h = &bytes[pos..pos + 512];
        if h.iter().all(|&b| b == 0) {
            return Ok(out);
        }
        let field = |r: std::ops::Range<usize>| {
            let f = &h[r];
            let end = f.iter().position(|&b| b == 0).unwrap_or(f.len());
            String::from_utf8_lossy(&f[..end]).into_owned()
        };
        let size = match pax.remove("size") {
            Some(s) => s.parse::<u64>().ok(),
            None => octal(&h[124..136]),
        };
        let Some(size) = size.and_then(|s| usize::try_from(s).ok()) else {
            crate::bail!(
                Format,
                "torch tar: the entry header at byte {pos} has the size field {:?}: expected \
                 an octal number",
                String::from_utf8_lossy(&h[124..136])
            );
        };
        let name = match pax.remove("path") {
            Some(p) => p,
            None => {
                let (prefix, name) = (field(345..500), field(0..100));
                if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                }
            }
        };
        let start = pos + 512;
        let end = start.checked_add(size).filter(|&e| e <= bytes.len());
        let Some(end) = end else {
            crate::bail!(
                Format,
                "torch tar: the file is truncated: its entry '{name}' ({size} bytes from byte \
                 {start}) should end at byte {}; the file is {} bytes",
                start as u64 + size as u64,
                bytes.len()
            );
        };
        match h[156] {
            b'x' => pax = pax_records(&bytes[start..end]),
            b'0' | 0 => {
                crate::ensure!(
                    out.insert(name.clone(), (start, size)).is_none(),
                    Format,
                    "torch tar: two entries are named '{name}'"
                );
            }
            _ => {}
        }
        pos = start + size.div_ceil(512) * 512;
    }
    crate::bail!(
        Format,
        "torch tar: the file is truncated: it is {} bytes and ends before the tar archive's \
         end (two blocks of zeros)",
        bytes.len()
    )
}

/// An octal header field (NUL or space terminated).
fn octal(f: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(f).ok()?;
    let s = s.trim_matches(|c: char| c == '\0' || c == ' ');
    u64::from_str_radix(s, 8).ok()
}

/// The `key=value` records of a pax header ("LEN key=value\n" each).
fn pax_records(data: &[u8]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let text = String::from_utf8_lossy(data);
    let mut rest = text.as_ref();
    while let Some((len, after)) = rest.split_once(' ') {
        let Ok(len) = len.parse::<usize>() else { break };
        let record_len = len.saturating_sub(len.to_string().len() + 1);
        let Some(record) = after.get(..record_len) else {
            break;
        };
        if let Some((k, v)) = record.trim_end_matches('\n').split_once('=') {
            out.insert(k.to_owned(), v.to_owned());
        }
        rest = &after[record_len..];
    }
    out
}

/// A reader of one entry's bytes: pickles and little-endian numbers.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    fn pickle(&mut self, what: &str) -> Result<Pickle<'a>> {
        let (p, used) = pickle::parse_prefix(
            &self.bytes[self.pos..self.end],
            &|m, n| torch_pickle::allowed(m, n),
            Limits::default(),
        )
        .map_err(|e| {
            crate::err!(
                Format,
                "torch tar: '{}' entry, {what}: {}",
                self.what,
                e.message()
            )
        })?;
        self.pos += used;
        Ok(p)
    }

    fn take(&mut self, n: usize, what: &str) -> Result<usize> {
        let at = self.pos;
        let end = at.checked_add(n).filter(|&e| e <= self.end);
        crate::ensure!(
            end.is_some(),
            Format,
            "torch tar: '{}' entry: {what} ({n} bytes at byte {at}) runs past the entry's end",
            self.what
        );
        self.pos += n;
        Ok(at)
    }

    fn i64(&mut self, what: &str) -> Result<i64> {
        let at = self.take(8, what)?;
        Ok(i64::from_le_bytes(
            self.bytes[at..at + 8].try_into().expect("8 bytes"),
        ))
    }
}

fn count(p: &Pickle<'_>, what: &str) -> Result<usize> {
    p.root()
        .as_int()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            crate::err!(
                Format,
                "torch tar: the {what} count is {}: expected an int >= 0",
                p.root().describe()
            )
        })
}

/// Reads a tar container from `source`.
pub(crate) fn read(source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict> {
    let bytes = source.bytes;
    let map = entries(bytes)?;
    let entry = |name: &'static str| -> Result<Cursor<'_>> {
        let Some(&(start, len)) = map.get(name) else {
            crate::bail!(Format, "torch tar: the archive has no '{name}' entry");
        };
        Ok(Cursor {
            bytes,
            pos: start,
            end: start + len,
            what: name,
        })
    };
    let mut tar = TarObjects::default();
    let mut records = HashMap::new();
    let mut c = entry("storages")?;
    let n = count(&c.pickle("the storage count")?, "storage")?;
    let records_prefix = "storages/";
    for i in 0..n {
        let head = c.pickle("a storage's (key, location, type)")?;
        let parts: Vec<_> = head
            .root()
            .as_seq()
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        let dtype = parts
            .get(2)
            .and_then(|t| t.as_global())
            .and_then(|(_, n)| dtypes::dtype_of_storage_name(n).flatten());
        let (Some(key), Some(dtype), 3) = (parts.first(), dtype, parts.len()) else {
            crate::bail!(
                Format,
                "torch tar: storage {i} is described by {}: expected (key, location, a typed \
                 storage class)",
                head.root().describe()
            );
        };
        let key = key_name(*key);
        let numel = c.i64("a storage's element count")?;
        let len = u64::try_from(numel)
            .ok()
            .and_then(|n| n.checked_mul(dtype.itemsize() as u64))
            .and_then(|n| usize::try_from(n).ok());
        let Some(len) = len else {
            crate::bail!(
                Format,
                "torch tar: storage '{key}' has {numel} elements: expected a count >= 0 that fits"
            );
        };
        let at = c.take(len, "a storage's bytes")?;
        let record = Rc::new(source.record(at, len, dtype.itemsize())?);
        records.insert(format!("{records_prefix}{key}"), (at, len));
        crate::ensure!(
            tar.storages.insert(key.clone(), (record, dtype)).is_none(),
            Format,
            "torch tar: two storages have the key '{key}'"
        );
    }
    let views = c.pickle("the storage views")?;
    for v in views.root().as_seq().iter().flat_map(|s| s.iter()) {
        let parts: Vec<_> = v.as_seq().map(|s| s.iter().collect()).unwrap_or_default();
        let [view, root, offset, numel] = parts[..] else {
            crate::bail!(
                Format,
                "torch tar: a storage view is {}: expected (view key, root key, offset, numel)",
                v.describe()
            );
        };
        let (view, root) = (key_name(view), key_name(root));
        let Some((rec, dtype)) = tar.storages.get(&root).cloned() else {
            crate::bail!(
                Format,
                "torch tar: storage view '{view}' of unknown storage '{root}'"
            );
        };
        let range = offset.as_int().zip(numel.as_int()).and_then(|(o, n)| {
            let size = dtype.itemsize() as i64;
            let start = o.checked_mul(size)?;
            let end = n.checked_mul(size)?.checked_add(start)?;
            (o >= 0 && n >= 0 && end <= rec.len as i64).then_some((start, end))
        });
        let Some((start, end)) = range else {
            crate::bail!(
                Format,
                "torch tar: storage view '{view}' {}: expected an offset and numel within \
                 storage '{root}' of {} bytes",
                v.describe(),
                rec.len
            );
        };
        let (at, _) = records[&format!("{records_prefix}{root}")];
        let sub = Rc::new(source.record(
            at + start as usize,
            (end - start) as usize,
            dtype.itemsize(),
        )?);
        tar.storages.insert(view, (sub, dtype));
    }
    let mut c = entry("tensors")?;
    let n = count(&c.pickle("the tensor count")?, "tensor")?;
    for i in 0..n {
        let head = c.pickle("a tensor's (key, storage key, type)")?;
        let parts: Vec<_> = head
            .root()
            .as_seq()
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        let [key, storage, _] = parts[..] else {
            crate::bail!(
                Format,
                "torch tar: tensor {i} is described by {}: expected (key, storage key, type)",
                head.root().describe()
            );
        };
        let (key, storage) = (key_name(key), key_name(storage));
        let at = c.take(8, "a tensor's number of dims")?;
        let ndim = i32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        crate::ensure!(
            (0..=64).contains(&ndim),
            Format,
            "torch tar: tensor '{key}' has {ndim} dims: expected 0 to 64"
        );
        let sizes = (0..ndim)
            .map(|_| c.i64("a size"))
            .collect::<Result<Vec<_>>>()?;
        let strides = (0..ndim)
            .map(|_| c.i64("a stride"))
            .collect::<Result<Vec<_>>>()?;
        let offset = c.i64("a storage offset")?;
        let Some((rec, dtype)) = tar.storages.get(&storage).cloned() else {
            crate::bail!(
                Format,
                "torch tar: tensor '{key}' names unknown storage '{storage}'"
            );
        };
        let name = format!("tensor '{key}'");
        let at = rec.place(&name, offset, &sizes, &strides, dtype)?;
        let t = Tensor::from_storage(&rec.storage, at, &sizes, Some(&strides), dtype)?;
        tar.tensors.insert(key, t);
    }
    let main = entry("pickle")?;
    let (root, _) = torch_pickle::read_pickle(
        &bytes[main.pos..main.end],
        "the tar container's pickle",
        flags,
    )?;
    let tree = torch_read::Tree::data(root.root(), "the tar container's pickle");
    let cx = Context {
        source,
        records: Records {
            map: records,
            prefix: String::new(),
        },
        flags,
        big_endian: false,
        tar: Some(tar),
    };
    torch_read::read_tree(cx, &[tree])
}
