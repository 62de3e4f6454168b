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

#[test]
fn repeating_a_memoized_value_is_bounded() {
    // A list of 1000 Nones memoized, then fetched a million times.
    let mut bytes = vec![0x80, 2, b']', b'('];
    bytes.extend(std::iter::repeat_n(b'N', 1000));
    bytes.extend_from_slice(b"eq\x00(");
    for _ in 0..1_000_000 {
        bytes.extend_from_slice(b"h\x00");
    }
    bytes.extend_from_slice(b"l.");
    let e = read(&bytes, &allow_all, Limits::default()).unwrap_err();
    assert!(e.message().contains("limit for a"), "{}", e.message());
}

/// A list of `n` Nones, memoized in slot 0, after PROTO 2.
fn memoized_list(n: usize) -> Vec<u8> {
    let mut b = vec![0x80, 2, b']', b'('];
    b.extend(std::iter::repeat_n(b'N', n));
    b.extend_from_slice(b"eq\x00");
    b
}

/// Reads `bytes`: a refusal naming the bound and the input's size, the
/// accounted bytes within the bound (and the bound within 192 bytes per
/// input byte + 1 MiB).
fn refused_within_bound(bytes: &[u8]) {
    let limits = Limits::default();
    let bound = limits.bound(bytes.len());
    assert!(bound <= (1 << 20) + 192 * bytes.len() as u64);
    let (r, accounted) = super::read_measured(bytes, &allow_all, limits);
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Format);
    let needle = format!(
        "more than {bound} bytes, the limit for a {}-byte pickle",
        bytes.len()
    );
    assert!(e.message().contains(&needle), "{}", e.message());
    assert!(accounted <= bound, "{accounted} > {bound}");
}

#[test]
fn one_mb_of_memo_gets_is_refused_within_the_bound() {
    // 1 MB: a 1000-None list fetched from the memo ~520,000 times.
    let mut b = memoized_list(1000);
    b.push(b'(');
    while b.len() < (1 << 20) - 2 {
        b.extend_from_slice(b"h\x00");
    }
    b.extend_from_slice(b"l.");
    refused_within_bound(&b);
}

#[test]
fn two_mb_of_dups_is_refused_within_the_bound() {
    // 8,000 DUPs of a 1000-None list (under the old 2^23-cell limit, so
    // it loaded, building ~450 MB), popped, then FRAMEs up to 2 MB.
    let mut b = memoized_list(1000);
    b.extend(std::iter::repeat_n(b'2', 8000));
    b.extend(std::iter::repeat_n(b'0', 8000));
    while b.len() < (2 << 20) - 1 {
        b.push(0x95);
        b.extend_from_slice(&0u64.to_le_bytes());
    }
    b.push(b'.');
    refused_within_bound(&b);
}

#[test]
fn memoizing_a_big_value_repeatedly_is_accounted() {
    // MEMOIZE copies the top value into a new memo slot each time; these
    // copies were not counted at all.
    let mut b = memoized_list(1000);
    b.extend(std::iter::repeat_n(0x94u8, 5_000));
    b.push(b'.');
    refused_within_bound(&b);
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
