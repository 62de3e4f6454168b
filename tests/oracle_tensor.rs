//! Checks promotion, can_cast, view ops and contiguity against reference
//! cases produced by PyTorch itself (tests/data/torch_cases.jsonl).

mod common;

use common::{case_lines, dtype_of, input_view};
use serde_json::Value;
use tessera::dtype::{can_cast, promote_types};
use tessera::tensor::MemoryFormat;
use tessera::Tensor;

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

#[test]
fn promotion_and_can_cast_match_pytorch() {
    let mut n = 0;
    for case in case_lines("promote") {
        let a = dtype_of(&case["a"]);
        let b = dtype_of(&case["b"]);
        let out = dtype_of(&case["out"]);
        assert_eq!(promote_types(a, b).unwrap(), out, "promote({a}, {b})");
        assert_eq!(
            can_cast(a, b),
            case["can_cast"].as_bool().unwrap(),
            "can_cast({a}, {b})"
        );
        n += 1;
    }
    assert_eq!(n, 144);
}

fn apply(op: &str, t: &Tensor, args: &[i64]) -> tessera::Result<Tensor> {
    match op {
        "view" => t.view(args),
        "reshape" => t.reshape(args),
        "squeeze" => t.squeeze(args[0]),
        "unsqueeze" => t.unsqueeze(args[0]),
        "narrow" => t.narrow(args[0], args[1], args[2]),
        "select" => t.select(args[0], args[1]),
        "expand" => t.expand(args),
        other => panic!("unknown op {other}"),
    }
}

#[test]
fn view_ops_match_pytorch() {
    let mut checked = 0;
    for case in case_lines("view") {
        let op = case["op"].as_str().unwrap();
        let input = input_view(&case["in"]);
        let args = ints(&case["args"]);
        let result = apply(op, &input, &args);
        if case.get("error").is_some() {
            assert!(
                result.is_err(),
                "{op}{args:?} on {case} should fail, got {result:?}"
            );
            checked += 1;
            continue;
        }
        let r = result.unwrap_or_else(|e| panic!("{op}{args:?} on {case}: {e}"));
        let sizes = ints(&case["sizes"]);
        let strides = ints(&case["strides"]);
        assert_eq!(r.sizes(), &sizes[..], "sizes of {op}{args:?} on {case}");
        for (d, (&s, (&got, &want))) in sizes
            .iter()
            .zip(r.strides().iter().zip(&strides))
            .enumerate()
        {
            if s != 1 {
                assert_eq!(
                    got,
                    want,
                    "stride {d} of {op}{args:?} on {case}: {:?}",
                    r.strides()
                );
            }
        }
        assert_eq!(
            r.storage_offset(),
            case["offset"].as_i64().unwrap(),
            "offset of {op} on {case}"
        );
        checked += 1;
    }
    assert_eq!(checked, 1400);
}

#[test]
fn contiguity_matches_pytorch() {
    let mut n = 0;
    for case in case_lines("contig") {
        let t = input_view(&case["in"]);
        assert_eq!(
            t.is_contiguous(MemoryFormat::Contiguous),
            case["contiguous"].as_bool().unwrap(),
            "contiguous {case}"
        );
        assert_eq!(
            t.is_contiguous(MemoryFormat::ChannelsLast),
            case["channels_last"].as_bool().unwrap(),
            "channels_last {case}"
        );
        n += 1;
    }
    assert!(n >= 40, "{n} contiguity cases");
}
