//! Reading torch.save's legacy format (PyTorch before 1.6, and later ones
//! with `_use_new_zipfile_serialization=False`): five things in a row,
//!
//! 1. a pickle of the magic number 0x1950a86a20f9469cfc6c,
//! 2. a pickle of the protocol version (1001),
//! 3. a pickle of sys_info: `{'protocol_version', 'little_endian',
//!    'type_sizes'}`,
//! 4. the main pickle, whose persistent ids name storages: `('storage',
//!    storage class, key, location, numel, view)`, where view is None or,
//!    in old files, `(view key, offset, numel)` of a part of the storage,
//! 5. a pickle of the list of storage keys, then each storage in that
//!    order: its element count as 8 little-endian bytes, then its bytes.
//!
//! The main pickle is read by the same restricted reader and tree walk as
//! the zip format (`torch_read`); a storage whose bytes are not aligned
//! for its dtype is copied (mostly so: the records follow pickles of any
//! length). Big-endian files are refused naming why; the tar container of
//! torch before 0.1.10 is refused naming it. Read only.

use super::dict::TensorDict;
use super::source::Source;
use super::torch_pickle::{self, Records};
use super::torch_read;
use super::{FileFormat, LoadFlags};
use crate::error::Result;
use crate::pickle::{self, Limits, Value};
use std::collections::HashMap;

/// torch.save's legacy magic number, little-endian, as pickle's LONG1
/// holds it.
const MAGIC: [u8; 10] = [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];

/// The only protocol version torch ever wrote.
const PROTOCOL_VERSION: i64 = 1001;

/// torch.save's legacy format.
pub(crate) struct TorchLegacy;

/// The TORCH_LEGACY format's entry in the format table.
pub(crate) static TORCH_LEGACY: TorchLegacy = TorchLegacy;

/// Where the magic pickle ends, if `bytes` start with one: PROTO 2-5, an
/// optional FRAME, LONG1 of the 10 magic bytes, STOP.
fn magic_end(bytes: &[u8]) -> Option<usize> {
    let mut pos = 0;
    if bytes.first() == Some(&0x80) && bytes.get(1).is_some_and(|p| (2..=5).contains(p)) {
        pos = 2;
    }
    if bytes.get(pos) == Some(&0x95) {
        pos += 9;
    }
    let rest = bytes.get(pos..pos + 13)?;
    (rest[..2] == [0x8a, 10] && rest[2..12] == MAGIC && rest[12] == b'.').then_some(pos + 13)
}

/// Whether `bytes` are a tar archive (torch.save before 0.1.10).
fn is_tar(bytes: &[u8]) -> bool {
    bytes.get(257..262) == Some(b"ustar")
}

/// Reads the small pickle at `*pos` (no globals allowed) and moves past it.
fn small_pickle(bytes: &[u8], pos: &mut usize, what: &str) -> Result<Value> {
    let (v, used) = pickle::read_prefix(&bytes[*pos..], &|_, _| false, Limits::default())
        .map_err(|e| crate::err!(Format, "torch legacy: the {what} pickle: {}", e.message()))?;
    *pos += used;
    Ok(v)
}

/// The value of `key` in a pickled dict.
fn dict_get<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Dict(items) => items
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v),
        _ => None,
    }
}

/// The element size of each storage key, from the main pickle's
/// persistent ids (the storage records carry element counts).
fn element_sizes(v: &Value, out: &mut HashMap<String, u64>) {
    match v {
        Value::PersistentId(id) => {
            if let Some([_, class, key, ..]) = id.as_seq() {
                let size = class
                    .as_global()
                    .and_then(|(_, n)| super::dtypes::dtype_of_storage_name(n))
                    .map(|d| d.map_or(1, |d| d.itemsize() as u64));
                if let (Some(k), Some(size)) = (key.as_str(), size) {
                    out.entry(k.to_owned()).or_insert(size);
                }
            }
        }
        Value::List(vs) | Value::Tuple(vs) => vs.iter().for_each(|x| element_sizes(x, out)),
        Value::Dict(items) => items.iter().for_each(|(_, x)| element_sizes(x, out)),
        Value::Reduce {
            args, items, state, ..
        } => {
            element_sizes(args, out);
            items.iter().for_each(|(_, x)| element_sizes(x, out));
            if let Some(s) = state {
                element_sizes(s, out);
            }
        }
        _ => {}
    }
}

/// Reads a legacy torch.save file from `source`.
fn read(source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict> {
    let bytes = source.bytes;
    crate::ensure!(
        !is_tar(bytes),
        Format,
        "torch legacy: a tar archive (torch.save before PyTorch 0.1.10) is not read: load it \
         with an old torch and save it again"
    );
    let mut pos = magic_end(bytes).ok_or_else(|| {
        crate::err!(
            Format,
            "torch legacy: the file does not start with torch.save's magic number pickle"
        )
    })?;
    let version = small_pickle(bytes, &mut pos, "protocol version")?;
    crate::ensure!(
        version.as_int() == Some(PROTOCOL_VERSION),
        Format,
        "torch legacy: protocol version {}: expected {PROTOCOL_VERSION}",
        version.describe()
    );
    let sys_info = small_pickle(bytes, &mut pos, "sys_info")?;
    crate::ensure!(
        !matches!(
            dict_get(&sys_info, "little_endian"),
            Some(Value::Bool(false))
        ),
        Format,
        "torch legacy: the file was saved on a big-endian machine (sys_info little_endian is \
         False): tessera reads little-endian files; save it again on a little-endian machine"
    );
    let (root, used) = torch_pickle::read_pickle(&bytes[pos..], "the main pickle", flags)?;
    pos += used;
    let keys = small_pickle(bytes, &mut pos, "storage keys")?;
    let keys = keys.as_seq().ok_or_else(|| {
        crate::err!(
            Format,
            "torch legacy: the storage keys are {}: expected a list",
            keys.describe()
        )
    })?;
    let mut sizes = HashMap::new();
    element_sizes(&root, &mut sizes);
    let mut map = HashMap::new();
    for key in keys {
        let key = key.as_str().ok_or_else(|| {
            crate::err!(
                Format,
                "torch legacy: storage key {}: expected a str",
                key.describe()
            )
        })?;
        let elem = sizes.get(key).copied().ok_or_else(|| {
            crate::err!(
                Format,
                "torch legacy: storage '{key}' is listed but no tensor names it"
            )
        })?;
        let count = bytes
            .get(pos..pos + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let len = count.and_then(|n| n.checked_mul(elem));
        let fits = len.filter(|&l| l <= (bytes.len() - pos - 8) as u64);
        let Some(len) = fits else {
            crate::bail!(
                Format,
                "torch legacy: storage '{key}' at byte {pos}: its element count {} x {elem} \
                 bytes runs past the end of the {}-byte file",
                count.map_or("(truncated)".to_owned(), |n| n.to_string()),
                bytes.len()
            );
        };
        let first = map.insert(format!("data/{key}"), (pos + 8, len as usize));
        crate::ensure!(
            first.is_none(),
            Format,
            "torch legacy: storage '{key}' is listed twice in the storage keys: expected each \
             storage once (which copy its tensors hold would be a guess)"
        );
        pos += 8 + len as usize;
    }
    let records = Records {
        map,
        prefix: String::new(),
    };
    let tree = torch_read::Tree::data(&root, "the main pickle");
    torch_read::read_tree(source, records, &[tree])
}

impl FileFormat for TorchLegacy {
    fn name(&self) -> &'static str {
        "torch legacy"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[]
    }

    fn detect(&self, bytes: &[u8]) -> bool {
        magic_end(bytes).is_some() || is_tar(bytes)
    }

    fn read(&self, source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict> {
        read(source, flags)
    }

    fn writes(&self) -> bool {
        false
    }
}
