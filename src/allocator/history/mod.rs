//! Memory history (c10's recordHistory, for every allocator): while it
//! records, each allocation and free of every allocator is an event in a
//! bounded ring, and the live blocks are kept in a table, both under one
//! lock, so that a snapshot (snapshot/) sees events and blocks agree.
//!
//! The hot path pays nothing while recording is off beyond the relaxed
//! load of the flag byte it already does (active.rs). While it records,
//! an event goes into the thread's own buffer without a lock
//! (buffer.rs); the buffers are drained into the ring and the table, in
//! time order, in batches and whenever someone reads them.

mod buffer;
mod clock;
mod host_frames;
mod ring;
#[cfg(test)]
mod tests;

use super::active;
use crate::device::Device;
use crate::error::Result;
use crate::fork::{self, Held, Step};
pub use clock::now_ns;
pub(crate) use clock::{ticks, TickScale};
pub(crate) use host_frames::HostStack;
pub use host_frames::{set_host_frames, HostFrameSink, HostFrames, MAX_HOST_FRAMES};
#[cfg(test)]
pub(crate) use host_frames::{test_source, HostFrame};
use std::cell::UnsafeCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::{Arc, Mutex};

/// The identity of an allocator in events: interned (one per distinct
/// name, device, kind and inner name, kept for the life of the process),
/// so that events and the statistics hold a plain reference and recording
/// pays no reference counting.
#[derive(Debug, PartialEq, Eq)]
pub struct Tag {
    /// The allocator's name.
    pub name: String,
    /// Its default device.
    pub device: Device,
    /// What kind of allocator it is.
    pub kind: crate::allocator::AllocatorKind,
    /// A caching allocator's inner allocator's name.
    pub inner: Option<String>,
}

impl Tag {
    /// The identity of an allocator with these properties.
    pub(crate) fn new(
        name: String,
        device: Device,
        kind: crate::allocator::AllocatorKind,
        inner: Option<String>,
    ) -> &'static Tag {
        static TAGS: Mutex<Vec<&'static Tag>> = Mutex::new(Vec::new());
        let tag = Tag {
            name,
            device,
            kind,
            inner,
        };
        let mut tags = TAGS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&t) = tags.iter().find(|t| ***t == tag) {
            return t;
        }
        let t: &'static Tag = Box::leak(Box::new(tag));
        tags.push(t);
        t
    }

    /// A key for tables: the identity's address.
    pub(crate) fn key(tag: &'static Tag) -> usize {
        tag as *const Tag as usize
    }
}

/// What an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A block handed out.
    Alloc,
    /// A block given back.
    Free,
    /// An allocation failed (size: the bytes requested).
    Oom,
}

impl Action {
    /// The name in snapshots.
    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::Free => "free",
            Action::Oom => "oom",
        }
    }
}

/// Where an allocation was made: the return addresses of its native
/// stack, innermost first, symbolized only when a snapshot is written,
/// and the host's own frames when a host registered a source of them
/// (host_frames.rs).
#[derive(Debug)]
pub(crate) struct Captured {
    pub(crate) ips: Box<[usize]>,
    pub(crate) host: Option<HostStack>,
}

/// A captured stack, shared by its event and its live block.
pub(crate) type Stack = Arc<Captured>;

/// One recorded event.
#[derive(Debug, Clone)]
pub struct Event {
    /// What happened.
    pub action: Action,
    /// Which allocator.
    pub tag: &'static Tag,
    /// The block's address (0 for Oom).
    pub addr: usize,
    /// Its size (a free carries its block's size; Oom: bytes requested).
    pub size: usize,
    /// When, in [`ticks`] (see [`TickScale`]).
    pub ticks: u64,
    /// Where, when backtraces are on.
    pub(crate) stack: Option<Stack>,
}

/// An event as the buffers and the ring keep it, in 32 bytes: its stack,
/// if any, is kept beside ([`Ring`]'s `stacks`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    /// The tag's address, with the action in bits 0-1 and whether a stack
    /// is kept in bit 2 (a Tag is at least 8-aligned).
    bits: usize,
    pub(crate) addr: usize,
    pub(crate) size: usize,
    pub(crate) ticks: u64,
}

const _: () = assert!(std::mem::align_of::<Tag>() >= 8);

impl Slot {
    pub(crate) fn new(
        tag: &'static Tag,
        action: Action,
        addr: usize,
        size: usize,
        ticks: u64,
        stack: bool,
    ) -> Slot {
        let a = match action {
            Action::Alloc => 0,
            Action::Free => 1,
            Action::Oom => 2,
        };
        Slot {
            bits: tag as *const Tag as usize | a | (stack as usize) << 2,
            addr,
            size,
            ticks,
        }
    }

    pub(crate) fn tag(&self) -> &'static Tag {
        // SAFETY: the bits above 2 are the address of a &'static Tag
        // (Slot::new).
        unsafe { &*((self.bits & !7) as *const Tag) }
    }

    pub(crate) fn action(&self) -> Action {
        match self.bits & 3 {
            0 => Action::Alloc,
            1 => Action::Free,
            _ => Action::Oom,
        }
    }

    pub(crate) fn has_stack(&self) -> bool {
        self.bits & 4 != 0
    }

    /// Whether `other` is an event of the same block.
    pub(crate) fn same_block(&self, other: &Slot) -> bool {
        self.addr == other.addr && self.bits & !7 == other.bits & !7
    }

    /// The key of its stack in [`Ring`]'s `stacks`.
    fn stack_key(&self) -> (u64, usize, usize) {
        (self.ticks, self.bits, self.addr)
    }
}

/// A block allocated while recording and not freed yet.
#[derive(Debug, Clone)]
pub(crate) struct LiveBlock {
    pub(crate) tag: &'static Tag,
    pub(crate) size: usize,
    pub(crate) ticks: u64,
    pub(crate) stack: Option<Stack>,
}

/// The ring and the live-block table.
#[derive(Default)]
pub(crate) struct Ring {
    /// When recording started: events stamped earlier (left in a buffer
    /// by a thread that raced with stopping) are not part of it.
    pub(crate) start_ticks: u64,
    /// Frees drained before their allocation was: (allocator key,
    /// address) -> (the free's ticks, the drain that met it). Kept for one
    /// more drain, which brings the allocation if there was one (see
    /// buffer.rs).
    unmatched: HashMap<(usize, usize), (u64, u64), KeyHash>,
    /// Drains so far.
    drains: u64,
    pub(crate) recording: bool,
    pub(crate) max_entries: usize,
    pub(crate) backtraces: bool,
    /// Events recorded since recording started, dropped ones included.
    pub(crate) recorded: u64,
    pub(crate) events: VecDeque<Slot>,
    /// The stacks of the events in `events` that have one.
    stacks: HashMap<(u64, usize, usize), Stack, KeyHash>,
    /// (allocator key, address) -> block.
    pub(crate) live: HashMap<(usize, usize), LiveBlock, KeyHash>,
}

/// The ring's lock: a spin lock whose release is a plain store (the
/// critical sections are short: a drain of up to a few buffers of 256
/// events, or reading the ring for a snapshot). A waiter yields its time
/// slice after a short spin.
struct RingLock {
    locked: AtomicBool,
    ring: UnsafeCell<Option<Ring>>,
    bufs: UnsafeCell<Option<buffer::Bufs>>,
}

// SAFETY: `ring` and `bufs` are only reached through a RingGuard, which exists only
// while `locked` is held by its thread.
unsafe impl Sync for RingLock {}

/// Exclusive access to the ring.
pub(crate) struct RingGuard(&'static RingLock);

impl std::ops::Deref for RingGuard {
    type Target = Option<Ring>;
    fn deref(&self) -> &Option<Ring> {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.0.ring.get() }
    }
}

impl std::ops::DerefMut for RingGuard {
    fn deref_mut(&mut self) -> &mut Option<Ring> {
        // SAFETY: the guard holds the lock, and this borrow of the guard
        // is exclusive.
        unsafe { &mut *self.0.ring.get() }
    }
}

impl RingGuard {
    /// The per-thread buffers' list.
    pub(crate) fn bufs(&mut self) -> &mut buffer::Bufs {
        // SAFETY: the guard holds the lock, and this borrow of the guard
        // is exclusive.
        unsafe { (*self.0.bufs.get()).get_or_insert_with(Default::default) }
    }

    /// The ring and the buffers' list at once.
    pub(crate) fn parts(&mut self) -> (&mut Option<Ring>, &mut buffer::Bufs) {
        // SAFETY: as in `bufs`; the two cells are distinct.
        let ring = unsafe { &mut *self.0.ring.get() };
        (ring, self.bufs())
    }
}

impl Drop for RingGuard {
    fn drop(&mut self) {
        self.0.locked.store(false, Release);
    }
}

static RING: RingLock = RingLock {
    locked: AtomicBool::new(false),
    ring: UnsafeCell::new(None),
    bufs: UnsafeCell::new(None),
};
/// Whether events carry stacks (read before taking the lock).
static BACKTRACES: AtomicBool = AtomicBool::new(false);

/// The ring's guard, from the atfork `prepare` handler to `parent` or
/// `child`.
static HELD: Held<RingGuard> = Held::new();

/// This module's step of the atfork handlers' lock order (`crate::fork::order`).
static FORK_STEP: Step = Step::new(crate::fork::order::HISTORY, fork_prepare, fork_release);

/// Atfork `prepare`: holds the ring.
///
/// # Safety
/// Only from the atfork handlers (crate::fork).
unsafe fn fork_prepare() {
    let mut guard = lock();
    buffer::fork_prepare(&mut guard);
    // SAFETY: called from the prepare handler, as the contract asks.
    unsafe { HELD.put(guard) };
}

/// Atfork `parent` or `child`: releases the ring (the child keeps its
/// events).
///
/// # Safety
/// Only from the atfork handlers, after [`fork_prepare`].
unsafe fn fork_release(in_child: bool) {
    // SAFETY: called from the parent or child handler, as the contract
    // asks.
    let guard = unsafe { HELD.take() };
    if let Some(mut guard) = guard {
        if in_child {
            buffer::fork_child(&mut guard);
        }
    }
}

/// The ring, locked, with every thread's published events in it.
pub(crate) fn lock_drained() -> RingGuard {
    let mut guard = lock();
    buffer::drain(&mut guard);
    guard
}

/// The ring, locked (the buffers not drained).
pub(crate) fn lock() -> RingGuard {
    let mut spins = 0u32;
    while RING
        .locked
        .compare_exchange_weak(false, true, Acquire, Relaxed)
        .is_err()
    {
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    RingGuard(&RING)
}

/// A hasher for (allocator, address) keys: addresses are already well
/// spread, so a multiply mixes enough, at a fraction of SipHash's cost on
/// a path that runs for every allocation while recording.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(29) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// The live-block table's hasher.
pub(crate) type KeyHash = std::hash::BuildHasherDefault<KeyHasher>;

/// Starts recording (or changes the options while recording): the ring
/// keeps the newest `max_entries` events. Restarting while recording
/// keeps the events that fit and the live blocks; starting after a stop
/// starts empty.
pub fn start(max_entries: usize, backtraces: bool) -> Result<()> {
    start_with(max_entries, backtraces, true)
}

/// [`start`], turning the hot path's flag on only if `hot_path` (the
/// tests record directly, so that other tests' allocations never reach
/// their ring, not even for a moment).
pub(crate) fn start_with(max_entries: usize, backtraces: bool, hot_path: bool) -> Result<()> {
    crate::ensure!(
        max_entries > 0,
        InvalidArgument,
        "memory history: max_entries is 0; expected at least 1 (the ring's capacity in events)"
    );
    let _ = clock::origin();
    fork::ensure_handlers(&FORK_STEP);
    let mut guard = lock_drained();
    let ring = guard.get_or_insert_with(Ring::default);
    if !ring.recording {
        *ring = Ring::default();
        ring.recording = true;
        ring.start_ticks = ticks();
    }
    ring.max_entries = max_entries;
    ring.backtraces = backtraces;
    BACKTRACES.store(backtraces, Relaxed);
    while ring.events.len() > max_entries {
        ring.pop_oldest();
    }
    if hot_path {
        active::set(active::HISTORY, true);
    }
    Ok(())
}

/// Stops recording and forgets the events and live blocks (frees are no
/// longer observed, so the table could not stay true).
pub fn stop() {
    let mut guard = lock();
    active::set(active::HISTORY, false);
    BACKTRACES.store(false, Relaxed);
    *guard = None;
    // Discards what the buffers hold.
    buffer::drain(&mut guard);
}

/// Whether history records now.
pub fn is_recording() -> bool {
    lock().as_ref().is_some_and(|r| r.recording)
}

/// The events in the ring now, oldest first (tests and snapshots).
pub fn events() -> Vec<Event> {
    lock_drained()
        .as_ref()
        .map(Ring::event_list)
        .unwrap_or_default()
}

fn capture() -> Stack {
    let mut ips = Vec::with_capacity(32);
    backtrace::trace(|frame| {
        ips.push(frame.ip() as usize);
        ips.len() < 64
    });
    Arc::new(Captured {
        ips: ips.into(),
        host: host_frames::gather(),
    })
}

/// Records an allocation (`delta` > 0) or free (`delta` < 0) of the
/// allocator `tag` at `addr` (the reporter's slow path calls it).
#[inline]
pub(crate) fn record_change(tag: &'static Tag, addr: usize, delta: i64) {
    let size = delta.unsigned_abs() as usize;
    let want_stack = delta > 0 && BACKTRACES.load(Relaxed);
    // Captured before anything else: unwinding takes microseconds.
    let stack = want_stack.then(capture);
    let action = if delta >= 0 {
        Action::Alloc
    } else {
        Action::Free
    };
    buffer::record(tag, addr, size, action, stack);
}

/// Records a failed allocation of `requested` bytes.
pub(crate) fn record_oom(tag: &'static Tag, requested: usize) {
    if active::get() & active::HISTORY == 0 {
        return;
    }
    let want_stack = BACKTRACES.load(Relaxed);
    let stack = want_stack.then(capture);
    let mut guard = lock_drained();
    let Some(ring) = guard.as_mut().filter(|r| r.recording) else {
        return;
    };
    // Read under the lock, after the drain.
    let ticks = ticks();
    let slot = Slot::new(tag, Action::Oom, 0, requested, ticks, stack.is_some());
    ring.apply(slot, stack, false);
    ring.end_drain();
}
