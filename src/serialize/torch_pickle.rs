//! The torch formats' pickles and archives: the globals a tensor file may
//! name (the allowlist), the restricted read of one pickle, and where the
//! records of a torch zip archive lie. Shared by the zip, TorchScript and
//! legacy readers; the tree walk over what they read is `torch_read`.

use super::dtypes;
use super::source::Source;
use super::zip_index;
use super::LoadFlags;
use crate::error::{Error, Result};
use crate::pickle::{self, Limits, Pickle};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

fn fmt_err(what: impl std::fmt::Display) -> Error {
    crate::err!(Format, "{what}")
}

/// Metadata key listing (one per line) the values of a torch file that
/// were not loaded, each with what it is.
pub const SKIPPED_KEY: &str = "tessera.skipped";

/// The functions of torch that rebuild a dense tensor, which the tree
/// walk (`torch_tensor`) interprets.
pub(crate) const TENSOR_REBUILDS: &[(&str, &str)] = &[
    ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_tensor_v3"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch._utils", "_rebuild_parameter_with_state"),
    ("torch._tensor", "_rebuild_from_type"),
    ("torch._tensor", "_rebuild_from_type_v2"),
];

/// torch's rebuilds of tensors tessera does not hold, with what they
/// rebuild: a file naming one is refused naming it (or, with
/// TSR_LOAD_SKIP_UNKNOWN, the value is listed as skipped).
pub(crate) const REFUSED_REBUILDS: &[(&str, &str)] = &[
    ("_rebuild_qtensor", "a quantized tensor"),
    ("_rebuild_sparse_tensor", "a sparse tensor"),
    ("_rebuild_nested_tensor", "a nested tensor"),
    (
        "_rebuild_meta_tensor_no_storage",
        "a tensor on the meta device (no data)",
    ),
    (
        "_rebuild_wrapper_subclass",
        "a wrapper tensor subclass (no storage of its own)",
    ),
    (
        "_rebuild_device_tensor_from_numpy",
        "a tensor of a device saved through NumPy",
    ),
    (
        "_rebuild_device_tensor_from_cpu_tensor",
        "a tensor of a device saved through the CPU",
    ),
    ("_rebuild_xla_tensor", "an XLA tensor"),
    ("_rebuild_mtia_tensor", "an MTIA tensor"),
];

/// What `module.name` rebuilds when it is one of [`REFUSED_REBUILDS`].
pub(crate) fn refused_rebuild(module: &str, name: &str) -> Option<&'static str> {
    (module == "torch._utils")
        .then(|| REFUSED_REBUILDS.iter().find(|(n, _)| *n == name))
        .flatten()
        .map(|(_, what)| *what)
}

/// The globals a tensor file may name. TorchScript's classes
/// (`__torch__.*`) are placeholders whose state holds the module's
/// attributes; nothing named is ever imported or called.
pub(crate) fn allowed(module: &str, name: &str) -> bool {
    if module == "__torch__" || module.starts_with("__torch__.") {
        return true;
    }
    if TENSOR_REBUILDS.contains(&(module, name)) {
        return true;
    }
    match module {
        "collections" => name == "OrderedDict",
        "torch" => {
            name == "device"
                || dtypes::dtype_of_storage_name(name).is_some()
                || dtypes::dtype_of_torch_name(name).is_some()
                || dtypes::dtype_of_tensor_type(name).is_some()
        }
        // Old GPU checkpoints' tensor types and storages (loaded on the CPU).
        "torch.cuda" => {
            dtypes::dtype_of_storage_name(name).is_some()
                || dtypes::dtype_of_tensor_type(name).is_some()
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
    pub(crate) fn pickle<'a>(
        &self,
        source: &Source<'a>,
        name: &str,
        flags: LoadFlags,
    ) -> Result<Option<Pickle<'a>>> {
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
/// then refused naming every such global (what it rebuilds, for torch's
/// rebuilds of tensors tessera does not hold) and the flag.
pub(crate) fn read_pickle<'a>(
    bytes: &'a [u8],
    what: &str,
    flags: LoadFlags,
) -> Result<(Pickle<'a>, usize)> {
    let unknown = RefCell::new(BTreeSet::new());
    let note = |module: &str, name: &str| {
        if !allowed(module, name) {
            unknown.borrow_mut().insert(format!("{module}.{name}"));
        }
        true
    };
    let (root, used) = pickle::parse_prefix(bytes, &note, Limits::default())?;
    let unknown = unknown.into_inner();
    if let Some(first) = unknown.iter().next().filter(|_| !flags.skip_unknown) {
        let all: Vec<&str> = unknown.iter().map(String::as_str).collect();
        let rebuilt = first
            .strip_prefix("torch._utils.")
            .and_then(|n| refused_rebuild("torch._utils", n))
            .map_or(String::new(), |what| {
                format!(" ({what}, which tessera does not read)")
            });
        crate::bail!(
            Format,
            "{what}: global {first}{rebuilt} is not allowed in a tensor file (the globals \
             outside the allowlist: {}): TSR_LOAD_SKIP_UNKNOWN loads the tensors around such \
             objects, which are never imported or called, and lists them in {}",
            all.join(", "),
            SKIPPED_KEY
        );
    }
    Ok((root, used))
}
