//! Stress: threads sharing storages, tensors, host objects and one built
//! iterator through the C API. Strong and weak references, locks of weak
//! handles, views and parallel loops run concurrently from several threads;
//! each test checks exact final counts (references, destructions, elements
//! visited and their sum). Each test is bounded to about a second on two
//! cores in a debug build; the operation counts are printed
//! (`cargo test --test stress -- --nocapture`).

use std::ffi::{c_char, c_void};
use std::ptr;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use tessera::ffi::iter::*;
use tessera::ffi::object::*;
use tessera::ffi::refcount_exports::*;
use tessera::ffi::storage::*;
use tessera::ffi::tensor::*;
use tessera::ffi::views::*;
use tessera::ffi::*;

const THREADS: usize = 4;
const CPU: TsrDevice = TsrDevice {
    device_type: TSR_CPU,
    index: -1,
};

/// A raw handle shared between threads (the C API's handles are
/// thread-safe for counts, locks, reads and loops).
struct Shared<T>(*mut T);
impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}
// SAFETY: tessera handles may be used from any thread (docs/ABI.md, the header).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as Send.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The handle (a method, so closures capture the Send wrapper).
    fn get(self) -> *mut T {
        self.0
    }
}

fn ok(status: TsrStatus) {
    assert_eq!(status, TSR_OK, "{}", unsafe {
        // SAFETY: a valid C string.
        std::ffi::CStr::from_ptr(tsr_last_error_message()).to_string_lossy()
    });
}

/// A float tensor of `sizes` holding 0, 1, 2, ... on its own storage.
fn arange(sizes: &[i64]) -> *mut TsrTensor {
    let mut t = ptr::null_mut();
    // SAFETY: a valid array; out writable.
    unsafe {
        ok(tsr_tensor_empty(
            sizes.len() as i64,
            sizes.as_ptr(),
            TSR_FLOAT,
            CPU,
            &mut t,
        ));
        let n = tsr_tensor_numel(t) as usize;
        let data = std::slice::from_raw_parts_mut(tsr_tensor_data(t) as *mut f32, n);
        for (i, x) in data.iter_mut().enumerate() {
            *x = i as f32;
        }
    }
    t
}

/// The float at `index` of a 2-d view (element strides).
///
/// # Safety
/// `t` live, a float tensor with that element.
unsafe fn at(t: *const TsrTensor, i: i64, j: i64) -> f32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        let p = tsr_tensor_data(t) as *const f32;
        *p.offset((i * tsr_tensor_stride(t, 0) + j * tsr_tensor_stride(t, 1)) as isize)
    }
}

#[test]
fn threads_share_tensors_views_and_weak_references() {
    const ROUNDS: usize = 3000;
    let t = arange(&[16, 32]);
    let mut weak = ptr::null_mut();
    // SAFETY: live handles; out-pointers writable.
    let s = unsafe {
        ok(tsr_tensor_downgrade(t, &mut weak));
        tsr_tensor_storage(t)
    };
    assert!(!s.is_null());
    let (t, s, weak) = (Shared(t), Shared(s), Shared(weak));
    let ops = AtomicUsize::new(0);
    let start = Barrier::new(THREADS);
    thread::scope(|scope| {
        for k in 0..THREADS {
            let (ops, start) = (&ops, &start);
            scope.spawn(move || {
                start.wait();
                let (t, s, weak) = (t.get(), s.get(), weak.get());
                let data = tsr_storage_data_of(s);
                for r in 0..ROUNDS {
                    // SAFETY: the handles stay alive for the scope (the main
                    // thread holds them); out-pointers are locals.
                    unsafe {
                        ok(tsr_tensor_incref(t));
                        let mut locked = ptr::null_mut();
                        ok(tsr_weak_tensor_lock(weak, &mut locked));
                        assert_eq!(locked, t, "a live tensor's weak handle locks to it");
                        ok(tsr_storage_incref(s));
                        let mut ws = ptr::null_mut();
                        ok(tsr_storage_downgrade(s, &mut ws));
                        let i = ((k * 7 + r) % 16) as i64;
                        let j = ((k * 3 + r * 5) % 32) as i64;
                        // Views made concurrently share the storage and see
                        // the same elements.
                        let mut tr = ptr::null_mut();
                        ok(tsr_tensor_transpose(t, 0, 1, &mut tr));
                        assert_eq!(at(tr, j, i), (i * 32 + j) as f32);
                        let mut row = ptr::null_mut();
                        ok(tsr_tensor_select(tr, 1, i, &mut row));
                        assert_eq!(tsr_tensor_data(row) as usize, data + 4 * (i as usize * 32));
                        let mut nar = ptr::null_mut();
                        ok(tsr_tensor_narrow(t, 1, j, 32 - j, &mut nar));
                        assert_eq!(at(nar, i, 0), (i * 32 + j) as f32);
                        let shape = [8i64, 64];
                        let mut v = ptr::null_mut();
                        ok(tsr_tensor_view(t, 2, shape.as_ptr(), &mut v));
                        assert_eq!(at(v, i / 2, (i % 2) * 32 + j), (i * 32 + j) as f32);
                        let mut st = ptr::null_mut();
                        ok(tsr_weak_storage_lock(ws, &mut st));
                        assert_eq!(st, s);
                        for h in [tr, row, nar, v, locked] {
                            ok(tsr_tensor_decref(h));
                        }
                        ok(tsr_storage_decref(st));
                        ok(tsr_weak_storage_decref(ws));
                        ok(tsr_storage_decref(s));
                        ok(tsr_tensor_decref(t));
                    }
                    ops.fetch_add(15, Ordering::Relaxed);
                }
            });
        }
    });
    // SAFETY: the handles are ours.
    unsafe {
        assert_eq!(
            tsr_tensor_use_count(t.0),
            1,
            "every strong ref was returned"
        );
        assert_eq!(tsr_tensor_weak_use_count(t.0), 2, "one weak ref + 1");
        assert_eq!(tsr_storage_use_count(s.0), 2, "our handle and the tensor's");
        assert_eq!(
            tsr_storage_weak_use_count(s.0),
            1,
            "every weak storage ref was returned"
        );
        ok(tsr_weak_tensor_decref(weak.0));
        ok(tsr_storage_decref(s.0));
        ok(tsr_tensor_decref(t.0));
    }
    println!(
        "shared tensors: {} C API operations in {THREADS} threads",
        ops.load(Ordering::Relaxed)
    );
}

fn tsr_storage_data_of(s: *mut TsrStorage) -> usize {
    // SAFETY: a live handle.
    unsafe { tsr_storage_data(s) as usize }
}

static RELEASED: AtomicUsize = AtomicUsize::new(0);
static DESTROYED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn on_release(data: *mut c_void) {
    // SAFETY: the object's 8-byte block, holding the round number.
    let round = unsafe { *(data as *const u64) };
    assert_ne!(round, u64::MAX, "release_resources ran twice");
    RELEASED.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn on_destroy(data: *mut c_void) {
    // SAFETY: `data` is the object's 8-byte block from tsr_object_new,
    // still allocated: destroy runs just before it is freed, when the last
    // reference of any kind is gone, so no other thread reads it now.
    // Marked so a second call would be seen.
    unsafe { *(data as *mut u64) = u64::MAX };
    DESTROYED.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn last_reference_races_destroy_exactly_once() {
    // Every round: one object, THREADS strong references dropped at once
    // by THREADS threads while another thread keeps locking a weak handle.
    // The object must be released and destroyed exactly once, after the
    // last reference, whichever thread drops it. The threads live for all
    // rounds; barriers start and end each round.
    const ROUNDS: usize = 4000;
    let vtable = TsrObjectVTable {
        struct_size: std::mem::size_of::<TsrObjectVTable>() as u32,
        release_resources: Some(on_release),
        destroy: Some(on_destroy),
    };
    let (released0, destroyed0) = (
        RELEASED.load(Ordering::SeqCst),
        DESTROYED.load(Ordering::SeqCst),
    );
    let locks_ok = AtomicUsize::new(0);
    let current = std::sync::Mutex::new((Shared(ptr::null_mut()), Shared(ptr::null_mut())));
    let (start, done) = (Barrier::new(THREADS + 2), Barrier::new(THREADS + 2));
    thread::scope(|scope| {
        for _ in 0..THREADS {
            let (current, start, done) = (&current, &start, &done);
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    start.wait();
                    let obj: Shared<TsrObject> = current.lock().unwrap().0;
                    // SAFETY: each thread owns one of the THREADS references.
                    ok(unsafe { tsr_object_decref(obj.get()) });
                    done.wait();
                }
            });
        }
        let (current, start, done, locks_ok) = (&current, &start, &done, &locks_ok);
        scope.spawn(move || {
            for round in 0..ROUNDS {
                start.wait();
                let weak: Shared<TsrWeakObject> = current.lock().unwrap().1;
                loop {
                    let mut l = ptr::null_mut();
                    // SAFETY: the main thread's weak reference keeps the memory.
                    unsafe {
                        ok(tsr_weak_object_lock(weak.get(), &mut l));
                        if l.is_null() {
                            break;
                        }
                        assert_eq!(*(tsr_object_data(l) as *const u64), round as u64);
                        ok(tsr_object_decref(l));
                    }
                    locks_ok.fetch_add(1, Ordering::Relaxed);
                }
                done.wait();
            }
        });
        for round in 0..ROUNDS {
            let mut obj = ptr::null_mut();
            let mut weak = ptr::null_mut();
            // SAFETY: valid table; out-pointers writable.
            unsafe {
                ok(tsr_object_new(8, &vtable, &mut obj));
                *(tsr_object_data(obj) as *mut u64) = round as u64;
                ok(tsr_object_downgrade(obj, &mut weak));
                for _ in 1..THREADS {
                    ok(tsr_object_incref(obj));
                }
            }
            *current.lock().unwrap() = (Shared(obj), Shared(weak));
            start.wait();
            done.wait();
            // SAFETY: our weak reference.
            unsafe {
                assert!(tsr_weak_object_expired(weak));
                assert_eq!(tsr_weak_object_weak_use_count(weak), 1);
                assert_eq!(RELEASED.load(Ordering::SeqCst), released0 + round + 1);
                assert_eq!(DESTROYED.load(Ordering::SeqCst), destroyed0 + round);
                ok(tsr_weak_object_decref(weak));
            }
            assert_eq!(DESTROYED.load(Ordering::SeqCst), destroyed0 + round + 1);
        }
    });
    println!(
        "last-reference races: {ROUNDS} rounds x {THREADS} concurrent decrefs racing {} \
         successful weak locks; {ROUNDS} releases and destructions, each once",
        locks_ok.load(Ordering::Relaxed)
    );
}

/// Adds up float elements of operand 1 (the input) of a unary iterator.
unsafe extern "C" fn sum_loop(
    user: *mut c_void,
    data: *mut *mut c_char,
    strides: *const i64,
    size0: i64,
    size1: i64,
) {
    let acc = user as *const AtomicI64;
    let mut total = 0i64;
    // SAFETY: the TsrLoop2d contract: two operands (output, input).
    unsafe {
        let (input, s0, s1) = (*data.add(1), *strides.add(1), *strides.add(3));
        for j in 0..size1 {
            for i in 0..size0 {
                total += *(input.offset((i * s0 + j * s1) as isize) as *const f32) as i64;
            }
        }
        (*acc).fetch_add(total, Ordering::Relaxed);
    }
}

#[test]
fn one_iterator_looped_from_many_threads() {
    // A built iterator is read-only: for_each (itself parallel) and
    // serial ranges may run from several threads at once.
    const ROUNDS: usize = 60;
    let t = arange(&[64, 96]);
    let mut tr = ptr::null_mut();
    let mut it = ptr::null_mut();
    // SAFETY: live handles; out-pointers writable.
    unsafe {
        ok(tsr_tensor_transpose(t, 0, 1, &mut tr));
        ok(tsr_iter_unary_op(ptr::null_mut(), tr, &mut it));
        assert_eq!(tsr_iter_numel(it), 64 * 96);
    }
    let n: i64 = 64 * 96;
    let expected = n * (n - 1) / 2;
    let it = Shared(it);
    let loops = AtomicUsize::new(0);
    thread::scope(|scope| {
        for k in 0..THREADS {
            let loops = &loops;
            scope.spawn(move || {
                for r in 0..ROUNDS {
                    let acc = AtomicI64::new(0);
                    let user = &acc as *const AtomicI64 as *mut c_void;
                    // SAFETY: the iterator lives until the scope ends.
                    unsafe {
                        if (k + r) % 2 == 0 {
                            ok(tsr_iter_for_each(it.get(), Some(sum_loop), user, 500));
                        } else {
                            // This thread's share of serial ranges.
                            let chunk = n / 7;
                            let mut b = 0;
                            while b < n {
                                ok(tsr_iter_serial_for_each(
                                    it.get(),
                                    Some(sum_loop),
                                    user,
                                    b,
                                    b + chunk,
                                ));
                                b += chunk;
                            }
                        }
                    }
                    assert_eq!(acc.load(Ordering::Relaxed), expected);
                    loops.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    // SAFETY: ours.
    unsafe {
        let out = tsr_iter_output(it.0, 0);
        assert_eq!(tsr_tensor_use_count(out), 2, "the iterator's and ours");
        tsr_iter_free(it.0);
        assert_eq!(tsr_tensor_use_count(out), 1);
        assert_eq!(
            tsr_tensor_use_count(tr),
            1,
            "the iterator released its input"
        );
        ok(tsr_tensor_decref(out));
        ok(tsr_tensor_decref(tr));
        assert_eq!(tsr_tensor_use_count(t), 1);
        ok(tsr_tensor_decref(t));
    }
    let total = loops.load(Ordering::Relaxed);
    assert_eq!(total, THREADS * ROUNDS);
    println!(
        "shared iterator: {total} full loops over {n} elements ({} elements visited) in \
         {THREADS} threads",
        total as i64 * n
    );
}

#[test]
fn storages_shared_and_released_from_many_threads() {
    // Each thread makes views of storages another thread made, and the
    // last holder (any thread) frees the data: every external buffer's
    // deleter runs once.
    static FREED: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn free_buf(ctx: *mut c_void) {
        // SAFETY: made by Box::into_raw below.
        drop(unsafe { Box::from_raw(ctx as *mut [u8; 256]) });
        FREED.fetch_add(1, Ordering::SeqCst);
    }
    const PER_THREAD: usize = 600;
    let queue = Arc::new(std::sync::Mutex::new(Vec::<Shared<TsrStorage>>::new()));
    let made = AtomicUsize::new(0);
    let freed0 = FREED.load(Ordering::SeqCst);
    thread::scope(|scope| {
        for k in 0..THREADS {
            let (queue, made) = (queue.clone(), &made);
            scope.spawn(move || {
                for r in 0..PER_THREAD {
                    let buf = Box::into_raw(Box::new([k as u8; 256]));
                    let mut dp = TsrDataPtr {
                        data: buf as *mut c_void,
                        ctx: buf as *mut c_void,
                        deleter: Some(free_buf),
                        device: CPU,
                    };
                    let mut s = ptr::null_mut();
                    // SAFETY: a valid data pointer we hand over.
                    unsafe { ok(tsr_storage_from_data_ptr(&mut dp, 256, &mut s)) };
                    made.fetch_add(1, Ordering::Relaxed);
                    queue.lock().unwrap().push(Shared(s));
                    // Take someone's storage (maybe our own), view it, drop both.
                    let other = queue.lock().unwrap().pop();
                    if let Some(o) = other {
                        let sizes = [16i64, 4];
                        let mut v = ptr::null_mut();
                        // SAFETY: we own the popped reference.
                        unsafe {
                            ok(tsr_tensor_from_storage(
                                o.0,
                                0,
                                2,
                                sizes.as_ptr(),
                                ptr::null(),
                                TSR_FLOAT,
                                &mut v,
                            ));
                            ok(tsr_storage_decref(o.0));
                            let b = *(tsr_tensor_data(v) as *const u8);
                            assert!((b as usize) < THREADS, "a storage's bytes are its maker's");
                            if r % 2 == 0 {
                                let mut c = ptr::null_mut();
                                ok(tsr_tensor_clone(v, &mut c));
                                ok(tsr_tensor_decref(c));
                            }
                            ok(tsr_tensor_decref(v));
                        }
                    }
                }
            });
        }
    });
    for s in queue.lock().unwrap().drain(..) {
        // SAFETY: the remaining references are ours.
        unsafe { ok(tsr_storage_decref(s.0)) };
    }
    let made = made.load(Ordering::Relaxed);
    assert_eq!(made, THREADS * PER_THREAD);
    assert_eq!(
        FREED.load(Ordering::SeqCst) - freed0,
        made,
        "every buffer freed exactly once"
    );
    println!(
        "shared storages: {made} external storages made, viewed and freed across {THREADS} threads"
    );
}
