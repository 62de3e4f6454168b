//! The torch formats' pickles and archives: the globals a tensor file may
//! name (the allowlist), the restricted read of one pickle, and where the
//! records of a torch zip archive lie. Shared by the zip, TorchScript and
//! legacy readers; the tree walk over what they read is `torch_read`.

use super::dtypes;
use super::source::Source;
use super::zip_index;
use super::LoadFlags;
use crate::error::{Error, Result};
use crate::pickle::{self, Limits, Value};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

fn fmt_err(what: impl std::fmt::Display) -> Error {
    crate::err!(Format, "{what}")
}

/// The globals a tensor file may name. TorchScript's classes
/// (`__torch__.*`) are placeholders whose state holds the module's
/// attributes; nothing named is ever imported or called.
pub(crate) fn allowed(module: &str, name: &str) -> bool {
    if module == "__torch__" || module.starts_with("__torch__.") {
        return true;
    }
    match module {
        "collections" => name == "OrderedDict",
        "torch._utils" => matches!(
            name,
            "_rebuild_tensor_v2"
                | "_rebuild_tensor_v3"
                | "_rebuild_parameter"
                | "_rebuild_parameter_with_state"
        ),
        "torch" => {
            name == "device"
                || dtypes::dtype_of_storage_name(name).is_some()
                || dtypes::dtype_of_torch_name(name).is_some()
        }
        "torch.jit._pickle" => matches!(
            name,
            "restore_type_tag"
                | "build_intlist"
                | "build_tensorlist"
                | "build_doublelist"
                | "build_boollist"
        ),
        "_codecs" => name == "encode",
        _ => false,
    }
}

/// Where each record of the file lies: name -> (offset, length); a
/// storage's record is `<prefix><tensor_dir><key>` ([`Tree::tensor_dir`]).
pub(crate) struct Records {
    pub map: HashMap<String, (usize, usize)>,
    pub prefix: String,
}

/// The stored records of the torch zip archive `bytes` (from
/// [`zip_index`], which refuses two records of one name, records over the
/// same bytes and local headers naming another file) and the archive's
/// directory, the one holding `data.pkl`.
pub(crate) fn index_archive(bytes: &[u8]) -> Result<Records> {
    let mut map = HashMap::new();
    let mut prefix = None;
    for f in zip_index::entries(bytes)? {
        let name = &f.name;
        if f.method != zip_index::STORED || f.encrypted {
            // TorchScript's code/ entries are deflated and never read; a
            // pickle or a storage record must be stored.
            let inner = name.split_once('/').map_or(name.as_str(), |(_, rest)| rest);
            let what = match (f.method != zip_index::STORED, f.encrypted) {
                (true, false) => format!("compressed ({})", f.method_name()),
                (true, true) => format!("compressed ({}) and encrypted", f.method_name()),
                _ => "encrypted".to_owned(),
            };
            crate::ensure!(
                !(inner.starts_with("data/") || inner.ends_with(".pkl")),
                Format,
                "zip entry {name} is {what}: torch files store records uncompressed"
            );
            continue;
        }
        if prefix.is_none() {
            if let Some(p) = name.strip_suffix("data.pkl") {
                if p.is_empty() || (p.ends_with('/') && !p[..p.len() - 1].contains('/')) {
                    prefix = Some(p.to_owned());
                }
            }
        }
        map.insert(f.name.clone(), (f.data as usize, f.packed as usize));
    }
    let prefix =
        prefix.ok_or_else(|| fmt_err("the archive has no data.pkl record: not a torch file"))?;
    Ok(Records { map, prefix })
}

impl Records {
    /// The archive's `<prefix>NAME` pickle, read as [`read_pickle`]
    /// reads; None when the archive has no such record.
    pub(crate) fn pickle(
        &self,
        source: &Source<'_>,
        name: &str,
        flags: LoadFlags,
    ) -> Result<Option<Value>> {
        let Some(&(off, len)) = self.map.get(&format!("{}{name}", self.prefix)) else {
            return Ok(None);
        };
        let (root, _) = read_pickle(&source.bytes[off..off + len], name, flags)?;
        Ok(Some(root))
    }
}

/// Reads the pickle at the start of `bytes` (`what` in messages) and the
/// position past it. A global outside [`allowed`] becomes a placeholder
/// (never imported or called); unless `flags.skip_unknown`, the file is
/// then refused naming every such global and the flag.
pub(crate) fn read_pickle(bytes: &[u8], what: &str, flags: LoadFlags) -> Result<(Value, usize)> {
    let unknown = RefCell::new(BTreeSet::new());
    let note = |module: &str, name: &str| {
        if !allowed(module, name) {
            unknown.borrow_mut().insert(format!("{module}.{name}"));
        }
        true
    };
    let (root, used) = pickle::read_prefix(bytes, &note, Limits::default())?;
    let unknown = unknown.into_inner();
    if let Some(first) = unknown.iter().next().filter(|_| !flags.skip_unknown) {
        let all: Vec<&str> = unknown.iter().map(String::as_str).collect();
        crate::bail!(
            Format,
            "{what}: global {first} is not allowed in a tensor file (the globals outside the \
             allowlist: {}): TSR_LOAD_SKIP_UNKNOWN loads the tensors around such objects, \
             which are never imported or called",
            all.join(", ")
        );
    }
    Ok((root, used))
}
