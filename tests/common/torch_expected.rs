//! What torch.load reads from a torch.save fixture (NAME.expected.jsonl,
//! written by scripts/make_torch_fixtures.py's `expected_lines`),
//! compared with what tessera loaded from it (included with `#[path]` by
//! tests/torch_fixtures.rs and tests/torch_wild.rs).
//!
//! One line per tensor, in order: name, dtype (torch's name), sizes,
//! strides, storage offset, storage group (tensors torch shows sharing a
//! storage share one in tessera, and no other) and the elements' bytes in
//! row-major order; a tensor on a view of a storage (legacy files) may
//! also say "view": {"group", "offset"}: tessera may load it on the
//! view's part, or on the whole storage of `group` with its offset moved
//! by `offset` elements. The last line says what tessera.skipped lists:
//! "skipped" (the exact entries; null: not checked), "skipped_extra"
//! (names whose entries are tessera's choice: an entry beyond "skipped"
//! must be one of them or start with one and "." or " ") and
//! "skipped_must_name" (strings some entry must contain).
#![allow(dead_code)]

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use tessera::serialize::{self, TensorDict};
use tessera::{DType, Storage};

/// A fixture's expected tensors and its last line.
pub struct Expected {
    pub tensors: Vec<Value>,
    pub last: Value,
}

/// Reads `dir`/`name`.expected.jsonl.
pub fn read(dir: &Path, name: &str) -> Expected {
    let path = dir.join(format!("{name}.expected.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = rows.pop().expect("a last line");
    Expected {
        tensors: rows,
        last,
    }
}

/// torch's dtype names (str(t.dtype) without "torch.") as tessera dtypes.
pub fn dtype_of(torch_name: &str) -> DType {
    let c10 = match torch_name {
        "float32" => "Float",
        "float64" => "Double",
        "float16" => "Half",
        "bfloat16" => "BFloat16",
        "int64" => "Long",
        "int32" => "Int",
        "int16" => "Short",
        "int8" => "Char",
        "uint8" => "Byte",
        "bool" => "Bool",
        "complex64" => "ComplexFloat",
        other => panic!("fixture dtype {other} has no entry here"),
    };
    DType::from_name(c10).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn ints(row: &Value, key: &str) -> Vec<i64> {
    row[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// Compares `dict` (loaded from the fixture, `what` in messages) with
/// `expected`.
pub fn check(expected: &Expected, what: &str, dict: &TensorDict) {
    let names: Vec<&str> = expected
        .tensors
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let loaded: Vec<&str> = dict.iter().map(|(n, _)| n).collect();
    assert_eq!(loaded, names, "{what}: names and their order");

    let mut groups: HashMap<u64, Storage> = HashMap::new();
    for row in &expected.tensors {
        let tname = row["name"].as_str().unwrap();
        let what = format!("{what} {tname}");
        let t = dict.get(tname).unwrap();
        let dtype = dtype_of(row["dtype"].as_str().unwrap());
        assert_eq!(t.dtype(), dtype, "{what}: dtype");
        assert_eq!(t.sizes(), &ints(row, "sizes")[..], "{what}: sizes");
        assert_eq!(t.strides(), &ints(row, "strides")[..], "{what}: strides");
        assert_eq!(
            hex(&serialize::row_major(t)),
            row["bytes"].as_str().unwrap(),
            "{what}: values"
        );
        let mut offset = row["offset"].as_i64().unwrap();
        let mut group = row["group"].as_u64().unwrap();
        // A view's tensor loaded on its root's whole storage (the root's
        // group comes first): the offset moves.
        if let Some(view) = row.get("view") {
            let root = view["group"].as_u64().unwrap();
            if groups
                .get(&root)
                .is_some_and(|s| Storage::ptr_eq(s, t.storage()))
            {
                offset += view["offset"].as_i64().unwrap();
                group = root;
            }
        }
        assert_eq!(t.storage_offset(), offset, "{what}: offset");
        match groups.get(&group) {
            Some(s) => assert!(
                Storage::ptr_eq(s, t.storage()),
                "{what}: shares group {group}'s storage"
            ),
            None => {
                for (g, s) in &groups {
                    assert!(
                        !Storage::ptr_eq(s, t.storage()),
                        "{what}: shares group {g}'s storage"
                    );
                }
                groups.insert(group, t.storage().clone());
            }
        }
    }
    check_skipped(&expected.last, what, dict);
}

/// tessera.skipped and the dict's values against the last line's
/// "skipped", "skipped_extra" and "skipped_must_name".
fn check_skipped(last: &Value, what: &str, dict: &TensorDict) {
    let listed: Vec<String> = dict
        .metadata(serialize::SKIPPED_KEY)
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default();
    // Plain values Python's walk lists are kept as values (issue 68): a
    // name of a value, or inside one (`optimizer.param_groups.0.lr` in the
    // value `optimizer.param_groups`).
    let is_value = |name: &str| {
        dict.values_iter().any(|(v, _)| {
            name == v
                || name
                    .strip_prefix(v)
                    .is_some_and(|rest| rest.starts_with('.'))
        })
    };
    for needle in strings(&last["skipped_must_name"]) {
        assert!(
            is_value(&needle) || listed.iter().any(|l| l.contains(&needle)),
            "{what}: tessera.skipped names {needle}: {listed:?}"
        );
    }
    if last["skipped"].is_null() {
        return;
    }
    let extra = strings(&last["skipped_extra"]);
    let is_extra = |entry: &str| {
        extra.iter().any(|x| {
            entry == x
                || entry
                    .strip_prefix(x.as_str())
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with(' '))
        })
    };
    let mut want: Vec<String> = strings(&last["skipped"])
        .into_iter()
        .filter(|w| !is_value(w))
        .collect();
    let mut got: Vec<String> = listed
        .iter()
        .filter(|l| want.contains(l) || !is_extra(l))
        .cloned()
        .collect();
    want.sort();
    got.sort();
    assert_eq!(
        got, want,
        "{what}: skipped non-tensor values (all listed: {listed:?})"
    );
}
