//! The dtype table against PyTorch 2.15's c10 (tests/data/torch_dtypes.jsonl,
//! the `dtype` rows): every ScalarType number 0..46 has c10's name,
//! itemsize and categories, through the Rust API and the C functions; the
//! numbers around the table are refused.

use serde_json::Value;
use std::ffi::CStr;
use tessera::ffi::dtype::*;
use tessera::DType;

fn dtype_rows() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/torch_dtypes.jsonl"
    ))
    .expect("tests/data/torch_dtypes.jsonl");
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("valid JSON line"))
        .filter(|v| v["kind"] == "dtype")
        .collect()
}

#[test]
fn every_oracle_row_matches() {
    let rows = dtype_rows();
    assert_eq!(rows.len(), 47, "the oracle lists ScalarType 0..46");
    for row in &rows {
        let num = row["num"].as_i64().unwrap();
        let name = row["name"].as_str().unwrap();
        let itemsize = row["itemsize"].as_u64().unwrap() as usize;
        let floating = row["floating"].as_bool().unwrap();
        let complex = row["complex"].as_bool().unwrap();
        let integral = row["integral"].as_bool().unwrap();
        let raw = i8::try_from(num).unwrap();

        let d = DType::from_raw(raw).unwrap_or_else(|e| panic!("{row}: {e}"));
        assert_eq!(d.name(), name, "{row}");
        assert_eq!(d.itemsize(), itemsize, "{row}");
        assert_eq!(d.is_floating(), floating, "{row}");
        assert_eq!(d.is_complex(), complex, "{row}");
        assert_eq!(d.is_integral(false), integral, "{row}");
        assert_eq!(DType::from_name(name), Some(d), "{row}");

        assert!(tsr_dtype_is_valid(raw), "{row}");
        assert_eq!(tsr_dtype_itemsize(raw), itemsize, "{row}");
        // SAFETY: tsr_dtype_name returns a static NUL-terminated string.
        let c_name = unsafe { CStr::from_ptr(tsr_dtype_name(raw)) };
        assert_eq!(c_name.to_str().unwrap(), name, "{row}");
        assert_eq!(tsr_dtype_is_floating(raw), floating, "{row}");
        assert_eq!(tsr_dtype_is_complex(raw), complex, "{row}");
    }
}

#[test]
fn numbers_outside_the_table_are_refused() {
    let valid = (i8::MIN..=i8::MAX)
        .filter(|&n| tsr_dtype_is_valid(n))
        .count();
    assert_eq!(valid, 47);
    for raw in [-128i8, -1, 47, 48, 127] {
        assert!(!tsr_dtype_is_valid(raw));
        assert_eq!(tsr_dtype_itemsize(raw), 0);
        // SAFETY: tsr_dtype_name returns a static NUL-terminated string.
        let c_name = unsafe { CStr::from_ptr(tsr_dtype_name(raw)) };
        assert_eq!(c_name.to_str().unwrap(), "Undefined");
        let e = DType::from_raw(raw).unwrap_err();
        assert!(e.message().contains(&raw.to_string()), "{e}");
    }
}
