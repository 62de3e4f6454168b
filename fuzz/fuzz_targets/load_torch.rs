//! Fuzzes loading the TORCH format from arbitrary bytes through the C
//! API (tsr_load_from_storage, with the format named and detected). A
//! refusal is a status other than TSR_ERR_INTERNAL with a message naming
//! the function; a dict that loads has tensors whose elements lie inside
//! their storages and can all be read; freeing the dict leaves the bytes'
//! storage with its one reference (nothing leaked: ASan checks the rest).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera::ffi::serialize::*;
use tessera::ffi::storage::*;
use tessera::ffi::*;
use tessera_fuzz::{check_refusal, check_tensor, elements, tensor_of};

const CPU: TsrDevice = TsrDevice {
    device_type: TSR_CPU,
    index: -1,
};

fn load(bytes: *mut TsrStorage, format: TsrFormat) {
    let mut dict = std::ptr::null_mut();
    // SAFETY: bytes is a live storage; dict is writable.
    let status = unsafe { tsr_load_from_storage(bytes, format, 0, &mut dict) };
    if status != TSR_OK {
        check_refusal("tsr_load_from_storage", status);
        assert!(dict.is_null(), "a refused load wrote its out-pointer");
        return;
    }
    // SAFETY: dict is the live dictionary just loaded.
    let n = unsafe { tsr_dict_size(dict) };
    for i in 0..n {
        // SAFETY: as above; i < size, so the name is non-NULL.
        let name = unsafe { tsr_dict_name(dict, i) };
        assert!(!name.is_null());
        // SAFETY: name is a NUL-terminated name of the dict.
        let t = unsafe { tsr_dict_get(dict, name) };
        assert!(!t.is_null());
        // SAFETY: t is a live tensor handle (a new reference).
        let tensor = unsafe { tensor_of(t) };
        check_tensor(&tensor);
        let _ = elements(&tensor, 1 << 16);
        drop(tensor);
        // SAFETY: t is the reference tsr_dict_get returned.
        assert_eq!(
            unsafe { tessera::ffi::tensor::tsr_tensor_decref(t) },
            TSR_OK
        );
    }
    // SAFETY: dict is live and not used afterwards.
    unsafe { tsr_dict_free(dict) };
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = std::ptr::null_mut();
    // SAFETY: bytes is writable.
    let status = unsafe { tsr_storage_new(data.len(), CPU, false, &mut bytes) };
    assert_eq!(status, TSR_OK);
    if !data.is_empty() {
        // SAFETY: a fresh CPU storage of data.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                tsr_storage_data(bytes) as *mut u8,
                data.len(),
            )
        };
    }
    load(bytes, TSR_FORMAT_TORCH);
    load(bytes, TSR_FORMAT_AUTO);
    // SAFETY: bytes is live.
    assert_eq!(
        unsafe { tsr_storage_use_count(bytes) },
        1,
        "a loaded record outlived its dict"
    );
    // SAFETY: bytes is live and not used afterwards.
    assert_eq!(unsafe { tsr_storage_decref(bytes) }, TSR_OK);
});
