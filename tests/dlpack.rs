//! DLPack export and import through the C functions: the fields of an
//! export, round trips, when deleters run, and every refusal (with the
//! consumed tensor's deleter called exactly once on error).

use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tessera::ffi::dlpack::*;
use tessera::ffi::refcount_exports::*;
use tessera::ffi::storage::*;
use tessera::ffi::tensor::*;
use tessera::ffi::views::*;
use tessera::ffi::*;

const CPU: TsrDevice = TsrDevice {
    device_type: TSR_CPU,
    index: -1,
};

fn last_error() -> String {
    // SAFETY: tsr_last_error_message never returns NULL and the string
    // stays valid until this thread's next failing call.
    unsafe { CStr::from_ptr(tsr_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

fn ok(status: TsrStatus) {
    assert_eq!(status, TSR_OK, "{}", last_error());
}

/// An owned tensor handle.
struct T(*mut TsrTensor);

impl Drop for T {
    fn drop(&mut self) {
        // SAFETY: T owns one reference of a live handle.
        ok(unsafe { tsr_tensor_decref(self.0) });
    }
}

impl T {
    fn sizes(&self) -> Vec<i64> {
        // SAFETY: a live handle; the arrays hold ndim values.
        unsafe {
            let n = tsr_tensor_ndim(self.0) as usize;
            std::slice::from_raw_parts(tsr_tensor_sizes(self.0), n).to_vec()
        }
    }
    fn strides(&self) -> Vec<i64> {
        // SAFETY: as sizes.
        unsafe {
            let n = tsr_tensor_ndim(self.0) as usize;
            std::slice::from_raw_parts(tsr_tensor_strides(self.0), n).to_vec()
        }
    }
    fn data(&self) -> *mut c_void {
        // SAFETY: a live handle.
        unsafe { tsr_tensor_data(self.0) }
    }
    fn dtype(&self) -> TsrDType {
        // SAFETY: a live handle.
        unsafe { tsr_tensor_dtype(self.0) }
    }
    fn device(&self) -> TsrDevice {
        // SAFETY: a live handle.
        unsafe { tsr_tensor_device(self.0) }
    }
    fn storage(&self) -> S {
        // SAFETY: a live handle; the result is a new reference.
        S(unsafe { tsr_tensor_storage(self.0) })
    }
    fn f32_at(&self, elem: isize) -> f32 {
        // SAFETY: tests only read elements inside the tensor's storage.
        unsafe { *(self.data() as *const f32).offset(elem) }
    }
}

/// An owned storage handle.
struct S(*mut TsrStorage);

impl Drop for S {
    fn drop(&mut self) {
        // SAFETY: S owns one reference of a live handle.
        ok(unsafe { tsr_storage_decref(self.0) });
    }
}

impl S {
    fn nbytes(&self) -> usize {
        // SAFETY: a live handle.
        unsafe { tsr_storage_nbytes(self.0) }
    }
    /// A weak reference, to see when the storage dies.
    fn weak(&self) -> W {
        let mut w = ptr::null_mut();
        // SAFETY: a live handle; w is writable.
        ok(unsafe { tsr_storage_downgrade(self.0, &mut w) });
        W(w)
    }
}

/// An owned weak storage handle.
struct W(*mut TsrWeakStorage);

impl W {
    fn expired(&self) -> bool {
        // SAFETY: a live weak handle.
        unsafe { tsr_weak_storage_expired(self.0) }
    }
}

impl Drop for W {
    fn drop(&mut self) {
        // SAFETY: W owns one weak reference.
        ok(unsafe { tsr_weak_storage_decref(self.0) });
    }
}

/// A float tensor of `sizes` holding 0, 1, 2, ...
fn arange(sizes: &[i64]) -> T {
    let mut t = ptr::null_mut();
    // SAFETY: sizes holds len values; t is writable.
    ok(unsafe { tsr_tensor_empty(sizes.len() as i64, sizes.as_ptr(), TSR_FLOAT, CPU, &mut t) });
    let t = T(t);
    let n: i64 = sizes.iter().product();
    for i in 0..n {
        // SAFETY: the fresh contiguous tensor holds n floats.
        unsafe { *(t.data() as *mut f32).offset(i as isize) = i as f32 };
    }
    t
}

fn view(status_and_out: impl FnOnce(*mut *mut TsrTensor) -> TsrStatus) -> T {
    let mut out = ptr::null_mut();
    ok(status_and_out(&mut out));
    T(out)
}

fn export(t: &T) -> *mut DLManagedTensorVersioned {
    let mut m = ptr::null_mut();
    // SAFETY: a live handle; m is writable.
    ok(unsafe { tsr_tensor_to_dlpack(t.0, &mut m) });
    assert!(!m.is_null());
    m
}

fn export_legacy(t: &T) -> *mut DLManagedTensor {
    let mut m = ptr::null_mut();
    // SAFETY: a live handle; m is writable.
    ok(unsafe { tsr_tensor_to_dlpack_legacy(t.0, &mut m) });
    assert!(!m.is_null());
    m
}

fn import(m: *mut DLManagedTensorVersioned) -> T {
    let mut t = ptr::null_mut();
    // SAFETY: m is a managed tensor this test owns and hands over.
    ok(unsafe { tsr_tensor_from_dlpack(m, &mut t) });
    T(t)
}

fn import_legacy(m: *mut DLManagedTensor) -> T {
    let mut t = ptr::null_mut();
    // SAFETY: as import.
    ok(unsafe { tsr_tensor_from_dlpack_legacy(m, &mut t) });
    T(t)
}

/// Reads the DLTensor's shape and strides.
fn dims(t: &DLTensor) -> (Vec<i64>, Vec<i64>) {
    let n = t.ndim as usize;
    assert!(!t.shape.is_null() && !t.strides.is_null());
    // SAFETY: a tessera export holds ndim values in each array.
    unsafe {
        (
            std::slice::from_raw_parts(t.shape, n).to_vec(),
            std::slice::from_raw_parts(t.strides, n).to_vec(),
        )
    }
}

/// Calls a managed tensor's deleter.
fn delete(m: *mut DLManagedTensorVersioned) {
    // SAFETY: m is live and owned by the test; its deleter frees it.
    unsafe { ((*m).deleter.expect("tessera sets a deleter"))(m) };
}

// ---- a test producer: a managed tensor over a buffer, counting deletes ----

/// What a test producer's managed tensor looks like.
#[derive(Clone)]
struct Spec {
    version: (u32, u32),
    flags: u64,
    dtype: DLDataType,
    device: DLDevice,
    ndim: i32,
    shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    byte_offset: u64,
    buffer_bytes: usize,
    null_data: bool,
    fake_data: Option<usize>,
}

fn f32_spec(shape: &[i64]) -> Spec {
    let n = shape
        .iter()
        .try_fold(1i64, |a, &b| a.checked_mul(b))
        .unwrap_or(1);
    Spec {
        version: (1, 1),
        flags: 0,
        dtype: DLDataType {
            code: 2,
            bits: 32,
            lanes: 1,
        },
        device: DLDevice {
            device_type: 1,
            device_id: 0,
        },
        ndim: shape.len() as i32,
        shape: Some(shape.to_vec()),
        strides: None,
        byte_offset: 0,
        buffer_bytes: 4 * n.clamp(1, 1024) as usize,
        null_data: false,
        fake_data: None,
    }
}

/// The producer side, freed by its deleter. `managed` must come first.
#[repr(C)]
struct Producer<M> {
    managed: M,
    shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    buffer: Vec<u64>,
    deletes: Arc<AtomicUsize>,
}

struct Made<M> {
    managed: *mut M,
    /// The buffer's address (float i at byte 4 * i holds i).
    buffer: *mut u8,
    deletes: Arc<AtomicUsize>,
}

fn dl_tensor(spec: &Spec, p: &mut (Option<Vec<i64>>, Option<Vec<i64>>, Vec<u64>)) -> DLTensor {
    let data = if spec.null_data {
        ptr::null_mut()
    } else if let Some(addr) = spec.fake_data {
        addr as *mut c_void
    } else {
        p.2.as_mut_ptr() as *mut c_void
    };
    DLTensor {
        data,
        device: spec.device,
        ndim: spec.ndim,
        dtype: spec.dtype,
        shape: p.0.as_mut().map_or(ptr::null_mut(), |v| v.as_mut_ptr()),
        strides: p.1.as_mut().map_or(ptr::null_mut(), |v| v.as_mut_ptr()),
        byte_offset: spec.byte_offset,
    }
}

fn parts(spec: &Spec) -> (Option<Vec<i64>>, Option<Vec<i64>>, Vec<u64>) {
    let mut buffer = vec![0u64; spec.buffer_bytes.div_ceil(8)];
    let floats = buffer.len() * 2;
    // SAFETY: the buffer holds `floats` f32 values.
    let f = unsafe { std::slice::from_raw_parts_mut(buffer.as_mut_ptr() as *mut f32, floats) };
    for (i, x) in f.iter_mut().enumerate() {
        *x = i as f32;
    }
    (spec.shape.clone(), spec.strides.clone(), buffer)
}

unsafe extern "C" fn versioned_deleter(m: *mut DLManagedTensorVersioned) {
    // SAFETY: m came from Box::into_raw in make_versioned; DLPack calls
    // the deleter once.
    let p = unsafe { Box::from_raw(m as *mut Producer<DLManagedTensorVersioned>) };
    p.deletes.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn legacy_deleter(m: *mut DLManagedTensor) {
    // SAFETY: as versioned_deleter.
    let p = unsafe { Box::from_raw(m as *mut Producer<DLManagedTensor>) };
    p.deletes.fetch_add(1, Ordering::SeqCst);
}

fn make_versioned(spec: &Spec) -> Made<DLManagedTensorVersioned> {
    let mut p = parts(spec);
    let dl_tensor = dl_tensor(spec, &mut p);
    let deletes = Arc::new(AtomicUsize::new(0));
    let buffer = p.2.as_mut_ptr() as *mut u8;
    let b = Box::new(Producer {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion {
                major: spec.version.0,
                minor: spec.version.1,
            },
            manager_ctx: ptr::null_mut(),
            deleter: Some(versioned_deleter),
            flags: spec.flags,
            dl_tensor,
        },
        shape: p.0,
        strides: p.1,
        buffer: p.2,
        deletes: deletes.clone(),
    });
    Made {
        managed: Box::into_raw(b) as *mut DLManagedTensorVersioned,
        buffer,
        deletes,
    }
}

fn make_legacy(spec: &Spec) -> Made<DLManagedTensor> {
    let mut p = parts(spec);
    let dl_tensor = dl_tensor(spec, &mut p);
    let deletes = Arc::new(AtomicUsize::new(0));
    let buffer = p.2.as_mut_ptr() as *mut u8;
    let b = Box::new(Producer {
        managed: DLManagedTensor {
            dl_tensor,
            manager_ctx: ptr::null_mut(),
            deleter: Some(legacy_deleter),
        },
        shape: p.0,
        strides: p.1,
        buffer: p.2,
        deletes: deletes.clone(),
    });
    Made {
        managed: Box::into_raw(b) as *mut DLManagedTensor,
        buffer,
        deletes,
    }
}

// ---- export ----

#[test]
fn export_of_a_permuted_view_fills_every_field() {
    let base = arange(&[2, 3, 4]);
    let dims_order = [2i64, 0, 1];
    // SAFETY: a live handle; dims holds 3 values.
    let p = view(|o| unsafe { tsr_tensor_permute(base.0, 3, dims_order.as_ptr(), o) });
    assert_eq!((p.sizes(), p.strides()), (vec![4, 2, 3], vec![1, 12, 4]));
    let storage = base.storage();
    let weak = storage.weak();
    let m = export(&p);
    // SAFETY: m is live until delete below.
    let mt = unsafe { &*m };
    assert_eq!((mt.version.major, mt.version.minor), (1, 1));
    assert_eq!(mt.flags, 0, "writable and not a copy");
    let t = &mt.dl_tensor;
    assert_eq!(t.data, p.data());
    assert_eq!(t.byte_offset, 0);
    assert_eq!((t.device.device_type, t.device.device_id), (1, 0));
    assert_eq!((t.dtype.code, t.dtype.bits, t.dtype.lanes), (2, 32, 1));
    assert_eq!(t.ndim, 3);
    assert_eq!(dims(t), (vec![4, 2, 3], vec![1, 12, 4]));
    // shape and strides live right after the struct, in its allocation
    let base_addr = m as usize;
    let shape_addr = t.shape as usize;
    assert!(shape_addr >= base_addr + std::mem::size_of::<DLManagedTensorVersioned>());
    assert!(
        shape_addr < base_addr + 256,
        "shape is not in the same block"
    );
    assert_eq!(t.strides as usize, shape_addr + 3 * 8);
    // manager_ctx is the storage, referenced by the export
    assert_eq!(mt.manager_ctx, storage.0 as *mut c_void);
    // SAFETY: manager_ctx is a live storage handle (the export holds one
    // of its references, checked equal to storage.0 just above).
    let uses = unsafe { tsr_storage_use_count(mt.manager_ctx as *const TsrStorage) };
    assert_eq!(uses, 4);

    // The export keeps the memory alive without any tensor.
    drop((p, base, storage));
    assert!(!weak.expired());
    // element [1, 1, 2] of the permuted view is base[1, 2, 1] = 12 + 8 + 1
    // SAFETY: the export's data spans the view.
    let v = unsafe { *(t.data as *const f32).offset(12 + 2 * 4 + 1) };
    assert_eq!(v, 21.0);
    delete(m);
    assert!(weak.expired(), "the deleter dropped the last reference");
}

#[test]
fn export_of_a_sliced_view_points_at_its_first_element() {
    let base = arange(&[4, 5]);
    // SAFETY: a live handle.
    let s = view(|o| unsafe { tsr_tensor_narrow(base.0, 1, 2, 3, o) });
    let m = export_legacy(&s);
    // SAFETY: m is live until its deleter runs below.
    let t = unsafe { &(*m).dl_tensor };
    assert_eq!(t.byte_offset, 0);
    assert_eq!(t.data as usize, base.data() as usize + 2 * 4);
    assert_eq!(dims(t), (vec![4, 3], vec![5, 1]));
    // SAFETY: the first element of the slice is base[0, 2].
    assert_eq!(unsafe { *(t.data as *const f32) }, 2.0);
    // SAFETY: m is live; its deleter frees it.
    unsafe { ((*m).deleter.unwrap())(m) };
}

#[test]
fn export_refusals_leave_out_untouched() {
    let sentinel = 0x10 as *mut DLManagedTensorVersioned;
    let mut out = sentinel;
    let mut q = ptr::null_mut();
    let n = 4i64;
    // SAFETY: sizes holds one value; q is writable.
    ok(unsafe { tsr_tensor_empty(1, &n, TSR_QINT8, CPU, &mut q) });
    let q = T(q);
    // SAFETY: q owns a live handle; out is a writable local.
    let status = unsafe { tsr_tensor_to_dlpack(q.0, &mut out) };
    assert_eq!(status, TSR_ERR_DTYPE);
    assert!(
        last_error().contains("tsr_tensor_to_dlpack: dtype QInt8"),
        "{}",
        last_error()
    );
    assert_eq!(out, sentinel);

    let meta = TsrDevice {
        device_type: TSR_META,
        index: -1,
    };
    let mut t = ptr::null_mut();
    // SAFETY: sizes (&n) holds one value; t is writable.
    ok(unsafe { tsr_tensor_empty(1, &n, TSR_FLOAT, meta, &mut t) });
    let t = T(t);
    // SAFETY: t owns a live handle; out is a writable local.
    let status = unsafe { tsr_tensor_to_dlpack(t.0, &mut out) };
    assert_eq!(status, TSR_ERR_UNSUPPORTED);
    assert!(last_error().contains("device meta"), "{}", last_error());
    let mut legacy = ptr::null_mut();
    // SAFETY: t owns a live handle; legacy is a writable local.
    let status = unsafe { tsr_tensor_to_dlpack_legacy(t.0, &mut legacy) };
    assert_eq!(status, TSR_ERR_UNSUPPORTED);
    assert!(legacy.is_null());
    // SAFETY: a NULL tensor is allowed (checked, an error); out is writable.
    let status = unsafe { tsr_tensor_to_dlpack(ptr::null(), &mut out) };
    assert_eq!(status, TSR_ERR_NULL_POINTER);
    // SAFETY: t owns a live handle; a NULL out is allowed (checked).
    let status = unsafe { tsr_tensor_to_dlpack(t.0, ptr::null_mut()) };
    assert_eq!(status, TSR_ERR_NULL_POINTER);
    assert_eq!(out, sentinel);
}

#[test]
fn every_dtype_with_a_dlpack_code_round_trips() {
    let n = 3i64;
    // (dtype, DLPack code, bits, lanes) of the dtypes DLPack 1.1 can name
    let codes: [(i8, u8, u8, u16); 22] = [
        (0, 1, 8, 1),
        (1, 0, 8, 1),
        (2, 0, 16, 1),
        (3, 0, 32, 1),
        (4, 0, 64, 1),
        (5, 2, 16, 1),
        (6, 2, 32, 1),
        (7, 2, 64, 1),
        (8, 5, 32, 1),
        (9, 5, 64, 1),
        (10, 5, 128, 1),
        (11, 6, 8, 1),
        (15, 4, 16, 1),
        (23, 12, 8, 1), // kDLFloat8_e5m2
        (24, 10, 8, 1), // kDLFloat8_e4m3fn
        (25, 13, 8, 1), // kDLFloat8_e5m2fnuz
        (26, 11, 8, 1), // kDLFloat8_e4m3fnuz
        (27, 1, 16, 1),
        (28, 1, 32, 1),
        (29, 1, 64, 1),
        (44, 14, 8, 1), // kDLFloat8_e8m0fnu
        (45, 17, 4, 2), // kDLFloat4_e2m1fn, two lanes per byte
    ];
    for raw in 0..=46i8 {
        let mut t = ptr::null_mut();
        // SAFETY: sizes holds one value; t is writable.
        ok(unsafe { tsr_tensor_empty(1, &n, raw, CPU, &mut t) });
        let t = T(t);
        let Some(&(_, code, bits, lanes)) = codes.iter().find(|c| c.0 == raw) else {
            // quantized, bits, sub-byte integers and BComplex32: refused
            let mut out = ptr::null_mut();
            // SAFETY: t owns a live handle; out is a writable local.
            let status = unsafe { tsr_tensor_to_dlpack(t.0, &mut out) };
            assert_eq!(status, TSR_ERR_DTYPE, "dtype {raw}");
            // SAFETY: tsr_dtype_name returns a static string.
            let name = unsafe { CStr::from_ptr(tessera::ffi::dtype::tsr_dtype_name(raw)) };
            assert!(
                last_error().contains(name.to_str().unwrap()),
                "{}",
                last_error()
            );
            assert!(out.is_null());
            continue;
        };
        let m = export(&t);
        // SAFETY: m is live until imported.
        let dt = unsafe { (*m).dl_tensor.dtype };
        assert_eq!(
            (dt.code, dt.bits, dt.lanes),
            (code, bits, lanes),
            "dtype {raw}"
        );
        // SAFETY: t owns a live handle.
        let itemsize = unsafe { tsr_tensor_itemsize(t.0) };
        assert_eq!(
            usize::from(bits) * usize::from(lanes),
            8 * itemsize,
            "dtype {raw}"
        );
        let back = import(m);
        assert_eq!(back.dtype(), raw);
        assert_eq!(back.data(), t.data());
    }
}

// ---- round trips ----

#[test]
fn round_trip_keeps_data_pointer_sizes_and_strides() {
    let base = arange(&[3, 4, 5]);
    // SAFETY: live handles.
    let s = view(|o| unsafe { tsr_tensor_narrow(base.0, 2, 1, 3, o) });
    // SAFETY: s owns a reference to the live narrowed view made just
    // above (dropped only at the end of the test); `o` is view's writable
    // out-pointer.
    let v = view(|o| unsafe { tsr_tensor_transpose(s.0, 0, 2, o) });
    assert_eq!((v.sizes(), v.strides()), (vec![3, 4, 3], vec![1, 5, 20]));
    let weak = base.storage().weak();

    let back = import(export(&v));
    assert_eq!(back.data(), v.data());
    assert_eq!((back.sizes(), back.strides()), (v.sizes(), v.strides()));
    assert_eq!(back.dtype(), TSR_FLOAT);
    assert_eq!(back.device().device_type, TSR_CPU);
    // SAFETY: a live handle.
    assert_eq!(unsafe { tsr_tensor_storage_offset(back.0) }, 0);
    // the storage spans exactly the view: elements 0 ..= 2*1 + 3*5 + 2*20
    assert_eq!(back.storage().nbytes(), (2 + 15 + 40 + 1) * 4);
    assert_eq!(back.f32_at(0), v.f32_at(0));

    let back_legacy = import_legacy(export_legacy(&v));
    assert_eq!(back_legacy.data(), v.data());
    assert_eq!(back_legacy.strides(), vec![1, 5, 20]);

    // Writes through the import are seen by the original.
    // SAFETY: element 0 of the shared memory.
    unsafe { *(back.data() as *mut f32) = -1.0 };
    assert_eq!(v.f32_at(0), -1.0);

    drop((base, s, v));
    assert!(!weak.expired(), "the imports keep the memory");
    drop(back);
    assert!(!weak.expired(), "the legacy import still does");
    drop(back_legacy);
    assert!(weak.expired(), "each export's deleter ran with its import");
}

#[test]
fn zero_dim_and_empty_tensors_round_trip() {
    let z = arange(&[]);
    let m = export(&z);
    // SAFETY: m is live until imported.
    let t = unsafe { &(*m).dl_tensor };
    assert_eq!(t.ndim, 0);
    assert!(!t.shape.is_null() && !t.strides.is_null());
    let back = import(m);
    assert_eq!(back.sizes(), Vec::<i64>::new());
    assert_eq!(back.data(), z.data());
    assert_eq!(back.f32_at(0), 0.0);

    let e = arange(&[0, 3]);
    let m = export(&e);
    // SAFETY: m is live until imported.
    assert!(unsafe { (*m).dl_tensor.data }.is_null());
    let back = import(m);
    assert_eq!((back.sizes(), back.strides()), (vec![0, 3], vec![3, 1]));
    assert_eq!(back.storage().nbytes(), 0);
}

#[test]
fn cuda_device_numbers_round_trip_without_touching_memory() {
    let mut spec = f32_spec(&[2, 2]);
    spec.device = DLDevice {
        device_type: 2,
        device_id: 1,
    };
    spec.fake_data = Some(0x7f00_0000_0000);
    let made = make_versioned(&spec);
    let t = import(made.managed);
    assert_eq!(
        t.device(),
        TsrDevice {
            device_type: TSR_CUDA,
            index: 1
        }
    );
    assert_eq!(t.data() as usize, 0x7f00_0000_0000);
    let m = export(&t);
    // SAFETY: m is live until deleted.
    let d = unsafe { (*m).dl_tensor.device };
    assert_eq!((d.device_type, d.device_id), (2, 1));
    delete(m);
    assert_eq!(made.deletes.load(Ordering::SeqCst), 0);
    drop(t);
    assert_eq!(made.deletes.load(Ordering::SeqCst), 1);
}

// ---- import ----

#[test]
fn producer_deleter_runs_once_when_the_last_user_dies() {
    let made = make_versioned(&f32_spec(&[4, 5]));
    let t = import(made.managed);
    assert_eq!(t.data() as *mut u8, made.buffer);
    // SAFETY: a live handle.
    let v = view(|o| unsafe { tsr_tensor_narrow(t.0, 0, 1, 2, o) });
    let s = t.storage();
    assert!(!s.0.is_null());
    // SAFETY: a live handle.
    assert!(!unsafe { tsr_storage_resizable(s.0) });
    drop(t);
    assert_eq!(made.deletes.load(Ordering::SeqCst), 0);
    assert_eq!(v.f32_at(0), 5.0);
    drop(v);
    assert_eq!(
        made.deletes.load(Ordering::SeqCst),
        0,
        "the storage is still held"
    );
    drop(s);
    assert_eq!(made.deletes.load(Ordering::SeqCst), 1);
}

#[test]
fn producer_deleter_may_run_on_another_thread() {
    let made = make_legacy(&f32_spec(&[3]));
    let t = import_legacy(made.managed);
    let handle = t.0 as usize;
    std::mem::forget(t);
    std::thread::spawn(move || drop(T(handle as *mut TsrTensor)))
        .join()
        .unwrap();
    assert_eq!(made.deletes.load(Ordering::SeqCst), 1);
}

#[test]
fn null_strides_mean_row_major() {
    let made = make_versioned(&f32_spec(&[2, 3]));
    let t = import(made.managed);
    assert_eq!((t.sizes(), t.strides()), (vec![2, 3], vec![3, 1]));
    // SAFETY: a live handle.
    assert!(unsafe { tsr_tensor_is_contiguous(t.0, TSR_CONTIGUOUS) });
    assert_eq!(t.f32_at(4), 4.0);
    assert_eq!(t.storage().nbytes(), 24);
}

#[test]
fn explicit_strides_and_byte_offset_are_honoured() {
    let mut spec = f32_spec(&[3, 2]);
    spec.strides = Some(vec![1, 4]);
    spec.byte_offset = 8;
    spec.buffer_bytes = 64;
    let made = make_legacy(&spec);
    let t = import_legacy(made.managed);
    assert_eq!(t.data() as usize, made.buffer as usize + 8);
    assert_eq!(t.strides(), vec![1, 4]);
    assert_eq!(t.f32_at(0), 2.0, "float 2 is at byte 8");
    // elements up to (2 * 1 + 1 * 4) + 1 = 7 floats from the first one
    assert_eq!(t.storage().nbytes(), 28);
}

#[test]
fn a_negative_stride_on_a_size_one_dim_is_normalized() {
    let mut spec = f32_spec(&[1, 3]);
    spec.strides = Some(vec![-3, 1]);
    let t = import(make_versioned(&spec).managed);
    assert_eq!(t.strides(), vec![3, 1]);
}

/// Imports a malformed tensor: it must fail with `status` and a message
/// containing `needle`, leave `out` untouched and call the deleter once.
fn refused(spec: &Spec, status: TsrStatus, needle: &str) {
    let sentinel = 0x10 as *mut TsrTensor;
    for legacy in [false, true] {
        if legacy && (spec.version.0 != 1 || spec.flags != 0) {
            continue; // the legacy struct has neither
        }
        let mut out = sentinel;
        let (got, deletes) = if legacy {
            let made = make_legacy(spec);
            // SAFETY: the test owns and hands over the managed tensor.
            let s = unsafe { tsr_tensor_from_dlpack_legacy(made.managed, &mut out) };
            (s, made.deletes)
        } else {
            let made = make_versioned(spec);
            // SAFETY: made.managed is the boxed versioned tensor
            // make_versioned just built, which the test owns and hands over
            // here (the import calls its deleter once, even on failure);
            // `out` is a writable local.
            let s = unsafe { tsr_tensor_from_dlpack(made.managed, &mut out) };
            (s, made.deletes)
        };
        let msg = last_error();
        assert_eq!(got, status, "legacy {legacy}: {msg}");
        assert!(
            msg.contains(needle),
            "legacy {legacy}: {msg:?} lacks {needle:?}"
        );
        let fname = if legacy {
            "tsr_tensor_from_dlpack_legacy: "
        } else {
            "tsr_tensor_from_dlpack: "
        };
        assert!(msg.starts_with(fname), "{msg}");
        assert_eq!(out, sentinel, "out must be untouched");
        assert_eq!(
            deletes.load(Ordering::SeqCst),
            1,
            "consumed on error: {msg}"
        );
    }
}

#[test]
fn major_version_2_is_refused_and_deleted() {
    let mut spec = f32_spec(&[2]);
    spec.version = (2, 0);
    refused(
        &spec,
        TSR_ERR_UNSUPPORTED,
        "DLPack version 2.0 is not supported",
    );
    refused(&spec, TSR_ERR_UNSUPPORTED, "tessera reads major version 1");
    spec.version = (0, 8);
    refused(&spec, TSR_ERR_UNSUPPORTED, "version 0.8");
}

#[test]
fn a_newer_minor_version_is_accepted() {
    let mut spec = f32_spec(&[2]);
    spec.version = (1, 9);
    let made = make_versioned(&spec);
    drop(import(made.managed));
    assert_eq!(made.deletes.load(Ordering::SeqCst), 1);
}

#[test]
fn dtype_refusals() {
    let mut spec = f32_spec(&[2]);
    spec.dtype.lanes = 4;
    refused(&spec, TSR_ERR_DTYPE, "4 lanes");
    let mut spec = f32_spec(&[2]);
    spec.dtype.code = 99;
    refused(&spec, TSR_ERR_DTYPE, "unknown DLPack type code 99");
    let mut spec = f32_spec(&[2]);
    spec.dtype.bits = 24;
    refused(&spec, TSR_ERR_DTYPE, "kDLFloat with 24 bits");
    let mut spec = f32_spec(&[2]);
    spec.dtype.code = 3;
    refused(&spec, TSR_ERR_DTYPE, "kDLOpaqueHandle");
}

#[test]
fn shape_and_stride_refusals() {
    refused(&f32_spec(&[2, -3]), TSR_ERR_SHAPE, "negative dimension -3");
    let mut spec = f32_spec(&[2]);
    spec.ndim = 65;
    refused(&spec, TSR_ERR_SHAPE, "ndim 65");
    spec.ndim = -1;
    refused(&spec, TSR_ERR_SHAPE, "ndim -1");
    let mut spec = f32_spec(&[2, 2]);
    spec.shape = None;
    refused(&spec, TSR_ERR_NULL_POINTER, "dl_tensor.shape");
    let mut spec = f32_spec(&[4]);
    spec.strides = Some(vec![-1]);
    spec.byte_offset = 12;
    refused(&spec, TSR_ERR_UNSUPPORTED, "negative stride -1 in dim 0");
    refused(
        &f32_spec(&[i64::MAX / 2, 4]),
        TSR_ERR_OUT_OF_MEMORY,
        "overflows",
    );
}

#[test]
fn memory_refusals() {
    let mut spec = f32_spec(&[2]);
    spec.byte_offset = 2;
    refused(&spec, TSR_ERR_INVALID_ARGUMENT, "not aligned to 4 bytes");
    let mut spec = f32_spec(&[2]);
    spec.null_data = true;
    refused(&spec, TSR_ERR_INVALID_ARGUMENT, "data is NULL");
}

#[test]
fn device_refusals() {
    let mut spec = f32_spec(&[2]);
    spec.device.device_type = 7;
    refused(&spec, TSR_ERR_UNSUPPORTED, "kDLVulkan");
    spec.device.device_type = 99;
    refused(
        &spec,
        TSR_ERR_INVALID_ARGUMENT,
        "unknown DLPack device type 99",
    );
    spec.device = DLDevice {
        device_type: 2,
        device_id: 300,
    };
    refused(&spec, TSR_ERR_INVALID_ARGUMENT, "device_id 300");
}

#[test]
fn null_arguments() {
    let mut out = ptr::null_mut();
    // SAFETY: NULL is checked.
    let s = unsafe { tsr_tensor_from_dlpack(ptr::null_mut(), &mut out) };
    assert_eq!(s, TSR_ERR_NULL_POINTER);
    assert!(last_error().contains("'consumed'"), "{}", last_error());
    // SAFETY: the legacy import checks `consumed` for NULL too and
    // returns before any read; `out` is a writable local.
    let s = unsafe { tsr_tensor_from_dlpack_legacy(ptr::null_mut(), &mut out) };
    assert_eq!(s, TSR_ERR_NULL_POINTER);
    assert!(out.is_null());

    let made = make_versioned(&f32_spec(&[2]));
    // SAFETY: the managed tensor is handed over; out NULL is checked.
    let s = unsafe { tsr_tensor_from_dlpack(made.managed, ptr::null_mut()) };
    assert_eq!(s, TSR_ERR_NULL_POINTER);
    assert!(last_error().contains("'out'"), "{}", last_error());
    assert_eq!(made.deletes.load(Ordering::SeqCst), 1, "consumed even then");
}

#[test]
fn a_managed_tensor_without_deleter_is_accepted() {
    let made = make_versioned(&f32_spec(&[2]));
    // SAFETY: the test owns the struct; it frees it itself afterwards.
    unsafe { (*made.managed).deleter = None };
    let t = import(made.managed);
    assert_eq!(t.f32_at(1), 1.0);
    drop(t);
    assert_eq!(made.deletes.load(Ordering::SeqCst), 0, "nothing to call");
    // SAFETY: tessera did not free it (no deleter); free it here.
    unsafe { versioned_deleter(made.managed) };
}
