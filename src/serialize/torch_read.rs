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
use super::torch_pickle::{allowed, index_archive, Records};
use super::torch_tensor::Loaded;
use super::LoadFlags;
use crate::dtype::DType;
use crate::error::Result;
use crate::pickle::{self, Call, Kind, Limits, Pairs, Val};
use crate::tensor::Tensor;
use std::collections::{HashMap, HashSet};

/// Metadata key listing (one per line) the names of skipped non-tensor
/// values.
pub const SKIPPED_KEY: &str = "tessera.skipped";

/// Name given to the root value in skipped entries.
const ROOT: &str = "<root>";

/// The deepest nesting the walk follows (a container holding itself is
/// refused there).
const MAX_DEPTH: u32 = 100;

/// The tensors and storages of torch's tar container, by key.
#[derive(Default)]
pub(crate) struct TarObjects {
    pub tensors: HashMap<String, Tensor>,
    pub storages: HashMap<String, Loaded>,
}

/// What the walk needs besides the trees.
pub(crate) struct Context<'a, 'b> {
    pub source: &'b Source<'a>,
    pub records: Records,
    pub flags: LoadFlags,
    /// The archive's byte order is big-endian: storages are swapped.
    pub big_endian: bool,
    /// The tar container's objects (its persistent ids name them).
    pub tar: Option<TarObjects>,
}

pub(crate) struct Loader<'s, 'p> {
    pub source: &'s Source<'s>,
    pub records: Records,
    pub flags: LoadFlags,
    pub big_endian: bool,
    pub tar: Option<TarObjects>,
    /// The directory of the current tree's storage records ("data/").
    pub tensor_dir: String,
    /// Storage key -> its record and dtype.
    pub storages: HashMap<String, Loaded>,
    /// The dtype each storage key is read as (views included).
    pub dtypes: HashMap<String, DType>,
    /// Storage keys some persistent id of this tree named.
    pub used_keys: HashSet<String>,
    /// Persistent-id nodes of the current tree that went to a tensor or
    /// to a skipped entry.
    pub accounted: HashSet<u32>,
    pub dict: TensorDict,
    pub skipped: Vec<String>,
    /// Values the walk may still visit (a pickle sharing values many times
    /// over is refused).
    steps: usize,
    _p: std::marker::PhantomData<Val<'p>>,
}

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

/// The value inside libtorch's type tags and list builders.
pub(crate) fn untag(v: Val<'_>) -> Val<'_> {
    if let Kind::Call(c) = v.kind() {
        if c.module == "torch.jit._pickle"
            && (c.name == "restore_type_tag" || c.name.starts_with("build_"))
        {
            if let Some(first) = c.args.get(0) {
                return untag(first);
            }
        }
    }
    v
}

/// A key of a dict, as a name part.
pub(crate) fn key_name(k: Val<'_>) -> String {
    match k.kind() {
        Kind::Str(s) => s.to_owned(),
        Kind::Int(i) => i.to_string(),
        Kind::Bool(b) => if b { "True" } else { "False" }.to_owned(),
        _ => format!("<{}>", k.describe()),
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The class a call makes: its global, or the class inside the
/// persistent id torch's legacy files name module classes by
/// (`('module', class, source file, source)`).
pub(crate) fn class_of<'p>(c: &Call<'p>) -> Option<(&'p str, &'p str)> {
    if !c.module.is_empty() {
        return Some((c.module, c.name));
    }
    match c.callable.kind() {
        Kind::PersistentId(id) if is_module_id(id) => {
            let parts = id.as_seq()?;
            parts
                .get(1)
                .and_then(|c| c.as_global())
                .or_else(|| parts.get(0)?.as_global())
        }
        _ => None,
    }
}

/// Whether a persistent id's value names a module's class: the legacy
/// format's `('module', class, source file, source)` or the tar
/// container's `(class, source file, source)`.
fn is_module_id(id: Val<'_>) -> bool {
    id.as_seq().and_then(|s| s.get(0)).and_then(|k| k.as_str()) == Some("module")
        || super::torch_tar::is_class_id(id)
}

/// The `module.name` of a value built from a global outside [`allowed`].
fn unknown_global(v: Val<'_>) -> Option<String> {
    match untag(v).kind() {
        Kind::Call(c) => class_of(&c),
        Kind::Global(m, n) => Some((m, n)),
        _ => None,
    }
    .filter(|(m, n)| !allowed(m, n))
    .map(|(m, n)| format!("{m}.{n}"))
}

/// The dict of the unpickled `trees`, in order, their storages in
/// `cx.records`: the part of reading shared by the zip, TorchScript,
/// legacy and tar formats. The first tree may be a lone tensor (named
/// "tensor"). Storage keys are per tree (TorchScript's data/0 and
/// constants/0 are two storages).
pub(crate) fn read_tree(cx: Context<'_, '_>, trees: &[Tree<'_>]) -> Result<TensorDict> {
    let mut loader = Loader {
        source: cx.source,
        records: cx.records,
        flags: cx.flags,
        big_endian: cx.big_endian,
        tar: cx.tar,
        tensor_dir: String::new(),
        storages: HashMap::new(),
        dtypes: HashMap::new(),
        used_keys: HashSet::new(),
        accounted: HashSet::new(),
        dict: TensorDict::new(),
        skipped: Vec::new(),
        steps: 0,
        _p: std::marker::PhantomData,
    };
    for (i, tree) in trees.iter().enumerate() {
        tree.tensor_dir.clone_into(&mut loader.tensor_dir);
        loader.storages.clear();
        loader.dtypes.clear();
        loader.used_keys.clear();
        loader.accounted.clear();
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
        if self.container(name, v, depth)?.is_none() {
            self.skip_value(name, v);
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

    /// Adds a skipped entry; the storages inside `v` go with it (the
    /// entry says how many).
    pub(super) fn skip(&mut self, mut entry: String, v: Option<Val<'p>>) {
        if let Some(v) = v {
            let n = self.account_inside(v);
            if n > 0 {
                entry.push_str(&format!(
                    " [holding {n} tensor storage{}, not loaded]",
                    if n == 1 { "" } else { "s" }
                ));
            }
        }
        self.skipped.push(entry);
    }

    /// The persistent ids reachable from `v`, each node once.
    fn pids_in(&self, v: Val<'p>) -> Vec<Val<'p>> {
        let mut seen = HashSet::new();
        let mut todo = vec![v];
        let mut out = Vec::new();
        while let Some(v) = todo.pop() {
            if !seen.insert(v.id()) {
                continue;
            }
            match v.kind() {
                Kind::PersistentId(id) if is_module_id(id) => {}
                Kind::PersistentId(_) => out.push(v),
                Kind::List(s) | Kind::Tuple(s) | Kind::Set(s) => todo.extend(s.iter()),
                Kind::Dict(d) => d.iter().for_each(|(k, v)| todo.extend([k, v])),
                Kind::Call(c) => {
                    todo.extend(c.args.iter());
                    todo.extend(c.list.iter());
                    for (k, v) in c.kwargs.iter().chain(c.items.iter()) {
                        todo.extend([k, v]);
                    }
                    todo.extend(c.state);
                }
                _ => {}
            }
        }
        out
    }

    fn storages_in(&self, v: Val<'p>) -> usize {
        self.pids_in(v).len()
    }

    /// Marks the persistent ids inside `v` as accounted for; gives how
    /// many there were.
    fn account_inside(&mut self, v: Val<'p>) -> usize {
        let pids = self.pids_in(v);
        for pid in &pids {
            self.accounted.insert(pid.id());
            if let Kind::PersistentId(id) = pid.kind() {
                if let Some(key) = id.as_seq().and_then(|s| s.get(2)) {
                    self.used_keys.insert(key_name(key));
                }
            }
        }
        pids.len()
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

/// A persistent id in messages: its storage key when it has one.
fn describe_pid(p: Val<'_>) -> String {
    match p.kind() {
        Kind::PersistentId(id) => match id.as_seq().and_then(|s| s.get(2)) {
            Some(key) => format!("'{}'", key_name(key)),
            None => format!("'{}'", key_name(id)),
        },
        _ => p.describe(),
    }
}

/// Whether `v` is None or a dict or OrderedDict with no items (however
/// it was pickled).
pub(crate) fn is_empty_dict(v: Val<'_>) -> bool {
    match untag(v).kind() {
        Kind::None => true,
        Kind::Dict(d) => d.is_empty(),
        Kind::Call(c) if (c.module, c.name) == ("collections", "OrderedDict") => {
            c.items.is_empty()
                && c.kwargs.is_empty()
                && ordered_dict_args("", c.args).is_ok_and(|a| a.is_empty())
        }
        _ => false,
    }
}

/// Whether a call's state is a module's: it holds `_parameters`,
/// `_buffers` and `_modules`.
fn is_module(state: Pairs<'_>) -> bool {
    ["_parameters", "_buffers", "_modules"]
        .iter()
        .all(|k| state.get(k).is_some())
}

/// The names in a set of str (a set, frozenset, or `set([...])` call).
fn set_of_names(v: Val<'_>) -> HashSet<String> {
    let seq = match untag(v).kind() {
        Kind::Set(s) | Kind::List(s) | Kind::Tuple(s) => Some(s),
        Kind::Call(c) => c.args.get(0).and_then(|a| a.as_seq()),
        _ => None,
    };
    seq.map(|s| {
        s.iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect()
    })
    .unwrap_or_default()
}

/// The items an OrderedDict's constructor was given: none, or one list
/// (or tuple) of (key, value) pairs (each a tuple or a two-element list:
/// how Python 2 pickled every OrderedDict), or a dict.
fn ordered_dict_args<'p>(
    name: &str,
    args: crate::pickle::Seq<'p>,
) -> Result<Vec<(Val<'p>, Val<'p>)>> {
    let name = if name.is_empty() { ROOT } else { name };
    let bad = |what: String| {
        crate::err!(
            Format,
            "'{name}': an OrderedDict built from {what}: expected a list of (key, value) pairs"
        )
    };
    match args.len() {
        0 => return Ok(Vec::new()),
        1 => {}
        n => return Err(bad(format!("{n} arguments"))),
    }
    let arg = args.get(0).expect("one argument");
    if let Kind::Dict(d) = arg.kind() {
        return Ok(d.iter().collect());
    }
    let Some(pairs) = arg.as_seq() else {
        return Err(bad(arg.describe()));
    };
    pairs
        .iter()
        .map(|p| match p.as_seq() {
            Some(kv) if kv.len() == 2 => Ok((kv.get(0).unwrap(), kv.get(1).unwrap())),
            _ => Err(bad(format!("a list holding {}", p.describe()))),
        })
        .collect()
}
