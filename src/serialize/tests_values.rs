//! Values read from pickles built value by value (issue 68): the bounds
//! of one value and of a whole load, a list shared under many names.

use super::tests::{archive, load_bytes};
use super::torch_pickle::SKIPPED_KEY;
use super::values::{MAX_LOAD, MAX_NODES};
use crate::pickle::{self, Value};

/// A dict of `names` keys, each holding the one list of `len` ints (the
/// pickle's memo: one list, shared).
fn shared_list(names: usize, len: usize) -> Vec<u8> {
    let list = Value::List((0..len as i64).map(Value::Int).collect());
    let mut items = vec![(
        Value::str("k0"),
        Value::Memo {
            id: 0,
            value: Box::new(list),
        },
    )];
    for i in 1..names {
        items.push((Value::str(&format!("k{i}")), Value::MemoGet(0)));
    }
    pickle::write(&Value::Dict(items)).unwrap()
}

#[test]
fn a_list_shared_under_many_names_is_kept_within_the_loads_budget() {
    // 2,000 names of one list of 60,000 ints: 120 million nodes if each
    // were copied; the load keeps what its budget allows and lists the
    // rest, naming the bound.
    let len = 60_000;
    let d = load_bytes(&archive(&shared_list(2_000, len), &[])).unwrap();
    let kept = d.value_count();
    assert!(kept >= 1 && kept <= MAX_LOAD.nodes / len + 1, "{kept} kept");
    assert_eq!(d.value("k0").unwrap().as_array().unwrap().len(), len);
    let skipped: Vec<&str> = d.metadata(SKIPPED_KEY).unwrap().lines().collect();
    assert_eq!(kept + skipped.len(), 2_000);
    assert!(
        skipped[0]
            .contains("the file's values pass 1048576 nodes or 16777216 bytes of JSON in all"),
        "{}",
        skipped[0]
    );
}

#[test]
fn a_value_past_its_node_bound_is_skipped_naming_it() {
    let d = load_bytes(&archive(&shared_list(1, MAX_NODES), &[])).unwrap();
    assert_eq!(d.value_count(), 0);
    assert_eq!(
        d.metadata(SKIPPED_KEY),
        Some("k0 (a value of more than 65536 lists, dicts and scalars: not kept)")
    );
}
