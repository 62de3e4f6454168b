//! NPY files written by NumPy itself (tests/fixtures/npy/, made by
//! scripts/make_npy_fixtures.py with np.save) load with their dtypes,
//! shapes, orders and values, copied and mapped; tessera's own NPY files
//! load back; bad files are refused by name.

#[path = "common/numpy.rs"]
mod numpy;

use numpy::{expected, storage_of, values};
use std::path::PathBuf;
use tessera::serialize::{
    detect, load, load_from_storage, save, save_to_bytes, Format, LoadFlags, TensorDict,
};
use tessera::{DType, Device, ErrorKind, MemoryFormat, Tensor};

/// The name of an npy file's one array (npy.rs's ARRAY_NAME, as np.savez
/// names a positional array).
const ARRAY_NAME: &str = "arr_0";

/// A NumPy-written npy file (TESSERA_NPY_FIXTURES or tests/fixtures/npy).
fn fixture(name: &str) -> PathBuf {
    numpy::fixture("TESSERA_NPY_FIXTURES", "npy", name)
}

/// Every dtype NumPy has, with its type code (the dtype table's numpy
/// column; make_npy_fixtures.py writes c_<code>.npy for each).
const NUMPY_CODES: &[(&str, DType)] = &[
    ("b1", DType::Bool),
    ("u1", DType::Byte),
    ("i1", DType::Char),
    ("i2", DType::Short),
    ("i4", DType::Int),
    ("i8", DType::Long),
    ("u2", DType::UInt16),
    ("u4", DType::UInt32),
    ("u8", DType::UInt64),
    ("f2", DType::Half),
    ("f4", DType::Float),
    ("f8", DType::Double),
    ("c8", DType::ComplexFloat),
    ("c16", DType::ComplexDouble),
];

fn numpy_code(dtype: DType) -> Option<&'static str> {
    NUMPY_CODES
        .iter()
        .find(|&&(_, d)| d == dtype)
        .map(|&(c, _)| c)
}

/// Loads `bytes` from a storage.
fn load_bytes(bytes: &[u8]) -> tessera::Result<TensorDict> {
    load_from_storage(&storage_of(bytes), Format::Auto)
}

fn load_one(file: &str, mmap: bool) -> Tensor {
    let d = load(
        &fixture(file),
        Format::Auto,
        LoadFlags {
            mmap,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(d.len(), 1, "{file}");
    assert_eq!(d.name(0), Some(ARRAY_NAME));
    d.get(ARRAY_NAME).unwrap().clone()
}

#[test]
fn numpy_files_load_with_dtype_shape_and_values() {
    for &(code, dtype) in NUMPY_CODES {
        for mmap in [false, true] {
            let t = load_one(&format!("c_{code}.npy"), mmap);
            assert_eq!((t.dtype(), t.sizes()), (dtype, &[2i64, 3, 4][..]), "{code}");
            assert!(t.is_contiguous(MemoryFormat::Contiguous));
            assert_eq!(values(&t), expected(dtype, 24), "{code} mmap={mmap}");
        }
    }
}

#[test]
fn fortran_order_is_a_column_major_view() {
    for (code, dtype) in [
        ("f4", DType::Float),
        ("c16", DType::ComplexDouble),
        ("i2", DType::Short),
    ] {
        for mmap in [false, true] {
            let t = load_one(&format!("fortran_{code}.npy"), mmap);
            assert_eq!(t.sizes(), &[2, 3, 4]);
            assert_eq!(t.strides(), &[1, 2, 6], "{code}: strided, not copied");
            assert_eq!(values(&t), expected(dtype, 24), "{code}");
        }
    }
}

#[test]
fn big_endian_data_are_swapped() {
    for (code, dtype) in [
        ("i4", DType::Int),
        ("f8", DType::Double),
        ("c8", DType::ComplexFloat),
        ("u2", DType::UInt16),
    ] {
        for mmap in [false, true] {
            let t = load_one(&format!("big_{code}.npy"), mmap);
            assert_eq!(t.dtype(), dtype);
            assert_eq!(values(&t), expected(dtype, 24), "{code} mmap={mmap}");
        }
    }
}

#[test]
fn scalars_empty_arrays_and_version_2_load() {
    let t = load_one("scalar_f8.npy", false);
    assert_eq!(
        (t.sizes().len(), values(&t)),
        (0, expected(DType::Double, 1))
    );
    let t = load_one("empty_f4.npy", true);
    assert_eq!((t.sizes(), t.numel()), (&[0i64, 4][..], 0));
    let t = load_one("v2_i8.npy", false);
    assert_eq!(
        (t.dtype(), values(&t)),
        (DType::Long, expected(DType::Long, 5))
    );
}

#[test]
fn tessera_writes_what_it_reads_and_refuses_what_npy_cannot_hold() {
    let dir = std::env::temp_dir().join(format!("tessera-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = load_one("c_c8.npy", false);
    // A transposed view is written in C order.
    let t = src.permute(&[2, 0, 1]).unwrap();
    let mut d = TensorDict::new();
    d.set("w", t.clone()).unwrap();
    let path = dir.join("w.npy");
    save(&d, &path, Format::Auto).unwrap();
    assert_eq!(detect(&std::fs::read(&path).unwrap()).unwrap(), Format::Npy);
    let back = load(
        &path,
        Format::Npy,
        LoadFlags {
            mmap: true,
            ..Default::default()
        },
    )
    .unwrap();
    let b = back.get(ARRAY_NAME).unwrap();
    assert_eq!((b.sizes(), b.dtype()), (t.sizes(), DType::ComplexFloat));
    assert_eq!(values(b), values(&t));
    // Two tensors, metadata, a dtype NumPy lacks: refused, nothing written.
    d.set("x", t.clone()).unwrap();
    let other = dir.join("two.npy");
    let e = save(&d, &other, Format::Auto).unwrap_err();
    assert!(e.message().contains("one array"), "{e}");
    assert!(!other.exists());
    let mut d = TensorDict::new();
    d.set(
        "b",
        Tensor::empty(&[2], DType::BFloat16, Device::CPU).unwrap(),
    )
    .unwrap();
    let e = save_to_bytes(&d, Format::Npy).unwrap_err();
    assert!(e.message().contains("BFloat16"), "{e}");
    // The mapping first: Windows refuses to remove a mapped file.
    drop(back);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lying_and_truncated_files_are_refused() {
    let good = std::fs::read(fixture("c_f4.npy")).unwrap();
    // Every truncation: refused or (the header only) short of data.
    for len in 0..good.len() {
        let e = load_bytes(&good[..len]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format, "{len}: {e}");
    }
    // A header that claims more elements than the file holds.
    let e = load_bytes(&with_shape(&good, "(9, 3, 4)")).unwrap_err();
    assert!(
        e.message().contains("truncated") && e.message().contains("should be"),
        "{e}"
    );
    // A shape whose product overflows.
    let e = load_bytes(&with_shape(&good, "(4294967296, 4294967296, 4)")).unwrap_err();
    assert!(e.message().contains("overflows"), "{e}");
}

/// `file` (a version 1.0 NPY file of shape (2, 3, 4)) with its shape
/// replaced by `shape`, the header's padding adjusted to keep its length.
fn with_shape(file: &[u8], shape: &str) -> Vec<u8> {
    let len = u16::from_le_bytes([file[8], file[9]]) as usize;
    let header = std::str::from_utf8(&file[10..10 + len]).unwrap();
    let mut new = header.trim_end().replace("(2, 3, 4)", shape);
    assert!(new.len() < len);
    while new.len() < len - 1 {
        new.push(' ');
    }
    new.push('\n');
    let mut out = file[..10].to_vec();
    out.extend_from_slice(new.as_bytes());
    out.extend_from_slice(&file[10 + len..]);
    out
}

/// Writes c_<code>.npy for every NumPy code tessera writes, holding the
/// fixture values, into TESSERA_NPY_OUT (for NumPy to check:
/// `make_npy_fixtures.py --check DIR`) or a temporary directory, and
/// reads each back.
#[test]
fn writes_reference_files() {
    let (dir, keep) = match std::env::var_os("TESSERA_NPY_OUT") {
        Some(d) => (PathBuf::from(d), true),
        None => (
            std::env::temp_dir().join(format!("tessera-npy-out-{}", std::process::id())),
            false,
        ),
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut written = Vec::new();
    for dtype in DType::ALL {
        // The dtypes NumPy has: the others are refused by name.
        let Some(code) = numpy_code(dtype) else {
            if let Ok(one) = Tensor::empty(&[1], dtype, Device::CPU) {
                let mut probe = TensorDict::new();
                probe.set("a", one).unwrap();
                let e = save_to_bytes(&probe, Format::Npy).unwrap_err();
                assert!(e.message().contains(dtype.name()), "{}: {e}", dtype.name());
            }
            continue;
        };
        let want = expected(dtype, 24);
        let complex = dtype.is_complex();
        let flat: Vec<f64> = want
            .iter()
            .flat_map(|&(re, im)| if complex { vec![re, im] } else { vec![re] })
            .collect();
        let src_dtype = if complex {
            DType::ComplexDouble
        } else {
            DType::Double
        };
        let src = Tensor::empty(&[2, 3, 4], src_dtype, Device::CPU).unwrap();
        // SAFETY: src is a fresh contiguous tensor of flat.len() f64 values.
        unsafe {
            std::ptr::copy_nonoverlapping(flat.as_ptr(), src.data_ptr() as *mut f64, flat.len())
        };
        let mut d = TensorDict::new();
        d.set("a", src.to_dtype(dtype).unwrap()).unwrap();
        let path = dir.join(format!("c_{code}.npy"));
        save(&d, &path, Format::Auto).unwrap();
        let back = load(&path, Format::Auto, LoadFlags::default()).unwrap();
        assert_eq!(values(back.get(ARRAY_NAME).unwrap()), want, "{code}");
        written.push(code);
    }
    assert_eq!(written.len(), NUMPY_CODES.len(), "{written:?}");
    if !keep {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
