//! Reading the values of torch pickles: the helpers the tree walk
//! (`torch_read`) and the tensor rebuilds (`torch_tensor`) share: type
//! tags, key names, the classes a call makes (legacy and tar files name
//! module classes through persistent ids), OrderedDict arguments, empty
//! dicts, modules' states.

use super::torch_pickle::allowed;
use crate::error::Result;
use crate::pickle::{Call, Kind, Pairs, Seq, Val};
use std::collections::HashSet;

/// Name given to the root value in skipped entries.
pub(crate) const ROOT: &str = "<root>";

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

/// `prefix.key`, or `key` at the root.
pub(crate) fn join(prefix: &str, key: &str) -> String {
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
pub(crate) fn is_module_id(id: Val<'_>) -> bool {
    id.as_seq().and_then(|s| s.get(0)).and_then(|k| k.as_str()) == Some("module") || is_class_id(id)
}

/// The `module.name` of a value built from a global outside [`allowed`].
pub(crate) fn unknown_global(v: Val<'_>) -> Option<String> {
    match untag(v).kind() {
        Kind::Call(c) => class_of(&c),
        Kind::Global(m, n) => Some((m, n)),
        _ => None,
    }
    .filter(|(m, n)| !allowed(m, n))
    .map(|(m, n)| format!("{m}.{n}"))
}

/// A persistent id in messages: its storage key when it has one.
pub(crate) fn describe_pid(p: Val<'_>) -> String {
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
pub(crate) fn is_module(state: Pairs<'_>) -> bool {
    ["_parameters", "_buffers", "_modules"]
        .iter()
        .all(|k| state.get(k).is_some())
}

/// The names in a set of str (a set, frozenset, or `set([...])` call).
pub(crate) fn set_of_names(v: Val<'_>) -> HashSet<String> {
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
pub(crate) fn ordered_dict_args<'p>(name: &str, args: Seq<'p>) -> Result<Vec<(Val<'p>, Val<'p>)>> {
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

/// Whether a persistent id's value is the tar container's
/// `(class, source file, source)` of a module's class.
fn is_class_id(id: Val<'_>) -> bool {
    id.as_seq()
        .and_then(|s| s.get(0))
        .is_some_and(|c| matches!(c.kind(), Kind::Global(..)))
}
