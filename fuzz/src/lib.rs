//! Shared helpers of tessera's fuzz targets: a reader that turns the
//! fuzzer's bytes into bounded values, and invariant checks on tensors
//! and iterators (every element a tensor or an iterator can reach lies
//! inside its storage).

use std::collections::BTreeSet;
use tessera::iterator::TensorIterator;
use tessera::{DType, Tensor};

/// Reads values from the fuzzer's input; an exhausted input reads zeros,
/// so every input (even an empty one) is a valid program.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte (0 once exhausted).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// The next eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        u64::from_le_bytes(b)
    }

    /// A bool from the low bit of the next byte.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// A value in `lo..=hi` (from one or two bytes).
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        assert!(lo <= hi);
        let span = (hi - lo) as u64 + 1;
        let raw = if span <= 256 {
            self.u8() as u64
        } else {
            self.u16() as u64
        };
        lo + (raw % span) as i64
    }

    /// Mostly a value in `lo..=hi`, sometimes (1 in 16) an extreme one:
    /// 0, -1, i64::MIN, i64::MAX, i64::MAX / 2 or a large power of two.
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        let sel = self.u8();
        if sel & 0x0f != 0x0f {
            return self.range(lo, hi);
        }
        match sel >> 4 {
            0 => i64::MIN,
            1 => i64::MAX,
            2 => i64::MAX / 2,
            3 => -1,
            4 => 1 << 40,
            5 => 1 << 62,
            6 => -(1 << 40),
            7 => i32::MAX as i64 + 1,
            _ => 0,
        }
    }

    /// One element of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.u8() as usize % items.len()]
    }
}

/// Every dtype number tessera knows.
pub fn dtypes() -> &'static [DType] {
    &DType::ALL
}

/// The multi-indices of a shape in row-major order (outermost dim first),
/// or None when the shape has more than `limit` elements.
pub fn indices(sizes: &[i64], limit: i64) -> Option<Vec<Vec<i64>>> {
    let numel: i64 = sizes
        .iter()
        .try_fold(1i64, |acc, &s| acc.checked_mul(s.max(0)))?;
    if numel > limit {
        return None;
    }
    let mut out = Vec::with_capacity(numel as usize);
    if numel == 0 {
        return Some(out);
    }
    let mut idx = vec![0i64; sizes.len()];
    loop {
        out.push(idx.clone());
        let mut d = sizes.len();
        loop {
            if d == 0 {
                return Some(out);
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// The byte offset of element `idx` from the start of `t`'s storage.
pub fn byte_offset(t: &Tensor, idx: &[i64]) -> i128 {
    let elems: i128 = t.storage_offset() as i128
        + idx
            .iter()
            .zip(t.strides())
            .map(|(&i, &s)| i as i128 * s as i128)
            .sum::<i128>();
    elems * t.itemsize() as i128
}

/// Asserts that every element `t` can address lies inside its storage,
/// and that its metadata agree with each other (numel, data pointer).
pub fn check_tensor(t: &Tensor) {
    let numel: i64 = t.sizes().iter().product();
    assert_eq!(t.numel(), numel, "numel of sizes {:?}", t.sizes());
    assert_eq!(t.sizes().len(), t.strides().len());
    assert!(t.sizes().iter().all(|&s| s >= 0), "sizes {:?}", t.sizes());
    assert!(t.storage_offset() >= 0);
    if numel == 0 {
        return;
    }
    let item = t.itemsize() as i128;
    let mut lo = t.storage_offset() as i128;
    let mut hi = lo;
    for (&size, &stride) in t.sizes().iter().zip(t.strides()) {
        let span = (size as i128 - 1) * stride as i128;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let nbytes = t.storage().nbytes() as i128;
    assert!(
        lo >= 0 && (hi + 1) * item <= nbytes,
        "tensor sizes {:?} strides {:?} offset {} itemsize {} reach elements [{lo}, {hi}] \
         outside a storage of {nbytes} bytes",
        t.sizes(),
        t.strides(),
        t.storage_offset(),
        item
    );
    let expect =
        (t.storage().data() as usize).wrapping_add((t.storage_offset() as i128 * item) as usize);
    assert_eq!(t.data_ptr() as usize, expect, "data pointer of a tensor");
}

/// A loaded tensor's geometry, empty or not (issue 36, item 8): strides
/// and offset non-negative, the offset's byte position within the
/// storage (an empty tensor's offset was once accepted near INT64_MAX).
pub fn check_loaded_geometry(t: &Tensor) {
    assert!(
        t.strides().iter().all(|&s| s >= 0),
        "a loaded tensor with strides {:?}",
        t.strides()
    );
    let start = (t.storage_offset() as i128) * t.itemsize() as i128;
    assert!(
        start <= t.storage().nbytes() as i128,
        "a loaded tensor's offset {} lies past its storage of {} bytes",
        t.storage_offset(),
        t.storage().nbytes()
    );
}

/// The byte contents of `t`'s elements in row-major order (None when the
/// tensor is larger than `limit` elements).
pub fn elements(t: &Tensor, limit: i64) -> Option<Vec<Vec<u8>>> {
    let idx = indices(t.sizes(), limit)?;
    let base = t.storage().data() as *const u8;
    let item = t.itemsize();
    Some(
        idx.iter()
            .map(|i| {
                let off = byte_offset(t, i) as usize;
                // SAFETY: check_tensor proved every element lies inside the
                // storage, which stays alive while `t` does.
                unsafe { std::slice::from_raw_parts(base.add(off), item) }.to_vec()
            })
            .collect(),
    )
}

/// Where one operand may be read or written: its storage's byte range.
struct Bounds {
    start: usize,
    end: usize,
    item: usize,
}

/// Walks `it` serially over all its elements and asserts that every byte
/// the loop hands out, for every operand, lies inside that operand's
/// storage. Returns (number of elements visited, per operand the set of
/// byte offsets visited when `collect` is set).
pub fn check_traversal(it: &TensorIterator, collect: bool) -> (i64, Vec<BTreeSet<usize>>) {
    let nt = it.ntensors();
    let bounds: Vec<Bounds> = (0..nt)
        .map(|arg| {
            let t = it.tensor(arg);
            let start = t.storage().data() as usize;
            Bounds {
                start,
                end: start + t.storage().nbytes(),
                item: t.itemsize(),
            }
        })
        .collect();
    let visited = std::cell::Cell::new(0i64);
    let seen = std::cell::RefCell::new(vec![BTreeSet::new(); nt]);
    it.serial_for_each(
        &|data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64| {
            assert_eq!(data.len(), nt);
            assert!(strides.len() >= 2 * nt);
            assert!(n0 >= 0 && n1 >= 0);
            visited.set(visited.get() + n0 * n1);
            for (arg, b) in bounds.iter().enumerate() {
                for j in 0..n1 {
                    for i in 0..n0 {
                        let addr = data[arg] as i128
                            + i as i128 * strides[arg] as i128
                            + j as i128 * strides[nt + arg] as i128;
                        assert!(
                            addr >= b.start as i128 && addr + b.item as i128 <= b.end as i128,
                            "operand {arg}: element ({i}, {j}) at {addr:#x} (+{} bytes) is \
                             outside its storage [{:#x}, {:#x})",
                            b.item,
                            b.start,
                            b.end
                        );
                        if collect {
                            seen.borrow_mut()[arg].insert(addr as usize - b.start);
                        }
                    }
                }
            }
        },
        0,
        it.numel(),
    );
    (visited.get(), seen.into_inner())
}

/// The set of byte offsets (from the storage start) of `t`'s elements, or
/// None when it has more than `limit` elements.
pub fn element_offsets(t: &Tensor, limit: i64) -> Option<BTreeSet<usize>> {
    let idx = indices(t.sizes(), limit)?;
    Some(idx.iter().map(|i| byte_offset(t, i) as usize).collect())
}

/// A new Rust handle to the tensor behind a C handle.
///
/// # Safety
/// `h` must be a live tensor handle.
pub unsafe fn tensor_of(h: *const tessera::ffi::tensor::TsrTensor) -> Tensor {
    // SAFETY: forwarded from the caller; a TsrTensor* is the address of an
    // RcBox<TensorImpl>.
    let r = unsafe {
        tessera::Ref::clone_from_raw(
            h as *const tessera::refcount::RcBox<tessera::tensor::TensorImpl>,
        )
    };
    Tensor::from_ref(r.expect("a live tensor handle"))
}

/// Asserts that a failed C call recorded a message naming the function,
/// and returns the message.
pub fn check_error_message(fname: &str) -> String {
    // SAFETY: tsr_last_error_message returns a valid C string.
    let msg = unsafe { std::ffi::CStr::from_ptr(tessera::ffi::tsr_last_error_message()) }
        .to_string_lossy()
        .into_owned();
    assert!(
        msg.starts_with(&format!("{fname}: ")) && msg.len() > fname.len() + 2,
        "the message of a failed {fname} does not name it: {msg:?}"
    );
    msg
}

/// Asserts that a C status is a clean refusal of bad values: not a caught
/// panic, not a NULL or dead handle (the targets never pass those).
pub fn check_refusal(fname: &str, status: tessera::ffi::TsrStatus) {
    use tessera::ffi::*;
    assert_ne!(status, TSR_OK);
    assert!(
        ![TSR_ERR_INTERNAL, TSR_ERR_NULL_POINTER, TSR_ERR_DEAD_OBJECT].contains(&status),
        "{fname} failed with status {status}: {}",
        check_error_message(fname)
    );
    check_error_message(fname);
}

/// The body of the loader targets (load_torch, load_safetensors): loads
/// `data`, copied into a CPU storage, with `format` and with
/// TSR_FORMAT_AUTO through tsr_load_from_storage. A refusal is a status
/// other than TSR_ERR_INTERNAL with a message naming the function and the
/// out-pointer untouched; a dict that loads has tensors whose elements lie
/// inside their storages and can all be read; freeing the dict leaves the
/// bytes' storage with its one reference.
pub fn fuzz_load(data: &[u8], format: tessera::ffi::TsrFormat) {
    use tessera::ffi::storage::*;
    use tessera::ffi::*;
    const CPU: TsrDevice = TsrDevice {
        device_type: TSR_CPU,
        index: -1,
    };
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
    load(bytes, format, 0);
    // Detected, and reading past unknown globals (placeholders only).
    load(bytes, TSR_FORMAT_AUTO, TSR_LOAD_SKIP_UNKNOWN);
    // SAFETY: bytes is live.
    assert_eq!(
        unsafe { tsr_storage_use_count(bytes) },
        1,
        "a loaded record outlived its dict"
    );
    // SAFETY: bytes is live and not used afterwards.
    assert_eq!(unsafe { tsr_storage_decref(bytes) }, TSR_OK);
}

fn load(
    bytes: *mut tessera::ffi::storage::TsrStorage,
    format: tessera::ffi::TsrFormat,
    flags: u32,
) {
    use tessera::ffi::serialize::*;
    use tessera::ffi::*;
    let mut dict = std::ptr::null_mut();
    // SAFETY: bytes is a live storage; dict is writable.
    let status = unsafe { tsr_load_from_storage(bytes, format, flags, &mut dict) };
    if status != TSR_OK {
        check_refusal("tsr_load_from_storage", status);
        assert!(dict.is_null(), "a refused load wrote its out-pointer");
        return;
    }
    check_dict(dict);
}

/// Checks every tensor of a loaded `dict` (as `load` does) and frees it.
fn check_dict(dict: *mut tessera::ffi::serialize::TsrTensorDict) {
    use tessera::ffi::serialize::*;
    use tessera::ffi::*;
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
        check_loaded_geometry(&tensor);
        let _ = elements(&tensor, 1 << 16);
        drop(tensor);
        // SAFETY: t is the reference tsr_dict_get returned.
        assert_eq!(unsafe { tessera::ffi::tsr_tensor_decref(t) }, TSR_OK);
    }
    // SAFETY: dict is live and not used afterwards.
    unsafe { tsr_dict_free(dict) };
}

/// Fuzzes loading a checkpoint of several files through `tsr_load` of a
/// path: the first byte picks a DCP directory (even: `.metadata` and
/// `__0_0.distcp`) or a Hugging Face shard index (odd:
/// `model.safetensors.index.json` and `model-00001-of-00001.safetensors`);
/// the next two bytes give the first file's length, the rest is the
/// second file. Both are written into a scratch directory of this
/// process and loaded by copy and mapped: a refusal is a clean error
/// (`check_refusal`), a loaded tensor passes `load`'s checks.
pub fn fuzz_load_files(data: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    use tessera::ffi::serialize::*;
    use tessera::ffi::*;
    let mut input = Input::new(data);
    let dcp = !input.bool();
    let len = input.u16() as usize;
    let rest = input.data;
    let (first, second) = rest.split_at(len.min(rest.len()));
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("tsr-fuzz-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("a scratch directory");
    let (names, load_path) = if dcp {
        ([".metadata", "__0_0.distcp"], dir.clone())
    } else {
        let index = "model.safetensors.index.json";
        ([index, "model-00001-of-00001.safetensors"], dir.join(index))
    };
    std::fs::write(dir.join(names[0]), first).expect("writing the scratch file");
    std::fs::write(dir.join(names[1]), second).expect("writing the scratch file");
    let path = std::ffi::CString::new(load_path.as_os_str().as_bytes()).expect("no NUL");
    for flags in [0, TSR_LOAD_MMAP] {
        let mut dict = std::ptr::null_mut();
        // SAFETY: path is NUL-terminated; dict is writable.
        let status = unsafe { tsr_load(path.as_ptr(), TSR_FORMAT_AUTO, flags, &mut dict) };
        if status != TSR_OK {
            check_refusal("tsr_load", status);
            assert!(dict.is_null(), "a refused load wrote its out-pointer");
            continue;
        }
        check_dict(dict);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
