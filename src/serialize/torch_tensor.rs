//! The tensors of a torch pickle: torch's rebuild calls (`_rebuild_tensor`
//! and its `_v2` / `_v3`, `_rebuild_parameter` and `_with_state`,
//! `_rebuild_from_type` and `_v2`, the persistent ids of the tar
//! container) turned into tensors over the file's storage records, each
//! storage loaded once per key (swapped when the file's byte order is
//! big-endian). Part of the tree walk of `torch_read`.

use super::dtypes;
use super::source::Record;
use super::torch_loader::{Loaded, Loader};
use super::torch_pickle::{refused_rebuild, SKIPPED_KEY};
use super::torch_values::{is_empty_dict, key_name, untag};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::pickle::{Call, Kind, Seq, Val};
use crate::tensor::Tensor;
use std::rc::Rc;

fn fmt_err(what: impl std::fmt::Display) -> Error {
    crate::err!(Format, "{what}")
}

impl<'p> Loader<'_, 'p> {
    /// The tensor `v` rebuilds; None when `v` is not a tensor. Torch's
    /// rebuilds of tensors tessera does not hold (quantized, sparse, ...)
    /// and tensors with the conjugate or negative bit are refused naming
    /// them, or, with TSR_LOAD_SKIP_UNKNOWN, listed as skipped (then also
    /// None).
    pub(super) fn tensor(&mut self, name: &str, v: Val<'p>) -> Result<Option<Tensor>> {
        let v = untag(v);
        let call = match v.kind() {
            Kind::Call(c) => c,
            Kind::PersistentId(id) => return self.tar_tensor(name, v, id),
            _ => return Ok(None),
        };
        let args = call.args;
        match (call.module, call.name) {
            ("torch._utils", f @ ("_rebuild_parameter" | "_rebuild_parameter_with_state")) => {
                let Some(data) = args.get(0) else {
                    crate::bail!(Format, "tensor '{name}': {f} without arguments");
                };
                let Some(t) = self.tensor(name, data)? else {
                    crate::bail!(
                        Format,
                        "tensor '{name}': {f} of {}: expected a tensor",
                        data.describe()
                    );
                };
                self.note_hooks(name, args.get(2));
                if let Some(state) = args.get(3) {
                    self.note_state(name, "the parameter", state);
                }
                Ok(Some(t))
            }
            ("torch._tensor", f @ ("_rebuild_from_type" | "_rebuild_from_type_v2")) => {
                let (Some(func), Some(class), Some(inner)) =
                    (args.get(0), args.get(1), args.get(2))
                else {
                    crate::bail!(
                        Format,
                        "tensor '{name}': {f} with {} arguments: expected (function, type, \
                         arguments, state)",
                        args.len()
                    );
                };
                let (Some((m, n)), Some(inner)) = (func.as_global(), inner.as_seq()) else {
                    crate::bail!(
                        Format,
                        "tensor '{name}': {f} of {} with {}: expected a rebuild function and \
                         its arguments",
                        func.describe(),
                        inner.describe()
                    );
                };
                let Some(t) = self.rebuild(name, m, n, inner)? else {
                    crate::bail!(
                        Format,
                        "tensor '{name}': {f} of {m}.{n}: expected a rebuild of a tensor"
                    );
                };
                match class.as_global() {
                    Some(("torch", "Tensor")) | Some(("torch.nn.parameter", "Parameter")) => {}
                    Some((m, n)) => self.skipped.push(format!(
                        "{name} (a tensor of the subclass {m}.{n}, loaded as a plain tensor)"
                    )),
                    None => crate::bail!(
                        Format,
                        "tensor '{name}': {f} with the type {}: expected a class",
                        class.describe()
                    ),
                }
                if let Some(state) = args.get(3) {
                    self.note_state(name, "the tensor", state);
                }
                Ok(Some(t))
            }
            (m, n) => {
                if let Some(t) = self.rebuild(name, m, n, args)? {
                    return Ok(Some(t));
                }
                self.tensor_type(name, call)
            }
        }
    }

    /// A tensor pickled as PyTorch before 0.4 did: its type
    /// (`torch.FloatTensor`, `torch.cuda.LongTensor`, ...) called with no
    /// arguments and BUILD state `(storage, offset, size, stride)`, or a
    /// Variable's `(data, ...)` of 5 parts (Tensor.__setstate__'s forms).
    fn tensor_type(&mut self, name: &str, call: Call<'p>) -> Result<Option<Tensor>> {
        let dtype = match (call.module, call.name) {
            ("torch" | "torch.cuda", n) => dtypes::dtype_of_tensor_type(n),
            _ => None,
        };
        let Some(dtype) = dtype else {
            return Ok(None);
        };
        let state: Vec<Val<'p>> = match call.state.and_then(|s| s.as_seq()) {
            Some(s) if call.args.is_empty() => s.iter().collect(),
            _ => crate::bail!(
                Format,
                "tensor '{name}': {}.{} with {} arguments and state {}: expected no arguments \
                 and a state of (storage, offset, size, stride)",
                call.module,
                call.name,
                call.args.len(),
                call.state.map_or("None".to_owned(), |s| s.describe())
            ),
        };
        match state.len() {
            4 => {
                let t = self.dense(name, &state, Some(dtype), true)?;
                Ok(Some(t))
            }
            5 => match self.tensor(name, state[0])? {
                Some(t) => Ok(Some(t)),
                None => crate::bail!(
                    Format,
                    "tensor '{name}': a Variable's state holds {}: expected a tensor",
                    state[0].describe()
                ),
            },
            n => crate::bail!(
                Format,
                "tensor '{name}': {}.{} with a state of {n} parts: expected 4 (storage, \
                 offset, size, stride) or 5 (a Variable's)",
                call.module,
                call.name
            ),
        }
    }

    /// `module.name(*args)` when it is a dense tensor's rebuild; None for
    /// any other call.
    fn rebuild(
        &mut self,
        name: &str,
        module: &str,
        f: &str,
        args: Seq<'p>,
    ) -> Result<Option<Tensor>> {
        if let Some(what) = refused_rebuild(module, f) {
            return self.refuse(name, &format!("{what} (torch._utils.{f})"), None);
        }
        let (min, dtype_at, metadata_at) = match (module, f) {
            ("torch._utils", "_rebuild_tensor") => (4, None, None),
            ("torch._utils", "_rebuild_tensor_v2") => (6, None, Some(6)),
            ("torch._utils", "_rebuild_tensor_v3") => (7, Some(6), Some(7)),
            _ => return Ok(None),
        };
        crate::ensure!(
            args.len() >= min,
            Format,
            "tensor '{name}': {f} with {} arguments: expected {min} or more",
            args.len()
        );
        let arg = |i: usize| args.get(i).expect("checked above");
        if let Some(meta) = metadata_at.and_then(|i| args.get(i)) {
            if let Some(bit) = self.set_bit(name, meta)? {
                return self.refuse(
                    name,
                    &format!("a tensor with torch's {bit} bit set (its values are not its bytes)"),
                    Some(meta),
                );
            }
        }
        if min >= 6 {
            self.note_hooks(name, args.get(5));
        }
        let dtype = match dtype_at.map(arg) {
            None => None,
            Some(d) => match d.as_global() {
                Some(("torch", n)) if dtypes::dtype_of_torch_name(n).is_some() => {
                    dtypes::dtype_of_torch_name(n)
                }
                _ => crate::bail!(
                    Format,
                    "tensor '{name}': dtype argument {}: expected a torch dtype",
                    d.describe()
                ),
            },
        };
        let parts: Vec<Val<'p>> = args.iter().take(4).collect();
        self.dense(name, &parts, dtype, false).map(Some)
    }

    /// The tensor of `(storage, offset, size, stride)`; the storage read
    /// as `dtype` when it is untyped, or (`typed`: a legacy tensor type)
    /// checked to hold it.
    fn dense(
        &mut self,
        name: &str,
        parts: &[Val<'p>],
        dtype: Option<DType>,
        typed: bool,
    ) -> Result<Tensor> {
        let (record, dtype) = match (typed, dtype) {
            (true, Some(want)) => {
                let (record, got) = self.storage(name, parts[0], Some(want))?;
                crate::ensure!(
                    got == want,
                    Format,
                    "tensor '{name}': a {} tensor type over a storage of {}: expected the \
                     same dtype",
                    want.name(),
                    got.name()
                );
                (record, got)
            }
            _ => self.storage(name, parts[0], dtype)?,
        };
        let offset = parts[1].as_int().ok_or_else(|| {
            fmt_err(format_args!(
                "tensor '{name}': storage offset is {}: expected an int",
                parts[1].describe()
            ))
        })?;
        let sizes = ints(name, "size", parts[2])?;
        let strides = ints(name, "stride", parts[3])?;
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

    /// A value tessera cannot load as `what`: refused naming it, or with
    /// TSR_LOAD_SKIP_UNKNOWN listed as skipped (its storages with it).
    fn refuse(&mut self, name: &str, what: &str, v: Option<Val<'p>>) -> Result<Option<Tensor>> {
        crate::ensure!(
            self.flags.skip_unknown,
            Format,
            "tensor '{name}' is {what}, which tessera does not read: TSR_LOAD_SKIP_UNKNOWN \
             loads the other tensors and lists it in {}",
            SKIPPED_KEY
        );
        self.skip(format!("{name} ({what})"), v);
        Ok(None)
    }

    /// The name of a conjugate or negative bit `metadata` sets, if any
    /// (torch's tensor metadata: a dict of bools).
    fn set_bit(&self, name: &str, metadata: Val<'p>) -> Result<Option<&'static str>> {
        let items = match untag(metadata).kind() {
            Kind::None => return Ok(None),
            Kind::Dict(d) => d,
            Kind::Call(c) if (c.module, c.name) == ("collections", "OrderedDict") => c.items,
            _ => crate::bail!(
                Format,
                "tensor '{name}': metadata {}: expected a dict of bools",
                metadata.describe()
            ),
        };
        for (k, v) in items.iter() {
            let on = v.as_int().is_some_and(|b| b != 0);
            match k.as_str() {
                Some("conj") if on => return Ok(Some("conjugate")),
                Some("neg") if on => return Ok(Some("negative")),
                Some("conj" | "neg") => {}
                _ => crate::bail!(
                    Format,
                    "tensor '{name}': metadata key {}: expected 'conj' or 'neg'",
                    k.describe()
                ),
            }
        }
        Ok(None)
    }

    /// Lists a tensor's backward hooks (never called) when there are any.
    fn note_hooks(&mut self, name: &str, hooks: Option<Val<'p>>) {
        let Some(hooks) = hooks else { return };
        if !is_empty_dict(hooks) {
            self.skip(
                format!("{name} (its backward hooks, never called)"),
                Some(hooks),
            );
        }
    }

    /// Lists the Python attributes a tensor or parameter was saved with
    /// (`of`: "the parameter"), when there are any.
    fn note_state(&mut self, name: &str, of: &str, state: Val<'p>) {
        let dicts: Vec<Val<'p>> = match state.kind() {
            Kind::Tuple(s) => s.iter().collect(),
            _ => vec![state],
        };
        for d in dicts {
            match untag(d).kind() {
                Kind::None => {}
                Kind::Dict(items) => {
                    for (k, v) in items.iter() {
                        let k = key_name(k);
                        self.skip(format!("{name} ({of}'s attribute '{k}')"), Some(v));
                    }
                }
                _ => self.skip(format!("{name} ({of}'s state)"), Some(d)),
            }
        }
    }

    /// The tensor a persistent id names in the tar container (the ids
    /// there are tensor keys); None elsewhere.
    fn tar_tensor(&mut self, name: &str, v: Val<'p>, id: Val<'p>) -> Result<Option<Tensor>> {
        let Some(tar) = &self.tar else {
            return Ok(None);
        };
        let key = key_name(id);
        let Some(t) = tar.tensors.get(&key) else {
            crate::ensure!(
                tar.storages.contains_key(&key),
                Format,
                "'{name}': the persistent id '{key}' names no tensor or storage of the tar \
                 container"
            );
            return Ok(None); // a storage: listed as one
        };
        let t = t.clone();
        self.accounted.insert(v.id());
        self.used_keys.insert(key);
        Ok(Some(t))
    }

    /// The storage a persistent id names, loaded once per key (a legacy
    /// view once per view key), with the dtype its tensor reads it as:
    /// the storage class's, or `v3_dtype` for an UntypedStorage.
    pub(super) fn storage(
        &mut self,
        name: &str,
        pid: Val<'p>,
        v3_dtype: Option<DType>,
    ) -> Result<Loaded> {
        let bad = |why: &str| {
            fmt_err(format_args!(
                "tensor '{name}': storage {}: {why}",
                pid.describe()
            ))
        };
        let Kind::PersistentId(id) = pid.kind() else {
            return Err(bad("expected a persistent id"));
        };
        if let Some(tar) = &self.tar {
            let key = key_name(id);
            let Some(s) = tar.storages.get(&key) else {
                return Err(bad("the tar container's 'storages' entry has no such key"));
            };
            self.accounted.insert(pid.id());
            return Ok(s.clone());
        }
        let parts = id.as_seq().ok_or_else(|| bad("expected a tuple id"))?;
        let part = |i: usize| parts.get(i).expect("length checked");
        // torch.save's legacy format adds a sixth part: None, or the
        // (view key, offset, numel) of a view of the storage.
        let view = match parts.len() {
            5 => None,
            6 => Some(part(5)).filter(|v| !v.is_none()),
            _ => return Err(bad("expected ('storage', type, key, location, numel)")),
        };
        if part(0).as_str() != Some("storage") {
            return Err(bad("the id does not start with 'storage'"));
        }
        let class_dtype = part(1)
            .as_global()
            .and_then(|(_, n)| dtypes::dtype_of_storage_name(n))
            .ok_or_else(|| bad("unknown storage type"))?;
        let dtype = match (class_dtype, v3_dtype) {
            (Some(d), _) => d,
            (None, Some(d)) => d,
            (None, None) => return Err(bad("an UntypedStorage needs _rebuild_tensor_v3's dtype")),
        };
        let key = match part(2).kind() {
            Kind::Str(_) | Kind::Int(_) => key_name(part(2)),
            _ => return Err(bad("the key is not a string")),
        };
        let numel = part(4)
            .as_int()
            .filter(|&n| n >= 0)
            .ok_or_else(|| bad("numel is not a non-negative int"))? as u64;
        let elem = if class_dtype.is_some() {
            dtype.itemsize() as u64
        } else {
            1
        };
        self.accounted.insert(pid.id());
        self.used_keys.insert(key.clone());
        // One dtype per storage key, its views included.
        if let Some(d) = self
            .dtypes
            .insert(key.clone(), dtype)
            .filter(|d| *d != dtype)
        {
            crate::bail!(
                Format,
                "tensor '{name}': storage '{key}' is read as {} and as {}: expected one dtype \
                 per storage",
                d.name(),
                dtype.name()
            );
        }
        // One record per storage key, read in one dtype whether through a
        // view or not (a view's place is counted in that dtype's elements).
        let whole = match self.storages.get(&key) {
            Some((s, _)) => s.clone(),
            None => {
                let record = format!("{}{}{key}", self.records.prefix, self.tensor_dir);
                let Some(&(off, len)) = self.records.map.get(&record) else {
                    crate::bail!(
                        Format,
                        "tensor '{name}': storage key '{key}' has no record {record} in the \
                         archive"
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
                    "tensor '{name}': storage '{key}' of {numel} elements needs {nbytes} bytes, \
                     its record {record} holds {len}"
                );
                let whole = Rc::new(self.record(off, nbytes as usize, dtype)?);
                self.storages.insert(key.clone(), (whole.clone(), dtype));
                whole
            }
        };
        match view {
            Some(view) => storage_view(name, &key, view, &whole, dtype, elem),
            None => Ok((whole, dtype)),
        }
    }

    /// The `len` bytes at `off` as a storage record for `dtype`: viewed
    /// or copied as the source allows, or, in a big-endian file, copied
    /// with each element's bytes reversed (each half of a complex).
    pub(super) fn record(&self, off: usize, len: usize, dtype: DType) -> Result<Record> {
        if !self.big_endian {
            return self.source.record(off, len, dtype.itemsize());
        }
        let width = if dtype.is_complex() {
            dtype.itemsize() / 2
        } else {
            dtype.itemsize()
        };
        self.source.record_swapped(off, len, width)
    }
}

/// A legacy storage view `(view key, offset, numel)`: `numel` elements at
/// element `offset` of the storage `root` (loaded as `whole`): a record on
/// the root's own storage, placed at the view, so views of one storage
/// share it (as torch's legacy loader shares the root's memory) and never
/// overlap another storage. Views are not memoized by view key: a key
/// reused for another part cannot return the wrong bytes.
fn storage_view(
    name: &str,
    root: &str,
    view: Val<'_>,
    whole: &Record,
    dtype: DType,
    elem: u64,
) -> Result<Loaded> {
    let parts: Vec<Val<'_>> = view
        .as_seq()
        .map(|s| s.iter().collect())
        .unwrap_or_default();
    let [_view_key, offset, numel] = parts[..] else {
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
            "tensor '{name}': storage '{root}' view {}: expected an offset and numel within its \
             {} bytes, in whole elements of {}",
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
    Ok((Rc::new(record), dtype))
}

/// A tuple of ints (a size or stride).
fn ints(name: &str, what: &str, v: Val<'_>) -> Result<Vec<i64>> {
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
