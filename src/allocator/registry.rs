//! One allocator slot per device type, with c10's priority rule: a new
//! allocator replaces the slot's when its priority is >= the current one
//! (equal priority: the last one wins). Thread-safe at any time; replacing
//! an allocator never frees it under its users, since every storage and
//! every allocation holds a reference to the allocator that made it.

use super::Allocator;
use crate::device::DeviceType;
use crate::fork::{self, Held, Step};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{RwLock, RwLockWriteGuard};

/// Whether the CPU slot holds something other than the built-in allocator
/// (until then, CPU allocations skip the registry lock).
static CPU_REPLACED: AtomicBool = AtomicBool::new(false);

/// Whether CPU allocations go to the built-in allocator (the CPU slot was
/// never replaced, or was cleared).
#[inline]
pub(crate) fn cpu_slot_is_builtin() -> bool {
    !CPU_REPLACED.load(Ordering::Acquire)
}

struct Slot {
    allocator: Allocator,
    priority: u8,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: RwLock<Option<Slot>> = RwLock::new(None);
static SLOTS: [RwLock<Option<Slot>>; DeviceType::SLOTS] = [EMPTY; DeviceType::SLOTS];

fn slot(t: DeviceType) -> &'static RwLock<Option<Slot>> {
    fork::ensure_handlers(&FORK_STEP);
    &SLOTS[t as u8 as usize]
}

/// The slots' guards, from the atfork `prepare` handler to `parent` or
/// `child`.
static HELD: Held<Vec<RwLockWriteGuard<'static, Option<Slot>>>> = Held::new();

/// This module's step of the atfork handlers' lock order (`crate::fork::order`).
static FORK_STEP: Step = Step::new(crate::fork::order::REGISTRY, fork_prepare, fork_release);

/// Atfork `prepare`: holds every slot, by device type number, so no
/// thread is replacing an allocator at the fork. The child keeps every
/// registered allocator.
///
/// # Safety
/// Only from the atfork handlers (crate::fork).
pub(crate) unsafe fn fork_prepare() {
    let guards = SLOTS
        .iter()
        .map(|s| s.write().unwrap_or_else(|e| e.into_inner()))
        .collect();
    // SAFETY: called from the prepare handler, as the contract asks.
    unsafe { HELD.put(guards) };
}

/// Atfork `parent` or `child`: releases the slots.
///
/// # Safety
/// Only from the atfork handlers, after [`fork_prepare`].
pub(crate) unsafe fn fork_release(_in_child: bool) {
    // SAFETY: called from the parent or child handler, as the contract
    // asks.
    drop(unsafe { HELD.take() });
}

/// Installs `allocator` for `device_type` if `priority` >= the current
/// slot's priority; returns whether it was installed (c10's SetAllocator,
/// which silently keeps a higher-priority allocator).
pub fn set_allocator(device_type: DeviceType, allocator: &Allocator, priority: u8) -> bool {
    let mut guard = slot(device_type).write().unwrap_or_else(|e| e.into_inner());
    let current = match guard.as_ref() {
        Some(s) => Some(s.priority),
        // The CPU slot holds the built-in allocator at priority 0 until
        // someone replaces it.
        None if device_type == DeviceType::Cpu => Some(0),
        None => None,
    };
    if let Some(p) = current {
        if priority < p {
            return false;
        }
    }
    let old = guard.replace(Slot {
        allocator: allocator.clone(),
        priority,
    });
    if device_type == DeviceType::Cpu {
        CPU_REPLACED.store(!allocator.is_builtin_cpu(), Ordering::Release);
    }
    drop(guard);
    // The previous allocator is released outside the lock: its release
    // callback may call back into the registry.
    drop(old);
    true
}

/// The allocator for `device_type` (the built-in one for CPU unless
/// replaced; with the "cuda" feature, the built-in caching CUDA allocator
/// for CUDA, which loads the driver only when it allocates), or None.
pub fn get_allocator(device_type: DeviceType) -> Option<Allocator> {
    if device_type == DeviceType::Cpu && cpu_slot_is_builtin() {
        // The slot is empty or holds the built-in allocator: no lock, as
        // on the allocation paths.
        return Some(Allocator::cpu());
    }
    let guard = slot(device_type).read().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(s) => Some(s.allocator.clone()),
        None if device_type == DeviceType::Cpu => Some(Allocator::cpu()),
        #[cfg(feature = "cuda")]
        None if device_type == DeviceType::Cuda => Some(super::cuda::device_allocator()),
        None => None,
    }
}

/// The priority of the slot for `device_type` (0 when empty).
pub fn priority(device_type: DeviceType) -> u8 {
    let guard = slot(device_type).read().unwrap_or_else(|e| e.into_inner());
    guard.as_ref().map_or(0, |s| s.priority)
}

/// Empties the slot (tests and shutdown); returns the allocator it held.
pub fn clear_allocator(device_type: DeviceType) -> Option<Allocator> {
    let mut guard = slot(device_type).write().unwrap_or_else(|e| e.into_inner());
    let old = guard.take();
    if device_type == DeviceType::Cpu {
        CPU_REPLACED.store(false, Ordering::Release);
    }
    drop(guard);
    old.map(|s| s.allocator)
}
