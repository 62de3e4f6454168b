//! Reading the TORCH format: archives written by torch.save (Python) and
//! torch::pickle_save (libtorch), and by tessera; and the tree walk the
//! other torch readers (legacy, tar, TorchScript) share.
//!
//! The walk accounts for everything the pickle gives: each value is a
//! tensor (loaded; `torch_tensor` rebuilds it), a container it walks
//! (dicts; OrderedDicts, whether their items come through SETITEMS or
//! the constructor's arguments; lists and tuples, named by index;
//! libtorch's type-tagged dicts; TorchScript objects, by attribute;
//! pickled `nn.Module`s, named as `state_dict()` names their tensors), or
//! listed by name in the metadata key [`SKIPPED_KEY`] with what it is.
//! Names are joined with ".". Every storage loads once per key, so
//! tensors that shared one share it again; a value reached twice (the
//! memo) is walked under each name. Then an audit: every persistent id
//! the walk reached must have gone to a tensor or to a skipped entry (a
//! load fails otherwise); ids the pickle built but does not hold, and
//! storage records no id names, are listed too. Storages saved from
//! another device load on the CPU; a `byteorder` record of `big` swaps
//! every storage as torch.load does.

use super::dict::TensorDict;
use super::source::Source;
use super::torch_loader::{Context, Loader};
use super::torch_pickle::{index_archive, Records, SKIPPED_KEY};
use super::torch_values::{
    describe_pid, is_module, is_module_id, join, key_name, ordered_dict_args, set_of_names,
    unknown_global, untag, ROOT,
};
use super::values::{self, Why};
use super::LoadFlags;
use crate::error::Result;
use crate::pickle::{self, Kind, Limits, Pairs, Val};
use std::collections::{HashMap, HashSet};

/// The deepest nesting the walk follows (a container holding itself is
/// refused there).
const MAX_DEPTH: u32 = 100;

/// Reads a torch archive from `source`.
pub(crate) fn read(source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict> {
    let records = index_archive(source.bytes)?;
    let root = records
        .pickle(source, "data.pkl", flags)?
        .expect("index_archive found data.pkl");
    let big_endian = byte_order(source, &records)?;
    let tree = Tree::data(root.root(), "data.pkl");
    let cx = Context {
        source,
        records,
        flags,
        big_endian,
        tar: None,
    };
    read_tree(cx, &[tree])
}

/// Whether the archive's `byteorder` record says big-endian (torch.save
/// writes `little` or `big`; files without one are little-endian).
pub(crate) fn byte_order(source: &Source<'_>, records: &Records) -> Result<bool> {
    let name = format!("{}byteorder", records.prefix);
    let Some(&(off, len)) = records.map.get(&name) else {
        return Ok(false);
    };
    match &source.bytes[off..off + len] {
        b"little" => Ok(false),
        b"big" => Ok(true),
        other => crate::bail!(
            Format,
            "the record {name} reads '{}': expected 'little' or 'big'",
            String::from_utf8_lossy(&other[..other.len().min(32)])
        ),
    }
}

/// One unpickled archive of a file and where its storages lie.
pub(crate) struct Tree<'v> {
    /// The unpickled value.
    pub root: Val<'v>,
    /// Its record, in messages ("data.pkl").
    pub what: &'v str,
    /// The directory of its storage records in the archive ("data/"):
    /// storage key K is the record `<prefix><tensor_dir>K`.
    pub tensor_dir: &'v str,
    /// The name its values are under ("" for data.pkl).
    pub names: &'v str,
}

impl<'v> Tree<'v> {
    /// The main pickle, its storages in `data/`.
    pub(crate) fn data(root: Val<'v>, what: &'v str) -> Self {
        Tree {
            root,
            what,
            tensor_dir: "data/",
            names: "",
        }
    }
}

/// The dict of the unpickled `trees`, in order, their storages in
/// `cx.records`: the part of reading shared by the zip, TorchScript,
/// legacy and tar formats. The first tree may be a lone tensor (named
/// "tensor"). Storage keys are per tree (TorchScript's data/0 and
/// constants/0 are two storages).
pub(crate) fn read_tree(cx: Context<'_, '_>, trees: &[Tree<'_>]) -> Result<TensorDict> {
    let mut loader = Loader::new(cx);
    for (i, tree) in trees.iter().enumerate() {
        tree.tensor_dir.clone_into(&mut loader.tensor_dir);
        loader.storages.clear();
        loader.dtypes.clear();
        loader.used_keys.clear();
        loader.accounted.clear();
        loader.pid_cache.clear();
        loader.walk_tree(tree, i == 0)?;
    }
    if !loader.skipped.is_empty() {
        let list = loader.skipped.join("\n");
        loader.dict.set_metadata(SKIPPED_KEY, &list)?;
    }
    loader.read_metadata()?;
    Ok(loader.dict)
}

impl<'s, 'p> Loader<'s, 'p> {
    fn walk_tree(&mut self, tree: &Tree<'p>, first: bool) -> Result<()> {
        // A legitimate walk visits each value once, or once per name a
        // shared value has: a few times the values built.
        self.steps = 4 * tree.root.pickle().len() + (1 << 20);
        let root = untag(tree.root);
        if first && tree.names.is_empty() {
            if let Some(t) = self.tensor("tensor", root)? {
                self.dict.set("tensor", t)?;
                return self.audit(tree);
            }
        }
        if self.container(tree.names, root, 0)?.is_none() {
            let empty = matches!(root.kind(), Kind::Tuple(s) | Kind::List(s) if s.is_empty());
            if !empty {
                let name = if tree.names.is_empty() {
                    ROOT
                } else {
                    tree.names
                };
                self.skip_value(name, root);
            }
        }
        self.audit(tree)
    }

    /// Counts a visit of `name`, refusing past the depth or the budget.
    fn visit(&mut self, name: &str, depth: u32) -> Result<()> {
        crate::ensure!(
            depth <= MAX_DEPTH,
            Format,
            "'{name}': values nested more than {MAX_DEPTH} deep (or a container holding \
             itself): refused"
        );
        crate::ensure!(
            self.steps > 0,
            Format,
            "'{name}': the pickle's values are reached more than 4 times their number (values \
             shared many times over): refused"
        );
        self.steps -= 1;
        Ok(())
    }

    /// Walks the value `v` named `name`.
    fn value(&mut self, name: &str, v: Val<'p>, depth: u32) -> Result<()> {
        self.visit(name, depth)?;
        let v = untag(v);
        if let Some(t) = self.tensor(name, v)? {
            crate::ensure!(
                self.dict.get(name).is_none(),
                Format,
                "two tensors are named '{name}' (a key holding '.' and a nested dict, or a \
                 TorchScript attribute 'constants' beside the constants)"
            );
            return self.dict.set(name, t);
        }
        // A value holding a tensor fails as JSON (its persistent id);
        // one past the bounds is skipped whole only when it holds none.
        let mut why = None;
        if self.dict.value(name).is_none() {
            match values::from_pickle(v, &mut self.value_budget) {
                Ok(json) if self.dict.get(name).is_none() => {
                    // Past the bounds of a kept value (its JSON text
                    // longer than estimated): left out, naming why.
                    if let Err(e) = self.dict.set_value(name, json) {
                        self.skip(format!("{name} ({}: not kept)", e.message()), Some(v));
                    }
                    return Ok(());
                }
                Ok(_) => {}
                Err(Why::Bound(w)) if self.storages_in(v) == 0 => {
                    self.skip(format!("{name} ({w}: not kept)"), Some(v));
                    return Ok(());
                }
                Err(Why::Other(w) | Why::Bound(w)) => why = Some(w),
            }
        }
        if self.container(name, v, depth)?.is_none() {
            match why {
                // A float JSON cannot hold says so; other kinds are listed
                // as before (by name, an object with its global).
                Some(w) if matches!(v.kind(), Kind::Float(_)) => {
                    self.skip(format!("{name} ({w})"), Some(v))
                }
                _ => self.skip_value(name, v),
            }
        }
        Ok(())
    }

    /// Walks `v` if it is a container: Some(()) when it was.
    fn container(&mut self, name: &str, v: Val<'p>, depth: u32) -> Result<Option<()>> {
        let items: Vec<(String, Val<'p>)> = match v.kind() {
            Kind::Dict(d) => self.items(name, d.iter()),
            Kind::List(s) | Kind::Tuple(s) if !s.is_empty() => s
                .iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect(),
            Kind::Call(c) if (c.module, c.name) == ("collections", "OrderedDict") => {
                let mut all = ordered_dict_args(name, c.args)?;
                all.extend(c.kwargs.iter());
                all.extend(c.items.iter());
                if let Some(state) = c.state {
                    self.dict_state(name, state);
                }
                self.items(name, all.into_iter())
            }
            Kind::Call(c) => match c.state.map(|s| s.kind()) {
                Some(Kind::Dict(state)) if is_module(state) => {
                    self.module(name, v, state, depth)?;
                    return Ok(Some(()));
                }
                // A TorchScript object: its attributes are its state.
                Some(Kind::Dict(state))
                    if c.module == "__torch__" || c.module.starts_with("__torch__.") =>
                {
                    self.items(name, state.iter())
                }
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        for (key, value) in items {
            self.value(&join(name, &key), value, depth + 1)?;
        }
        Ok(Some(()))
    }

    /// A dict's items by name, a key set twice keeping its first place
    /// and its last value, as in Python (the earlier value listed as
    /// skipped).
    fn items(
        &mut self,
        name: &str,
        items: impl Iterator<Item = (Val<'p>, Val<'p>)>,
    ) -> Vec<(String, Val<'p>)> {
        let mut out: Vec<(String, Val<'p>)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        for (k, v) in items {
            let key = key_name(k);
            match at.get(&key) {
                Some(&i) => {
                    let old = std::mem::replace(&mut out[i].1, v);
                    let what = format!(
                        "{} (replaced by a later value of its key)",
                        join(name, &key)
                    );
                    self.skip(what, Some(old));
                }
                None => {
                    at.insert(key.clone(), out.len());
                    out.push((key, v));
                }
            }
        }
        out
    }

    /// An OrderedDict's attributes (BUILD state): `_metadata`, the
    /// version record `state_dict()` attaches, holds no tensor and is
    /// dropped; any other attribute is listed as skipped.
    fn dict_state(&mut self, name: &str, state: Val<'p>) {
        if let Kind::Dict(attrs) = state.kind() {
            for (k, v) in attrs.iter() {
                if k.as_str() == Some("_metadata") && self.storages_in(v) == 0 {
                    continue;
                }
                let what = format!(
                    "{} (an attribute '{}' of the OrderedDict)",
                    if name.is_empty() { ROOT } else { name },
                    key_name(k)
                );
                self.skip(what, Some(v));
            }
        } else if !state.is_none() {
            let what = format!(
                "{} (the OrderedDict's state)",
                if name.is_empty() { ROOT } else { name }
            );
            self.skip(what, Some(state));
        }
    }

    /// A pickled `nn.Module` (its state holds `_parameters`, `_buffers`
    /// and `_modules`): its tensors under the names `state_dict()` gives
    /// (parameters, then persistent buffers, then each child module's),
    /// its class listed as skipped, and tensors it holds outside its state
    /// dict (non-persistent buffers, plain attributes) listed too.
    fn module(&mut self, name: &str, v: Val<'p>, state: Pairs<'p>, depth: u32) -> Result<()> {
        let class = unknown_global(v).unwrap_or_else(|| v.describe());
        self.skipped.push(format!(
            "{} ({class})",
            if name.is_empty() { ROOT } else { name }
        ));
        let non_persistent = state
            .get("_non_persistent_buffers_set")
            .map(set_of_names)
            .unwrap_or_default();
        for part in ["_parameters", "_buffers", "_modules"] {
            let holder = state.get(part).expect("is_module checked it");
            let entries: Vec<(String, Val<'p>)> = match untag(holder).kind() {
                Kind::Dict(d) => self.items(name, d.iter()),
                Kind::Call(c) if (c.module, c.name) == ("collections", "OrderedDict") => {
                    let mut all = ordered_dict_args(name, c.args)?;
                    all.extend(c.items.iter());
                    self.items(name, all.into_iter())
                }
                _ => {
                    let what = format!("{} (its {part}, {})", join(name, part), holder.describe());
                    self.skip(what, Some(holder));
                    continue;
                }
            };
            for (key, value) in entries {
                let full = join(name, &key);
                if value.is_none() {
                    continue; // absent from state_dict() too
                }
                if part == "_buffers" && non_persistent.contains(&key) {
                    self.skip(
                        format!("{full} (a non-persistent buffer: not in the state dict)"),
                        Some(value),
                    );
                    continue;
                }
                self.value(&full, value, depth + 1)?;
            }
        }
        for (k, attr) in state.iter() {
            let key = key_name(k);
            if matches!(key.as_str(), "_parameters" | "_buffers" | "_modules") {
                continue;
            }
            if self.storages_in(attr) > 0 {
                let what = format!(
                    "{} (an attribute of {class} outside its state dict)",
                    join(name, &key)
                );
                self.skip(what, Some(attr));
            }
        }
        Ok(())
    }

    /// Lists `name` as skipped with what it is.
    fn skip_value(&mut self, name: &str, v: Val<'p>) {
        let what = match (v.kind(), unknown_global(v)) {
            (_, Some(global)) => format!("{name} ({global})"),
            (Kind::PersistentId(_), _) => format!("{name} (a storage, not a tensor)"),
            _ => name.to_owned(),
        };
        self.skip(what, Some(v));
    }

    /// Every persistent id the walk reached went to a tensor or a skipped
    /// entry (else the load fails: nothing is dropped without a word);
    /// those the pickle built but does not hold, and storage records no
    /// id names, are listed as skipped.
    fn audit(&mut self, tree: &Tree<'p>) -> Result<()> {
        let reached = self.pids_in(tree.root);
        if let Some(lost) = reached.iter().find(|p| !self.accounted.contains(&p.id())) {
            crate::bail!(
                Format,
                "{}: the storage {} is reached but neither loaded nor listed as skipped: \
                 refused rather than dropped",
                tree.what,
                describe_pid(*lost)
            );
        }
        let reached: HashSet<u32> = reached.iter().map(|p| p.id()).collect();
        let dropped: Vec<Val<'p>> = tree
            .root
            .pickle()
            .persistent_ids()
            .filter(|p| !reached.contains(&p.id()))
            .filter(|p| !matches!(p.kind(), Kind::PersistentId(id) if is_module_id(id)))
            .collect();
        for p in dropped {
            self.skipped.push(format!(
                "{} (the storage {}, which the pickle builds but does not hold)",
                tree.what,
                describe_pid(p)
            ));
        }
        if let Some(tar) = &self.tar {
            let mut unused: Vec<&String> = tar
                .tensors
                .keys()
                .filter(|k| !self.used_keys.contains(*k))
                .collect();
            unused.sort();
            for key in unused {
                self.skipped.push(format!(
                    "tensor '{key}' (a tensor of the tar container {} never names)",
                    tree.what
                ));
            }
        } else {
            let dir = format!("{}{}", self.records.prefix, self.tensor_dir);
            let mut unused: Vec<&str> = self
                .records
                .map
                .keys()
                .filter_map(|r| r.strip_prefix(&dir))
                .filter(|k| !k.contains('/') && !self.used_keys.contains(*k))
                .collect();
            unused.sort();
            for key in unused {
                self.skipped.push(format!(
                    "{dir}{key} (a storage record {} never names)",
                    tree.what
                ));
            }
        }
        Ok(())
    }

    /// tessera's own metadata record, if present.
    fn read_metadata(&mut self) -> Result<()> {
        let record = format!("{}tessera_metadata.pkl", self.records.prefix);
        let Some(&(off, len)) = self.records.map.get(&record) else {
            return Ok(());
        };
        let p = pickle::parse(
            &self.source.bytes[off..off + len],
            &|_, _| false,
            Limits::default(),
        )?;
        let Kind::Dict(items) = p.root().kind() else {
            crate::bail!(
                Format,
                "{record} holds {}: expected a dict",
                p.root().describe()
            );
        };
        let mut seen = HashSet::new();
        for (k, v) in items.iter() {
            match (k.as_str(), v.as_str()) {
                (Some(k), Some(v)) => {
                    crate::ensure!(
                        seen.insert(k),
                        Format,
                        "{record}: the key '{k}' is given twice: expected each once"
                    );
                    self.dict.set_metadata(k, v)?
                }
                _ => crate::bail!(Format, "{record}: expected str keys and values"),
            }
        }
        Ok(())
    }
}
