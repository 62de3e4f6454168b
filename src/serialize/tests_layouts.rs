//! The torch readers' invariant as a property (issue 51): over generated
//! pickles of every container layout (dicts; OrderedDicts by SETITEMS,
//! by constructor lists and tuples, by both, with BUILD state; lists and
//! tuples; nested modules with parameters, buffers (non-persistent ones
//! too) and children; objects of unknown classes holding values;
//! memo-shared tensors and dicts reached under two names), in both torch
//! containers (zip and legacy), every storage the file references is in a
//! loaded tensor or counted in a skipped entry, and the loaded names and
//! values are the ones a reference interpretation of the layout gives.

use super::tests::{archive, load_bytes};
use super::*;
use crate::pickle::{self, Value};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy)]
enum Form {
    Dict,
    Setitems,
    CtorLists,
    CtorTuples,
    CtorAndSetitems,
    WithMetadata,
}

#[derive(Debug, Clone)]
enum Shape {
    Leaf,
    Int,
    Map(Form, Vec<Shape>),
    List(Vec<Shape>),
    Tuple(Vec<Shape>),
    /// params (present or None), buffers (persistent or not), children.
    Module(Vec<bool>, Vec<bool>, Vec<Shape>),
    /// An object of an unknown class holding the value in its state.
    Hidden(Box<Shape>),
}

fn form() -> impl Strategy<Value = Form> {
    prop_oneof![
        Just(Form::Dict),
        Just(Form::Setitems),
        Just(Form::CtorLists),
        Just(Form::CtorTuples),
        Just(Form::CtorAndSetitems),
        Just(Form::WithMetadata),
    ]
}

fn module(depth: u32) -> BoxedStrategy<Shape> {
    let flags = || proptest::collection::vec(any::<bool>(), 0..3);
    if depth == 0 {
        (flags(), flags())
            .prop_map(|(p, b)| Shape::Module(p, b, vec![]))
            .boxed()
    } else {
        (
            flags(),
            flags(),
            proptest::collection::vec(module(depth - 1), 0..3),
        )
            .prop_map(|(p, b, c)| Shape::Module(p, b, c))
            .boxed()
    }
}

fn shape() -> impl Strategy<Value = Shape> {
    let leaf = prop_oneof![3 => Just(Shape::Leaf), 1 => Just(Shape::Int)];
    leaf.prop_recursive(3, 32, 4, |inner| {
        let items = || proptest::collection::vec(inner.clone(), 0..4);
        prop_oneof![
            (form(), items()).prop_map(|(f, v)| Shape::Map(f, v)),
            items().prop_map(Shape::List),
            items().prop_map(Shape::Tuple),
            module(2),
            inner.clone().prop_map(|s| Shape::Hidden(Box::new(s))),
        ]
    })
}

/// A memoized visible leaf or map: its memo id, the (name, leaf) pairs
/// it gave relative to its own name, and the storages its skipped
/// entries held.
type Shared = (u32, Vec<(String, usize)>, usize);

/// Pickles a layout and says what a load must give.
struct Emit {
    legacy: bool,
    /// Each tensor's storage bytes (leaf k: storage key k).
    leaves: Vec<Vec<u8>>,
    memo: u32,
    /// (name, leaf) of every tensor a load must give, in order.
    names: Vec<(String, usize)>,
    /// Storages counted in skipped entries (a value reached twice, twice).
    held: usize,
    /// Leaves only held, never loaded.
    hidden: Vec<usize>,
    /// Memoized visible leaves and maps.
    shared: Vec<Shared>,
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_owned()
    } else {
        format!("{a}.{b}")
    }
}

fn od(args: Vec<Value>, items: Vec<(Value, Value)>, state: Option<Value>) -> Value {
    Value::Reduce {
        callable: Box::new(Value::global("collections", "OrderedDict")),
        args: Box::new(Value::Tuple(args)),
        items,
        state: state.map(Box::new),
    }
}

impl Emit {
    fn tensor(&mut self) -> (Value, usize) {
        let k = self.leaves.len();
        let bytes: Vec<u8> = (0..2)
            .flat_map(|i| ((k * 10 + i) as f32).to_le_bytes())
            .collect();
        self.leaves.push(bytes);
        let mut pid = vec![
            Value::str("storage"),
            Value::global("torch", "FloatStorage"),
            Value::str(&k.to_string()),
            Value::str("cpu"),
            Value::Int(2),
        ];
        if self.legacy {
            pid.push(Value::None);
        }
        let storage = Value::PersistentId(Box::new(Value::Tuple(pid)));
        let geometry = [
            Value::Int(0),
            Value::Tuple(vec![Value::Int(2)]),
            Value::Tuple(vec![Value::Int(1)]),
        ];
        let t = if k % 3 == 0 {
            // PyTorch 0.4's rebuild.
            let mut args = vec![storage];
            args.extend(geometry);
            Value::call(Value::global("torch._utils", "_rebuild_tensor"), args)
        } else {
            let mut args = vec![storage];
            args.extend(geometry);
            args.extend([Value::Bool(false), od(vec![], vec![], None)]);
            Value::call(Value::global("torch._utils", "_rebuild_tensor_v2"), args)
        };
        (t, k)
    }

    fn memoized(&mut self, v: Value) -> (Value, u32) {
        self.memo += 1;
        (
            Value::Memo {
                id: self.memo,
                value: Box::new(v),
            },
            self.memo,
        )
    }

    /// The pickled value of `s` at `name`; `visible`: reached by the
    /// walk as a value of its own (not inside an unknown object).
    fn value(&mut self, s: &Shape, name: &str, visible: bool) -> Value {
        match s {
            Shape::Leaf => {
                let (t, k) = self.tensor();
                if !visible {
                    self.hidden.push(k);
                    self.held += 1;
                    return t;
                }
                self.names.push((name.to_owned(), k));
                let (t, id) = self.memoized(t);
                self.shared.push((id, vec![(String::new(), k)], 0));
                t
            }
            Shape::Int => Value::Int(7),
            Shape::Map(form, items) => {
                let first = self.names.len();
                let held = self.held;
                let pairs: Vec<(Value, Value)> = items
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let key = format!("k{i}");
                        let v = self.value(s, &join(name, &key), visible);
                        (Value::str(&key), v)
                    })
                    .collect();
                let pair = |(k, v): (Value, Value), tuple: bool| {
                    if tuple {
                        Value::Tuple(vec![k, v])
                    } else {
                        Value::List(vec![k, v])
                    }
                };
                let v = match form {
                    Form::Dict => Value::Dict(pairs),
                    Form::Setitems => od(vec![], pairs, None),
                    Form::CtorLists | Form::CtorTuples => {
                        let tuple = matches!(form, Form::CtorTuples);
                        let list = pairs.into_iter().map(|p| pair(p, tuple)).collect();
                        od(vec![Value::List(list)], vec![], None)
                    }
                    Form::CtorAndSetitems => {
                        let mut pairs = pairs;
                        let rest = pairs.split_off(pairs.len() / 2);
                        let list = pairs.into_iter().map(|p| pair(p, false)).collect();
                        od(vec![Value::List(list)], rest, None)
                    }
                    Form::WithMetadata => {
                        let versions = od(
                            vec![],
                            vec![(
                                Value::str(""),
                                Value::Dict(vec![(Value::str("version"), Value::Int(1))]),
                            )],
                            None,
                        );
                        let state = Value::Dict(vec![(Value::str("_metadata"), versions)]);
                        od(vec![], pairs, Some(state))
                    }
                };
                if !visible {
                    return v;
                }
                let rel = self.names[first..]
                    .iter()
                    .map(|(n, k)| (n[name.len()..].trim_start_matches('.').to_owned(), *k))
                    .collect();
                let (v, id) = self.memoized(v);
                self.shared.push((id, rel, self.held - held));
                v
            }
            Shape::List(items) | Shape::Tuple(items) => {
                let vs = items
                    .iter()
                    .enumerate()
                    .map(|(i, s)| self.value(s, &join(name, &i.to_string()), visible))
                    .collect();
                match s {
                    Shape::List(_) => Value::List(vs),
                    _ => Value::Tuple(vs),
                }
            }
            Shape::Module(params, buffers, children) => {
                let mut p = Vec::new();
                for (i, present) in params.iter().enumerate() {
                    let key = format!("p{i}");
                    let v = if *present {
                        let t = self.value(&Shape::Leaf, &join(name, &key), visible);
                        Value::call(
                            Value::global("torch._utils", "_rebuild_parameter"),
                            vec![t, Value::Bool(true), od(vec![], vec![], None)],
                        )
                    } else {
                        Value::None
                    };
                    p.push((Value::str(&key), v));
                }
                let mut b = Vec::new();
                let mut transient = Vec::new();
                for (i, persistent) in buffers.iter().enumerate() {
                    let key = format!("b{i}");
                    let v = self.value(&Shape::Leaf, &join(name, &key), visible && *persistent);
                    if !persistent {
                        transient.push(Value::str(&key));
                    }
                    b.push((Value::str(&key), v));
                }
                let c = children
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let key = format!("c{i}");
                        (Value::str(&key), self.value(s, &join(name, &key), visible))
                    })
                    .collect();
                let state = Value::Dict(vec![
                    (Value::str("training"), Value::Bool(true)),
                    (Value::str("_parameters"), od(vec![], p, None)),
                    (Value::str("_buffers"), od(vec![], b, None)),
                    (
                        Value::str("_non_persistent_buffers_set"),
                        Value::call(
                            Value::global("builtins", "set"),
                            vec![Value::List(transient)],
                        ),
                    ),
                    (Value::str("_modules"), od(vec![], c, None)),
                ]);
                Value::Reduce {
                    callable: Box::new(Value::global("__main__", "Net")),
                    args: Box::new(Value::Tuple(vec![])),
                    items: vec![],
                    state: Some(Box::new(state)),
                }
            }
            Shape::Hidden(inner) => {
                let payload = self.value(inner, &join(name, "payload"), false);
                Value::Reduce {
                    callable: Box::new(Value::global("__main__", "Config")),
                    args: Box::new(Value::Tuple(vec![])),
                    items: vec![],
                    state: Some(Box::new(Value::Dict(vec![(
                        Value::str("payload"),
                        payload,
                    )]))),
                }
            }
        }
    }
}

/// torch.save's legacy container of `pkl` and the storages.
fn legacy_file(pkl: &[u8], leaves: &[Vec<u8>]) -> Vec<u8> {
    let mut f = vec![
        0x80, 2, 0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, b'.',
    ];
    f.extend(pickle::write(&Value::Int(1001)).unwrap());
    let sys_info = Value::Dict(vec![
        (Value::str("protocol_version"), Value::Int(1001)),
        (Value::str("little_endian"), Value::Bool(true)),
    ]);
    f.extend(pickle::write(&sys_info).unwrap());
    f.extend_from_slice(pkl);
    let keys = (0..leaves.len())
        .map(|k| Value::str(&k.to_string()))
        .collect();
    f.extend(pickle::write(&Value::List(keys)).unwrap());
    for bytes in leaves {
        f.extend(((bytes.len() / 4) as u64).to_le_bytes());
        f.extend_from_slice(bytes);
    }
    f
}

/// Loads `root`'s layout in one container and checks the invariant.
fn check(root: &Shape, extra: usize, legacy: bool) -> std::result::Result<(), TestCaseError> {
    let mut e = Emit {
        legacy,
        leaves: Vec::new(),
        memo: 0,
        names: Vec::new(),
        held: 0,
        hidden: Vec::new(),
        shared: Vec::new(),
    };
    let mut v = e.value(root, "", true);
    // The root map is memoized last: it cannot hold itself.
    e.shared.pop();
    // Reach some memoized tensors and maps a second time, by new names.
    let shared: Vec<_> = e.shared.iter().rev().take(extra).cloned().collect();
    let mut again = Vec::new();
    for (i, (id, rel, held)) in shared.into_iter().enumerate() {
        let key = format!("again{i}");
        for (n, k) in rel {
            let full = if n.is_empty() {
                key.clone()
            } else {
                join(&key, &n)
            };
            e.names.push((full, k));
        }
        e.held += held;
        again.push((Value::str(&key), Value::MemoGet(id)));
    }
    // The root is a map: the extra keys go at its end.
    match &mut v {
        Value::Memo { value, .. } => match &mut **value {
            Value::Dict(items) => items.extend(again),
            Value::Reduce { items, .. } => items.extend(again),
            _ => unreachable!(),
        },
        _ => unreachable!(),
    }
    let pkl = pickle::write(&v).unwrap();
    let bytes = if legacy {
        legacy_file(&pkl, &e.leaves)
    } else {
        let records: Vec<(String, &[u8])> = e
            .leaves
            .iter()
            .enumerate()
            .map(|(k, b)| (k.to_string(), &b[..]))
            .collect();
        let records: Vec<(&str, &[u8])> = records.iter().map(|(k, b)| (k.as_str(), *b)).collect();
        archive(&pkl, &records)
    };
    let s = Storage::new(bytes.len(), Device::CPU, false).unwrap();
    // SAFETY: a fresh storage of bytes.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.data() as *mut u8, bytes.len()) };
    let flags = LoadFlags {
        mmap: false,
        skip_unknown: true,
        ..Default::default()
    };
    let d = load_from_storage_flags(&s, Format::Auto, flags)
        .map_err(|err| TestCaseError::fail(format!("{root:?}: {err}")))?;
    let loaded: Vec<&str> = d.iter().map(|(n, _)| n).collect();
    let expected: Vec<&str> = e.names.iter().map(|(n, _)| n.as_str()).collect();
    prop_assert_eq!(&loaded, &expected, "names of {:?}", root);
    for (name, k) in &e.names {
        let got = row_major(d.get(name).unwrap());
        prop_assert_eq!(&got, &e.leaves[*k], "values of {}", name);
    }
    let skipped = d.metadata(SKIPPED_KEY).unwrap_or("");
    let held: usize = skipped
        .lines()
        .filter_map(|l| {
            l.split_once("[holding ")?
                .1
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    prop_assert_eq!(
        held,
        e.held,
        "storages held by skipped entries:\n{}",
        skipped
    );
    // Every storage is in a loaded tensor or held by a skipped entry.
    let mut accounted: Vec<usize> = e.names.iter().map(|(_, k)| *k).collect();
    accounted.extend(&e.hidden);
    accounted.sort();
    accounted.dedup();
    prop_assert_eq!(accounted.len(), e.leaves.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn every_storage_is_loaded_or_listed(
        form in form(),
        items in proptest::collection::vec(shape(), 1..5),
        extra in 0usize..3,
    ) {
        let root = Shape::Map(form, items);
        check(&root, extra, false)?;
        check(&root, extra, true)?;
    }
}

/// Without TSR_LOAD_SKIP_UNKNOWN a module is refused naming its class.
#[test]
fn a_module_without_skip_unknown_is_refused_naming_its_class() {
    let mut e = Emit {
        legacy: false,
        leaves: Vec::new(),
        memo: 0,
        names: Vec::new(),
        held: 0,
        hidden: Vec::new(),
        shared: Vec::new(),
    };
    let v = e.value(&Shape::Module(vec![true], vec![true], vec![]), "", true);
    let pkl = pickle::write(&v).unwrap();
    let records: Vec<(String, Vec<u8>)> = e
        .leaves
        .iter()
        .enumerate()
        .map(|(k, b)| (k.to_string(), b.clone()))
        .collect();
    let records: Vec<(&str, &[u8])> = records.iter().map(|(k, b)| (k.as_str(), &b[..])).collect();
    let err = load_bytes(&archive(&pkl, &records)).unwrap_err();
    assert!(err.message().contains("__main__.Net"), "{err}");
    assert!(err.message().contains("TSR_LOAD_SKIP_UNKNOWN"), "{err}");
}
