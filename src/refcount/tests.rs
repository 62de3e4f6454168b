use super::*;
use std::sync::atomic::{AtomicUsize as StdAtomic, Ordering as StdOrdering};
use std::sync::Arc as StdArc;

/// Records what happened to it: release_resources calls and drops.
struct Probe {
    released: StdArc<StdAtomic>,
    dropped: StdArc<StdAtomic>,
}

impl RcTarget for Probe {
    fn release_resources(&mut self) {
        self.released.fetch_add(1, StdOrdering::SeqCst);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, StdOrdering::SeqCst);
    }
}

fn probe() -> (Ref<Probe>, StdArc<StdAtomic>, StdArc<StdAtomic>) {
    let released = StdArc::new(StdAtomic::new(0));
    let dropped = StdArc::new(StdAtomic::new(0));
    let r = Ref::new(Probe {
        released: released.clone(),
        dropped: dropped.clone(),
    });
    (r, released, dropped)
}

#[test]
fn new_object_counts() {
    let (r, _, _) = probe();
    assert_eq!(Ref::use_count(&r), 1);
    assert_eq!(Ref::weak_use_count(&r), 1);
    assert!(Ref::is_unique(&r));
}

#[test]
fn copy_move_reset_counts() {
    let (a, _, dropped) = probe();
    let b = a.clone();
    assert_eq!(Ref::use_count(&a), 2);
    assert_eq!(Ref::weak_use_count(&a), 1);
    let c = b; // a move does not change counts
    assert_eq!(Ref::use_count(&c), 2);
    drop(c); // reset
    assert_eq!(Ref::use_count(&a), 1);
    assert_eq!(dropped.load(StdOrdering::SeqCst), 0);
    drop(a);
    assert_eq!(dropped.load(StdOrdering::SeqCst), 1);
}

#[test]
fn downgrade_and_lock_counts() {
    let (a, _, _) = probe();
    let w = Ref::downgrade(&a);
    assert_eq!(Ref::use_count(&a), 1);
    assert_eq!(Ref::weak_use_count(&a), 2);
    assert_eq!(w.use_count(), 1);
    assert!(!w.expired());
    let b = w.lock().expect("alive");
    assert_eq!(Ref::use_count(&a), 2);
    assert!(Ref::ptr_eq(&a, &b));
    let w2 = w.clone();
    assert_eq!(w2.weak_use_count(), 3);
    drop(w2);
    assert_eq!(w.weak_use_count(), 2);
}

#[test]
fn lock_on_expired_is_none_and_release_runs_once() {
    let (a, released, dropped) = probe();
    let w = Ref::downgrade(&a);
    drop(a);
    assert!(w.expired());
    assert_eq!(w.use_count(), 0);
    assert!(w.lock().is_none());
    // A refused lock leaves the count at 0 (no Ref built and dropped).
    assert!(w.expired());
    assert_eq!(w.use_count(), 0);
    assert_eq!(released.load(StdOrdering::SeqCst), 1);
    // memory stays until the last weak reference goes
    assert_eq!(dropped.load(StdOrdering::SeqCst), 0);
    assert_eq!(w.weak_use_count(), 1);
    drop(w);
    assert_eq!(dropped.load(StdOrdering::SeqCst), 1);
    assert_eq!(released.load(StdOrdering::SeqCst), 1);
}

#[test]
fn no_release_resources_without_weak_refs() {
    let (a, released, dropped) = probe();
    let b = a.clone();
    drop(a);
    drop(b);
    assert_eq!(released.load(StdOrdering::SeqCst), 0);
    assert_eq!(dropped.load(StdOrdering::SeqCst), 1);
}

#[test]
fn weak_dropped_first_then_strong_destroys_directly() {
    let (a, released, dropped) = probe();
    let w = Ref::downgrade(&a);
    drop(w);
    drop(a);
    assert_eq!(released.load(StdOrdering::SeqCst), 0);
    assert_eq!(dropped.load(StdOrdering::SeqCst), 1);
}

struct SelfRefReleasing {
    me: Option<WeakRef<SelfRefReleasing>>,
    dropped: StdArc<StdAtomic>,
}
impl RcTarget for SelfRefReleasing {
    fn release_resources(&mut self) {
        self.me = None; // dropping our own weak ref frees the block afterwards
    }
}
impl Drop for SelfRefReleasing {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, StdOrdering::SeqCst);
    }
}

#[test]
fn self_weak_released_in_release_resources() {
    let dropped = StdArc::new(StdAtomic::new(0));
    let a = Ref::new(SelfRefReleasing {
        me: None,
        dropped: dropped.clone(),
    });
    let w = Ref::downgrade(&a);
    // Hand the weak ref to the object itself through raw access: emulate a
    // host that stores a weak handle in its own object.
    let raw = Ref::into_raw(a);
    // SAFETY: we own the only strong ref and nothing else reads the value.
    unsafe { (*(raw as *mut RcBox<SelfRefReleasing>)).value.me = Some(w) };
    // SAFETY: raw came from into_raw; we own that strong reference.
    unsafe { decref_raw(raw).unwrap() };
    assert_eq!(dropped.load(StdOrdering::SeqCst), 1);
}

#[test]
fn get_mut_only_when_unique() {
    let (mut a, _, _) = probe();
    assert!(Ref::get_mut(&mut a).is_some());
    let w = Ref::downgrade(&a);
    assert!(Ref::get_mut(&mut a).is_none());
    drop(w);
    let b = a.clone();
    assert!(Ref::get_mut(&mut a).is_none());
    drop(b);
    assert!(Ref::get_mut(&mut a).is_some());
}

#[test]
fn raw_api_detects_dead_objects() {
    let (a, released, dropped) = probe();
    let w = Ref::downgrade(&a);
    let raw = Ref::into_raw(a);
    // SAFETY: raw is alive (we own one strong and one weak ref).
    unsafe {
        incref_raw(raw).unwrap();
        assert_eq!(counts_raw(raw), (2, 2));
        decref_raw(raw).unwrap();
        decref_raw(raw).unwrap();
        assert_eq!(released.load(StdOrdering::SeqCst), 1);
        // the weak ref keeps the memory: misuse is detectable
        let e = decref_raw(raw).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::DeadObject);
        let e = incref_raw(raw).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::DeadObject);
        assert!(downgrade_raw(raw).is_err());
        assert_eq!(counts_raw(raw), (0, 1));
        assert_eq!(lock_raw(raw), Ok(false));
    }
    drop(w);
    assert_eq!(dropped.load(StdOrdering::SeqCst), 1);
}

#[test]
fn raw_lock_and_weak_counts() {
    let (a, _, dropped) = probe();
    let raw = Ref::as_ptr(&a);
    // SAFETY: `a` keeps the block alive throughout.
    unsafe {
        downgrade_raw(raw).unwrap();
        assert_eq!(counts_raw(raw), (1, 2));
        assert_eq!(lock_raw(raw), Ok(true));
        assert_eq!(counts_raw(raw), (2, 2));
        decref_raw(raw).unwrap();
        weak_incref_raw(raw).unwrap();
        assert_eq!(counts_raw(raw), (1, 3));
        weak_decref_raw(raw).unwrap();
        weak_decref_raw(raw).unwrap();
        assert_eq!(counts_raw(raw), (1, 1));
    }
    drop(a);
    assert_eq!(dropped.load(StdOrdering::SeqCst), 1);
}

#[test]
fn concurrent_stress_exact_counts() {
    const THREADS: usize = 4;
    const OPS: usize = 250_000;
    let (a, released, dropped) = probe();
    let w = Ref::downgrade(&a);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let a = a.clone();
            let w = w.clone();
            s.spawn(move || {
                let mut held = Vec::new();
                for i in 0..OPS {
                    match (i + t) % 4 {
                        0 => held.push(a.clone()),
                        1 => held.push(w.lock().expect("a keeps it alive")),
                        2 => drop(w.clone()),
                        _ => {
                            held.pop();
                        }
                    }
                    if held.len() > 64 {
                        held.clear();
                    }
                }
            });
        }
    });
    assert_eq!(Ref::use_count(&a), 1);
    assert_eq!(Ref::weak_use_count(&a), 2);
    drop(a);
    assert!(w.lock().is_none());
    assert_eq!(released.load(StdOrdering::SeqCst), 1);
    drop(w);
    assert_eq!(dropped.load(StdOrdering::SeqCst), 1);
}

#[test]
fn concurrent_last_release_destroys_once() {
    // Many rounds where the last strong and the last weak reference are
    // dropped on different threads at the same time.
    for _ in 0..2000 {
        let (a, released, dropped) = probe();
        let w = Ref::downgrade(&a);
        let b = a.clone();
        std::thread::scope(|s| {
            s.spawn(move || drop(a));
            s.spawn(move || drop(b));
            s.spawn(move || {
                let _ = w.lock();
                drop(w)
            });
        });
        assert_eq!(dropped.load(StdOrdering::SeqCst), 1);
        assert!(released.load(StdOrdering::SeqCst) <= 1);
    }
}
