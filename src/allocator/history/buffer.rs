//! Per-thread event buffers: the recording hot path appends an event to
//! its thread's buffer (a time-stamp read and a few plain stores, no lock,
//! no locked instruction) and the events reach the ring in batches.
//!
//! Each buffer has one writer, its thread, which writes the slot at `len`
//! and then publishes it by storing `len + 1` (release). Everything else
//! happens under the ring's lock: a *drain* reads every registered
//! buffer's published events from `head` to `len` (acquire), advances
//! `head`, merges the events of all buffers by time and applies them to
//! the ring and the live-block table (mod.rs). A thread whose buffer is
//! full drains under the lock and then rewinds its own buffer; snapshots,
//! `events()`, out-of-memory events, starting and stopping drain too, so
//! a reader under the lock sees every event published before it took it.
//!
//! Since every drain takes every buffer's events, an event published
//! before a drain started is in the ring after it. A drain may still read
//! one thread's `len` before an allocation there is published and another
//! thread's `len` after that block's free is: the free then meets no live
//! block (mod.rs keeps a note of it for one more drain, which is certain
//! to bring the allocation, and drops both).
//!
//! A buffer outlives its thread: the thread's exit drains it (a
//! thread-local with a destructor) and puts it on a free list, where the
//! next thread that records takes it. After `fork()`, the child puts the
//! buffers of the threads it does not have on the free list; their
//! published events stay and are drained like any others.

use super::{ticks, Action, RingGuard, Slot, Stack, Tag};
use crate::allocator::thread_slot;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{
    AtomicBool, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};

/// Events per buffer: a drain every this many events of a thread (at
/// most; other threads' drains take them earlier).
pub(crate) const CAP: usize = 256;

/// One thread's buffer.
pub(crate) struct Buf {
    /// Published events: written by the owning thread only (outside the
    /// ring's lock only to publish, otherwise under it to rewind).
    len: AtomicUsize,
    /// Events drained: written under the ring's lock only.
    head: AtomicUsize,
    /// Whether a thread owns it (under the ring's lock only).
    owned: AtomicBool,
    recs: [UnsafeCell<MaybeUninit<Slot>>; CAP],
    stacks: [UnsafeCell<Option<Stack>>; CAP],
}

// SAFETY: slot i is written only by the owning thread while i >= len (not
// yet published) and read (and its stack taken) only under the ring's lock
// while i < len, after an acquire load of len that saw the release store
// publishing it; the owner rewinds len only under the same lock, after a
// drain read every published slot. So no slot is written and read
// concurrently.
unsafe impl Sync for Buf {}

impl Buf {
    fn new() -> Buf {
        Buf {
            len: AtomicUsize::new(0),
            head: AtomicUsize::new(0),
            owned: AtomicBool::new(false),
            recs: [const { UnsafeCell::new(MaybeUninit::uninit()) }; CAP],
            stacks: [const { UnsafeCell::new(None) }; CAP],
        }
    }
}

/// The buffers, under the ring's lock.
#[derive(Default)]
pub(crate) struct Bufs {
    all: Vec<&'static Buf>,
    free: Vec<&'static Buf>,
    /// A drain's runs (kept for its allocation).
    runs: Vec<Run>,
}

/// The current thread's buffer (null: none yet, or the thread is
/// exiting), kept in the allocators' thread slot (one plain load, and in
/// the CPU allocator's paths an address they computed already).
#[inline(always)]
fn mine() -> *const Buf {
    thread_slot::with(|w| w[thread_slot::HISTORY_BUFFER].get() as *const Buf)
}

fn set_mine(b: *const Buf) {
    thread_slot::with(|w| w[thread_slot::HISTORY_BUFFER].set(b as usize));
}

thread_local! {
    /// Drains and frees the thread's buffer when the thread exits.
    static EXIT: ExitDrain = const { ExitDrain };
}

struct ExitDrain;

impl Drop for ExitDrain {
    fn drop(&mut self) {
        let b = mine();
        if b.is_null() {
            return;
        }
        set_mine(std::ptr::null());
        // SAFETY: the slot holds a leaked (so 'static) buffer.
        let b: &'static Buf = unsafe { &*b };
        let mut guard = super::lock();
        drain(&mut guard);
        b.len.store(0, Relaxed);
        b.head.store(0, Relaxed);
        b.owned.store(false, Relaxed);
        guard.bufs().free.push(b);
    }
}

/// Records an event of the current thread.
#[inline]
pub(crate) fn record(
    tag: &'static Tag,
    addr: usize,
    size: usize,
    action: Action,
    stack: Option<Stack>,
) {
    match stack {
        None => record_plain(tag, addr, size, action),
        Some(s) => record_with_stack(tag, addr, size, action, s),
    }
}

/// Records an event without a backtrace: the common case, kept free of
/// the backtrace's drop and of the rewind, both out of line.
#[inline(always)]
fn record_plain(tag: &'static Tag, addr: usize, size: usize, action: Action) {
    let Some((b, i)) = next_slot() else {
        return record_without_buffer(tag, addr, size, action, None);
    };
    publish(b, i, Slot::new(tag, action, addr, size, ticks(), false));
}

/// Records an event with its backtrace.
#[inline(never)]
fn record_with_stack(tag: &'static Tag, addr: usize, size: usize, action: Action, stack: Stack) {
    let Some((b, i)) = next_slot() else {
        return record_without_buffer(tag, addr, size, action, Some(stack));
    };
    // SAFETY: slot i >= len is not published: only this thread, its
    // owner, reaches it (see Buf's Sync).
    unsafe { *b.stacks[i].get() = Some(stack) };
    publish(b, i, Slot::new(tag, action, addr, size, ticks(), true));
}

/// The current thread's buffer and the index of its next free slot
/// (rewinding a full buffer first); None when the thread has no buffer.
#[inline(always)]
fn next_slot() -> Option<(&'static Buf, usize)> {
    let b = mine();
    if b.is_null() {
        return None;
    }
    // SAFETY: the slot holds a leaked (so 'static) buffer this thread owns.
    let b = unsafe { &*b };
    let i = b.len.load(Relaxed);
    if i == CAP {
        rewind(b);
        return Some((b, 0));
    }
    Some((b, i))
}

/// Writes slot `i` (from [`next_slot`]) and publishes it.
#[inline(always)]
fn publish(b: &'static Buf, i: usize, rec: Slot) {
    // SAFETY: slot i >= len is not published: only this thread, its
    // owner, reaches it (see Buf's Sync).
    unsafe { (*b.recs[i].get()).write(rec) };
    b.len.store(i + 1, Release);
}

/// A full buffer: drains every buffer, then starts this one over.
#[cold]
#[inline(never)]
fn rewind(b: &'static Buf) {
    let mut guard = super::lock();
    drain(&mut guard);
    // Under the lock, after the drain read every published slot.
    b.len.store(0, Relaxed);
    b.head.store(0, Relaxed);
}

/// The current thread has no buffer: takes one, or, if the thread is
/// exiting (its thread-locals being destroyed), records under the lock.
#[cold]
#[inline(never)]
fn record_without_buffer(
    tag: &'static Tag,
    addr: usize,
    size: usize,
    action: Action,
    stack: Option<Stack>,
) {
    if EXIT.try_with(|_| ()).is_ok() {
        let b = acquire();
        set_mine(b);
        return record(tag, addr, size, action, stack);
    }
    let mut guard = super::lock();
    drain(&mut guard);
    let slot = Slot::new(tag, action, addr, size, ticks(), stack.is_some());
    if let Some(ring) = guard.as_mut().filter(|r| r.recording) {
        ring.apply(slot, stack, false);
        ring.end_drain();
    }
}

/// A buffer for the current thread: a free one, or a new one.
fn acquire() -> &'static Buf {
    let mut guard = super::lock();
    let b = match guard.bufs().free.pop() {
        Some(b) => {
            if b.head.load(Relaxed) != b.len.load(Relaxed) {
                // Events a thread gone with fork() left.
                drain(&mut guard);
            }
            b
        }
        None => {
            let b: &'static Buf = Box::leak(Box::new(Buf::new()));
            guard.bufs().all.push(b);
            b
        }
    };
    b.len.store(0, Relaxed);
    b.head.store(0, Relaxed);
    b.owned.store(true, Relaxed);
    b
}

/// Moves every buffer's published events into the ring (discarding them
/// while history does not record), merged by time.
pub(crate) fn drain(guard: &mut RingGuard) {
    let (ring, bufs) = guard.parts();
    let runs = &mut bufs.runs;
    runs.clear();
    for &b in &bufs.all {
        let len = b.len.load(Acquire);
        let head = b.head.load(Relaxed);
        if head != len {
            runs.push(Run {
                buf: b,
                head,
                next: head,
                len,
            });
        }
    }
    let mut ring = ring.as_mut().filter(|r| r.recording);
    // One thread's events only (the common case): appended at once.
    if let ([r], Some(ring)) = (&mut runs[..], ring.as_deref_mut()) {
        let b = r.buf;
        // SAFETY: the slots head..len are published (the acquire load of
        // len above) and we hold the ring's lock (see Buf's Sync); a Slot
        // and an UnsafeCell<MaybeUninit<Slot>> have the same layout.
        let run = unsafe {
            std::slice::from_raw_parts(b.recs.as_ptr().add(r.head) as *const Slot, r.len - r.head)
        };
        let head = r.head;
        // SAFETY: append_run calls `stack(i)` only for i < run.len() =
        // len - head, so slot head + i is published (the acquire load of
        // len above) and we hold the ring's lock (see Buf's Sync): no other
        // thread touches that slot's stack while we take it.
        let stack = |i: usize| unsafe { (*b.stacks[head + i].get()).take() };
        if ring.append_run(run, stack) {
            r.next = r.len;
        }
    }
    // Each run is in time order: merge them, taking the earliest next
    // event each time (few runs: a linear pick).
    loop {
        let mut pick: Option<(usize, u64)> = None;
        for (k, r) in runs.iter().enumerate() {
            if r.next < r.len {
                let t = r.rec(r.next).ticks;
                if pick.is_none_or(|(_, pt)| t < pt) {
                    pick = Some((k, t));
                }
            }
        }
        let Some((k, _)) = pick else { break };
        let r = &mut runs[k];
        let i = r.next;
        r.next += 1;
        let rec = r.rec(i);
        let stack = if rec.has_stack() {
            // SAFETY: i < len, published, and we hold the ring's lock
            // (see Buf's Sync).
            unsafe { (*r.buf.stacks[i].get()).take() }
        } else {
            None
        };
        let Some(ring) = ring.as_deref_mut() else {
            continue;
        };
        // An allocation and its free next to each other in one thread's
        // run: no other event of that block can come between them, so
        // neither touches the live-block table.
        let paired = match rec.action() {
            Action::Alloc => {
                i + 1 < r.len && {
                    let n = r.rec(i + 1);
                    n.action() == Action::Free && n.same_block(&rec)
                }
            }
            Action::Free => {
                i > r.head && {
                    let p = r.rec(i - 1);
                    p.action() == Action::Alloc && p.same_block(&rec)
                }
            }
            Action::Oom => false,
        };
        ring.apply(rec, stack, paired);
    }
    for r in runs.iter() {
        r.buf.head.store(r.len, Relaxed);
    }
    runs.clear();
    if let Some(ring) = ring {
        ring.end_drain();
    }
}

/// One buffer's published, undrained events.
pub(crate) struct Run {
    buf: &'static Buf,
    head: usize,
    next: usize,
    len: usize,
}

impl Run {
    fn rec(&self, i: usize) -> Slot {
        debug_assert!(self.head <= i && i < self.len);
        // SAFETY: head <= i < len: published (the acquire load of len
        // in `drain`), and the drain holds the ring's lock (see Buf's
        // Sync).
        unsafe { (*self.buf.recs[i].get()).assume_init() }
    }
}

/// Atfork `prepare`, under the held ring lock: makes room on the free
/// list for every buffer, so the child handler does not allocate.
pub(crate) fn fork_prepare(guard: &mut RingGuard) {
    let bufs = guard.bufs();
    let more = bufs.all.len();
    bufs.free.reserve(more);
}

/// Atfork `child`, under the held ring lock: frees the buffers of the
/// threads the child does not have (their published events stay).
pub(crate) fn fork_child(guard: &mut RingGuard) {
    let mine = mine();
    let bufs = guard.bufs();
    for &b in &bufs.all {
        if b.owned.load(Relaxed) && !std::ptr::eq(b, mine) {
            b.owned.store(false, Relaxed);
            bufs.free.push(b);
        }
    }
}

/// Buffers made so far (tests).
#[cfg(test)]
pub(crate) fn count() -> (usize, usize) {
    let mut guard = super::lock();
    let bufs = guard.bufs();
    (bufs.all.len(), bufs.free.len())
}
