//! A read pickle as an arena ([`Pickle`]): every value the pickle builds
//! is one node, named by a 32-bit id, and containers hold ids. A value
//! the pickle refers to twice (through the memo or DUP) is one node
//! reached twice, and a container changed after it was memoized is seen
//! changed through every reference, as in Python's unpickler.
//!
//! Compactness is what bounds the reader's memory (module docs): a node
//! is 12 bytes, kept in fixed chunks (growing them never copies), a
//! string or bytes object is a range of the input (not copied), a tuple
//! of up to two values holds them inline, and the children of other
//! containers are 4-byte ids in one vector per container, made at its
//! first child.

use super::value::Value;
use crate::error::Result;

/// "None" in an id field: no children yet, no state, ...
pub(super) const NO: u32 = u32::MAX;

/// The ids of the shared constant nodes every arena starts with.
pub(super) const NONE_ID: u32 = 0;
pub(super) const TRUE_ID: u32 = 1;
pub(super) const FALSE_ID: u32 = 2;
pub(super) const EMPTY_TUPLE_ID: u32 = 3;

/// One value. Ranges are (start, length) in the input; `Text` is an
/// owned string; containers name their children's vector (or [`NO`]).
#[derive(Clone, Copy, Debug)]
pub(super) enum Node {
    None,
    Bool(bool),
    /// An int, as its low and high 32 bits.
    Int(u32, u32),
    /// A float, as the low and high 32 bits of its f64 bits.
    Float(u32, u32),
    /// A str: UTF-8 bytes of the input.
    Str(u32, u32),
    /// A str converted from the input (Python 2's str, read as Latin-1).
    Text(u32),
    Bytes(u32, u32),
    List(u32),
    Dict(u32),
    Set(u32),
    Tuple0,
    Tuple1(u32),
    Tuple2(u32, u32),
    /// A tuple of 3 or more: (start, length) in the shared children pool.
    TupleN(u32, u32),
    /// `module.name`: two str nodes.
    Global(u32, u32),
    /// An index into the calls.
    Call(u32),
    PersistentId(u32),
}

const _: () = assert!(std::mem::size_of::<Node>() == 12);

/// A call (REDUCE, NEWOBJ, NEWOBJ_EX) and what the pickle did to its
/// result: dict items (SETITEMS), list items (APPENDS), BUILD's state.
#[derive(Clone, Copy, Debug)]
pub(super) struct CallRec {
    pub callable: u32,
    pub args: u32,
    /// NEWOBJ_EX's keyword arguments (a dict node: it may gain items
    /// after the call), or [`NO`].
    pub kwargs: u32,
    pub items: u32,
    pub list: u32,
    pub state: u32,
}

const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A growing list in chunks of [`CHUNK`] that never move: growing it
/// never copies, so it holds no more than its items and one chunk.
pub(super) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: u32,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    /// Adds `x`; gives its index.
    pub fn push(&mut self, x: T) -> u32 {
        if self.len as usize % CHUNK == 0 {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let last = self.chunks.len() - 1;
        self.chunks[last].push(x);
        self.len += 1;
        self.len - 1
    }

    pub fn get(&self, i: u32) -> &T {
        &self.chunks[(i >> CHUNK_BITS) as usize][i as usize % CHUNK]
    }

    pub fn get_mut(&mut self, i: u32) -> &mut T {
        &mut self.chunks[(i >> CHUNK_BITS) as usize][i as usize % CHUNK]
    }

    pub fn len(&self) -> u32 {
        self.len
    }
}

/// A read pickle: its values, borrowing the input's bytes.
pub struct Pickle<'a> {
    pub(super) data: &'a [u8],
    pub(super) nodes: Chunked<Node>,
    /// The children of tuples of 3 or more.
    pub(super) kids: Vec<u32>,
    /// The children of lists, sets, dicts (key, value, key, ...) and of
    /// calls' items and lists.
    pub(super) vecs: Chunked<Vec<u32>>,
    pub(super) texts: Chunked<String>,
    pub(super) calls: Chunked<CallRec>,
    pub(super) root: u32,
}

impl<'a> Pickle<'a> {
    /// An arena over `data` holding the shared constants.
    pub(super) fn new(data: &'a [u8]) -> Self {
        let mut nodes = Chunked::default();
        for n in [
            Node::None,
            Node::Bool(true),
            Node::Bool(false),
            Node::Tuple0,
        ] {
            nodes.push(n);
        }
        Pickle {
            data,
            nodes,
            kids: Vec::new(),
            vecs: Chunked::default(),
            texts: Chunked::default(),
            calls: Chunked::default(),
            root: NONE_ID,
        }
    }

    /// The value the pickle gives (what STOP returned).
    pub fn root(&self) -> Val<'_> {
        Val {
            p: self,
            id: self.root,
        }
    }

    /// Every persistent id the pickle built, in the order it built them,
    /// whether or not the root reaches it.
    pub fn persistent_ids(&self) -> impl Iterator<Item = Val<'_>> + '_ {
        (0..self.nodes.len()).filter_map(move |id| {
            matches!(self.nodes.get(id), Node::PersistentId(_)).then_some(Val { p: self, id })
        })
    }

    /// How many values the pickle built (the shared constants included).
    pub fn len(&self) -> usize {
        self.nodes.len() as usize
    }

    /// Never: the shared constants are always there.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The value of node `id`.
    pub(super) fn val(&self, id: u32) -> Val<'_> {
        Val { p: self, id }
    }

    fn vec(&self, v: u32) -> &[u32] {
        if v == NO {
            &[]
        } else {
            self.vecs.get(v)
        }
    }

    fn range(&self, start: u32, len: u32) -> &'a [u8] {
        &self.data[start as usize..(start + len) as usize]
    }
}

/// A value of a [`Pickle`]: a node and its arena. Two `Val`s are the same
/// Python object exactly when their [`Val::id`]s are equal.
#[derive(Clone, Copy)]
pub struct Val<'p> {
    p: &'p Pickle<'p>,
    id: u32,
}

/// The ids of a sequence's elements: inline for short tuples.
#[derive(Clone, Copy)]
enum Ids<'p> {
    Slice(&'p [u32]),
    Inline([u32; 2], u8),
}

/// The elements of a tuple, list or set.
#[derive(Clone, Copy)]
pub struct Seq<'p> {
    p: &'p Pickle<'p>,
    ids: Ids<'p>,
}

impl<'p> Seq<'p> {
    fn ids(&self) -> &[u32] {
        match &self.ids {
            Ids::Slice(s) => s,
            Ids::Inline(a, n) => &a[..*n as usize],
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.ids().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<Val<'p>> {
        let p = self.p;
        self.ids().get(i).map(|&id| Val { p, id })
    }

    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = Val<'p>> + '_ {
        let p = self.p;
        self.ids().iter().map(move |&id| Val { p, id })
    }
}

/// The (key, value) items of a dict, or the items set on a call's result.
#[derive(Clone, Copy)]
pub struct Pairs<'p> {
    p: &'p Pickle<'p>,
    ids: &'p [u32],
}

impl<'p> Pairs<'p> {
    /// The number of items.
    pub fn len(&self) -> usize {
        self.ids.len() / 2
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The items in order.
    pub fn iter(&self) -> impl Iterator<Item = (Val<'p>, Val<'p>)> + 'p {
        let p = self.p;
        self.ids
            .chunks_exact(2)
            .map(move |kv| (Val { p, id: kv[0] }, Val { p, id: kv[1] }))
    }

    /// The value of the str key `key` (the last, if it is there twice).
    pub fn get(&self, key: &str) -> Option<Val<'p>> {
        self.iter()
            .filter(|(k, _)| k.as_str() == Some(key))
            .last()
            .map(|(_, v)| v)
    }
}

/// `module.name(*args, **kwargs)` and what the pickle did to its result.
#[derive(Clone, Copy)]
pub struct Call<'p> {
    /// What is called: a global, or a persistent id (an object stored
    /// outside the pickle, as torch's legacy files store module classes).
    pub callable: Val<'p>,
    /// The global called ("" when the callable is not a global).
    pub module: &'p str,
    /// Its name in the module ("" when the callable is not a global).
    pub name: &'p str,
    /// The positional arguments.
    pub args: Seq<'p>,
    /// Keyword arguments (NEWOBJ_EX); usually empty.
    pub kwargs: Pairs<'p>,
    /// Dict items set on the result (SETITEMS; an OrderedDict's items).
    pub items: Pairs<'p>,
    /// List items appended to the result (APPENDS on a list subclass).
    pub list: Seq<'p>,
    /// The state BUILD passed to the result, if any.
    pub state: Option<Val<'p>>,
}

/// What a [`Val`] is.
#[derive(Clone, Copy)]
pub enum Kind<'p> {
    /// Python's None.
    None,
    /// A bool.
    Bool(bool),
    /// An int.
    Int(i64),
    /// A float.
    Float(f64),
    /// A str.
    Str(&'p str),
    /// A bytes object.
    Bytes(&'p [u8]),
    /// A list.
    List(Seq<'p>),
    /// A tuple.
    Tuple(Seq<'p>),
    /// A set or frozenset.
    Set(Seq<'p>),
    /// A dict.
    Dict(Pairs<'p>),
    /// A reference to `module.name`.
    Global(&'p str, &'p str),
    /// A call.
    Call(Call<'p>),
    /// An object stored outside the pickle, named by this id.
    PersistentId(Val<'p>),
}

fn join(lo: u32, hi: u32) -> u64 {
    lo as u64 | (hi as u64) << 32
}

impl<'p> Val<'p> {
    /// The node's id: equal for the same Python object.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The pickle this value is part of.
    pub fn pickle(&self) -> &'p Pickle<'p> {
        self.p
    }

    fn at(&self, id: u32) -> Val<'p> {
        Val { p: self.p, id }
    }

    fn seq(&self, ids: Ids<'p>) -> Seq<'p> {
        Seq { p: self.p, ids }
    }

    fn pairs(&self, v: u32) -> Pairs<'p> {
        Pairs {
            p: self.p,
            ids: self.p.vec(v),
        }
    }

    /// What the value is.
    pub fn kind(&self) -> Kind<'p> {
        let p = self.p;
        match *p.nodes.get(self.id) {
            Node::None => Kind::None,
            Node::Bool(b) => Kind::Bool(b),
            Node::Int(lo, hi) => Kind::Int(join(lo, hi) as i64),
            Node::Float(lo, hi) => Kind::Float(f64::from_bits(join(lo, hi))),
            // The reader checked the range is UTF-8.
            Node::Str(s, n) => Kind::Str(std::str::from_utf8(p.range(s, n)).unwrap_or("")),
            Node::Text(i) => Kind::Str(p.texts.get(i)),
            Node::Bytes(s, n) => Kind::Bytes(p.range(s, n)),
            Node::List(v) => Kind::List(self.seq(Ids::Slice(p.vec(v)))),
            Node::Set(v) => Kind::Set(self.seq(Ids::Slice(p.vec(v)))),
            Node::Dict(v) => Kind::Dict(self.pairs(v)),
            Node::Tuple0 => Kind::Tuple(self.seq(Ids::Slice(&[]))),
            Node::Tuple1(a) => Kind::Tuple(self.seq(Ids::Inline([a, 0], 1))),
            Node::Tuple2(a, b) => Kind::Tuple(self.seq(Ids::Inline([a, b], 2))),
            Node::TupleN(s, n) => {
                Kind::Tuple(self.seq(Ids::Slice(&p.kids[s as usize..(s + n) as usize])))
            }
            Node::Global(m, n) => Kind::Global(
                self.at(m).as_str().unwrap_or(""),
                self.at(n).as_str().unwrap_or(""),
            ),
            Node::Call(c) => {
                let c = *p.calls.get(c);
                let (module, name) = self.at(c.callable).as_global().unwrap_or(("", ""));
                let args = match self.at(c.args).kind() {
                    Kind::Tuple(s) => s,
                    _ => self.seq(Ids::Slice(&[])),
                };
                Kind::Call(Call {
                    callable: self.at(c.callable),
                    module,
                    name,
                    args,
                    kwargs: match (c.kwargs != NO).then(|| *p.nodes.get(c.kwargs)) {
                        Some(Node::Dict(v)) => self.pairs(v),
                        _ => self.pairs(NO),
                    },
                    items: self.pairs(c.items),
                    list: self.seq(Ids::Slice(p.vec(c.list))),
                    state: (c.state != NO).then(|| self.at(c.state)),
                })
            }
            Node::PersistentId(v) => Kind::PersistentId(self.at(v)),
        }
    }

    /// The string, when this is a str.
    pub fn as_str(&self) -> Option<&'p str> {
        match self.kind() {
            Kind::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The int, when this is an int (or a bool, as Python counts it).
    pub fn as_int(&self) -> Option<i64> {
        match self.kind() {
            Kind::Int(i) => Some(i),
            Kind::Bool(b) => Some(b as i64),
            _ => None,
        }
    }

    /// The elements, when this is a tuple or a list.
    pub fn as_seq(&self) -> Option<Seq<'p>> {
        match self.kind() {
            Kind::Tuple(s) | Kind::List(s) => Some(s),
            _ => None,
        }
    }

    /// (module, name), when this is a global.
    pub fn as_global(&self) -> Option<(&'p str, &'p str)> {
        match self.kind() {
            Kind::Global(m, n) => Some((m, n)),
            _ => None,
        }
    }

    /// The call, when this is one.
    pub fn as_call(&self) -> Option<Call<'p>> {
        match self.kind() {
            Kind::Call(c) => Some(c),
            _ => None,
        }
    }

    /// Whether this is None.
    pub fn is_none(&self) -> bool {
        matches!(self.kind(), Kind::None)
    }

    /// A short description for error messages ("a str", "a call of
    /// torch._utils._rebuild_tensor_v2", ...).
    pub fn describe(&self) -> String {
        match self.kind() {
            Kind::None => "None".into(),
            Kind::Bool(_) => "a bool".into(),
            Kind::Int(i) => format!("the int {i}"),
            Kind::Float(_) => "a float".into(),
            Kind::Str(s) if s.len() <= 64 => format!("the str '{s}'"),
            Kind::Str(_) => "a str".into(),
            Kind::Bytes(_) => "a bytes object".into(),
            Kind::List(_) => "a list".into(),
            Kind::Tuple(_) => "a tuple".into(),
            Kind::Set(_) => "a set".into(),
            Kind::Dict(_) => "a dict".into(),
            Kind::Global(m, n) => format!("the global {m}.{n}"),
            Kind::Call(c) if c.module.is_empty() => format!("a call of {}", c.callable.describe()),
            Kind::Call(c) => format!("a call of {}.{}", c.module, c.name),
            Kind::PersistentId(_) => "a persistent id".into(),
        }
    }

    /// The value as a [`Value`] tree, copying what is reached twice;
    /// refused (`Format`) past `max_depth` nesting (a cycle included) or
    /// `max_values` values built.
    pub fn to_value(&self, max_depth: u32, max_values: usize) -> Result<Value> {
        let mut budget = max_values;
        self.tree(0, max_depth, &mut budget)
    }

    fn tree(&self, depth: u32, max_depth: u32, budget: &mut usize) -> Result<Value> {
        crate::ensure!(
            depth <= max_depth,
            Format,
            "pickle: values nested {depth} deep (or a container holding itself): the limit \
             is {max_depth}"
        );
        crate::ensure!(
            *budget > 0,
            Format,
            "pickle: its values, each counted where it is reached, are more than the limit of \
             values built: it repeats too much"
        );
        *budget -= 1;
        let sub = |v: Val<'p>, budget: &mut usize| v.tree(depth + 1, max_depth, budget);
        let seq = |s: Seq<'p>, budget: &mut usize| -> Result<Vec<Value>> {
            s.iter().map(|v| sub(v, budget)).collect()
        };
        let pairs = |s: Pairs<'p>, budget: &mut usize| -> Result<Vec<(Value, Value)>> {
            s.iter()
                .map(|(k, v)| Ok((sub(k, budget)?, sub(v, budget)?)))
                .collect()
        };
        Ok(match self.kind() {
            Kind::None => Value::None,
            Kind::Bool(b) => Value::Bool(b),
            Kind::Int(i) => Value::Int(i),
            Kind::Float(f) => Value::Float(f),
            Kind::Str(s) => Value::Str(s.to_owned()),
            Kind::Bytes(b) => Value::Bytes(b.to_vec()),
            Kind::List(s) | Kind::Set(s) => Value::List(seq(s, budget)?),
            Kind::Tuple(s) => Value::Tuple(seq(s, budget)?),
            Kind::Dict(d) => Value::Dict(pairs(d, budget)?),
            Kind::Global(m, n) => Value::global(m, n),
            Kind::Call(c) => {
                crate::ensure!(
                    c.kwargs.is_empty() && c.list.is_empty() && !c.module.is_empty(),
                    Format,
                    "pickle: {} with keyword arguments, list items or a callable that is not \
                     a global, which a value tree cannot hold",
                    self.describe()
                );
                Value::Reduce {
                    callable: Box::new(Value::global(c.module, c.name)),
                    args: Box::new(Value::Tuple(seq(c.args, budget)?)),
                    items: pairs(c.items, budget)?,
                    state: match c.state {
                        Some(s) => Some(Box::new(sub(s, budget)?)),
                        None => None,
                    },
                }
            }
            Kind::PersistentId(v) => Value::PersistentId(Box::new(sub(v, budget)?)),
        })
    }
}

impl std::fmt::Debug for Val<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{} {}", self.id, self.describe())
    }
}
