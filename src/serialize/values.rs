//! Non-tensor values a checkpoint holds (`global_step`, a config dict,
//! `hidden_dims`): kept as JSON values per dotted name in a
//! [`TensorDict`](super::TensorDict), read from torch's pickles and
//! written back as Python values, and held by safetensors and GGUF under
//! [`VALUES_KEY`] (docs/FORMATS.md, Values).
//!
//! Bounded: a value nested deeper than [`MAX_DEPTH`] or whose JSON text
//! passes [`MAX_BYTES`] is not kept (a loader lists it as skipped,
//! naming why; `set_value` refuses it).

use crate::error::Result;
use crate::pickle::{Kind, Val, Value as Py};
use serde_json::Value;

/// The metadata key under which safetensors and GGUF hold values: a JSON
/// object of name -> value (GGUF: those its typed keys cannot hold).
pub const VALUES_KEY: &str = "tessera.values";

/// GGUF's typed keys of values: `tessera.values.NAME`.
pub(crate) const GGUF_VALUE_PREFIX: &str = "tessera.values.";

/// The metadata key a conversion's provenance is written under: a JSON
/// object with the source file, its format and how much was left out of
/// it (`tessera convert` sets it; a load never lists it as skipped).
pub const SOURCE_KEY: &str = "tessera.source";

/// The deepest nesting of lists and dicts a kept value may have.
pub const MAX_DEPTH: usize = 32;

/// The longest JSON text of one kept value, in bytes.
pub const MAX_BYTES: usize = 1 << 20;

/// The most lists, dicts and scalars one kept value may hold.
pub const MAX_NODES: usize = 1 << 16;

/// What one load may keep as values in all: JSON bytes and nodes (a
/// pickle holding one large list under many names would otherwise make
/// a copy per name). About 100 MiB of memory at most.
pub const MAX_LOAD: Budget = Budget {
    nodes: 1 << 20,
    bytes: 16 << 20,
};

/// What reading values may still spend: nodes and bytes of JSON (about:
/// a number counts its digits, a float 24, a string its length).
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Lists, dicts and scalars.
    pub nodes: usize,
    /// Bytes of JSON text.
    pub bytes: usize,
}

/// Why a value is not kept, for the skipped entry.
pub(crate) enum Why {
    /// Past a bound (too deep, too long): skipped whole.
    Bound(String),
    /// Something JSON cannot hold inside it ("a float nan", an object):
    /// a container's other items may still be kept one by one.
    Other(String),
}

/// The JSON value of the pickled `v`, or why it cannot be one: None,
/// bools, ints, finite floats, strs, lists and tuples (as arrays) and
/// dicts with str keys (as objects, keys sorted) of them, at most
/// [`MAX_DEPTH`] deep, [`MAX_NODES`] nodes and about [`MAX_BYTES`] of
/// JSON.
///
/// `left` is what the whole load may still spend ([`MAX_LOAD`] at its
/// start); the work spent on `v` comes off it, kept or not (a value that
/// fails late cost its work).
pub(crate) fn from_pickle(v: Val<'_>, left: &mut Budget) -> std::result::Result<Value, Why> {
    let start = Budget {
        nodes: MAX_NODES.min(left.nodes),
        bytes: MAX_BYTES.min(left.bytes),
    };
    let mut budget = start;
    let value = convert(v, 0, &mut budget);
    left.nodes -= start.nodes - budget.nodes;
    left.bytes -= start.bytes - budget.bytes;
    value.map_err(|e| match e {
        Why::Bound(_) if start.nodes < MAX_NODES || start.bytes < MAX_BYTES => Why::Bound(format!(
            "the file's values pass {} nodes or {} bytes of JSON in all",
            MAX_LOAD.nodes, MAX_LOAD.bytes
        )),
        e => e,
    })
}

/// Spends `bytes` of JSON and a node.
fn spend(budget: &mut Budget, bytes: usize) -> std::result::Result<(), Why> {
    budget.nodes = budget.nodes.checked_sub(1).ok_or_else(|| {
        Why::Bound(format!(
            "a value of more than {MAX_NODES} lists, dicts and scalars"
        ))
    })?;
    budget.bytes = budget
        .bytes
        .checked_sub(bytes)
        .ok_or_else(|| Why::Bound(format!("a value longer than {MAX_BYTES} bytes of JSON")))?;
    Ok(())
}

fn convert(v: Val<'_>, depth: usize, budget: &mut Budget) -> std::result::Result<Value, Why> {
    let kind = v.kind();
    if depth >= MAX_DEPTH && matches!(kind, Kind::List(_) | Kind::Tuple(_) | Kind::Dict(_)) {
        return Err(Why::Bound(format!(
            "a value nested more than {MAX_DEPTH} deep"
        )));
    }
    // A node's JSON, with its separator: a number its digits, a float at
    // most 24, a string its length and quotes.
    let bytes = match kind {
        Kind::None => 5,
        Kind::Bool(_) => 6,
        Kind::Int(i) => 2 + i.unsigned_abs().checked_ilog10().unwrap_or(0) as usize + 1,
        Kind::Float(_) => 25,
        Kind::Str(s) => s.len() + 3,
        _ => 2,
    };
    spend(budget, bytes)?;
    Ok(match kind {
        Kind::None => Value::Null,
        Kind::Bool(b) => Value::Bool(b),
        Kind::Int(i) => Value::from(i),
        Kind::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| Why::Other(format!("a float {f}, which JSON cannot hold")))?,
        Kind::Str(s) => Value::from(s),
        Kind::List(s) | Kind::Tuple(s) => Value::Array(
            s.iter()
                .map(|x| convert(x, depth + 1, budget))
                .collect::<std::result::Result<_, _>>()?,
        ),
        Kind::Dict(d) => {
            let mut map = serde_json::Map::new();
            for (k, x) in d.iter() {
                let Some(k) = k.as_str() else {
                    return Err(Why::Other(format!(
                        "a dict with a key {}, not a str",
                        k.describe()
                    )));
                };
                spend(budget, k.len() + 3)?;
                map.insert(k.to_owned(), convert(x, depth + 1, budget)?);
            }
            Value::Object(map)
        }
        _ => return Err(Why::Other(v.describe())),
    })
}

/// The JSON text of the value `name`, or an error naming it past the
/// bounds.
pub(crate) fn checked_text(name: &str, value: &Value) -> Result<String> {
    fn levels(v: &Value) -> usize {
        match v {
            Value::Array(a) => 1 + a.iter().map(levels).max().unwrap_or(0),
            Value::Object(o) => 1 + o.values().map(levels).max().unwrap_or(0),
            _ => 0,
        }
    }
    let n = levels(value);
    crate::ensure!(
        n <= MAX_DEPTH,
        InvalidArgument,
        "value '{name}' is nested {n} deep: expected at most {MAX_DEPTH} levels of lists and \
         dicts"
    );
    let text = value.to_string();
    crate::ensure!(
        text.len() <= MAX_BYTES,
        InvalidArgument,
        "value '{name}' is {} bytes of JSON: expected at most {MAX_BYTES}",
        text.len()
    );
    Ok(text)
}

/// The Python value of `value` for torch's pickle: arrays as lists,
/// objects as dicts; an integer past int64 is refused.
pub(crate) fn to_pickle(name: &str, value: &Value) -> Result<Py> {
    Ok(match value {
        Value::Null => Py::None,
        Value::Bool(b) => Py::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Py::Int(i),
            (None, Some(f)) if !n.is_u64() => Py::Float(f),
            _ => crate::bail!(
                InvalidArgument,
                "value '{name}': the integer {n} does not fit int64: expected one that does"
            ),
        },
        Value::String(s) => Py::Str(s.clone()),
        Value::Array(a) => Py::List(
            a.iter()
                .map(|x| to_pickle(name, x))
                .collect::<Result<_>>()?,
        ),
        Value::Object(o) => Py::Dict(
            o.iter()
                .map(|(k, x)| Ok((Py::Str(k.clone()), to_pickle(name, x)?)))
                .collect::<Result<_>>()?,
        ),
    })
}

/// The (name, value) pairs of the JSON object `text`, in its order (a
/// name given twice refused).
pub(crate) fn parse_values(text: &str) -> Result<Vec<(String, Value)>> {
    use serde::de::{Deserializer, Error as _, MapAccess, Visitor};
    struct Pairs;
    impl<'de> Visitor<'de> for Pairs {
        type Value = Vec<(String, Value)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of name -> value")
        }
        fn visit_map<A: MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut out: Vec<(String, Value)> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            while let Some((k, v)) = map.next_entry::<String, Value>()? {
                if !seen.insert(k.clone()) {
                    return Err(A::Error::custom(format!("the name '{k}' is given twice")));
                }
                out.push((k, v));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let pairs = de
        .deserialize_map(Pairs)
        .and_then(|p| de.end().map(|_| p))
        .map_err(|e| {
            crate::err!(
                Format,
                "{:?} is not a JSON object of name -> value ({e})",
                text.chars().take(60).collect::<String>()
            )
        })?;
    Ok(pairs)
}
