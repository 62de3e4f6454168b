//! The state of a torch tree walk ([`Loader`]): the file's records, the
//! storages loaded, the dict being filled, the skipped entries and which
//! persistent ids went to a tensor or an entry; and how a skipped value
//! takes the storages inside it along (`skip`). The walk itself is
//! `torch_read`, the tensor rebuilds `torch_tensor`.

use super::dict::TensorDict;
use super::source::{Record, Source};
use super::torch_pickle::Records;
use super::torch_values::{is_module_id, key_name};
use super::LoadFlags;
use crate::dtype::DType;
use crate::pickle::{Kind, Val};
use crate::tensor::Tensor;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// A storage loaded for the tensors of one tree: its record and the
/// dtype it is read as.
pub(crate) type Loaded = (Rc<Record>, DType);

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
    /// `pids_in`'s answers by node id, for the current tree.
    pub pid_cache: HashMap<u32, Rc<[Val<'p>]>>,
    /// What the load may still spend on values (`values::MAX_LOAD` at
    /// the start).
    pub value_budget: super::values::Budget,
    /// Values the walk may still visit (a pickle sharing values many times
    /// over is refused).
    pub steps: usize,
    _p: std::marker::PhantomData<Val<'p>>,
}

impl<'s, 'p> Loader<'s, 'p> {
    /// A loader of `cx`'s records, nothing loaded yet.
    pub(crate) fn new(cx: Context<'s, 's>) -> Self {
        Loader {
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
            pid_cache: HashMap::new(),
            value_budget: super::values::MAX_LOAD,
            steps: 0,
            _p: std::marker::PhantomData,
        }
    }

    /// Adds a skipped entry; the storages inside `v` go with it (the
    /// entry says how many).
    pub(crate) fn skip(&mut self, mut entry: String, v: Option<Val<'p>>) {
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

    /// The persistent ids reachable from `v`, each node once; found once
    /// per node of the current tree (a value shared under many names is
    /// walked once).
    pub(crate) fn pids_in(&mut self, v: Val<'p>) -> Rc<[Val<'p>]> {
        if let Some(found) = self.pid_cache.get(&v.id()) {
            return found.clone();
        }
        let found: Rc<[Val<'p>]> = Self::find_pids(v).into();
        self.pid_cache.insert(v.id(), found.clone());
        found
    }

    fn find_pids(v: Val<'p>) -> Vec<Val<'p>> {
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

    pub(crate) fn storages_in(&mut self, v: Val<'p>) -> usize {
        self.pids_in(v).len()
    }

    /// Marks the persistent ids inside `v` as accounted for; gives how
    /// many there were.
    fn account_inside(&mut self, v: Val<'p>) -> usize {
        let pids = self.pids_in(v);
        for pid in pids.iter() {
            self.accounted.insert(pid.id());
            if let Kind::PersistentId(id) = pid.kind() {
                if let Some(key) = id.as_seq().and_then(|s| s.get(2)) {
                    self.used_keys.insert(key_name(key));
                }
            }
        }
        pids.len()
    }
}
