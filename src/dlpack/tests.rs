use super::*;
use crate::error::ErrorKind;

fn dt(code: u8, bits: u8) -> DLDataType {
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

const CPU: DLDevice = DLDevice {
    device_type: device_code::CPU,
    device_id: 0,
};

#[test]
fn every_dtype_maps_both_ways_or_is_storage_only() {
    for d in DType::ALL {
        match DLDataType::from_dtype(d) {
            Ok(t) => {
                assert_eq!(
                    usize::from(t.bits) * usize::from(t.lanes),
                    d.itemsize() * 8,
                    "{d}"
                );
                assert_eq!(t.to_dtype().unwrap(), d);
            }
            Err(e) => {
                assert!(d.is_storage_only() || d == DType::BComplex32, "{d}: {e}");
                assert_eq!(e.kind(), ErrorKind::DType);
                assert!(e.message().contains(d.name()), "{e}");
            }
        }
    }
}

#[test]
fn dtype_facts() {
    assert_eq!(DLDataType::from_dtype(DType::Bool).unwrap(), dt(6, 8));
    assert_eq!(DLDataType::from_dtype(DType::BFloat16).unwrap(), dt(4, 16));
    assert_eq!(
        DLDataType::from_dtype(DType::ComplexHalf).unwrap(),
        dt(5, 32)
    );
    assert_eq!(
        DLDataType::from_dtype(DType::ComplexDouble).unwrap(),
        dt(5, 128)
    );
    assert_eq!(DLDataType::from_dtype(DType::Byte).unwrap(), dt(1, 8));
    assert_eq!(DLDataType::from_dtype(DType::Char).unwrap(), dt(0, 8));
    assert_eq!(
        DLDataType::from_dtype(DType::Float8E5M2).unwrap(),
        dt(12, 8)
    );
    assert_eq!(
        DLDataType::from_dtype(DType::Float8E4M3Fn).unwrap(),
        dt(10, 8)
    );
    assert_eq!(
        DLDataType::from_dtype(DType::Float8E5M2Fnuz).unwrap(),
        dt(13, 8)
    );
    assert_eq!(
        DLDataType::from_dtype(DType::Float8E4M3Fnuz).unwrap(),
        dt(11, 8)
    );
    assert_eq!(
        DLDataType::from_dtype(DType::Float8E8M0Fnu).unwrap(),
        dt(14, 8)
    );
    let fp4 = DLDataType {
        code: 17,
        bits: 4,
        lanes: 2,
    };
    assert_eq!(DLDataType::from_dtype(DType::Float4E2M1FnX2).unwrap(), fp4);
    assert_eq!(fp4.to_dtype().unwrap(), DType::Float4E2M1FnX2);
    for d in [
        DType::BComplex32,
        DType::Bits8,
        DType::UInt4,
        DType::QUInt4x2,
    ] {
        let e = DLDataType::from_dtype(d).unwrap_err();
        assert!(e.message().contains(d.name()), "{e}");
    }
    // DLPack codes tessera has no dtype for are refused by name.
    for (code, bits, name) in [
        (type_code::FLOAT8_E3M4, 8, "kDLFloat8_e3m4"),
        (type_code::FLOAT8_E4M3, 8, "kDLFloat8_e4m3"),
        (type_code::FLOAT8_E4M3B11FNUZ, 8, "kDLFloat8_e4m3b11fnuz"),
        (type_code::FLOAT6_E2M3FN, 6, "kDLFloat6_e2m3fn"),
        (type_code::FLOAT6_E3M2FN, 6, "kDLFloat6_e3m2fn"),
    ] {
        let e = dt(code, bits).to_dtype().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DType);
        assert!(e.message().contains(name), "{e}");
    }
    // one lane of float4 is not a tessera dtype (c10 packs two per byte)
    let e = dt(type_code::FLOAT4_E2M1FN, 4).to_dtype().unwrap_err();
    assert!(e.message().contains("kDLFloat4_e2m1fn"), "{e}");
}

#[test]
fn bad_dlpack_dtypes() {
    let e = DLDataType {
        code: 2,
        bits: 32,
        lanes: 4,
    }
    .to_dtype()
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType);
    assert!(e.message().contains("4 lanes"), "{e}");
    let e = dt(99, 32).to_dtype().unwrap_err();
    assert!(e.message().contains("unknown DLPack type code 99"), "{e}");
    let e = dt(type_code::FLOAT, 8).to_dtype().unwrap_err();
    assert!(
        e.message().contains("kDLFloat with 8 bits") && e.message().contains("16, 32, 64"),
        "{e}"
    );
    let e = dt(type_code::OPAQUE_HANDLE, 64).to_dtype().unwrap_err();
    assert!(e.message().contains("kDLOpaqueHandle"), "{e}");
    let e = dt(type_code::FLOAT8_E3M4, 8).to_dtype().unwrap_err();
    assert!(e.message().contains("kDLFloat8_e3m4"), "{e}");
    let e = dt(type_code::BOOL, 1).to_dtype().unwrap_err();
    assert!(e.message().contains("expected bits 8"), "{e}");
}

#[test]
fn devices() {
    let cuda3 = Device::new(DeviceType::Cuda, 3).unwrap();
    let d = DLDevice::from_device(cuda3).unwrap();
    assert_eq!((d.device_type, d.device_id), (2, 3));
    assert_eq!(d.to_device().unwrap(), cuda3);
    let current = Device::new(DeviceType::Cuda, -1).unwrap();
    assert_eq!(DLDevice::from_device(current).unwrap().device_id, 0);
    assert_eq!(DLDevice::from_device(Device::CPU).unwrap(), CPU);
    assert!(CPU.to_device().unwrap().is_cpu());
    let pinned = DLDevice {
        device_type: device_code::CUDA_HOST,
        device_id: 0,
    };
    assert!(pinned.to_device().unwrap().is_cpu());

    let hip = Device::new(DeviceType::Hip, 0).unwrap();
    let e = DLDevice::from_device(hip).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.message().contains("hip:0"), "{e}");
    let meta = Device::new(DeviceType::Meta, -1).unwrap();
    assert!(DLDevice::from_device(meta).is_err());

    let e = DLDevice {
        device_type: device_code::VULKAN,
        device_id: 0,
    }
    .to_device()
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.message().contains("kDLVulkan"), "{e}");
    let e = DLDevice {
        device_type: 42,
        device_id: 0,
    }
    .to_device()
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = DLDevice {
        device_type: device_code::CUDA,
        device_id: 128,
    }
    .to_device()
    .unwrap_err();
    assert!(e.message().contains("device_id 128"), "{e}");
}

#[test]
fn version_flags_ndim() {
    check_version(1, 0).unwrap();
    check_version(1, 7).unwrap();
    let e = check_version(2, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(
        e.message().contains("version 2.0") && e.message().contains("major version 1"),
        "{e}"
    );
    assert_eq!(check_ndim(64).unwrap(), 64);
    assert_eq!(check_ndim(0).unwrap(), 0);
    assert_eq!(check_ndim(-1).unwrap_err().kind(), ErrorKind::Shape);
    assert!(check_ndim(65).unwrap_err().message().contains("ndim 65"));
}

#[test]
fn plan_spans_and_strides() {
    let f32t = dt(type_code::FLOAT, 32);
    let p = plan_import(f32t, CPU, &[2, 3], None, 0x1000, 8).unwrap();
    assert_eq!(&p.strides[..], &[3, 1]);
    assert_eq!((p.first_byte, p.nbytes), (8, 24));
    assert_eq!(p.dtype, DType::Float);
    // a transposed view spans the same bytes
    let p = plan_import(f32t, CPU, &[3, 2], Some(&[1, 3]), 0x1000, 0).unwrap();
    assert_eq!((&p.strides[..], p.nbytes), (&[1i64, 3][..], 24));
    // a strided view spans up to its last element only
    let p = plan_import(f32t, CPU, &[2, 2], Some(&[4, 1]), 0x1000, 0).unwrap();
    assert_eq!(p.nbytes, 24);
    // 0-dim: one element
    assert_eq!(
        plan_import(f32t, CPU, &[], None, 0x1000, 0).unwrap().nbytes,
        4
    );
    // empty: no bytes, NULL data allowed, strides normalized
    let p = plan_import(f32t, CPU, &[0, 5], Some(&[-7, 1]), 0, 0).unwrap();
    assert_eq!((&p.strides[..], p.nbytes), (&[5i64, 1][..], 0));
}

#[test]
fn plan_refusals() {
    let f32t = dt(type_code::FLOAT, 32);
    let e = plan_import(f32t, CPU, &[2, -3], None, 0x1000, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape);
    assert!(e.message().contains("-3"), "{e}");
    let e = plan_import(f32t, CPU, &[4], Some(&[-1]), 0x1000, 12).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.message().contains("negative stride -1"), "{e}");
    // a negative stride on a size-1 dim addresses nothing: accepted
    let p = plan_import(f32t, CPU, &[1, 4], Some(&[-4, 1]), 0x1000, 0).unwrap();
    assert_eq!(&p.strides[..], &[4, 1]);
    let e = plan_import(f32t, CPU, &[4], None, 0, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("NULL"), "{e}");
    let e = plan_import(f32t, CPU, &[4], None, 0x1000, 2).unwrap_err();
    assert!(e.message().contains("not aligned to 4 bytes"), "{e}");
    let c64 = dt(type_code::COMPLEX, 64);
    plan_import(c64, CPU, &[4], None, 0x1004, 0).expect("complex64 needs 4-byte alignment");
    let e = plan_import(f32t, CPU, &[i64::MAX / 2, 4], None, 0x1000, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    let e = plan_import(f32t, CPU, &[4], None, usize::MAX - 8, 0).unwrap_err();
    assert!(e.message().contains("overflows the address space"), "{e}");
}
