//! Helpers shared by the NumPy interop tests (tests/format_npy.rs,
//! tests/format_npz.rs): where the NumPy-written fixtures are, the values
//! scripts/make_npy_fixtures.py and make_npz_fixtures.py store, a loaded
//! tensor's values, and a storage holding file bytes.
#![allow(dead_code)]

use std::path::PathBuf;
use tessera::{DType, Device, MemoryFormat, Storage, Tensor};

/// A NumPy-written file `name`: the committed copy in tests/fixtures/`dir`,
/// or a fresh one from the directory the environment variable `env` names
/// (the interop stage, .ci/serialization-interop.sh, runs NumPy's writer
/// first).
pub fn fixture(env: &str, dir: &str, name: &str) -> PathBuf {
    std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(dir)
        })
        .join(name)
}

/// The (real, imaginary) values of `t` in row-major order.
pub fn values(t: &Tensor) -> Vec<(f64, f64)> {
    let complex = t.dtype().is_complex();
    let target = if complex {
        DType::ComplexDouble
    } else {
        DType::Double
    };
    let c = t
        .to_dtype(target)
        .unwrap()
        .contiguous(MemoryFormat::Contiguous)
        .unwrap();
    let n = c.numel() as usize * if complex { 2 } else { 1 };
    if n == 0 {
        return Vec::new();
    }
    // SAFETY: c is a contiguous CPU tensor of n f64 values.
    let v = unsafe { std::slice::from_raw_parts(c.data_ptr() as *const f64, n) };
    if complex {
        v.chunks(2).map(|p| (p[0], p[1])).collect()
    } else {
        v.iter().map(|&x| (x, 0.0)).collect()
    }
}

/// What make_npy_fixtures.py's `values` stores at row-major index i (the
/// npz fixtures use the same function).
pub fn expected(dtype: DType, n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|i| {
            if dtype == DType::Bool {
                return (f64::from(u8::from(i % 3 == 0)), 0.0);
            }
            let v = ((i * 7 + 3) % 100) as f64;
            if dtype.is_complex() {
                (v, -v)
            } else {
                (v, 0.0)
            }
        })
        .collect()
}

/// A fresh CPU storage holding `bytes`.
pub fn storage_of(bytes: &[u8]) -> Storage {
    let s = Storage::new(bytes.len(), Device::CPU, true).unwrap();
    if !bytes.is_empty() {
        // SAFETY: s is a fresh CPU storage of bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.data() as *mut u8, bytes.len()) };
    }
    s
}
