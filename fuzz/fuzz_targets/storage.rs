//! Fuzzes storages through the C API: creation (registry, a counting C
//! plugin, external memory), resize (including allocation failures),
//! share_external, clone, copy, fill, extra strong and weak references
//! and tensors holding storages, read-only storages (every write refused),
//! set_data_ptr (the old pointer handed back or freed exactly once) and
//! storages mapped from a temporary file (each TsrFileMode), in arbitrary
//! order. A model of every storage's bytes is checked after each step; at
//! the end every plugin allocation is freed, every external buffer's
//! deleter ran exactly once, and the plugin's release ran exactly once. Shared memory (issue 17):
//! share_memory in place and a share_fd / from_fd round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;
use tessera::ffi::allocator::*;
use tessera::ffi::allocator_plugin::*;
use tessera::ffi::data_ptr::tsr_data_ptr_free;
use tessera::ffi::storage::*;
use tessera::ffi::storage_data::*;
use tessera::ffi::storage_file::*;
use tessera::ffi::storage_shm::*;
use tessera::ffi::tensor::*;
use tessera::ffi::*;
use tessera_fuzz::{check_refusal, Input};

const CPU: TsrDevice = TsrDevice {
    device_type: TSR_CPU,
    index: -1,
};

/// The counting plugin's state and the external buffers' ledger.
struct Ledger {
    live: BTreeMap<usize, usize>,
    fail_next: u32,
    refused: u32,
    released: u32,
    /// External buffers by id: the bytes (None once deleted) and how many
    /// times the deleter ran.
    external: Vec<(Option<Vec<u8>>, u32)>,
}

static LEDGER: Mutex<Ledger> = Mutex::new(Ledger {
    live: BTreeMap::new(),
    fail_next: 0,
    refused: 0,
    released: 0,
    external: Vec::new(),
});

fn ledger() -> std::sync::MutexGuard<'static, Ledger> {
    LEDGER.lock().unwrap_or_else(|e| e.into_inner())
}

unsafe extern "C" fn plugin_free(ctx: *mut c_void) {
    let size = ledger()
        .live
        .remove(&(ctx as usize))
        .expect("a live plugin block");
    // SAFETY: allocated below with this layout.
    unsafe { std::alloc::dealloc(ctx as *mut u8, Layout::from_size_align(size, 64).unwrap()) };
}

unsafe extern "C" fn plugin_allocate(
    _self: *mut c_void,
    nbytes: usize,
    device: TsrDevice,
    out: *mut TsrDataPtr,
) -> TsrStatus {
    {
        let mut l = ledger();
        if l.fail_next > 0 {
            l.fail_next -= 1;
            l.refused += 1;
            drop(l);
            // SAFETY: a static message.
            return unsafe {
                tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, c"fuzz plugin: no".as_ptr())
            };
        }
    }
    let size = nbytes.max(1);
    // SAFETY: a non-zero size.
    let p = unsafe { std::alloc::alloc(Layout::from_size_align(size, 64).unwrap()) };
    assert!(!p.is_null());
    ledger().live.insert(p as usize, size);
    // SAFETY: out is tessera's writable TsrDataPtr.
    unsafe {
        *out = TsrDataPtr {
            data: p as *mut c_void,
            ctx: p as *mut c_void,
            deleter: Some(plugin_free),
            device,
        }
    };
    TSR_OK
}

unsafe extern "C" fn plugin_release(_self: *mut c_void) {
    ledger().released += 1;
}

unsafe extern "C" fn external_delete(ctx: *mut c_void) {
    let id = ctx as usize - 1;
    let mut l = ledger();
    let entry = &mut l.external[id];
    assert_eq!(entry.1, 0, "external buffer {id}: deleter ran twice");
    entry.1 += 1;
    entry.0 = None;
}

/// A new external buffer of `n` bytes holding `byte`, as a TsrDataPtr
/// whose deleter records its run.
fn external(n: usize, byte: u8) -> (TsrDataPtr, usize) {
    let mut l = ledger();
    let id = l.external.len();
    let mut buf = vec![byte; n];
    let data = if n == 0 {
        ptr::null_mut()
    } else {
        buf.as_mut_ptr() as *mut c_void
    };
    l.external.push((Some(buf), 0));
    let dp = TsrDataPtr {
        data,
        ctx: (id + 1) as *mut c_void,
        deleter: Some(external_delete),
        device: CPU,
    };
    (dp, id)
}

fn deletions(id: usize) -> u32 {
    ledger().external[id].1
}

/// One storage under test and what we know of its bytes.
struct Entry {
    h: *mut TsrStorage,
    model: Vec<Option<u8>>,
    extra: Vec<*mut TsrStorage>,
    tensors: Vec<*mut TsrTensor>,
    /// The external buffer it currently holds, if any.
    ext: Option<usize>,
    read_only: bool,
}

fn check(e: &Entry) {
    // SAFETY: e.h is a live handle.
    unsafe {
        assert_eq!(tsr_storage_nbytes(e.h), e.model.len());
        assert_eq!(tsr_storage_is_read_only(e.h), e.read_only);
        let data = tsr_storage_data(e.h) as *const u8;
        if e.model.is_empty() {
            return;
        }
        assert!(
            !data.is_null(),
            "a storage of {} bytes has no data",
            e.model.len()
        );
        let bytes = std::slice::from_raw_parts(data, e.model.len());
        for (i, (&b, m)) in bytes.iter().zip(&e.model).enumerate() {
            if let Some(m) = m {
                assert_eq!(b, *m, "byte {i} of a storage");
            }
        }
        let strong = 1 + e.extra.len() + e.tensors.len();
        assert_eq!(tsr_storage_use_count(e.h), strong);
    }
}

fn push_new(input: &mut Input, plugin: *mut TsrAllocator, pool: &mut Vec<Entry>) {
    let n = input.range(0, 300) as usize;
    let resizable = input.bool();
    let mut h = ptr::dangling_mut();
    let mut ext = None;
    // SAFETY: live handles; writable out-pointers.
    let status = unsafe {
        match input.range(0, 2) {
            0 => tsr_storage_new(n, CPU, resizable, &mut h),
            1 => {
                let fail = input.range(0, 3) == 0;
                ledger().fail_next = fail as u32;
                let s = tsr_storage_new_with_allocator(n, plugin, resizable, &mut h);
                let refused = std::mem::take(&mut ledger().fail_next) == 0 && fail;
                assert_eq!(s == TSR_ERR_OUT_OF_MEMORY, refused, "status {s}");
                s
            }
            _ => {
                let (mut dp, id) = external(n, 0x5a);
                let s = tsr_storage_from_data_ptr(&mut dp, n, &mut h);
                assert_eq!(s, TSR_OK);
                assert!(
                    dp.ctx.is_null() && dp.deleter.is_none(),
                    "a consumed pointer"
                );
                ext = Some(id);
                s
            }
        }
    };
    if status != TSR_OK {
        check_refusal("tsr_storage_new_with_allocator", status);
        assert_eq!(h, ptr::dangling_mut());
        return;
    }
    if n > 0 {
        // SAFETY: a new storage of n bytes.
        unsafe { std::ptr::write_bytes(tsr_storage_data(h) as *mut u8, 0x11, n) };
    }
    pool.push(Entry {
        h,
        model: vec![Some(0x11); n],
        extra: Vec::new(),
        tensors: Vec::new(),
        ext,
        read_only: false,
    });
}

/// A storage mapped from a new temporary file of random bytes, in a random
/// mode; the file is removed at once (the mapping keeps its pages).
fn push_file(input: &mut Input, pool: &mut Vec<Entry>) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = input.range(0, 300) as usize;
    let bytes: Vec<u8> = (0..n).map(|_| input.u8()).collect();
    let path = std::env::temp_dir().join(format!(
        "tessera-fuzz-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&path, &bytes).unwrap();
    let mode = input.range(0, 2) as TsrFileMode;
    // 0 or the file's size, sometimes one byte too many
    let nbytes = match input.range(0, 2) {
        0 => 0,
        1 => n,
        _ => n + 1,
    };
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut h = ptr::dangling_mut();
    // SAFETY: a C string; out writable.
    let s = unsafe { tsr_storage_from_file(cpath.as_ptr(), mode, nbytes, &mut h) };
    std::fs::remove_file(&path).unwrap();
    if nbytes > n && mode != TSR_FILE_SHARED {
        assert_eq!(s, TSR_ERR_INVALID_ARGUMENT);
        check_refusal("tsr_storage_from_file", s);
        assert_eq!(h, ptr::dangling_mut());
        return;
    }
    assert_eq!(s, TSR_OK);
    let mut model: Vec<Option<u8>> = bytes.into_iter().map(Some).collect();
    if nbytes > n {
        model.push(Some(0)); // SHARED extended the file with a zero
    }
    // SAFETY: h is a new storage.
    unsafe {
        assert_eq!(tsr_storage_filename(h).is_null(), mode != TSR_FILE_SHARED);
        assert_eq!(tsr_storage_flush(h), TSR_OK);
        assert!(!tsr_storage_resizable(h));
    }
    pool.push(Entry {
        h,
        model,
        extra: Vec::new(),
        tensors: Vec::new(),
        ext: None,
        read_only: mode == TSR_FILE_READ_ONLY,
    });
}

fn step(input: &mut Input, plugin: *mut TsrAllocator, pool: &mut Vec<Entry>) {
    if pool.is_empty() || input.range(0, 7) == 0 {
        if input.range(0, 3) == 0 {
            push_file(input, pool);
        } else {
            push_new(input, plugin, pool);
        }
        return;
    }
    let k = input.u8() as usize % pool.len();
    // ---- shared memory (issue 17, st-shm): its own draw, so the other
    // operations keep their numbers ----
    if input.range(0, 6) == 0 {
        shm_step(input, &mut pool[k]);
        check(&pool[k]);
        return;
    }
    // ---- end of shared memory ----
    let op = input.range(0, 11);
    // SAFETY (whole block): every handle is live and owned by the pool.
    unsafe {
        match op {
            0 => {
                // resize, sometimes with the plugin refusing
                let e = &mut pool[k];
                let n = input.range(0, 400) as usize;
                let fail = input.range(0, 3) == 0;
                ledger().fail_next = fail as u32;
                let resizable = tsr_storage_resizable(e.h);
                let s = tsr_storage_resize(e.h, n);
                let refused = std::mem::take(&mut ledger().fail_next) == 0 && fail;
                if e.read_only {
                    assert_eq!(s, TSR_ERR_READ_ONLY);
                } else if !resizable {
                    assert_eq!(s, TSR_ERR_NOT_RESIZABLE);
                } else if refused {
                    assert_eq!(s, TSR_ERR_OUT_OF_MEMORY);
                } else {
                    assert_eq!(s, TSR_OK);
                }
                if s == TSR_OK {
                    e.model.resize(n, None);
                    // a resizable storage given an external pointer by
                    // set_data_ptr frees it on resize
                    if let Some(id) = e.ext.take() {
                        assert_eq!(deletions(id), 1, "the resized-away buffer was not freed");
                    }
                } else {
                    check_refusal("tsr_storage_resize", s);
                }
            }
            1 => {
                // share_external: only while uniquely owned
                let e = &mut pool[k];
                let n = input.range(0, 300) as usize;
                let byte = input.u8();
                let (mut dp, id) = external(n, byte);
                let unique = e.extra.is_empty() && e.tensors.is_empty();
                let s = tsr_storage_share_external(e.h, &mut dp, n);
                if e.read_only {
                    assert_eq!(s, TSR_ERR_READ_ONLY);
                    check_refusal("tsr_storage_share_external", s);
                    tsr_data_ptr_free(&mut dp);
                    assert_eq!(deletions(id), 1);
                } else if unique {
                    assert_eq!(s, TSR_OK);
                    assert!(
                        dp.ctx.is_null() && dp.deleter.is_none(),
                        "a consumed pointer"
                    );
                    if let Some(old) = e.ext.replace(id) {
                        assert_eq!(deletions(old), 1, "the replaced buffer was not freed");
                    }
                    e.model = vec![Some(byte); n];
                    assert!(!tsr_storage_resizable(e.h));
                } else {
                    assert_eq!(s, TSR_ERR_INVALID_ARGUMENT);
                    check_refusal("tsr_storage_share_external", s);
                    assert_eq!(deletions(id), 0, "a refused pointer was freed");
                    tsr_data_ptr_free(&mut dp);
                    assert_eq!(deletions(id), 1);
                }
            }
            2 => {
                let mut c = ptr::dangling_mut();
                let fail = input.range(0, 3) == 0;
                ledger().fail_next = fail as u32;
                let s = tsr_storage_clone(pool[k].h, &mut c);
                ledger().fail_next = 0;
                if s != TSR_OK {
                    check_refusal("tsr_storage_clone", s);
                    assert_eq!(c, ptr::dangling_mut());
                    return;
                }
                let model = pool[k].model.clone();
                pool.push(Entry {
                    h: c,
                    model,
                    extra: Vec::new(),
                    tensors: Vec::new(),
                    ext: None,
                    read_only: false,
                });
            }
            3 => {
                let j = input.u8() as usize % pool.len();
                let s = tsr_storage_copy(pool[k].h, pool[j].h);
                if pool[k].read_only {
                    assert_eq!(s, TSR_ERR_READ_ONLY);
                    check_refusal("tsr_storage_copy", s);
                } else if pool[k].model.len() == pool[j].model.len() {
                    assert_eq!(s, TSR_OK);
                    pool[k].model = pool[j].model.clone();
                } else {
                    assert_eq!(s, TSR_ERR_SHAPE);
                    check_refusal("tsr_storage_copy", s);
                }
            }
            4 => {
                let byte = input.u8();
                let s = tsr_storage_fill(pool[k].h, byte);
                if pool[k].read_only {
                    assert_eq!(s, TSR_ERR_READ_ONLY);
                    check_refusal("tsr_storage_fill", s);
                } else {
                    assert_eq!(s, TSR_OK);
                    pool[k].model.iter_mut().for_each(|m| *m = Some(byte));
                }
            }
            5 => {
                let e = &mut pool[k];
                if input.bool() || e.extra.is_empty() {
                    assert_eq!(tsr_storage_incref(e.h), TSR_OK);
                    e.extra.push(e.h);
                } else {
                    assert_eq!(tsr_storage_decref(e.extra.pop().unwrap()), TSR_OK);
                }
            }
            6 => {
                // a tensor over the first bytes holds a reference
                let e = &mut pool[k];
                let n = [e.model.len() as i64];
                let mut t = ptr::dangling_mut();
                let s =
                    tsr_tensor_from_storage(e.h, 0, 1, n.as_ptr(), ptr::null(), TSR_BYTE, &mut t);
                assert_eq!(s, TSR_OK);
                e.tensors.push(t);
            }
            7 => {
                let e = &mut pool[k];
                if let Some(t) = e.tensors.pop() {
                    assert_eq!(tsr_tensor_decref(t), TSR_OK);
                }
            }
            9 => {
                // one way: every later write is refused
                assert_eq!(tsr_storage_make_read_only(pool[k].h), TSR_OK);
                pool[k].read_only = true;
            }
            10 => {
                // set_data_ptr: the old pointer handed back or freed, once
                let e = &mut pool[k];
                let n = input.range(0, 300) as usize;
                let byte = input.u8();
                let (mut dp, id) = external(n, byte);
                let hand_back = input.bool();
                let mut old = TsrDataPtr {
                    data: ptr::null_mut(),
                    ctx: ptr::null_mut(),
                    deleter: None,
                    device: CPU,
                };
                let old_out = if hand_back {
                    &mut old as *mut TsrDataPtr
                } else {
                    ptr::null_mut()
                };
                let s = tsr_storage_set_data_ptr(e.h, &mut dp, n, old_out);
                if e.read_only {
                    assert_eq!(s, TSR_ERR_READ_ONLY);
                    check_refusal("tsr_storage_set_data_ptr", s);
                    assert!(old.ctx.is_null());
                    tsr_data_ptr_free(&mut dp);
                    assert_eq!(deletions(id), 1);
                } else {
                    assert_eq!(s, TSR_OK);
                    assert!(
                        dp.ctx.is_null() && dp.deleter.is_none(),
                        "a consumed pointer"
                    );
                    let previous = e.ext.replace(id);
                    if let Some(prev) = previous {
                        assert_eq!(deletions(prev), u32::from(!hand_back));
                    }
                    tsr_data_ptr_free(&mut old);
                    if let Some(prev) = previous {
                        assert_eq!(deletions(prev), 1, "the old pointer was not freed once");
                    }
                    e.model = vec![Some(byte); n];
                }
            }
            _ => {
                // weak reference: locks while alive, expires after the last
                // strong reference; the data goes with the last strong one
                let e = pool.swap_remove(k);
                let mut w = ptr::null_mut();
                assert_eq!(tsr_storage_downgrade(e.h, &mut w), TSR_OK);
                let mut l = ptr::null_mut();
                assert_eq!(tsr_weak_storage_lock(w, &mut l), TSR_OK);
                assert_eq!(l, e.h);
                assert_eq!(tsr_storage_decref(l), TSR_OK);
                for h in e.extra.iter().copied().chain([e.h]) {
                    assert!(!tsr_weak_storage_expired(w));
                    assert_eq!(tsr_storage_decref(h), TSR_OK);
                }
                for &t in &e.tensors {
                    assert!(!tsr_weak_storage_expired(w));
                    if let Some(id) = e.ext {
                        assert_eq!(deletions(id), 0, "freed while a tensor holds it");
                    }
                    assert_eq!(tsr_tensor_decref(t), TSR_OK);
                }
                assert!(tsr_weak_storage_expired(w));
                assert_eq!(tsr_weak_storage_lock(w, &mut l), TSR_OK);
                assert!(l.is_null());
                if let Some(id) = e.ext {
                    assert_eq!(deletions(id), 1, "the last reference did not free");
                }
                assert_eq!(tsr_weak_storage_decref(w), TSR_OK);
            }
        }
    }
    if let Some(e) = pool.get(k) {
        check(e);
    }
}

// ---- shared memory (issue 17, st-shm) ----

/// share_memory (in place: the bytes stay, the storage becomes shared and
/// non-resizable, an external buffer it held is freed) or a descriptor
/// round trip (a second storage over the same segment sees and makes
/// writes; a storage not in shared memory is refused).
fn shm_step(input: &mut Input, e: &mut Entry) {
    // SAFETY (whole block): e.h is a live handle owned by the pool.
    unsafe {
        if input.bool() {
            let shared = tsr_storage_is_shared(e.h);
            let before = tsr_storage_data(e.h);
            let s = tsr_storage_share_memory(e.h);
            if e.read_only && !shared {
                // Other processes would get writable memory: refused.
                assert_eq!(s, TSR_ERR_READ_ONLY);
                check_refusal("tsr_storage_share_memory", s);
                assert_eq!(tsr_storage_data(e.h), before);
                return;
            }
            assert_eq!(s, TSR_OK);
            assert!(tsr_storage_is_shared(e.h) && !tsr_storage_resizable(e.h));
            if shared {
                assert_eq!(
                    tsr_storage_data(e.h),
                    before,
                    "a shared storage moved again"
                );
            } else if let Some(id) = e.ext.take() {
                assert_eq!(deletions(id), 1, "the moved-out buffer was not freed");
            }
            return;
        }
        let mut fd = -7;
        let s = tsr_storage_share_fd(e.h, &mut fd);
        // Refused for read-only storages (a descriptor would be a writable
        // alias: issue 36) and for storages not in a shared-memory segment
        // (SHARED file storages are shared but have no segment).
        if e.read_only {
            assert_eq!(s, TSR_ERR_READ_ONLY);
        }
        if s != TSR_OK {
            if !e.read_only {
                assert_eq!(s, TSR_ERR_INVALID_ARGUMENT);
            }
            check_refusal("tsr_storage_share_fd", s);
            assert_eq!(fd, -7);
            return;
        }
        assert_eq!(s, TSR_OK);
        let mut other = ptr::null_mut();
        assert_eq!(tsr_storage_from_fd(fd, 0, &mut other), TSR_OK);
        assert_eq!(libc_close(fd), 0);
        let n = e.model.len();
        assert_eq!(tsr_storage_nbytes(other), n);
        if n > 0 {
            let i = input.range(0, n as i64 - 1) as usize;
            let byte = input.u8();
            *(tsr_storage_data(other) as *mut u8).add(i) = byte;
            e.model[i] = Some(byte);
        }
        assert_eq!(tsr_storage_decref(other), TSR_OK);
    }
}

extern "C" {
    #[link_name = "close"]
    fn libc_close(fd: std::ffi::c_int) -> std::ffi::c_int;
}

// ---- end of shared memory ----

fuzz_target!(|data: &[u8]| {
    {
        let mut l = ledger();
        l.external.clear();
        l.released = 0;
        assert!(l.live.is_empty());
    }
    let vtable = TsrAllocatorVTable {
        struct_size: std::mem::size_of::<TsrAllocatorVTable>() as u32,
        name: c"fuzz".as_ptr(),
        allocate: Some(plugin_allocate),
        raw_deleter: None,
        copy_data: None,
        release: Some(plugin_release),
    };
    let mut plugin = ptr::null_mut();
    // SAFETY: a valid table; out writable.
    assert_eq!(
        unsafe { tsr_allocator_new(&vtable, ptr::null_mut(), &mut plugin) },
        TSR_OK
    );

    let mut input = Input::new(data);
    let mut pool = Vec::new();
    for _ in 0..input.range(1, 24) {
        if input.is_empty() {
            break;
        }
        step(&mut input, plugin, &mut pool);
    }
    for e in pool {
        // SAFETY: every reference is ours.
        unsafe {
            for h in e.extra.iter().copied().chain([e.h]) {
                assert_eq!(tsr_storage_decref(h), TSR_OK);
            }
            for t in e.tensors {
                assert_eq!(tsr_tensor_decref(t), TSR_OK);
            }
        }
    }
    {
        let l = ledger();
        assert!(l.live.is_empty(), "{} plugin blocks leaked", l.live.len());
        for (id, (buf, n)) in l.external.iter().enumerate() {
            // A buffer that never reached a storage was freed above; every
            // other one by its storage.
            assert_eq!(*n, 1, "external buffer {id}: deleter ran {n} times");
            assert!(buf.is_none());
        }
        assert_eq!(l.released, 0, "released while a handle is held");
    }
    // SAFETY: our handle.
    assert_eq!(unsafe { tsr_allocator_decref(plugin) }, TSR_OK);
    assert_eq!(
        ledger().released,
        1,
        "the plugin's release ran {} times",
        ledger().released
    );
});
