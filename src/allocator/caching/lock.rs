//! The lock of a caching allocator: a spin lock that yields to the
//! scheduler when it cannot get in quickly.
//!
//! Why not `std::sync::Mutex`: its unlock is a read-modify-write (it must
//! see whether to wake a waiter), which costs as much again as the lock
//! itself on the allocation fast path; and the caching allocator frees its
//! own state from inside a deleter right after unlocking (see
//! `Shared::destroy` in mod.rs), which is only sound if unlocking touches
//! the lock with one final store and never again. Both hold here. Spinning
//! is acceptable because no critical section calls out of tessera (the
//! inner allocator, the memory reporter and plugin callbacks all run
//! outside it) and each is a few dozen instructions; a waiter that still
//! cannot get in after a short spin yields its time slice, so a preempted
//! holder gets the CPU back.
//!
//! A panic while the lock is held poisons it: the pools may be half
//! updated, so later users get an error instead of corrupting memory.

use crate::error::Result;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// Spins this many times before yielding.
const SPINS_BEFORE_YIELD: u32 = 64;

pub(super) struct SpinLock<T> {
    /// In a cache line of its own: a line shared with data another core
    /// keeps reading (a neighbouring heap object) turns every lock and
    /// unlock into a cache-line transfer.
    locked: LockWord,
    poisoned: AtomicBool,
    value: UnsafeCell<T>,
}

/// The lock flag, alone in its cache line.
#[repr(align(64))]
struct LockWord(AtomicBool);

impl std::ops::Deref for LockWord {
    type Target = AtomicBool;
    fn deref(&self) -> &AtomicBool {
        &self.0
    }
}

// SAFETY: the lock hands out access to `value` to one thread at a time, as
// a Mutex does; moving the lock moves the value, hence T: Send.
unsafe impl<T: Send> Send for SpinLock<T> {}
// SAFETY: a &SpinLock reaches `value` only through a SpinGuard, made by
// `lock` after the acquire swap of `locked` to true and dropped with the
// release store of false, so two threads never hold a reference to the
// value at once and T: Send suffices, as for Mutex. (The guard, which
// hands out &T, is Sync only when T: Sync, as MutexGuard: see its marker.)
unsafe impl<T: Send> Sync for SpinLock<T> {}

pub(super) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Makes the guard Sync (and Send) only when T is Sync: a shared guard
    /// gives every thread holding it a &T.
    _shares: PhantomData<&'a T>,
}

impl<T> SpinLock<T> {
    pub(super) fn new(value: T) -> Self {
        SpinLock {
            locked: LockWord(AtomicBool::new(false)),
            poisoned: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock; fails only if an earlier holder panicked.
    #[inline]
    pub(super) fn lock(&self) -> Result<SpinGuard<'_, T>> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        let guard = SpinGuard {
            lock: self,
            _shares: PhantomData,
        };
        if self.poisoned.load(Ordering::Relaxed) {
            drop(guard);
            crate::bail!(
                Internal,
                "the caching allocator's state was left inconsistent by an earlier panic"
            );
        }
        Ok(guard)
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Takes the lock whether or not it is poisoned, without a guard: for
    /// the atfork `prepare` handler, which holds it across the fork and
    /// releases it with [`SpinLock::force_unlock`] (in the parent and in
    /// the child). The child then finds the pools as they were between
    /// two critical sections, never half updated.
    pub(super) fn force_lock(&self) {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    /// Releases a lock taken with [`SpinLock::force_lock`].
    ///
    /// # Safety
    /// The caller took the lock with `force_lock` and has not released it.
    pub(super) unsafe fn force_unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// The value, for the owner when no other thread can hold the lock.
    pub(super) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: holding the guard means holding the lock: no other
        // reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in deref; the guard is borrowed mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.lock.poisoned.store(true, Ordering::Relaxed);
        }
        // The last access to the lock: after this store another thread may
        // take the lock and free it.
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_and_counts_exactly() {
        let lock = std::sync::Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        *lock.lock().unwrap() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock().unwrap(), 80_000);
    }

    #[test]
    fn a_panic_poisons() {
        let lock = SpinLock::new(1);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = lock.lock().unwrap();
            panic!("inside");
        }));
        assert!(r.is_err());
        let e = lock.lock().err().expect("poisoned");
        assert_eq!(e.kind(), crate::error::ErrorKind::Internal);
    }
}
