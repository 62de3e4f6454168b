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
