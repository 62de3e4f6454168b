//! Reading the TORCH format: archives written by torch.save (Python) and
//! torch::pickle_save (libtorch), and by tessera.
//!
//! The archive's records come from its central directory
//! (`zip_index`); each record must be stored (not compressed). The
//! pickle is read by the restricted reader ([`crate::pickle::read`]) with
//! the allowlist below, then interpreted: dicts and OrderedDicts (and
//! libtorch's type-tagged dicts, and lists / tuples, named by index) of
//! tensors and nested dicts, names joined with "."; tensors rebuilt by
//! `_rebuild_tensor_v2` / `_v3` and `_rebuild_parameter`; every storage
//! loaded once per key and read in one dtype, so tensors that shared one
//! share it again (a legacy view of a storage is a place on it); any
//! other value skipped, its name listed in the metadata key
//! [`SKIPPED_KEY`]. Storages saved from another device load on the CPU.

use super::dict::TensorDict;
use super::dtypes;
use super::source::{Record, Source};
use super::torch_pickle::{allowed, index_archive, Records};
use super::LoadFlags;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::pickle::{self, Limits, Value};
use crate::tensor::Tensor;
use std::collections::HashMap;

/// Metadata key listing (one per line) the names of skipped non-tensor
/// values.
pub const SKIPPED_KEY: &str = "tessera.skipped";

fn fmt_err(what: impl std::fmt::Display) -> Error {
    crate::err!(Format, "{what}")
}

struct Loader<'a> {
    source: &'a Source<'a>,
    records: Records,
    /// The directory of the current tree's storage records ("data/").
    tensor_dir: String,
    /// Storage key -> (record, dtype of its first tensor).
    storages: HashMap<String, (std::rc::Rc<Record>, DType)>,
    dict: TensorDict,
    skipped: Vec<String>,
}

/// Reads a torch archive from `source`.
pub(crate) fn read(source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict> {
    let records = index_archive(source.bytes)?;
    let root = records
        .pickle(source, "data.pkl", flags)?
        .expect("index_archive found data.pkl");
    let tree = Tree::data(&root, "data.pkl");
    read_tree(source, records, &[tree])
}

/// One unpickled archive of a file and where its storages lie.
pub(crate) struct Tree<'v> {
    /// The unpickled value.
    pub root: &'v Value,
    /// Its record, in messages ("data.pkl").
    pub what: &'v str,
    /// The directory of its storage records in the archive ("data/"):
    /// storage key K is the record `<prefix><tensor_dir>K`.
    pub tensor_dir: &'v str,
    /// Prefixed to every name it gives ("" for data.pkl).
    pub names: &'v str,
}

impl<'v> Tree<'v> {
    /// The main pickle, its storages in `data/`.
    pub(crate) fn data(root: &'v Value, what: &'v str) -> Self {
        Tree {
            root,
            what,
            tensor_dir: "data/",
            names: "",
        }
    }
}

/// The `module.name` of a value built from a global outside [`allowed`].
fn unknown_global(v: &Value) -> Option<String> {
    let global = match untag(v) {
        Value::Reduce { callable, .. } => callable.as_global(),
        g @ Value::Global { .. } => g.as_global(),
        _ => None,
    };
    global
        .filter(|(m, n)| !allowed(m, n))
        .map(|(m, n)| format!("{m}.{n}"))
}

/// The dict of the unpickled `trees`, in order, their storages in
/// `records`: the part of reading shared by the zip, TorchScript and
/// legacy formats. The first tree may be a lone tensor (named "tensor");
/// the others must be dict-like or empty. Storage keys are per tree
/// (TorchScript's data/0 and constants/0 are two storages).
pub(crate) fn read_tree(
    source: &Source<'_>,
    records: Records,
    trees: &[Tree<'_>],
) -> Result<TensorDict> {
    let mut loader = Loader {
        source,
        records,
        tensor_dir: "data/".to_owned(),
        storages: HashMap::new(),
        dict: TensorDict::new(),
        skipped: Vec::new(),
    };
    for (i, tree) in trees.iter().enumerate() {
        tree.tensor_dir.clone_into(&mut loader.tensor_dir);
        loader.storages.clear();
        match loader.entries(tree.root) {
            Some(items) => loader.walk(items, tree.names)?,
            None if matches!(untag(tree.root), Value::Tuple(v) | Value::List(v) if v.is_empty()) => {
            }
            None => match loader.tensor("tensor", tree.root)? {
                Some(t) if i == 0 => loader.dict.set("tensor", t)?,
                _ => crate::bail!(
                    Format,
                    "{} holds {}: expected a dict of tensors",
                    tree.what,
                    tree.root.describe()
                ),
            },
        }
    }
    if !loader.skipped.is_empty() {
        let list = loader.skipped.join("\n");
        loader.dict.set_metadata(SKIPPED_KEY, &list)?;
    }
    loader.read_metadata()?;
    Ok(loader.dict)
}

/// The value inside libtorch's type tags and list builders.
fn untag(v: &Value) -> &Value {
    if let Value::Reduce { callable, args, .. } = v {
        if let Some(("torch.jit._pickle", name)) = callable.as_global() {
            if name == "restore_type_tag" || name.starts_with("build_") {
                if let Some(first) = args.as_seq().and_then(|a| a.first()) {
                    return untag(first);
                }
            }
        }
    }
    v
}

/// A key of a dict, as a name part.
fn key_name(k: &Value) -> Option<String> {
    match k {
        Value::Str(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

impl Loader<'_> {
    /// The (key, value) items of a dict-like value.
    fn entries<'v>(&self, v: &'v Value) -> Option<Vec<(String, &'v Value)>> {
        let named = |items: &'v [(Value, Value)]| -> Vec<(String, &'v Value)> {
            items
                .iter()
                .map(|(k, v)| (key_name(k).unwrap_or_else(|| format!("{k:?}")), v))
                .collect()
        };
        match untag(v) {
            Value::Dict(items) => Some(named(items)),
            Value::Reduce {
                callable, items, ..
            } if callable.as_global() == Some(("collections", "OrderedDict")) => Some(named(items)),
            // A TorchScript object: its attributes are its state.
            Value::Reduce {
                callable,
                state: Some(state),
                ..
            } if callable
                .as_global()
                .is_some_and(|(m, _)| m == "__torch__" || m.starts_with("__torch__.")) =>
            {
                match &**state {
                    Value::Dict(items) => Some(named(items)),
                    _ => None,
                }
            }
            Value::List(vs) | Value::Tuple(vs) if !vs.is_empty() => Some(
                vs.iter()
                    .enumerate()
                    .map(|(i, v)| (i.to_string(), v))
                    .collect(),
            ),
            _ => None,
        }
    }

    fn walk(&mut self, items: Vec<(String, &Value)>, prefix: &str) -> Result<()> {
        for (key, value) in items {
            let name = format!("{prefix}{key}");
            if let Some(t) = self.tensor(&name, value)? {
                crate::ensure!(
                    self.dict.get(&name).is_none(),
                    Format,
                    "two tensors are named '{name}' (a key holding '.' and a nested dict, or a \
                     TorchScript attribute 'constants' beside the constants)"
                );
                self.dict.set(&name, t)?;
            } else if let Some(inner) = self.entries(value) {
                self.walk(inner, &format!("{name}."))?;
            } else {
                self.skipped.push(match unknown_global(value) {
                    Some(global) => format!("{name} ({global})"),
                    None => name,
                });
            }
        }
        Ok(())
    }

    /// The tensor `v` rebuilds, None when it is not a tensor.
    fn tensor(&mut self, name: &str, v: &Value) -> Result<Option<Tensor>> {
        let Value::Reduce { callable, args, .. } = untag(v) else {
            return Ok(None);
        };
        let Some(("torch._utils", func)) = callable.as_global() else {
            return Ok(None);
        };
        let args = args.as_seq().unwrap_or(&[]);
        match func {
            "_rebuild_parameter" | "_rebuild_parameter_with_state" => {
                let Some(data) = args.first() else {
                    crate::bail!(Format, "tensor '{name}': {func} without arguments");
                };
                match self.tensor(name, data)? {
                    Some(t) => Ok(Some(t)),
                    None => crate::bail!(
                        Format,
                        "tensor '{name}': {func} of {}: expected a tensor",
                        data.describe()
                    ),
                }
            }
            "_rebuild_tensor_v2" | "_rebuild_tensor_v3" => {
                let v3 = func == "_rebuild_tensor_v3";
                crate::ensure!(
                    args.len() >= if v3 { 7 } else { 6 },
                    Format,
                    "tensor '{name}': {func} with {} arguments: expected {}",
                    args.len(),
                    if v3 { 7 } else { 6 }
                );
                let dtype = if v3 {
                    let d = args[6].as_global().and_then(|(m, n)| {
                        (m == "torch")
                            .then(|| dtypes::dtype_of_torch_name(n))
                            .flatten()
                    });
                    match d {
                        Some(d) => Some(d),
                        None => crate::bail!(
                            Format,
                            "tensor '{name}': dtype argument {}: expected a torch dtype",
                            args[6].describe()
                        ),
                    }
                } else {
                    None
                };
                self.rebuild(name, args, dtype).map(Some)
            }
            _ => Ok(None),
        }
    }

    fn ints(name: &str, what: &str, v: &Value) -> Result<Vec<i64>> {
        let seq = untag(v).as_seq().ok_or_else(|| {
            fmt_err(format_args!(
                "tensor '{name}': {what} is {}: expected a tuple of ints",
                v.describe()
            ))
        })?;
        seq.iter()
            .map(|x| {
                x.as_int().ok_or_else(|| {
                    fmt_err(format_args!(
                        "tensor '{name}': {what} holds {}: expected ints",
                        x.describe()
                    ))
                })
            })
            .collect()
    }

    fn rebuild(&mut self, name: &str, args: &[Value], dtype: Option<DType>) -> Result<Tensor> {
        let (record, dtype) = self.storage(name, &args[0], dtype)?;
        let offset = args[1].as_int().ok_or_else(|| {
            fmt_err(format_args!(
                "tensor '{name}': storage offset is {}: expected an int",
                args[1].describe()
            ))
        })?;
        let sizes = Self::ints(name, "size", &args[2])?;
        let strides = Self::ints(name, "stride", &args[3])?;
        let storage_offset = record.place(name, offset, &sizes, &strides, dtype)?;
        Tensor::from_storage(
            &record.storage,
            storage_offset,
            &sizes,
            Some(&strides),
            dtype,
        )
        .map_err(|e| fmt_err(format_args!("tensor '{name}': {e}")))
    }

    /// The storage a persistent id names, loaded once per key.
    fn storage(
        &mut self,
        name: &str,
        pid: &Value,
        v3_dtype: Option<DType>,
    ) -> Result<(std::rc::Rc<Record>, DType)> {
        let bad = |why: &str| {
            fmt_err(format_args!(
                "tensor '{name}': storage {}: {why}",
                pid.describe()
            ))
        };
        let Value::PersistentId(id) = pid else {
            return Err(bad("expected a persistent id"));
        };
        let parts = id.as_seq().ok_or_else(|| bad("expected a tuple id"))?;
        // torch.save's legacy format adds a sixth part: None, or the
        // (view key, offset, numel) of a view of the storage.
        let (kind, class, key, numel, view) = match parts {
            [kind, class, key, _location, numel] => (kind, class, key, numel, None),
            [kind, class, key, _location, numel, view] => (kind, class, key, numel, Some(view)),
            _ => return Err(bad("expected ('storage', type, key, location, numel)")),
        };
        if kind.as_str() != Some("storage") {
            return Err(bad("the id does not start with 'storage'"));
        }
        let class_dtype = class
            .as_global()
            .and_then(|(_, n)| dtypes::dtype_of_storage_name(n))
            .ok_or_else(|| bad("unknown storage type"))?;
        let dtype = match (class_dtype, v3_dtype) {
            (Some(d), _) => d,
            (None, Some(d)) => d,
            (None, None) => return Err(bad("an UntypedStorage needs _rebuild_tensor_v3's dtype")),
        };
        let key = key_name(key).ok_or_else(|| bad("the key is not a string"))?;
        let numel = numel
            .as_int()
            .filter(|&n| n >= 0)
            .ok_or_else(|| bad("numel is not a non-negative int"))? as u64;
        let elem = if class_dtype.is_some() {
            dtype.itemsize() as u64
        } else {
            1
        };
        let view = view.filter(|v| **v != Value::None);
        // One record per storage key, read in one dtype whether through a
        // view or not (a view's place is counted in that dtype's elements).
        let record = if let Some((s, d)) = self.storages.get(&key) {
            crate::ensure!(
                *d == dtype,
                Format,
                "tensor '{name}': storage '{key}' is read as {} and as {}: expected one dtype per storage",
                d.name(),
                dtype.name()
            );
            s.clone()
        } else {
            let record = format!("{}{}{key}", self.records.prefix, self.tensor_dir);
            let Some(&(off, len)) = self.records.map.get(&record) else {
                crate::bail!(
                    Format,
                    "tensor '{name}': storage key '{key}' has no record {record} in the archive"
                );
            };
            let nbytes = numel.checked_mul(elem).ok_or_else(|| {
                fmt_err(format_args!(
                    "tensor '{name}': storage '{key}' numel {numel} x {elem} bytes overflows"
                ))
            })?;
            crate::ensure!(
                nbytes <= len as u64,
                Format,
                "tensor '{name}': storage '{key}' of {numel} elements needs {nbytes} bytes, its record {record} holds {len}"
            );
            let record =
                std::rc::Rc::new(self.source.record(off, nbytes as usize, dtype.itemsize())?);
            self.storages.insert(key.clone(), (record.clone(), dtype));
            record
        };
        match view {
            Some(view) => Self::storage_view(name, &key, view, &record, dtype, elem),
            None => Ok((record, dtype)),
        }
    }

    /// A legacy storage view: `numel` elements at element `offset` of the
    /// storage `root` (loaded as `whole`): a record on the root's own
    /// storage, placed at the view, so views of one storage share it (as
    /// torch's legacy loader shares the root's memory) and never overlap
    /// another storage.
    fn storage_view(
        name: &str,
        root: &str,
        view: &Value,
        whole: &Record,
        dtype: DType,
        elem: u64,
    ) -> Result<(std::rc::Rc<Record>, DType)> {
        let parts = view.as_seq().unwrap_or(&[]);
        let [_view_key, offset, numel] = parts else {
            crate::bail!(
                Format,
                "tensor '{name}': storage '{root}' view {}: expected (view key, offset, numel)",
                view.describe()
            );
        };
        let item = dtype.itemsize() as u64;
        let range = offset
            .as_int()
            .zip(numel.as_int())
            .filter(|&(o, n)| o >= 0 && n >= 0)
            .and_then(|(o, n)| {
                let start = (o as u64).checked_mul(elem)?;
                let end = (n as u64).checked_mul(elem)?.checked_add(start)?;
                (end <= whole.len as u64 && start % item == 0).then_some((start, end))
            });
        let base = range.and_then(|(start, _)| whole.base.checked_add((start / item) as i64));
        let (Some((start, end)), Some(base)) = (range, base) else {
            crate::bail!(
                Format,
                "tensor '{name}': storage '{root}' view {}: expected an offset and numel \
                 within its {} bytes, in whole elements of {}",
                view.describe(),
                whole.len,
                dtype.name()
            );
        };
        let record = Record {
            storage: whole.storage.clone(),
            base,
            len: (end - start) as usize,
        };
        Ok((std::rc::Rc::new(record), dtype))
    }

    /// tessera's own metadata record, if present.
    fn read_metadata(&mut self) -> Result<()> {
        let record = format!("{}tessera_metadata.pkl", self.records.prefix);
        let Some(&(off, len)) = self.records.map.get(&record) else {
            return Ok(());
        };
        let v = pickle::read(
            &self.source.bytes[off..off + len],
            &|_, _| false,
            Limits::default(),
        )?;
        let Value::Dict(items) = v else {
            crate::bail!(Format, "{record} holds {}: expected a dict", v.describe());
        };
        for (k, v) in items {
            match (k.as_str(), v.as_str()) {
                (Some(k), Some(v)) => self.dict.set_metadata(k, v)?,
                _ => crate::bail!(Format, "{record}: expected str keys and values"),
            }
        }
        Ok(())
    }
}
