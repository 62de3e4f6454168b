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
//! length). torch writes these storages little-endian on any machine, so
//! sys_info's byte order is not read (as torch.load does not). The tar
//! container of torch before 0.1.10 is read by `torch_tar`. Read only.

use super::dict::TensorDict;
use super::source::Source;
use super::torch_pickle::{self, Records};
use super::torch_read;
use super::torch_tar;
use super::{FileFormat, LoadFlags};
use crate::error::Result;
use crate::pickle::{self, Kind, Limits, Pickle};
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

/// Reads the small pickle at `*pos` (no globals allowed) and moves past it.
fn small_pickle<'a>(
    bytes: &'a [u8],
    pos: &mut usize,
    what: &str,
    file: usize,
) -> Result<Pickle<'a>> {
    let (v, used) = pickle::parse_prefix(&bytes[*pos..], &|_, _| false, Limits::default())
        .map_err(|e| pickle_error(file, &format!("the {what} pickle"), e))?;
    *pos += used;
    Ok(v)
}

/// A pickle's error in the file's terms: a pickle cut short means the
/// file is (the pickles run to the end of what is there).
fn pickle_error(file: usize, what: &str, e: crate::error::Error) -> crate::error::Error {
    if e.message().contains("cut short") {
        crate::err!(
            Format,
            "torch legacy: the file is truncated: it is {file} bytes and ends inside {what} ({})",
            e.message()
        )
    } else {
        crate::err!(Format, "torch legacy: {what}: {}", e.message())
    }
}

/// The element size of each storage key, from the main pickle's
/// persistent ids (the storage records carry element counts).
fn element_sizes(p: &Pickle<'_>) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for pid in p.persistent_ids() {
        let Kind::PersistentId(id) = pid.kind() else {
            continue;
        };
        let Some(parts) = id.as_seq() else { continue };
        let (Some(class), Some(key)) = (parts.get(1), parts.get(2)) else {
            continue;
        };
        let size = class
            .as_global()
            .and_then(|(_, n)| super::dtypes::dtype_of_storage_name(n))
            .map(|d| d.map_or(1, |d| d.itemsize() as u64));
        if let (Some(k), Some(size)) = (key.as_str(), size) {
            out.entry(k.to_owned()).or_insert(size);
        }
    }
    out
}

/// The pickles in front of a legacy file's storages: the main pickle,
/// the storage keys, and where the first storage's element count lies.
pub(crate) struct Prefix<'a> {
    root: Pickle<'a>,
    keys: Pickle<'a>,
    pub end: usize,
}

impl Prefix<'_> {
    /// The storage keys in the order their storages follow the pickles,
    /// each with its element size (from the main pickle's persistent
    /// ids); an error for keys that are not a list of str or name a
    /// storage no tensor does.
    pub(crate) fn storages(&self) -> Result<Vec<(&str, u64)>> {
        let keys = self.keys.root().as_seq().ok_or_else(|| {
            crate::err!(
                Format,
                "torch legacy: the storage keys are {}: expected a list",
                self.keys.root().describe()
            )
        })?;
        let sizes = element_sizes(&self.root);
        keys.iter()
            .map(|key| {
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
                Ok((key, elem))
            })
            .collect()
    }
}

/// The pickles at the front of the legacy file `bytes` (magic, protocol
/// version, sys_info, main, storage keys); `file`, the whole file's
/// length, for the message when `bytes` end inside one.
pub(crate) fn prefix(bytes: &[u8], file: usize, flags: LoadFlags) -> Result<Prefix<'_>> {
    let mut pos = magic_end(bytes).ok_or_else(|| {
        crate::err!(
            Format,
            "torch legacy: the file does not start with torch.save's magic number pickle"
        )
    })?;
    let version = small_pickle(bytes, &mut pos, "protocol version", file)?;
    crate::ensure!(
        version.root().as_int() == Some(PROTOCOL_VERSION),
        Format,
        "torch legacy: protocol version {}: expected {PROTOCOL_VERSION}",
        version.root().describe()
    );
    // sys_info's byte order does not matter: torch writes the storages
    // of this format little-endian on any machine, and reads them so.
    small_pickle(bytes, &mut pos, "sys_info", file)?;
    let (root, used) = torch_pickle::read_pickle(&bytes[pos..], "the main pickle", flags)
        .map_err(|e| pickle_error(file, "the main pickle", e))?;
    pos += used;
    let keys = small_pickle(bytes, &mut pos, "storage keys", file)?;
    Ok(Prefix {
        root,
        keys,
        end: pos,
    })
}

/// Reads a legacy torch.save file from `source`.
fn read(source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict> {
    let bytes = source.bytes;
    if torch_tar::is_tar(bytes) {
        return torch_tar::read(source, flags);
    }
    let prefix = prefix(bytes, bytes.len(), flags)?;
    let storages = prefix.storages()?;
    let (root, mut pos) = (&prefix.root, prefix.end);
    let mut map = HashMap::new();
    for &(key, elem) in &storages {
        let count = bytes
            .get(pos..pos + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let len = count.and_then(|n| n.checked_mul(elem));
        let fits = len.filter(|&l| l <= (bytes.len() - pos - 8) as u64);
        let Some(len) = fits else {
            let file = bytes.len();
            let why = match (count, len) {
                (None, _) => format!(
                    "the file is truncated: it is {file} bytes and ends inside storage \
                     '{key}''s 8-byte element count at byte {pos}"
                ),
                (Some(n), Some(l)) => format!(
                    "the file is truncated: storage '{key}' ({n} elements of {elem} bytes \
                     from byte {}) should end at byte {}; the file is {file} bytes",
                    pos + 8,
                    pos as u64 + 8 + l
                ),
                (Some(n), None) => crate::bail!(
                    Format,
                    "torch legacy: storage '{key}' at byte {pos}: {n} elements of {elem} bytes \
                     overflow"
                ),
            };
            let rest: Vec<&str> = storages.iter().map(|(k, _)| *k).collect();
            let at = rest.iter().position(|k| *k == key).unwrap_or(0);
            let users = users_of(source, root, flags, &map, &rest[at..]);
            crate::bail!(Format, "torch legacy: {why}{users}");
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
    let tree = torch_read::Tree::data(root.root(), "the main pickle");
    let cx = super::torch_loader::Context {
        source,
        records,
        flags,
        big_endian: false,
        tar: None,
    };
    torch_read::read_tree(cx, &[tree])
}

/// For a message about storages the file is cut before (`missing`, the
/// first one cut): the tensors that need them, found by the tree walk
/// over records noted instead of read (`Source::lazy`: each missing
/// storage noted at its own offset past the file's end). Empty when the
/// walk fails otherwise.
fn users_of(
    source: &Source<'_>,
    root: &Pickle<'_>,
    flags: LoadFlags,
    read: &HashMap<String, (usize, usize)>,
    missing: &[&str],
) -> String {
    const SHOWN: usize = 8;
    let past = source.bytes.len() + 1;
    let mut map = read.clone();
    for (i, key) in missing.iter().enumerate() {
        // Length enough for any tensor's check; a noted record holds no
        // bytes.
        map.insert(format!("data/{key}"), (past + i, 1 << 48));
    }
    let noted = super::source::Noted::default();
    let lazy = Source {
        bytes: source.bytes,
        backing: None,
        direct: false,
        lazy: Some(&noted),
    };
    let cx = super::torch_loader::Context {
        source: &lazy,
        records: Records {
            map,
            prefix: String::new(),
        },
        flags,
        big_endian: false,
        tar: None,
    };
    let tree = torch_read::Tree::data(root.root(), "the main pickle");
    let Ok(dict) = torch_read::read_tree(cx, &[tree]) else {
        return String::new();
    };
    let (mut first, mut later) = (Vec::new(), 0);
    for (name, t) in dict.iter() {
        match noted.get(t.storage()).map(|(off, _)| off as usize) {
            Some(off) if off == past => first.push(format!("'{name}'")),
            Some(off) if off > past => later += 1,
            _ => {}
        }
    }
    let mut out = String::new();
    if !first.is_empty() {
        let more = first.len().saturating_sub(SHOWN);
        first.truncate(SHOWN);
        out = format!(
            ": it holds tensor{} {}{}",
            if first.len() + more > 1 { "s" } else { "" },
            first.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    if later > 0 {
        out.push_str(&format!(
            "; {later} more tensor{} lie in the {} storage{} after it",
            if later > 1 { "s" } else { "" },
            missing.len() - 1,
            if missing.len() > 2 { "s" } else { "" }
        ));
    }
    out
}

impl FileFormat for TorchLegacy {
    fn name(&self) -> &'static str {
        "torch legacy"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[]
    }

    fn detect(&self, bytes: &[u8]) -> bool {
        magic_end(bytes).is_some() || torch_tar::is_tar(bytes)
    }

    fn read(&self, source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict> {
        read(source, flags)
    }

    fn writes(&self) -> bool {
        false
    }
}
