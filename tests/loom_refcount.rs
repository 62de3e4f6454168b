//! Model-checks the refcount transitions with loom: every interleaving of
//! a few threads doing clone/drop/downgrade/lock on one object. Run with
//! `RUSTFLAGS="--cfg loom" cargo test --test loom_refcount` (CI does, in
//! the dev profile: the models take 0.03 s; `--release` only makes the
//! build longer).
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use tessera::refcount::{RcTarget, Ref};

/// Counts release_resources calls and drops.
struct Probe {
    released: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl RcTarget for Probe {
    fn release_resources(&mut self) {
        self.released.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

fn probe() -> (Ref<Probe>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let released = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let r = Ref::new(Probe {
        released: released.clone(),
        dropped: dropped.clone(),
    });
    (r, released, dropped)
}

#[test]
fn concurrent_strong_drops_destroy_once() {
    loom::model(|| {
        let (a, released, dropped) = probe();
        let b = a.clone();
        let t = thread::spawn(move || drop(b));
        drop(a);
        t.join().unwrap();
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert_eq!(
            released.load(Ordering::SeqCst),
            0,
            "no weak refs: no release_resources"
        );
    });
}

#[test]
fn lock_races_the_last_strong_drop() {
    loom::model(|| {
        let (a, released, dropped) = probe();
        let w = Ref::downgrade(&a);
        let t = thread::spawn(move || {
            let locked = w.lock();
            if let Some(r) = &locked {
                // a successful lock keeps the object alive
                assert_eq!(r.dropped.load(Ordering::SeqCst), 0);
            }
            drop(locked);
            drop(w);
        });
        drop(a);
        t.join().unwrap();
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert!(released.load(Ordering::SeqCst) <= 1);
    });
}

#[test]
fn weak_and_strong_released_on_two_threads() {
    loom::model(|| {
        let (a, released, dropped) = probe();
        let w = Ref::downgrade(&a);
        let t = thread::spawn(move || drop(w));
        drop(a);
        t.join().unwrap();
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert!(released.load(Ordering::SeqCst) <= 1);
    });
}

#[test]
fn lock_after_expiry_fails() {
    loom::model(|| {
        let (a, released, _dropped) = probe();
        let w = Ref::downgrade(&a);
        let w2 = w.clone();
        let t = thread::spawn(move || drop(a));
        t.join().unwrap();
        assert!(w.lock().is_none());
        assert!(w2.expired());
        assert_eq!(released.load(Ordering::SeqCst), 1);
    });
}
