//! Geometry calls and their refusals against libtorch 2.15's own results
//! (tests/data/torch_views2.jsonl, fields in torch_views2.README.md):
//! as_strided, set_ and resize_ (with the storage each leaves behind),
//! transpose, permute, flatten, unsqueeze and squeeze. set_ and resize_
//! run through both the Rust core and the C exports (tsr_tensor_set,
//! tsr_tensor_resize), which must agree with libtorch and with each other.

use serde_json::Value;
use std::ptr;
use tessera::ffi::refcount_exports::{tsr_storage_decref, tsr_tensor_decref};
use tessera::ffi::storage::{tsr_storage_nbytes, tsr_storage_new, TsrStorage};
use tessera::ffi::tensor::*;
use tessera::ffi::tensor_resize::{tsr_tensor_resize, tsr_tensor_set};
use tessera::ffi::{TsrDevice, TsrStatus, TSR_CPU, TSR_FLOAT, TSR_OK};
use tessera::tensor::MemoryFormat;
use tessera::{DType, Device, Storage, Tensor};

/// Every case of `op` in the oracle file.
fn cases(op: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/torch_views2.jsonl"
    ))
    .expect("tests/data/torch_views2.jsonl");
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|v| v["op"] == op)
        .collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap_or_else(|| panic!("{v} is not an array"))
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn int(case: &Value, key: &str) -> i64 {
    case[key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} of {case}"))
}

fn refused(case: &Value) -> bool {
    case.get("error").is_some()
}

/// What a geometry call left: the tensor's geometry, its storage's size
/// and whether its version moved; or a refusal.
#[derive(Debug, PartialEq)]
enum Outcome {
    Refused,
    Done {
        sizes: Vec<i64>,
        strides: Vec<i64>,
        offset: i64,
        storage_nbytes: usize,
        version_bumped: bool,
    },
}

/// The outcome libtorch reports for a set or resize case.
fn expected(case: &Value) -> Outcome {
    if refused(case) {
        return Outcome::Refused;
    }
    Outcome::Done {
        sizes: ints(&case["sizes"]),
        strides: ints(&case["strides"]),
        offset: int(case, "offset"),
        storage_nbytes: int(case, "storage_nbytes") as usize,
        version_bumped: true,
    }
}

/// Checks that `t` still has `sizes` / `offset` over a storage of
/// `nbytes` (a refused call changes nothing).
fn assert_unchanged(t: &Tensor, sizes: &[i64], offset: i64, nbytes: usize, case: &Value) {
    assert_eq!(t.sizes(), sizes, "refused {case} changed the sizes");
    assert_eq!(
        t.storage_offset(),
        offset,
        "refused {case} moved the offset"
    );
    assert_eq!(
        t.storage().nbytes(),
        nbytes,
        "refused {case} resized the storage"
    );
    assert_eq!(t.version(), 0, "refused {case} bumped the version");
}

fn core_outcome(t: &Tensor, result: tessera::Result<()>, storage: &Storage) -> Outcome {
    match result {
        Err(_) => Outcome::Refused,
        Ok(()) => {
            assert!(Storage::ptr_eq(t.storage(), storage), "another storage");
            Outcome::Done {
                sizes: t.sizes().to_vec(),
                strides: t.strides().to_vec(),
                offset: t.storage_offset(),
                storage_nbytes: storage.nbytes(),
                version_bumped: t.version() == 1,
            }
        }
    }
}

/// Owned C handles, released on drop.
struct CTensor(*mut TsrTensor);
struct CStorage(*mut TsrStorage);

impl Drop for CTensor {
    fn drop(&mut self) {
        // SAFETY: CTensor owns one reference of a live handle.
        assert_eq!(unsafe { tsr_tensor_decref(self.0) }, TSR_OK);
    }
}

impl Drop for CStorage {
    fn drop(&mut self) {
        // SAFETY: CStorage owns one reference of a live handle.
        assert_eq!(unsafe { tsr_storage_decref(self.0) }, TSR_OK);
    }
}

const CPU: TsrDevice = TsrDevice {
    device_type: TSR_CPU,
    index: -1,
};

fn c_storage(nbytes: usize, resizable: bool) -> CStorage {
    let mut s = ptr::null_mut();
    // SAFETY: s is writable.
    let status = unsafe { tsr_storage_new(nbytes, CPU, resizable, &mut s) };
    assert_eq!(status, TSR_OK);
    CStorage(s)
}

impl CTensor {
    fn sizes(&self) -> Vec<i64> {
        // SAFETY: a live handle; sizes and strides hold ndim values.
        unsafe {
            let n = tsr_tensor_ndim(self.0) as usize;
            if n == 0 {
                return Vec::new();
            }
            std::slice::from_raw_parts(tsr_tensor_sizes(self.0), n).to_vec()
        }
    }

    fn strides(&self) -> Vec<i64> {
        // SAFETY: as sizes.
        unsafe {
            let n = tsr_tensor_ndim(self.0) as usize;
            if n == 0 {
                return Vec::new();
            }
            std::slice::from_raw_parts(tsr_tensor_strides(self.0), n).to_vec()
        }
    }

    fn outcome(&self, status: TsrStatus, storage: &CStorage) -> Outcome {
        if status != TSR_OK {
            return Outcome::Refused;
        }
        // SAFETY: live handles.
        let (offset, nbytes, version) = unsafe {
            (
                tsr_tensor_storage_offset(self.0),
                tsr_storage_nbytes(storage.0),
                tsr_tensor_version(self.0),
            )
        };
        Outcome::Done {
            sizes: self.sizes(),
            strides: self.strides(),
            offset,
            storage_nbytes: nbytes,
            version_bumped: version == 1,
        }
    }
}

/// `torch.empty(0).set_(storage, offset, size, stride)`, in the core.
fn set_core(case: &Value) -> Outcome {
    let nbytes = int(case, "nbytes") as usize;
    let resizable = case["resizable"].as_bool().unwrap();
    let storage = Storage::new(nbytes, Device::CPU, resizable).unwrap();
    let t = Tensor::empty(&[0], DType::Float, Device::CPU).unwrap();
    let sizes = ints(&case["size"]);
    let strides = (!case["stride"].is_null()).then(|| ints(&case["stride"]));
    // SAFETY: t and storage are this thread's alone.
    let r = unsafe { t.set_(&storage, int(case, "offset"), &sizes, strides.as_deref()) };
    let outcome = core_outcome(&t, r, &storage);
    if outcome == Outcome::Refused {
        assert_unchanged(&t, &[0], 0, 0, case);
        assert_eq!(
            storage.nbytes(),
            nbytes,
            "refused {case} resized the storage"
        );
    }
    outcome
}

/// The same through tsr_tensor_set.
fn set_c(case: &Value) -> Outcome {
    let storage = c_storage(
        int(case, "nbytes") as usize,
        case["resizable"].as_bool().unwrap(),
    );
    let zero = 0i64;
    let mut t = ptr::null_mut();
    // SAFETY: one size; t writable.
    let status = unsafe { tsr_tensor_empty(1, &zero, TSR_FLOAT, CPU, &mut t) };
    assert_eq!(status, TSR_OK);
    let t = CTensor(t);
    let sizes = ints(&case["size"]);
    let strides = (!case["stride"].is_null()).then(|| ints(&case["stride"]));
    let strides_ptr = strides.as_ref().map_or(ptr::null(), |s| s.as_ptr());
    // SAFETY: live handles; sizes (and strides when given) hold ndim values.
    let status = unsafe {
        tsr_tensor_set(
            t.0,
            storage.0,
            int(case, "offset"),
            sizes.len() as i64,
            sizes.as_ptr(),
            strides_ptr,
        )
    };
    t.outcome(status, &storage)
}

fn format_of(case: &Value) -> MemoryFormat {
    MemoryFormat::from_raw(int(case, "format") as i32).unwrap()
}

/// resize_ of a contiguous float view of in_sizes at in_offset, in the
/// core.
fn resize_core(case: &Value) -> Outcome {
    let nbytes = int(case, "nbytes") as usize;
    let resizable = case["resizable"].as_bool().unwrap();
    let storage = Storage::new(nbytes, Device::CPU, resizable).unwrap();
    let (in_sizes, in_offset) = (ints(&case["in_sizes"]), int(case, "in_offset"));
    let t = Tensor::from_storage(&storage, in_offset, &in_sizes, None, DType::Float).unwrap();
    // SAFETY: t and its storage are this thread's alone.
    let r = unsafe { t.resize_(&ints(&case["size"]), format_of(case)) };
    let outcome = core_outcome(&t, r, &storage);
    if outcome == Outcome::Refused {
        assert_unchanged(&t, &in_sizes, in_offset, nbytes, case);
    }
    outcome
}

/// The same through tsr_tensor_resize.
fn resize_c(case: &Value) -> Outcome {
    let storage = c_storage(
        int(case, "nbytes") as usize,
        case["resizable"].as_bool().unwrap(),
    );
    let in_sizes = ints(&case["in_sizes"]);
    let mut t = ptr::null_mut();
    // SAFETY: a live storage; in_sizes holds ndim values; t writable.
    let status = unsafe {
        tsr_tensor_from_storage(
            storage.0,
            int(case, "in_offset"),
            in_sizes.len() as i64,
            in_sizes.as_ptr(),
            ptr::null(),
            TSR_FLOAT,
            &mut t,
        )
    };
    assert_eq!(status, TSR_OK, "the input view of {case}");
    let t = CTensor(t);
    let sizes = ints(&case["size"]);
    // SAFETY: a live handle; sizes holds ndim values.
    let status = unsafe {
        tsr_tensor_resize(
            t.0,
            sizes.len() as i64,
            sizes.as_ptr(),
            int(case, "format") as i32,
        )
    };
    t.outcome(status, &storage)
}

#[test]
fn as_strided_matches_libtorch() {
    let all = cases("as_strided");
    for case in &all {
        let base = Tensor::empty(&[int(case, "base")], DType::Float, Device::CPU).unwrap();
        let (size, stride) = (ints(&case["size"]), ints(&case["stride"]));
        let r = base.as_strided(&size, &stride, int(case, "offset"));
        if refused(case) {
            assert!(r.is_err(), "{case}: libtorch refuses, tessera gave {r:?}");
            continue;
        }
        let v = r.unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(v.sizes(), &ints(&case["sizes"])[..], "{case}");
        assert_eq!(v.strides(), &ints(&case["strides"])[..], "{case}");
        assert_eq!(v.storage_offset(), int(case, "offset"), "{case}");
        assert!(Storage::ptr_eq(v.storage(), base.storage()), "{case}");
    }
    assert_eq!(all.len(), 150);
}

#[test]
fn set_matches_libtorch_in_the_core_and_the_c_api() {
    let all = cases("set");
    let mut grown = 0;
    for case in &all {
        let want = expected(case);
        assert_eq!(set_core(case), want, "core set_ {case}");
        assert_eq!(set_c(case), want, "tsr_tensor_set {case}");
        if let Outcome::Done { storage_nbytes, .. } = want {
            grown += usize::from(storage_nbytes > int(case, "nbytes") as usize);
        }
    }
    assert_eq!(all.len(), 150);
    // The cases the issue found: a resizable storage grown to fit.
    assert!(grown > 0, "no case grows a storage");
}

#[test]
fn resize_matches_libtorch_in_the_core_and_the_c_api() {
    let all = cases("resize");
    for case in &all {
        let want = expected(case);
        assert_eq!(resize_core(case), want, "core resize_ {case}");
        assert_eq!(resize_c(case), want, "tsr_tensor_resize {case}");
    }
    assert_eq!(all.len(), 150);
}

/// A float view of in_sizes / in_strides at offset 0 over a storage just
/// large enough.
fn dim_view_input(case: &Value) -> Tensor {
    let (sizes, strides) = (ints(&case["in_sizes"]), ints(&case["in_strides"]));
    let needed = tessera::tensor::layout::storage_nbytes_needed(&sizes, &strides, 0, 4).unwrap();
    let storage = Storage::new(needed, Device::CPU, false).unwrap();
    Tensor::from_storage(&storage, 0, &sizes, Some(&strides), DType::Float).unwrap()
}

fn dim_op(op: &str, t: &Tensor, args: &[i64]) -> tessera::Result<Tensor> {
    match op {
        "transpose" => t.transpose(args[0], args[1]),
        "permute" => t.permute(args),
        "flatten" => t.flatten(args[0], args[1]),
        "unsqueeze" => t.unsqueeze(args[0]),
        "squeeze" => t.squeeze(args[0]),
        other => panic!("unknown op {other}"),
    }
}

#[test]
fn dim_views_match_libtorch() {
    let mut n = 0;
    for op in ["transpose", "permute", "flatten", "unsqueeze", "squeeze"] {
        for case in cases(op) {
            n += 1;
            let input = dim_view_input(&case);
            let args = ints(&case["args"]);
            let r = dim_op(op, &input, &args);
            if refused(&case) {
                assert!(r.is_err(), "{case}: libtorch refuses, tessera gave {r:?}");
                continue;
            }
            let v = r.unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(v.sizes(), &ints(&case["sizes"])[..], "{case}");
            assert_eq!(v.strides(), &ints(&case["strides"])[..], "{case}");
            assert_eq!(v.storage_offset(), int(&case, "offset"), "{case}");
            let shares = case["shares"].as_bool().unwrap();
            assert_eq!(
                Storage::ptr_eq(v.storage(), input.storage()),
                shares,
                "{case}: shares the input's storage"
            );
        }
    }
    assert_eq!(n, 150);
}
