//! `Tensor::item` (c10's item()) over every dtype; the C export and the
//! C++ `Tensor::item<T>()` over it are checked by the bad-input table and
//! cpp_tests/test_tensor.cpp.

use tessera::{DType, Device, ErrorKind, Scalar, Tensor};

/// c10's item() for every dtype with a numeric value: a value every dtype
/// holds exactly (true for bool, 5 for integers, 2 for floating types,
/// float4 and float8 (e8m0: powers of two only) included, 1.5-2i for
/// complex) filled into a
/// one-element tensor comes back as the scalar of its kind, from a 0-dim
/// tensor and from one of sizes [1, 1, 1]; storage-only dtypes and
/// tensors of 0 or 2 elements are refused.
#[test]
fn item_gives_the_one_element_of_every_dtype() {
    let mut read = 0;
    for dtype in DType::ALL {
        for sizes in [&[][..], &[1, 1, 1][..]] {
            let t = Tensor::empty(sizes, dtype, Device::CPU).unwrap();
            if dtype.is_storage_only() {
                let e = t.item().unwrap_err();
                assert_eq!(e.kind(), ErrorKind::DType, "{dtype:?}: {e}");
                continue;
            }
            let (fill, want) = if dtype == DType::Bool {
                (Scalar::Bool(true), Scalar::Bool(true))
            } else if dtype.is_complex() {
                (Scalar::Complex(1.5, -2.0), Scalar::Complex(1.5, -2.0))
            } else if dtype.is_floating() {
                (Scalar::Float(2.0), Scalar::Float(2.0))
            } else if dtype.is_barebones_unsigned() {
                (Scalar::Int(5), Scalar::UInt(5))
            } else {
                (Scalar::Int(5), Scalar::Int(5))
            };
            if let Err(e) = t.fill_(fill) {
                // Float4_e2m1fn_x2: two values packed in a byte, no scalar
                // of its own (c10 has no item() for it either).
                assert_eq!(e.kind(), ErrorKind::Unsupported, "{dtype:?}: {e}");
                assert!(t.item().is_err(), "{dtype:?}: item() of a packed dtype");
                continue;
            }
            assert_eq!(t.item().unwrap(), want, "{dtype:?} {sizes:?}");
            read += 1;
        }
    }
    // 22 dtypes with a numeric value (of 47), each as 0-dim and [1, 1, 1].
    assert_eq!(read, 44, "dtype x shape cases read");
    for sizes in [&[2][..], &[0][..]] {
        let t = Tensor::empty(sizes, DType::Float, Device::CPU).unwrap();
        let e = t.item().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Shape, "{sizes:?}: {e}");
        assert!(e.message().contains("exactly one element"), "{e}");
    }
}
