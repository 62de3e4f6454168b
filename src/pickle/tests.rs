use super::*;
use crate::error::ErrorKind;

fn allow_all(_: &str, _: &str) -> bool {
    true
}

fn sample() -> Value {
    Value::Reduce {
        callable: Box::new(Value::global("collections", "OrderedDict")),
        args: Box::new(Value::Tuple(vec![])),
        items: vec![
            (Value::str("a"), Value::Int(-5)),
            (Value::str("big"), Value::Int(1 << 40)),
            (Value::str("neg"), Value::Int(-(1 << 40))),
            (Value::str("f"), Value::Float(1.5)),
            (
                Value::str("l"),
                Value::List(vec![Value::None, Value::Bool(true), Value::Int(65535)]),
            ),
            (
                Value::str("t"),
                Value::Tuple((0..5).map(Value::Int).collect()),
            ),
            (
                Value::str("p"),
                Value::PersistentId(Box::new(Value::Tuple(vec![
                    Value::str("storage"),
                    Value::global("torch", "FloatStorage"),
                ]))),
            ),
            (
                Value::str("d"),
                Value::Dict(vec![(Value::Int(1), Value::str("é"))]),
            ),
        ],
        state: Some(Box::new(Value::Dict(vec![]))),
    }
}

#[test]
fn write_then_read_gives_the_same_tree() {
    let bytes = write(&sample()).unwrap();
    assert_eq!(&bytes[..2], &[0x80, 2]);
    let back = read(&bytes, &allow_all, Limits::default()).unwrap();
    assert_eq!(back, sample());
}

#[test]
fn bytes_need_protocol_3() {
    let v = Value::Bytes(vec![1, 2, 3]);
    assert_eq!(write(&v).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let bytes = write_protocol(&v, 3).unwrap();
    assert_eq!(read(&bytes, &allow_all, Limits::default()).unwrap(), v);
}

#[test]
fn a_refused_global_is_named() {
    let bytes = b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00ls\x85R.";
    let e = read(bytes, &|m, _| m == "collections", Limits::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Format);
    assert!(e.message().contains("os.system"), "{}", e.message());
}

#[test]
fn deep_nesting_is_refused() {
    let mut bytes = vec![0x80, 2, b'N'];
    bytes.extend(std::iter::repeat_n(0x85u8, 10_000));
    bytes.push(b'.');
    let e = read(&bytes, &allow_all, Limits::default()).unwrap_err();
    assert!(e.message().contains("nested 101 deep"), "{}", e.message());
    // The arena itself holds the 10,000 tuples (a walker limits depth).
    assert!(parse(&bytes, &allow_all, Limits::default()).is_ok());
}

#[test]
fn huge_and_missing_memo_indices_are_refused() {
    let e = read(
        b"\x80\x02Nr\xff\xff\xff\xff.",
        &allow_all,
        Limits::default(),
    )
    .unwrap_err();
    assert!(
        e.message().contains("memo index 4294967295"),
        "{}",
        e.message()
    );
    let e = read(b"\x80\x02j\x00\x00\x00\x01.", &allow_all, Limits::default()).unwrap_err();
    assert!(e.message().contains("never stored"), "{}", e.message());
}

/// A list of `n` Nones, memoized in slot 0, after PROTO 2.
fn memoized_list(n: usize) -> Vec<u8> {
    let mut b = vec![0x80, 2, b']', b'('];
    b.extend(std::iter::repeat_n(b'N', n));
    b.extend_from_slice(b"eq\x00");
    b
}

#[test]
fn a_value_reached_a_million_times_is_one_node() {
    // A list of 1000 Nones memoized, then fetched a million times: the
    // arena holds one list and a million ids; a tree of it is refused.
    let mut bytes = memoized_list(1000);
    bytes.push(b'(');
    for _ in 0..1_000_000 {
        bytes.extend_from_slice(b"h\x00");
    }
    bytes.extend_from_slice(b"l.");
    let p = parse(&bytes, &allow_all, Limits::default()).unwrap();
    let root = p.root();
    let outer = root.as_seq().unwrap();
    assert_eq!(outer.len(), 1_000_000);
    let first = outer.get(0).unwrap();
    assert_eq!(first.as_seq().unwrap().len(), 1000);
    assert!(outer.iter().all(|v| v.id() == first.id()), "one object");
    assert!(p.len() < 16, "{} nodes", p.len());
    let e = read(&bytes, &allow_all, Limits::default()).unwrap_err();
    assert!(
        e.message().contains("limit of values built"),
        "{}",
        e.message()
    );
}

#[test]
fn a_container_filled_after_it_was_memoized_is_seen_full() {
    // EMPTY_DICT, BINPUT 0, SETITEMS {'a': 1}, then [memo 0, memo 0]:
    // both are the filled dict, as in Python (the old reader copied the
    // memo's value when it was put: two empty dicts).
    let b = b"\x80\x02(}q\x00(X\x01\x00\x00\x00aK\x01uh\x00l.";
    let v = read(b, &allow_all, Limits::default()).unwrap();
    let d = Value::Dict(vec![(Value::str("a"), Value::Int(1))]);
    assert_eq!(v, Value::List(vec![d.clone(), d]));
}

#[test]
fn a_list_holding_itself_is_read_and_refused_as_a_tree() {
    // EMPTY_LIST, BINPUT 0, BINGET 0, APPEND: a list that holds itself.
    let b = b"\x80\x02]q\x00h\x00a.";
    let p = parse(b, &allow_all, Limits::default()).unwrap();
    let l = p.root().as_seq().unwrap();
    assert_eq!(l.get(0).unwrap().id(), p.root().id());
    let e = read(b, &allow_all, Limits::default()).unwrap_err();
    assert!(e.message().contains("holding itself"), "{}", e.message());
}

#[test]
fn a_second_build_on_one_object_is_refused() {
    let b = b"\x80\x02ccollections\nOrderedDict\n)R}b}b.";
    let e = read(b, &allow_all, Limits::default()).unwrap_err();
    assert!(e.message().contains("second BUILD"), "{}", e.message());
}

#[test]
fn protocol_4_sets_and_newobj_ex_are_read() {
    // EMPTY_SET + ADDITEMS {'a'}, FROZENSET of 'b', and NEWOBJ_EX of
    // collections.OrderedDict with () and {'k': 1}.
    let mut b = vec![0x80, 4];
    b.extend_from_slice(b"(\x8f(\x8c\x01a\x90(\x8c\x01b\x91");
    b.extend_from_slice(b"\x8c\x0bcollections\x8c\x0bOrderedDict\x93)}\x8c\x01kK\x01s\x92t.");
    let p = parse(&b, &allow_all, Limits::default()).unwrap();
    let t = p.root().as_seq().unwrap();
    let Kind::Set(a) = t.get(0).unwrap().kind() else {
        panic!("{:?}", t.get(0))
    };
    assert_eq!(a.get(0).unwrap().as_str(), Some("a"));
    let Kind::Set(fb) = t.get(1).unwrap().kind() else {
        panic!()
    };
    assert_eq!(fb.get(0).unwrap().as_str(), Some("b"));
    let c = t.get(2).unwrap().as_call().unwrap();
    assert_eq!((c.module, c.name), ("collections", "OrderedDict"));
    assert_eq!(c.kwargs.get("k").unwrap().as_int(), Some(1));
}

#[test]
fn python_2_strings_are_latin_1() {
    // SHORT_BINSTRING of b'caf\xe9' (Python 2's str).
    let b = b"\x80\x02U\x04caf\xe9.";
    let v = read(b, &allow_all, Limits::default()).unwrap();
    assert_eq!(v, Value::str("caf\u{e9}"));
}

#[test]
fn every_persistent_id_is_listed_reached_or_not() {
    // [pid('a'), pid('b')] with pid('c') built and popped.
    let b = b"\x80\x02]X\x01\x00\x00\x00cQ0(X\x01\x00\x00\x00aQX\x01\x00\x00\x00bQe.";
    let p = parse(b, &allow_all, Limits::default()).unwrap();
    let ids: Vec<String> = p
        .persistent_ids()
        .map(|v| match v.kind() {
            Kind::PersistentId(id) => id.as_str().unwrap().to_owned(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(ids, ["c", "a", "b"]);
    assert_eq!(p.root().as_seq().unwrap().len(), 2);
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = write(&sample()).unwrap();
    for n in 0..bytes.len() {
        let e = read(&bytes[..n], &allow_all, Limits::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format, "length {n}");
    }
}

#[test]
fn protocol_4_opcodes_are_read() {
    // PROTO 4, FRAME, SHORT_BINUNICODE + MEMOIZE, STACK_GLOBAL, BINGET.
    let mut b = vec![0x80, 4, 0x95];
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(b"\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93\x94)R\x94");
    b.extend_from_slice(b"(\x8c\x01x\x94h\x00u.");
    let v = read(&b, &allow_all, Limits::default()).unwrap();
    let Value::Reduce {
        callable, items, ..
    } = v
    else {
        panic!("{v:?}")
    };
    assert_eq!(callable.as_global(), Some(("collections", "OrderedDict")));
    assert_eq!(items, vec![(Value::str("x"), Value::str("collections"))]);
}

#[test]
fn memo_and_memo_get_write_one_object_twice() {
    let big = Value::Memo {
        id: 300,
        value: Box::new(Value::str("shared")),
    };
    let v = Value::List(vec![big, Value::MemoGet(300), Value::MemoGet(300)]);
    let bytes = write(&v).unwrap();
    assert!(
        bytes.contains(&b'r') && bytes.contains(&b'j'),
        "LONG_BINPUT / LONG_BINGET"
    );
    let back = read(&bytes, &allow_all, Limits::default()).unwrap();
    assert_eq!(back, Value::List(vec![Value::str("shared"); 3]));
}
