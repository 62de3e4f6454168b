//! The values a pickle holds, as a tree.

/// A pickled value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Python's None.
    None,
    /// A bool.
    Bool(bool),
    /// An int (pickles of larger ints are refused by the reader).
    Int(i64),
    /// A float.
    Float(f64),
    /// A str.
    Str(String),
    /// A bytes object (protocol 3 and later).
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Value>),
    /// A tuple.
    Tuple(Vec<Value>),
    /// A dict, its items in order.
    Dict(Vec<(Value, Value)>),
    /// A reference to `module.name` (a class or function).
    Global {
        /// The module, e.g. "collections".
        module: String,
        /// The name in the module, e.g. "OrderedDict".
        name: String,
    },
    /// `callable(*args)`, then the dict items set on the result (pickle's
    /// SETITEMS on the object, as OrderedDict's reduce gives) and the
    /// state pickle's BUILD passes to it, if any.
    Reduce {
        /// What is called: usually a [`Value::Global`].
        callable: Box<Value>,
        /// The arguments: a [`Value::Tuple`].
        args: Box<Value>,
        /// Items set on the result after the call.
        items: Vec<(Value, Value)>,
        /// The BUILD state, if any.
        state: Option<Box<Value>>,
    },
    /// An object stored outside the pickle, named by this id (BINPERSID).
    PersistentId(Box<Value>),
    /// Writing only: `value`, then stored in the memo under `id` (BINPUT),
    /// so that a later [`Value::MemoGet`] refers to the same object (how
    /// pickle keeps one object referenced twice; the reader resolves gets,
    /// so it never yields these two).
    Memo {
        /// The memo slot.
        id: u32,
        /// The value stored.
        value: Box<Value>,
    },
    /// Writing only: the object stored under `id` by a [`Value::Memo`]
    /// written before it (BINGET).
    MemoGet(u32),
}

impl Value {
    /// A reference to `module.name`.
    pub fn global(module: &str, name: &str) -> Value {
        Value::Global {
            module: module.to_owned(),
            name: name.to_owned(),
        }
    }

    /// `callable(*args)` with no items and no state.
    pub fn call(callable: Value, args: Vec<Value>) -> Value {
        Value::Reduce {
            callable: Box::new(callable),
            args: Box::new(Value::Tuple(args)),
            items: Vec::new(),
            state: None,
        }
    }

    /// A str value.
    pub fn str(s: &str) -> Value {
        Value::Str(s.to_owned())
    }

    /// The string, when this is a str.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The int, when this is an int (or a bool, as Python counts it).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }

    /// The elements, when this is a tuple or a list.
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(v) | Value::List(v) => Some(v),
            _ => None,
        }
    }

    /// (module, name), when this is a global.
    pub fn as_global(&self) -> Option<(&str, &str)> {
        match self {
            Value::Global { module, name } => Some((module, name)),
            _ => None,
        }
    }

    /// A short description for error messages ("a str", "a call of
    /// torch._utils._rebuild_tensor_v2", ...).
    pub fn describe(&self) -> String {
        match self {
            Value::None => "None".into(),
            Value::Bool(_) => "a bool".into(),
            Value::Int(_) => "an int".into(),
            Value::Float(_) => "a float".into(),
            Value::Str(_) => "a str".into(),
            Value::Bytes(_) => "a bytes object".into(),
            Value::List(_) => "a list".into(),
            Value::Tuple(_) => "a tuple".into(),
            Value::Dict(_) => "a dict".into(),
            Value::Global { module, name } => format!("the global {module}.{name}"),
            Value::Reduce { callable, .. } => match callable.as_global() {
                Some((m, n)) => format!("a call of {m}.{n}"),
                None => "a call".into(),
            },
            Value::PersistentId(_) => "a persistent id".into(),
            Value::Memo { value, .. } => value.describe(),
            Value::MemoGet(id) => format!("memo entry {id}"),
        }
    }
}
