//! Fuzzes DLPack import (versioned and legacy) with arbitrary structs:
//! version, flags, ndim, dtype code/bits/lanes, device, shape, strides
//! (or NULL), byte_offset, and a data pointer into a real buffer (or NULL,
//! misaligned, or near the end of the address space). Whatever happens the
//! producer's deleter runs exactly once: at once when the import fails,
//! when the last tensor using the memory goes when it succeeds. An
//! imported tensor's storage is exactly the span its view addresses, and
//! its elements are the producer's bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::alloc::Layout;
use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;
use tessera::ffi::dlpack::*;
use tessera::ffi::tensor::*;
use tessera::ffi::views::*;
use tessera::ffi::*;
use tessera_fuzz::{check_error_message, check_tensor, elements, tensor_of, Input};

const BUF_LEN: usize = 4096;

/// How many times each producer struct's deleter ran, by id.
static DELETED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn deleted(id: usize) -> u32 {
    DELETED.lock().unwrap()[id]
}

/// What a producer struct owns besides itself.
struct Owned {
    id: usize,
    _shape: Vec<i64>,
    _strides: Option<Vec<i64>>,
}

fn record_delete(ctx: *mut c_void) {
    // SAFETY: manager_ctx is the Box<Owned> made in `produce`, freed only
    // here (a second call would be the double free under test).
    let owned = unsafe { Box::from_raw(ctx as *mut Owned) };
    let mut d = DELETED.lock().unwrap();
    assert_eq!(d[owned.id], 0, "producer {}: deleter ran twice", owned.id);
    d[owned.id] += 1;
}

unsafe extern "C" fn delete_versioned(this: *mut DLManagedTensorVersioned) {
    // SAFETY: made by Box::new in `produce`; tessera calls this once.
    let this = unsafe { Box::from_raw(this) };
    record_delete(this.manager_ctx);
}

unsafe extern "C" fn delete_legacy(this: *mut DLManagedTensor) {
    // SAFETY: as above.
    let this = unsafe { Box::from_raw(this) };
    record_delete(this.manager_ctx);
}

/// The fuzzed description, kept to check the result against.
struct Spec {
    dl: DLTensor,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
}

fn produce(input: &mut Input, buf: *mut u8) -> (Spec, u32, u32, u64) {
    let ndim = if input.range(0, 31) == 0 {
        input.int(-2, 70) as i32
    } else {
        input.range(0, 4) as i32
    };
    let n = ndim.clamp(0, 70) as usize;
    let shape: Vec<i64> = (0..n).map(|_| input.int(-1, 5)).collect();
    let strides = if input.bool() {
        None
    } else {
        Some((0..n).map(|_| input.int(-2, 12)).collect::<Vec<i64>>())
    };
    let codes = [0u8, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 17, 200];
    let bits = [1u8, 4, 8, 16, 32, 64, 128, 0, 7];
    let dtype = DLDataType {
        code: input.pick(&codes),
        bits: input.pick(&bits),
        lanes: if input.range(0, 15) == 0 {
            input.range(0, 4) as u16
        } else {
            1
        },
    };
    let device = DLDevice {
        device_type: if input.range(0, 7) == 0 {
            input.range(0, 20) as i32
        } else {
            1
        },
        device_id: if input.range(0, 7) == 0 {
            input.int(-1, 200) as i32
        } else {
            0
        },
    };
    let data = match input.range(0, 9) {
        0 => ptr::null_mut(),
        1 => usize::MAX.wrapping_sub(input.range(0, 4096) as usize) as *mut c_void,
        // SAFETY (both arms): offsets inside the buffer.
        2 => unsafe { buf.add(input.range(0, 64) as usize) as *mut c_void },
        _ => unsafe { buf.add(8 * input.range(0, 8) as usize) as *mut c_void },
    };
    let byte_offset = match input.range(0, 7) {
        0 => input.u64(),
        1 => input.range(0, 64) as u64,
        _ => 8 * input.range(0, 16) as u64,
    };
    let major = if input.range(0, 15) == 0 {
        input.range(0, 3) as u32
    } else {
        1
    };
    let minor = input.range(0, 3) as u32;
    let flags = if input.range(0, 7) == 0 {
        input.u64() & 7
    } else {
        0
    };
    let mut spec = Spec {
        dl: DLTensor {
            data,
            device,
            ndim,
            dtype,
            shape: ptr::null_mut(),
            strides: ptr::null_mut(),
            byte_offset,
        },
        shape,
        strides,
    };
    if !(n > 0 && input.range(0, 31) == 0) {
        spec.dl.shape = spec.shape.as_mut_ptr();
    }
    if let Some(s) = &mut spec.strides {
        spec.dl.strides = s.as_mut_ptr();
    }
    (spec, major, minor, flags)
}

/// Imports the spec through the versioned or the legacy function.
fn import(
    input: &mut Input,
    spec: &Spec,
    version: (u32, u32, u64),
) -> (usize, &'static str, TsrStatus, *mut TsrTensor) {
    let id = {
        let mut d = DELETED.lock().unwrap();
        d.push(0);
        d.len() - 1
    };
    let owned = Box::into_raw(Box::new(Owned {
        id,
        _shape: spec.shape.clone(),
        _strides: spec.strides.clone(),
    })) as *mut c_void;
    let mut out: *mut TsrTensor = ptr::dangling_mut();
    let out_arg = if input.range(0, 31) == 0 {
        ptr::null_mut()
    } else {
        &mut out as *mut _
    };
    let (fname, status) = if input.bool() {
        let m = Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: spec.dl,
            manager_ctx: owned,
            deleter: Some(delete_legacy),
        }));
        // SAFETY: a valid managed tensor we hand over.
        let s = unsafe { tsr_tensor_from_dlpack_legacy(m, out_arg) };
        ("tsr_tensor_from_dlpack_legacy", s)
    } else {
        let m = Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion {
                major: version.0,
                minor: version.1,
            },
            manager_ctx: owned,
            deleter: Some(delete_versioned),
            flags: version.2,
            dl_tensor: spec.dl,
        }));
        // SAFETY: as above.
        let s = unsafe { tsr_tensor_from_dlpack(m, out_arg) };
        ("tsr_tensor_from_dlpack", s)
    };
    (id, fname, status, out)
}

/// Checks an imported tensor against its description.
fn check_import(spec: &Spec, t: &tessera::Tensor, buf: *mut u8) {
    check_tensor(t);
    assert_eq!(t.sizes(), &spec.shape[..]);
    // one element is bits x lanes (Float4_e2m1fn_x2: 4 bits, 2 lanes)
    assert_eq!(
        t.itemsize() * 8,
        spec.dl.dtype.bits as usize * spec.dl.dtype.lanes as usize
    );
    let s = t.storage();
    assert_eq!(t.storage_offset(), 0);
    if t.numel() == 0 {
        return;
    }
    let first = (spec.dl.data as usize).wrapping_add(spec.dl.byte_offset as usize);
    assert_eq!(
        s.data() as usize,
        first,
        "the storage starts at the first element"
    );
    // The span of the view, computed here independently.
    let item = t.itemsize() as i128;
    let mut last = 0i128;
    for (d, &size) in spec.shape.iter().enumerate() {
        let stride = match &spec.strides {
            Some(st) if size > 1 => st[d],
            _ => t.strides()[d],
        };
        assert!(size <= 1 || stride == t.strides()[d], "stride of dim {d}");
        last += (size as i128 - 1) * stride as i128;
    }
    assert_eq!(
        s.nbytes() as i128,
        (last + 1) * item,
        "the storage spans the view exactly"
    );
    // Inside our buffer: the elements are the producer's bytes.
    let start = buf as usize;
    let inside = first >= start && first as u128 + s.nbytes() as u128 <= (start + BUF_LEN) as u128;
    let els = if t.device().is_cpu() && inside {
        elements(t, 1 << 14)
    } else {
        None
    };
    if let Some(els) = els {
        let mut clone = ptr::null_mut();
        let h = tessera::Ref::into_raw(t.as_rc().clone()) as *mut TsrTensor;
        // SAFETY: live handles; out writable.
        unsafe {
            assert_eq!(tsr_tensor_clone(h, &mut clone), TSR_OK);
            assert_eq!(elements(&tensor_of(clone), 1 << 14).unwrap(), els);
            assert_eq!(tsr_tensor_decref(clone), TSR_OK);
            assert_eq!(tsr_tensor_decref(h), TSR_OK);
        }
    }
}

/// Exports `h` and imports the export again: one more owner of the
/// memory, released by tessera's own deleter.
fn roundtrip(h: *mut TsrTensor) -> *mut TsrTensor {
    let mut m = ptr::null_mut();
    let mut back = ptr::null_mut();
    // SAFETY: a live handle; out-pointers writable.
    unsafe {
        assert_eq!(tsr_tensor_to_dlpack(h, &mut m), TSR_OK);
        assert_eq!(tsr_tensor_from_dlpack(m, &mut back), TSR_OK);
        assert_eq!(tensor_of(back).sizes(), tensor_of(h).sizes());
    }
    back
}

fuzz_target!(|data: &[u8]| {
    let layout = Layout::from_size_align(BUF_LEN, 64).unwrap();
    // SAFETY: a non-zero size.
    let buf = unsafe { std::alloc::alloc(layout) };
    for i in 0..BUF_LEN {
        // SAFETY: inside the buffer.
        unsafe { *buf.add(i) = (i * 7 % 256) as u8 };
    }
    let mut input = Input::new(data);
    DELETED.lock().unwrap().clear();
    for _ in 0..input.range(1, 3) {
        let (spec, major, minor, flags) = produce(&mut input, buf);
        let (id, fname, status, out) = import(&mut input, &spec, (major, minor, flags));
        if status != TSR_OK {
            assert!(
                ![TSR_ERR_INTERNAL, TSR_ERR_DEAD_OBJECT].contains(&status),
                "import failed with status {status}"
            );
            check_error_message(fname);
            assert_eq!(
                out,
                ptr::dangling_mut(),
                "a failed import wrote its out-pointer"
            );
            assert_eq!(
                deleted(id),
                1,
                "a refused tensor's deleter must run at once, once"
            );
            continue;
        }
        assert_eq!(deleted(id), 0, "deleter ran while the tensor lives");
        // SAFETY: a new reference from the import.
        let t = unsafe { tensor_of(out) };
        check_import(&spec, &t, buf);
        // A view and a DLPack round trip keep the memory alive.
        let mut view = ptr::null_mut();
        // SAFETY: live handle; out writable.
        let narrowed = t.ndim() > 0
            && unsafe { tsr_tensor_narrow(out, 0, 0, t.sizes()[0].min(1), &mut view) } == TSR_OK;
        let back = roundtrip(out);
        drop(t);
        // SAFETY: our references.
        unsafe {
            assert_eq!(tsr_tensor_decref(out), TSR_OK);
            assert_eq!(deleted(id), 0, "deleter ran while a view lives");
            assert_eq!(tsr_tensor_decref(back), TSR_OK);
            if narrowed {
                assert_eq!(deleted(id), 0, "deleter ran while a view lives");
                assert_eq!(tsr_tensor_decref(view), TSR_OK);
            }
        }
        assert_eq!(deleted(id), 1, "deleter after the last tensor");
    }
    // SAFETY: allocated above.
    unsafe { std::alloc::dealloc(buf, layout) };
});
