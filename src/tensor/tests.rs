use super::*;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::ErrorKind;

fn arange_f32(n: usize) -> Tensor {
    let t = Tensor::empty(&[n as i64], DType::Float, Device::CPU).unwrap();
    // SAFETY: t owns n floats.
    let s = unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, n) };
    for (i, v) in s.iter_mut().enumerate() {
        *v = i as f32;
    }
    t
}

fn values(t: &Tensor) -> Vec<f32> {
    let c = t.contiguous(MemoryFormat::Contiguous).unwrap();
    // SAFETY: c is contiguous with numel floats.
    unsafe { std::slice::from_raw_parts(c.data_ptr() as *const f32, c.numel() as usize) }.to_vec()
}

#[test]
fn empty_and_getters() {
    let t = Tensor::empty(&[2, 3], DType::Float, Device::CPU).unwrap();
    assert_eq!(t.sizes(), &[2, 3]);
    assert_eq!(t.strides(), &[3, 1]);
    assert_eq!(t.numel(), 6);
    assert_eq!(t.storage().nbytes(), 24);
    assert!(t.is_contiguous(MemoryFormat::Contiguous));
    assert_eq!(t.data_ptr() as usize % 64, 0);
    let z = Tensor::empty(&[], DType::Double, Device::CPU).unwrap();
    assert_eq!((z.ndim(), z.numel(), z.storage().nbytes()), (0, 1, 8));
    let e = Tensor::empty(&[0, 4], DType::Float, Device::CPU).unwrap();
    assert_eq!(e.numel(), 0);
    assert!(e.data_ptr().is_null());
}

#[test]
fn bad_sizes() {
    let e = Tensor::empty(&[2, -1], DType::Float, Device::CPU).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape);
    assert!(e.message().contains("-1"));
    let e = Tensor::empty(&[i64::MAX, 4], DType::Float, Device::CPU).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    let e = Tensor::empty(&[1 << 62], DType::Double, Device::CPU).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    let many = vec![1i64; MAX_DIMS + 1];
    assert_eq!(
        Tensor::empty(&many, DType::Float, Device::CPU)
            .unwrap_err()
            .kind(),
        ErrorKind::Shape
    );
}

#[test]
fn from_storage_bounds() {
    let s = Storage::new(40, Device::CPU, false).unwrap();
    let t = Tensor::from_storage(&s, 2, &[2, 4], None, DType::Float).unwrap();
    assert_eq!(t.strides(), &[4, 1]);
    let e = Tensor::from_storage(&s, 3, &[2, 4], None, DType::Float).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape);
    assert!(
        e.message()
            .contains("requiring a storage size of 44 are out of bounds for storage of size 40"),
        "{e}"
    );
    assert!(Tensor::from_storage(&s, 0, &[2], Some(&[-1]), DType::Float).is_err());
    let t = arange_f32(6);
    assert!(t.as_strided(&[2, 3], &[3, 1], 1).is_err());
}

#[test]
fn views_share_storage_and_version() {
    let t = arange_f32(12);
    let v = t.view(&[3, -1]).unwrap();
    assert_eq!(v.sizes(), &[3, 4]);
    assert!(Storage::ptr_eq(v.storage(), t.storage()));
    assert_eq!(t.version(), 0);
    v.bump_version();
    assert_eq!(t.version(), 1);
    let p = v.permute(&[1, 0]).unwrap();
    assert_eq!((p.sizes(), p.strides()), (&[4, 3][..], &[1, 4][..]));
    p.bump_version();
    assert_eq!(t.version(), 2);
    let other = Tensor::from_storage(t.storage(), 0, &[12], None, DType::Float).unwrap();
    assert_eq!(
        other.version(),
        0,
        "a tensor made from a storage has its own counter"
    );
}

#[test]
fn view_vs_reshape() {
    let t = arange_f32(6).view(&[2, 3]).unwrap();
    let tt = t.transpose(0, 1).unwrap();
    assert!(!tt.is_contiguous(MemoryFormat::Contiguous));
    let e = tt.view(&[6]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape);
    assert!(e.message().contains("reshape"), "{e}");
    let r = tt.reshape(&[6]).unwrap();
    assert!(!Storage::ptr_eq(r.storage(), t.storage()), "reshape copied");
    assert_eq!(values(&r), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let r2 = t.reshape(&[3, 2]).unwrap();
    assert!(Storage::ptr_eq(r2.storage(), t.storage()), "reshape viewed");
}

#[test]
fn each_view_op() {
    let t = arange_f32(24).view(&[2, 3, 4]).unwrap();
    let n = t.narrow(1, 1, 2).unwrap();
    assert_eq!(
        (n.sizes(), n.strides(), n.storage_offset()),
        (&[2, 2, 4][..], &[12, 4, 1][..], 4)
    );
    let n = t.narrow(-1, -2, 2).unwrap();
    assert_eq!((n.sizes(), n.storage_offset()), (&[2, 3, 2][..], 2));
    assert!(t.narrow(1, 2, 2).is_err());
    let s = t.select(0, -1).unwrap();
    assert_eq!(
        (s.sizes(), s.strides(), s.storage_offset()),
        (&[3, 4][..], &[4, 1][..], 12)
    );
    let e = t.select(1, 3).unwrap_err();
    assert!(
        e.message().contains("index 3") && e.message().contains("[-3, 2]"),
        "{e}"
    );
    let u = t.unsqueeze(1).unwrap();
    assert_eq!(
        (u.sizes(), u.strides()),
        (&[2, 1, 3, 4][..], &[12, 12, 4, 1][..])
    );
    let u = t.unsqueeze(-1).unwrap();
    assert_eq!(
        (u.sizes(), u.strides()),
        (&[2, 3, 4, 1][..], &[12, 4, 1, 1][..])
    );
    let q = u.squeeze(3).unwrap();
    assert_eq!(q.sizes(), &[2, 3, 4]);
    let q = t.squeeze(0).unwrap();
    assert_eq!(q.sizes(), &[2, 3, 4], "squeeze of a non-1 dim is unchanged");
    let x = t
        .select(0, 0)
        .unwrap()
        .unsqueeze(0)
        .unwrap()
        .expand(&[5, 3, 4])
        .unwrap();
    assert_eq!((x.sizes(), x.strides()), (&[5, 3, 4][..], &[0, 4, 1][..]));
    let f = t.flatten(1, 2).unwrap();
    assert_eq!((f.sizes(), f.strides()), (&[2, 12][..], &[12, 1][..]));
    let e = t.transpose(0, 3).unwrap_err();
    assert!(e.message().contains("[-3, 2]"), "{e}");
    assert!(t.permute(&[0, 0, 1]).is_err());
    assert!(t.permute(&[0, 1]).is_err());
    let sq = Tensor::empty(&[1, 3, 1], DType::Float, Device::CPU)
        .unwrap()
        .squeeze_all()
        .unwrap();
    assert_eq!(sq.sizes(), &[3]);
}

#[test]
fn contiguity_flags_and_clone() {
    let t = Tensor::empty_with_format(
        &[2, 3, 4, 5],
        DType::Float,
        Device::CPU,
        MemoryFormat::ChannelsLast,
    )
    .unwrap();
    assert!(t.is_contiguous(MemoryFormat::ChannelsLast));
    assert!(!t.is_contiguous(MemoryFormat::Contiguous));
    assert_eq!(t.suggest_memory_format(), MemoryFormat::ChannelsLast);
    let c = t.clone_tensor(MemoryFormat::Preserve).unwrap();
    assert_eq!(c.strides(), t.strides());
    let c = t.contiguous(MemoryFormat::Contiguous).unwrap();
    assert_eq!(c.strides(), &[60, 20, 5, 1]);
    let same = c.contiguous(MemoryFormat::Contiguous).unwrap();
    assert!(Tensor::ptr_eq(&same, &c));
    // NC11 is both contiguous and channels last
    let nc = Tensor::empty(&[2, 3, 1, 1], DType::Float, Device::CPU).unwrap();
    assert!(
        nc.is_contiguous(MemoryFormat::Contiguous) && nc.is_contiguous(MemoryFormat::ChannelsLast)
    );
}

#[test]
fn set_replaces_metadata() {
    let t = arange_f32(4);
    let s = Storage::new(32, Device::CPU, false).unwrap();
    s.fill(0).unwrap();
    // SAFETY: no other thread uses t.
    unsafe { t.set_(&s, 0, &[2, 4], None).unwrap() };
    assert_eq!(t.sizes(), &[2, 4]);
    assert!(Storage::ptr_eq(t.storage(), &s));
    assert_eq!(values(&t), vec![0.0; 8]);
    assert_eq!(t.version(), 1);
    // SAFETY: `t` is still this test's alone (no clone, no other thread),
    // and the sizes() slices taken by the asserts above are not used after.
    let e = unsafe { t.set_(&s, 1, &[2, 4], None) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape);
    assert_eq!(t.sizes(), &[2, 4], "a failed set_ changes nothing");
}

#[test]
fn weak_tensor_releases_storage() {
    let t = arange_f32(4);
    let storage = t.storage().downgrade();
    let w = t.downgrade();
    drop(t);
    assert!(w.lock().is_none());
    assert!(
        storage.expired(),
        "the tensor's release dropped its storage"
    );
}

/// A resizable CPU storage of `n` floats holding 0, 1, 2, ...
fn counting_storage(n: usize) -> Storage {
    let s = Storage::new(4 * n, Device::CPU, true).unwrap();
    for i in 0..n {
        // SAFETY: the storage holds n floats.
        unsafe { *(s.data() as *mut f32).add(i) = i as f32 };
    }
    s
}

fn floats(s: &Storage, n: usize) -> Vec<f32> {
    // SAFETY: callers ask for at most the storage's floats.
    unsafe { std::slice::from_raw_parts(s.data() as *const f32, n) }.to_vec()
}

#[test]
fn set_grows_a_resizable_storage() {
    let t = arange_f32(4);
    let s = counting_storage(2);
    // SAFETY: t and s are this test's alone, on this thread.
    unsafe { t.set_(&s, 1, &[2, 4], None).unwrap() };
    assert_eq!(s.nbytes(), 36, "(offset 1 + 8 elements) * 4 bytes");
    assert_eq!(floats(&s, 2), [0.0, 1.0], "the first bytes kept");
    assert_eq!(
        (t.sizes(), t.strides(), t.storage_offset()),
        (&[2, 4][..], &[4, 1][..], 1)
    );
    assert_eq!(t.version(), 1);
    // SAFETY: as above; no slice of t's sizes is held.
    unsafe { t.set_(&s, 0, &[2], None).unwrap() };
    assert_eq!(s.nbytes(), 36, "never shrunk");
    // An empty view needs no bytes, whatever its offset.
    let e = counting_storage(1);
    // SAFETY: as above.
    unsafe { t.set_(&e, 9, &[0, 3], None).unwrap() };
    assert_eq!(e.nbytes(), 4);
    // ... but its contiguous strides must fit in int64.
    // SAFETY: as above.
    let err = unsafe { t.set_(&e, 0, &[0, 1 << 40, 1 << 40], None) }.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfMemory, "{err}");
    assert_eq!(t.sizes(), &[0, 3]);
}

/// Checks that a refused geometry change left `t` and its storage as
/// they were.
#[cfg_attr(not(unix), allow(dead_code))]
fn assert_untouched(t: &Tensor, sizes: &[i64], offset: i64, nbytes: usize, version: u64) {
    assert_eq!(t.sizes(), sizes);
    assert_eq!(t.storage_offset(), offset);
    assert_eq!(t.storage().nbytes(), nbytes);
    assert_eq!(t.version(), version);
}

// Uses a shared-memory storage: refused on Windows (platform::shm).
#[cfg(unix)]
#[test]
fn set_refuses_what_it_cannot_grow() {
    let t = arange_f32(4);
    // A live DLPack export pins the memory.
    let s = counting_storage(2);
    s.export_started();
    // SAFETY: t and s are this test's alone, on this thread.
    let e = unsafe { t.set_(&s, 0, &[3], None) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("1 live DLPack export"), "{e}");
    assert_untouched(&t, &[4], 0, 16, 0);
    assert_eq!(s.nbytes(), 8);
    s.export_ended();
    // A read-only storage.
    let r = counting_storage(2);
    r.make_read_only();
    // SAFETY: as above.
    let e = unsafe { t.set_(&r, 0, &[3], None) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
    // A shared-memory storage is not resizable: out of bounds.
    let m = counting_storage(2);
    // SAFETY: m is this test's alone.
    unsafe { m.share_memory().unwrap() };
    // SAFETY: as above.
    let e = unsafe { t.set_(&m, 0, &[3], None) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape, "{e}");
    assert!(e.message().contains("not resizable"), "{e}");
    assert_untouched(&t, &[4], 0, 16, 0);
    // ... but it may be viewed within its bytes.
    // SAFETY: as above.
    unsafe { t.set_(&m, 0, &[2], None).unwrap() };
}

#[test]
fn resize_grows_keeping_the_offset_and_the_first_bytes() {
    let s = counting_storage(4);
    let t = Tensor::from_storage(&s, 1, &[3], None, DType::Float).unwrap();
    let view = t.narrow(0, 1, 2).unwrap();
    // SAFETY: t and s are this test's alone, on this thread.
    unsafe { t.resize_(&[2, 3], MemoryFormat::Contiguous).unwrap() };
    assert_eq!(
        (t.sizes(), t.strides(), t.storage_offset()),
        (&[2, 3][..], &[3, 1][..], 1)
    );
    assert_eq!(s.nbytes(), 28, "(offset 1 + 6 elements) * 4 bytes");
    assert!(Storage::ptr_eq(t.storage(), &s));
    assert_eq!(floats(&s, 4), [0.0, 1.0, 2.0, 3.0]);
    assert_eq!(t.version(), 1);
    assert_eq!(view.sizes(), &[2], "a view keeps its own sizes");
    assert_eq!(view.version(), 1, "and shares the version");
    // SAFETY: as above; no slice of t's sizes is held.
    unsafe {
        t.resize_(&[2, 3, 4, 5], MemoryFormat::ChannelsLast)
            .unwrap()
    };
    assert_eq!(t.strides(), &[60, 1, 15, 3]);
    assert!(t.is_contiguous(MemoryFormat::ChannelsLast));
    assert_eq!(s.nbytes(), 4 * 121);
    // SAFETY: as above.
    unsafe {
        t.resize_(&[1, 2, 1, 1, 3], MemoryFormat::ChannelsLast3d)
            .unwrap()
    };
    assert_eq!(t.strides(), &[6, 1, 6, 6, 2]);
    // SAFETY: as above.
    unsafe { t.resize_(&[2], MemoryFormat::Contiguous).unwrap() };
    assert_eq!(s.nbytes(), 4 * 121, "never shrunk");
    assert_eq!(t.version(), 4);
    // A fixed storage large enough is fine.
    let f = Storage::new(16, Device::CPU, false).unwrap();
    let u = Tensor::from_storage(&f, 0, &[4], None, DType::Float).unwrap();
    // SAFETY: u and f are this test's alone.
    unsafe { u.resize_(&[2, 2], MemoryFormat::Contiguous).unwrap() };
    assert_eq!(u.sizes(), &[2, 2]);
}

// Uses a shared-memory storage: refused on Windows (platform::shm).
#[cfg(unix)]
#[test]
fn resize_refusals_change_nothing() {
    let s = counting_storage(4);
    let t = Tensor::from_storage(&s, 1, &[3], None, DType::Float).unwrap();
    let refuse = |sizes: &[i64], format, kind: ErrorKind, says: &str| {
        // SAFETY: t and s are this test's alone, on this thread.
        let e = unsafe { t.resize_(sizes, format) }.unwrap_err();
        assert_eq!(e.kind(), kind, "{sizes:?}: {e}");
        assert!(e.message().contains(says), "{sizes:?}: {e}");
        assert_untouched(&t, &[3], 1, 16, 0);
    };
    refuse(
        &[2, 3, 4],
        MemoryFormat::ChannelsLast,
        ErrorKind::Shape,
        "requires 4 dims",
    );
    refuse(
        &[2, 3, 4, 5],
        MemoryFormat::ChannelsLast3d,
        ErrorKind::Shape,
        "requires 5 dims",
    );
    refuse(
        &[2, 3],
        MemoryFormat::Preserve,
        ErrorKind::InvalidArgument,
        "preserve",
    );
    refuse(&[2, -3], MemoryFormat::Contiguous, ErrorKind::Shape, "-3");
    let negative = [2, 1 << 40, -(1 << 40), 4];
    refuse(
        &negative,
        MemoryFormat::ChannelsLast,
        ErrorKind::Shape,
        "negative",
    );
    refuse(
        &[1 << 62, 8],
        MemoryFormat::Contiguous,
        ErrorKind::OutOfMemory,
        "overflows",
    );
    // No element, but strides past int64 (c10: "Stride calculation
    // overflowed").
    let huge = [0, 1 << 40, 1 << 40];
    refuse(
        &huge,
        MemoryFormat::Contiguous,
        ErrorKind::OutOfMemory,
        "overflow",
    );
    s.export_started();
    refuse(
        &[8],
        MemoryFormat::Contiguous,
        ErrorKind::InvalidArgument,
        "live DLPack export",
    );
    s.export_ended();
    // Fixed storages: from_blob-like, shared memory, a file mapping.
    let path = std::env::temp_dir().join(format!("tessera-resize-{}", std::process::id()));
    std::fs::write(&path, [0u8; 16]).unwrap();
    let mapped = Storage::from_file(&path, crate::storage::file::FileMode::Private, 0).unwrap();
    std::fs::remove_file(&path).unwrap();
    let shared = counting_storage(4);
    // SAFETY: shared is this test's alone.
    unsafe { shared.share_memory().unwrap() };
    let fixed = Storage::new(16, Device::CPU, false).unwrap();
    for storage in [fixed, shared, mapped] {
        let u = Tensor::from_storage(&storage, 1, &[3], None, DType::Float).unwrap();
        // SAFETY: u and its storage are this test's alone.
        let e = unsafe { u.resize_(&[4], MemoryFormat::Contiguous) }.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotResizable, "{e}");
        assert!(
            e.message().contains("need 20 bytes, the storage holds 16"),
            "{e}"
        );
        assert_untouched(&u, &[3], 1, 16, 0);
    }
    s.make_read_only();
    refuse(
        &[8],
        MemoryFormat::Contiguous,
        ErrorKind::ReadOnly,
        "read-only",
    );
}

#[test]
fn views_of_huge_empty_strides_are_refused_not_overflowed() {
    // No element, so no storage bounds the strides: 6^24 fits in int64,
    // 5 * 6^24 does not.
    let s = Storage::new(0, Device::CPU, false).unwrap();
    let big = 6i64.pow(24);
    let t = Tensor::from_storage(&s, 0, &[0, 6], Some(&[1, big]), DType::Float).unwrap();
    for e in [
        t.select(1, 5).unwrap_err(),
        t.narrow(1, 5, 1).unwrap_err(),
        t.unsqueeze(1).unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
        assert!(e.message().contains("overflows int64"), "{e}");
    }
    assert_eq!(t.select(1, 0).unwrap().storage_offset(), 0);
    // A view of an empty tensor to a shape whose contiguous strides
    // overflow: strides saturate (they address nothing), no panic.
    let mut wide = vec![0i64];
    wide.extend([6; 25]);
    let v = t.view(&wide).unwrap();
    assert_eq!(v.strides()[0], i64::MAX);
    assert!(v.select(1, 5).is_err());
}
