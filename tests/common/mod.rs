//! Helpers shared by the integration tests that read PyTorch's reference
//! cases.
#![allow(dead_code)]

use serde_json::Value;
use tessera::{DType, Device, Storage, Tensor};

/// Every case of `kind` in tests/data/torch_cases.jsonl.
pub fn case_lines(kind: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/torch_cases.jsonl"
    ))
    .expect("tests/data/torch_cases.jsonl");
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("valid JSON line"))
        .filter(|v| v["kind"] == kind)
        .collect()
}

/// The dtype with a c10 name.
pub fn dtype_of(v: &Value) -> DType {
    let name = v.as_str().expect("dtype name");
    DType::from_name(name).unwrap_or_else(|| panic!("unknown dtype {name}"))
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// The input view of a case (`{"sizes","strides","offset","dtype"}`) over a
/// storage just large enough, filled with a distinct byte pattern.
pub fn input_view(spec: &Value) -> Tensor {
    let sizes = ints(&spec["sizes"]);
    let strides = ints(&spec["strides"]);
    let offset = spec["offset"].as_i64().unwrap();
    let dtype = dtype_of(&spec["dtype"]);
    let needed =
        tessera::tensor::layout::storage_nbytes_needed(&sizes, &strides, offset, dtype.itemsize())
            .unwrap();
    let storage = Storage::new(
        needed.max(dtype.itemsize() * (offset as usize + 1)),
        Device::CPU,
        false,
    )
    .unwrap();
    storage.fill(0).unwrap();
    Tensor::from_storage(&storage, offset, &sizes, Some(&strides), dtype).unwrap()
}
