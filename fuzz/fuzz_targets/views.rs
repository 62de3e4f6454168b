//! Fuzzes the view and copy functions of the C API (as_strided, view,
//! reshape, permute, transpose, expand, narrow, select, squeeze,
//! squeeze_all, unsqueeze, flatten, contiguous, clone) with arbitrary
//! arguments, chained on each other's results, and resize in place
//! (tsr_tensor_resize, which may grow the storage under the other views).
//! Each call either fails cleanly (a status that is not TSR_ERR_INTERNAL,
//! a message naming the function, the out-pointer untouched; a refused
//! resize changes nothing) or returns a tensor whose every element lies
//! inside its storage and holds the element the operation's definition
//! says. At the end every reference is released: the storage
//! is back to our single reference and every copy's storage is freed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ptr;
use tessera::ffi::storage::*;
use tessera::ffi::tensor::*;
use tessera::ffi::tensor_resize::tsr_tensor_resize;
use tessera::ffi::views::*;
use tessera::ffi::*;
use tessera::{Storage, Tensor, WeakStorage};
use tessera_fuzz::{byte_offset, check_refusal, check_tensor, indices, tensor_of, Input};

const LIMIT: i64 = 1024;
const CPU: TsrDevice = TsrDevice {
    device_type: TSR_CPU,
    index: -1,
};
/// What an out-pointer holds before a call, to see that failures leave it.
fn sentinel() -> *mut TsrTensor {
    ptr::dangling_mut()
}

/// Wraps a dim as c10 does (None when out of range).
fn wrap(dim: i64, ndim: usize) -> Option<usize> {
    let n = ndim.max(1) as i64;
    let d = if dim < 0 { dim.checked_add(n)? } else { dim };
    (0..n).contains(&d).then_some(d as usize)
}

/// Asserts that element `idx` of `r` is element `map(idx)` of `src`: the
/// same address when they share a storage, the same bytes otherwise.
fn check_mapping(r: &Tensor, src: &Tensor, map: impl Fn(&[i64]) -> Vec<i64>) {
    let Some(all) = indices(r.sizes(), LIMIT) else {
        return;
    };
    let same = Storage::ptr_eq(r.storage(), src.storage());
    let (rb, sb) = (
        r.storage().data() as *const u8,
        src.storage().data() as *const u8,
    );
    let item = r.itemsize();
    for idx in &all {
        let sidx = map(idx);
        let (ro, so) = (byte_offset(r, idx), byte_offset(src, &sidx));
        if same {
            assert_eq!(
                ro, so,
                "element {idx:?} should be element {sidx:?} of the input"
            );
        } else {
            // SAFETY: check_tensor proved both elements lie in their storages.
            let (a, b) = unsafe {
                (
                    std::slice::from_raw_parts(rb.add(ro as usize), item),
                    std::slice::from_raw_parts(sb.add(so as usize), item),
                )
            };
            assert_eq!(
                a, b,
                "element {idx:?} differs from element {sidx:?} of the input"
            );
        }
    }
}

/// Asserts that `r` holds `src`'s elements in the same row-major order.
fn check_same_order(r: &Tensor, src: &Tensor) {
    assert_eq!(r.numel(), src.numel());
    let (Some(ri), Some(si)) = (indices(r.sizes(), LIMIT), indices(src.sizes(), LIMIT)) else {
        return;
    };
    let pairs: std::collections::HashMap<Vec<i64>, Vec<i64>> = ri.into_iter().zip(si).collect();
    check_mapping(r, src, |idx| pairs[idx].clone());
}

fn sizes(input: &mut Input) -> Vec<i64> {
    let n = if input.range(0, 31) == 0 {
        input.range(60, 70)
    } else {
        input.range(0, 4)
    };
    (0..n).map(|_| input.int(-2, 6)).collect()
}

/// What a successful result must satisfy.
type Check = Box<dyn Fn(&Tensor)>;

/// The geometry a refused resize must leave as it was.
fn geometry(t: &Tensor) -> (Vec<i64>, Vec<i64>, i64, usize, u64) {
    (
        t.sizes().to_vec(),
        t.strides().to_vec(),
        t.storage_offset(),
        t.storage().nbytes(),
        t.version(),
    )
}

/// tsr_tensor_resize of `src_h` in place, to fuzzed sizes in a fuzzed
/// format: on success the sizes asked for, contiguous in the format, at
/// the same offset over a storage that holds them (grown when needed,
/// never shrunk) and the version bumped; refused, nothing changed.
fn resize_in_place(input: &mut Input, src_h: *mut TsrTensor, src: &Tensor) {
    let s = sizes(input);
    let format = input.range(-1, 4) as TsrMemoryFormat;
    // Growths past 4 MiB would only measure the machine.
    let bytes = s
        .iter()
        .try_fold(1i64, |n, &d| n.checked_mul(d.max(0)))
        .and_then(|n| n.checked_add(src.storage_offset()))
        .and_then(|n| n.checked_mul(src.itemsize() as i64));
    if bytes.is_none_or(|b| b > 1 << 22) {
        return;
    }
    let before = geometry(src);
    // SAFETY: a live handle used by this thread only; s holds s.len() values.
    let status = unsafe { tsr_tensor_resize(src_h, s.len() as i64, s.as_ptr(), format) };
    if status != TSR_OK {
        check_refusal("tsr_tensor_resize", status);
        assert_eq!(geometry(src), before, "a refused resize changed the tensor");
        return;
    }
    check_tensor(src);
    assert_eq!(src.sizes(), &s[..]);
    assert_eq!(src.storage_offset(), before.2);
    assert!(
        src.storage().nbytes() >= before.3,
        "resize shrank the storage"
    );
    assert_eq!(src.version(), before.4 + 1);
    let format = tessera::MemoryFormat::from_raw(format).expect("an accepted format");
    assert!(
        src.is_contiguous(format),
        "{format:?} strides {:?}",
        src.strides()
    );
}

/// Applies one fuzzed operation to `src`; pushes the result to `pool`.
fn apply(input: &mut Input, src_h: *mut TsrTensor, pool: &mut Vec<*mut TsrTensor>) {
    // SAFETY: src_h is a live handle owned by the pool.
    let src = unsafe { tensor_of(src_h) };
    let nd = src.ndim();
    let op = input.range(0, 14);
    if op == 13 {
        resize_in_place(input, src_h, &src);
        return;
    }
    // Copies of huge (expanded) tensors would only measure the machine.
    let copies = matches!(op, 2 | 11..);
    if copies && src.numel().saturating_mul(src.itemsize() as i64) > 1 << 22 {
        return;
    }
    let mut out = sentinel();
    let (fname, status, check): (&str, TsrStatus, Check) = match op {
        0 => {
            let s = sizes(input);
            let st: Vec<i64> = (0..s.len()).map(|_| input.int(-1, 8)).collect();
            let off = input.int(-1, 16);
            // SAFETY: arrays of s.len() values; out writable.
            let status = unsafe {
                tsr_tensor_as_strided(
                    src_h,
                    s.len() as i64,
                    s.as_ptr(),
                    st.as_ptr(),
                    off,
                    &mut out,
                )
            };
            let src2 = src.clone();
            let check = move |r: &Tensor| {
                assert_eq!((r.sizes(), r.strides()), (&s[..], &st[..]));
                assert_eq!(r.storage_offset(), off);
                assert!(Storage::ptr_eq(r.storage(), src2.storage()));
            };
            ("tsr_tensor_as_strided", status, Box::new(check))
        }
        1 | 2 => {
            let s = sizes(input);
            // SAFETY: an array of s.len() values; out writable.
            let status = unsafe {
                if op == 1 {
                    tsr_tensor_view(src_h, s.len() as i64, s.as_ptr(), &mut out)
                } else {
                    tsr_tensor_reshape(src_h, s.len() as i64, s.as_ptr(), &mut out)
                }
            };
            let src2 = src.clone();
            let is_view = op == 1;
            let check = move |r: &Tensor| {
                assert_eq!(r.ndim(), s.len());
                for (&got, &want) in r.sizes().iter().zip(&s) {
                    assert!(want == -1 || got == want, "sizes {:?} for {s:?}", r.sizes());
                }
                if is_view {
                    assert!(Storage::ptr_eq(r.storage(), src2.storage()));
                }
                check_same_order(r, &src2);
            };
            (
                if is_view {
                    "tsr_tensor_view"
                } else {
                    "tsr_tensor_reshape"
                },
                status,
                Box::new(check),
            )
        }
        3 => {
            let n = if input.range(0, 7) == 0 {
                input.range(0, 5) as usize
            } else {
                nd
            };
            let dims: Vec<i64> = (0..n).map(|_| input.int(-5, 5)).collect();
            // SAFETY: an array of n values; out writable.
            let status = unsafe { tsr_tensor_permute(src_h, n as i64, dims.as_ptr(), &mut out) };
            let src2 = src.clone();
            let check = move |r: &Tensor| {
                let w: Vec<usize> = dims
                    .iter()
                    .map(|&d| wrap(d, nd).expect("a valid dim"))
                    .collect();
                check_mapping(r, &src2, |idx| {
                    let mut s = vec![0; nd];
                    for (i, &d) in w.iter().enumerate() {
                        s[d] = idx[i];
                    }
                    s
                });
            };
            ("tsr_tensor_permute", status, Box::new(check))
        }
        4 => {
            let (d0, d1) = (input.int(-4, 4), input.int(-4, 4));
            // SAFETY: out writable.
            let status = unsafe { tsr_tensor_transpose(src_h, d0, d1, &mut out) };
            let src2 = src.clone();
            let check = move |r: &Tensor| {
                if nd == 0 {
                    check_same_order(r, &src2);
                    return;
                }
                let (a, b) = (wrap(d0, nd).unwrap(), wrap(d1, nd).unwrap());
                check_mapping(r, &src2, |idx| {
                    let mut s = idx.to_vec();
                    s.swap(a, b);
                    s
                });
            };
            ("tsr_tensor_transpose", status, Box::new(check))
        }
        5 => {
            let s = sizes(input);
            // SAFETY: an array of s.len() values; out writable.
            let status = unsafe { tsr_tensor_expand(src_h, s.len() as i64, s.as_ptr(), &mut out) };
            let src2 = src.clone();
            let check = move |r: &Tensor| {
                assert_eq!(r.ndim(), s.len());
                let lead = s.len() - nd;
                check_mapping(r, &src2, |idx| {
                    idx[lead..]
                        .iter()
                        .zip(src2.sizes())
                        .map(|(&i, &size)| if size == 1 { 0 } else { i })
                        .collect()
                });
            };
            ("tsr_tensor_expand", status, Box::new(check))
        }
        6 => {
            let (dim, start, len) = (input.int(-4, 4), input.int(-6, 6), input.int(-1, 6));
            // SAFETY: out writable.
            let status = unsafe { tsr_tensor_narrow(src_h, dim, start, len, &mut out) };
            let src2 = src.clone();
            let check = move |r: &Tensor| {
                let d = wrap(dim, nd).unwrap();
                let size = src2.sizes()[d];
                let s0 = if start < 0 { start + size } else { start };
                assert_eq!(r.sizes()[d], len);
                assert!(s0 >= 0 && s0 + len <= size);
                check_mapping(r, &src2, |idx| {
                    let mut s = idx.to_vec();
                    s[d] += s0;
                    s
                });
            };
            ("tsr_tensor_narrow", status, Box::new(check))
        }
        7 => {
            let (dim, index) = (input.int(-4, 4), input.int(-6, 6));
            // SAFETY: out writable.
            let status = unsafe { tsr_tensor_select(src_h, dim, index, &mut out) };
            let src2 = src.clone();
            let check = move |r: &Tensor| {
                let d = wrap(dim, nd).unwrap();
                let size = src2.sizes()[d];
                let i0 = if index < 0 { index + size } else { index };
                assert!((0..size).contains(&i0));
                assert_eq!(r.ndim() + 1, nd);
                check_mapping(r, &src2, |idx| {
                    let mut s = idx.to_vec();
                    s.insert(d, i0);
                    s
                });
            };
            ("tsr_tensor_select", status, Box::new(check))
        }
        8..=10 => {
            let dim = input.int(-5, 5);
            // SAFETY: out writable.
            let (fname, status) = unsafe {
                match op {
                    8 => (
                        "tsr_tensor_squeeze",
                        tsr_tensor_squeeze(src_h, dim, &mut out),
                    ),
                    9 => (
                        "tsr_tensor_squeeze_all",
                        tsr_tensor_squeeze_all(src_h, &mut out),
                    ),
                    _ => (
                        "tsr_tensor_unsqueeze",
                        tsr_tensor_unsqueeze(src_h, dim, &mut out),
                    ),
                }
            };
            let src2 = src.clone();
            let check = move |r: &Tensor| {
                assert!(Storage::ptr_eq(r.storage(), src2.storage()));
                check_same_order(r, &src2);
                match op {
                    9 => assert!(r.sizes().iter().all(|&s| s != 1)),
                    10 => assert_eq!(r.ndim(), nd + 1),
                    _ => assert!(r.ndim() == nd || r.ndim() + 1 == nd),
                }
            };
            (fname, status, Box::new(check))
        }
        11 => {
            let (a, b) = (input.int(-5, 5), input.int(-5, 5));
            // SAFETY: out writable.
            let status = unsafe { tsr_tensor_flatten(src_h, a, b, &mut out) };
            let src2 = src.clone();
            let check = move |r: &Tensor| check_same_order(r, &src2);
            ("tsr_tensor_flatten", status, Box::new(check))
        }
        _ => {
            let clone = input.bool();
            let format = input.range(-1, 4) as TsrMemoryFormat;
            // SAFETY: out writable.
            let (fname, status) = unsafe {
                if clone {
                    ("tsr_tensor_clone", tsr_tensor_clone(src_h, &mut out))
                } else {
                    (
                        "tsr_tensor_contiguous",
                        tsr_tensor_contiguous(src_h, format, &mut out),
                    )
                }
            };
            let src2 = src.clone();
            let check = move |r: &Tensor| {
                check_same_order(r, &src2);
                if clone {
                    assert!(!Storage::ptr_eq(r.storage(), src2.storage()));
                } else if format == TSR_CONTIGUOUS {
                    assert!(r.is_contiguous(tessera::MemoryFormat::Contiguous));
                }
            };
            (fname, status, Box::new(check))
        }
    };
    if status != TSR_OK {
        check_refusal(fname, status);
        assert_eq!(out, sentinel(), "{fname} wrote its out-pointer and failed");
        return;
    }
    assert!(!out.is_null() && out != sentinel());
    // SAFETY: a successful call wrote a new reference.
    let r = unsafe { tensor_of(out) };
    check_tensor(&r);
    assert_eq!(r.dtype(), src.dtype());
    check(&r);
    pool.push(out);
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let nbytes = input.range(0, 512) as usize;
    let mut s: *mut TsrStorage = ptr::null_mut();
    // SAFETY: out writable.
    assert_eq!(
        unsafe { tsr_storage_new(nbytes, CPU, input.bool(), &mut s) },
        TSR_OK
    );
    // A storage of 0 bytes may have NULL data, which no slice may take.
    if nbytes > 0 {
        // SAFETY: the storage owns nbytes bytes at a non-NULL address.
        let data = unsafe { tsr_storage_data(s) } as *mut u8;
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts_mut(data, nbytes) };
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
    }

    // The base view: fuzzed metadata, or the whole storage as bytes.
    let dtype = input.pick(&tessera::DType::ALL).raw();
    let s0 = sizes(&mut input);
    let st: Vec<i64> = (0..s0.len()).map(|_| input.int(-1, 8)).collect();
    let off = input.int(-1, 16);
    let strides = if input.bool() {
        ptr::null()
    } else {
        st.as_ptr()
    };
    let mut base = sentinel();
    // SAFETY: arrays of s0.len() values; out writable.
    let status = unsafe {
        tsr_tensor_from_storage(
            s,
            off,
            s0.len() as i64,
            s0.as_ptr(),
            strides,
            dtype,
            &mut base,
        )
    };
    if status != TSR_OK {
        check_refusal("tsr_tensor_from_storage", status);
        assert_eq!(base, sentinel());
        let whole = [nbytes as i64];
        // SAFETY: as above.
        let status = unsafe {
            tsr_tensor_from_storage(s, 0, 1, whole.as_ptr(), ptr::null(), TSR_BYTE, &mut base)
        };
        assert_eq!(status, TSR_OK);
    }
    // SAFETY: a live handle.
    check_tensor(&unsafe { tensor_of(base) });

    let mut pool = vec![base];
    let mut weak: Vec<WeakStorage> = Vec::new();
    for _ in 0..input.range(1, 10) {
        if input.is_empty() {
            break;
        }
        let src = pool[input.u8() as usize % pool.len()];
        apply(&mut input, src, &mut pool);
        // SAFETY: the last pool entry is a live handle.
        weak.push(
            unsafe { tensor_of(*pool.last().unwrap()) }
                .storage()
                .downgrade(),
        );
    }

    // Strong and weak references through the C API on one of the tensors.
    let t = pool[input.u8() as usize % pool.len()];
    // SAFETY: t is live; out-pointers writable.
    unsafe {
        let n = tsr_tensor_use_count(t);
        let mut w: *mut TsrWeakTensor = ptr::null_mut();
        assert_eq!(tsr_tensor_downgrade(t, &mut w), TSR_OK);
        let mut locked: *mut TsrTensor = ptr::null_mut();
        assert_eq!(tsr_weak_tensor_lock(w, &mut locked), TSR_OK);
        assert_eq!(locked, t);
        assert_eq!(tsr_tensor_use_count(t), n + 1);
        assert_eq!(tsr_tensor_decref(locked), TSR_OK);
        assert_eq!(tsr_weak_tensor_decref(w), TSR_OK);
        assert_eq!(tsr_tensor_use_count(t), n);
    }

    for h in pool {
        // SAFETY: each pool entry is a reference we own.
        assert_eq!(unsafe { tsr_tensor_decref(h) }, TSR_OK);
    }
    // SAFETY: s is our live storage handle.
    unsafe {
        assert_eq!(
            tsr_storage_use_count(s),
            1,
            "a view kept a storage reference"
        );
        assert_eq!(
            tsr_storage_weak_use_count(s),
            1 + weak.iter().filter(|w| !w.expired()).count()
        );
    }
    for w in &weak {
        // Copies had storages of their own: all freed with their tensors.
        // SAFETY: as above.
        let ours = unsafe { tsr_storage_data(s) };
        if let Some(live) = w.lock() {
            assert_eq!(live.data(), ours, "a copy's storage outlived its tensors");
        }
    }
    drop(weak);
    // SAFETY: our last reference.
    unsafe {
        assert_eq!(tsr_storage_weak_use_count(s), 1);
        assert_eq!(tsr_storage_decref(s), TSR_OK);
    }
});
