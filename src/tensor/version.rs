//! The version counter a tensor shares with its views, bumped by in-place
//! writes. Created lazily: a tensor that never has views and is never
//! written in place allocates none.

use crate::refcount::{RcBox, RcTarget, Ref};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

struct Counter(AtomicU64);
impl RcTarget for Counter {}

/// A slot holding a shared counter once one is needed.
pub(crate) struct VersionSlot(AtomicPtr<RcBox<Counter>>);

impl VersionSlot {
    /// An empty slot (version 0, no counter yet).
    pub(crate) fn new() -> VersionSlot {
        VersionSlot(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// A slot sharing `other`'s counter (creating it if needed).
    pub(crate) fn shared_with(other: &VersionSlot) -> VersionSlot {
        let counter = other.counter();
        VersionSlot(AtomicPtr::new(Ref::into_raw(counter) as *mut _))
    }

    /// A new reference to the counter, creating it on first use.
    fn counter(&self) -> Ref<Counter> {
        let mut p = self.0.load(Ordering::Acquire);
        if p.is_null() {
            let fresh = Ref::into_raw(Ref::new(Counter(AtomicU64::new(0)))) as *mut RcBox<Counter>;
            match self.0.compare_exchange(
                std::ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => p = fresh,
                Err(existing) => {
                    // Another thread won: drop ours.
                    // SAFETY: fresh came from into_raw just above and was not published.
                    drop(unsafe { Ref::from_raw(fresh) });
                    p = existing;
                }
            }
        }
        // SAFETY: p is the published counter, kept alive by this slot's
        // reference until the slot is dropped; clone_from_raw adds ours.
        unsafe { Ref::clone_from_raw(p) }.expect("a published version counter is alive")
    }

    /// The current version (0 before any bump).
    pub(crate) fn get(&self) -> u64 {
        let p = self.0.load(Ordering::Acquire);
        if p.is_null() {
            0
        } else {
            // SAFETY: a published counter stays alive while the slot holds it.
            unsafe { Ref::borrow_raw(p) }.0.load(Ordering::Acquire)
        }
    }

    /// Adds one to the version.
    pub(crate) fn bump(&self) {
        let p = self.0.load(Ordering::Acquire);
        if p.is_null() {
            self.counter().0.fetch_add(1, Ordering::AcqRel);
        } else {
            // SAFETY: as in get.
            unsafe { Ref::borrow_raw(p) }
                .0
                .fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for VersionSlot {
    fn drop(&mut self) {
        let p = *self.0.get_mut();
        if !p.is_null() {
            // SAFETY: the slot owns one reference to the published counter.
            drop(unsafe { Ref::from_raw(p) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_and_lazy() {
        let a = VersionSlot::new();
        assert_eq!(a.get(), 0);
        a.bump();
        assert_eq!(a.get(), 1);
        let b = VersionSlot::shared_with(&a);
        b.bump();
        assert_eq!(a.get(), 2);
        let c = VersionSlot::new();
        let d = VersionSlot::shared_with(&c);
        c.bump();
        assert_eq!(d.get(), 1);
        drop(c);
        d.bump();
        assert_eq!(d.get(), 2);
    }
}
