//! Checks the iterator against reference cases produced by PyTorch's own
//! TensorIterator (tests/data/torch_cases.jsonl): allocated-output sizes,
//! strides and dtype, the iteration shape after reorder and coalesce, and
//! the memory-overlap decisions.

mod common;

use common::{case_lines, dtype_of, input_view};
use serde_json::Value;
use tessera::iterator::IterConfig;
use tessera::{DType, Device, Storage, Tensor};

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

#[test]
fn binary_builds_match_pytorch() {
    let mut n = 0;
    let mut failures = Vec::new();
    for case in case_lines("binary") {
        let a = input_view(&case["a"]);
        let b = input_view(&case["b"]);
        let mut config = IterConfig::new();
        config
            .add_output(None)
            .unwrap()
            .add_input(a)
            .unwrap()
            .add_input(b)
            .unwrap();
        config
            .promote_inputs_to_common_dtype(true)
            .cast_common_dtype_to_outputs(true)
            .enforce_safe_casting_to_output(true);
        let it = config
            .build()
            .unwrap_or_else(|e| panic!("build failed for {case}: {e}"));
        let out = it.output(0);
        let want_sizes = ints(&case["out_sizes"]);
        let want_strides = ints(&case["out_strides"]);
        let strides_ok = want_sizes
            .iter()
            .zip(out.strides().iter().zip(&want_strides))
            .all(|(&s, (&got, &want))| s == 1 || got == want);
        let ok = out.sizes() == &want_sizes[..]
            && strides_ok
            && out.dtype() == dtype_of(&case["out_dtype"])
            && it.ndim() as i64 == case["iter_ndim"].as_i64().unwrap()
            && it.shape() == &ints(&case["iter_shape"])[..];
        if !ok {
            failures.push(format!(
                "{case}\n   got sizes {:?} strides {:?} dtype {} iter shape {:?}",
                out.sizes(),
                out.strides(),
                out.dtype(),
                it.shape()
            ));
        }
        n += 1;
    }
    assert!(
        failures.is_empty(),
        "{} of {n} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(n, 500);
}

#[test]
fn overlap_decisions_match_pytorch() {
    let storage = Storage::new(10 * 4, Device::CPU, false).unwrap();
    storage.fill(0).unwrap();
    let view = |offset: i64, size: i64, stride: i64| {
        Tensor::from_storage(&storage, offset, &[size], Some(&[stride]), DType::Float).unwrap()
    };
    for case in case_lines("overlap") {
        let name = case["name"].as_str().unwrap();
        let (out, input) = match name {
            "out_expanded" => (view(0, 5, 0), view(5, 5, 1)),
            "partial_overlap" => (view(1, 5, 1), view(0, 5, 1)),
            "full_overlap_inplace" => {
                let v = view(0, 5, 1);
                (v.clone(), v)
            }
            "disjoint" => (view(5, 5, 1), view(0, 5, 1)),
            other => panic!("unknown overlap case {other}"),
        };
        let mut config = IterConfig::new();
        config
            .add_output(Some(out))
            .unwrap()
            .add_input(input)
            .unwrap();
        let accepted = config.build().is_ok();
        assert_eq!(accepted, case["accepted"].as_bool().unwrap(), "case {name}");
    }
}
