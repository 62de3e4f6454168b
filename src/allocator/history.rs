//! Memory history (c10's recordHistory, for every allocator): while it
//! records, each allocation and free of every allocator is an event in a
//! bounded ring, and the live blocks are kept in a table, both under one
//! lock, so that a snapshot (snapshot.rs) sees events and blocks agree.
//!
//! The hot path pays nothing while recording is off beyond the relaxed
//! load of the flag byte it already does (active.rs).

use super::active;
use crate::device::Device;
use crate::error::Result;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// The identity of an allocator in events: made once per allocator, kept
/// by its statistics and by each event that names it (so an event outlives
/// its allocator).
#[derive(Debug)]
pub struct Tag {
    /// The allocator's name.
    pub name: String,
    /// Its default device.
    pub device: Device,
    /// "cpu", "caching", "plugin" or "other".
    pub kind: &'static str,
    /// A caching allocator's inner allocator's name.
    pub inner: Option<String>,
}

impl Tag {
    /// A new identity.
    pub(crate) fn new(
        name: String,
        device: Device,
        kind: &'static str,
        inner: Option<String>,
    ) -> Arc<Tag> {
        Arc::new(Tag {
            name,
            device,
            kind,
            inner,
        })
    }

    /// A key for tables: the identity's address.
    pub(crate) fn key(tag: &Arc<Tag>) -> usize {
        Arc::as_ptr(tag) as usize
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

/// Return addresses of a stack, innermost first, symbolized only when a
/// snapshot is written.
pub(crate) type Stack = Arc<[usize]>;

/// One recorded event.
#[derive(Debug, Clone)]
pub struct Event {
    /// What happened.
    pub action: Action,
    /// Which allocator.
    pub tag: Arc<Tag>,
    /// The block's address (0 for Oom).
    pub addr: usize,
    /// Its size (a free carries its block's size; Oom: bytes requested).
    pub size: usize,
    /// Nanoseconds on [`now_ns`]'s clock.
    pub time_ns: u64,
    /// Where, when backtraces are on.
    pub(crate) stack: Option<Stack>,
}

/// A block allocated while recording and not freed yet.
#[derive(Debug, Clone)]
pub(crate) struct LiveBlock {
    pub(crate) tag: Arc<Tag>,
    pub(crate) size: usize,
    pub(crate) time_ns: u64,
    pub(crate) stack: Option<Stack>,
}

/// The ring and the live-block table.
#[derive(Default)]
pub(crate) struct Ring {
    pub(crate) recording: bool,
    pub(crate) max_entries: usize,
    pub(crate) backtraces: bool,
    /// Events recorded since recording started, dropped ones included.
    pub(crate) recorded: u64,
    pub(crate) events: VecDeque<Event>,
    /// (allocator key, address) -> block.
    pub(crate) live: HashMap<(usize, usize), LiveBlock>,
}

static RING: Mutex<Option<Ring>> = Mutex::new(None);
/// Whether events carry stacks (read before taking the lock).
static BACKTRACES: AtomicBool = AtomicBool::new(false);

/// The ring, locked (made empty on first use).
pub(crate) fn lock() -> MutexGuard<'static, Option<Ring>> {
    RING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Nanoseconds since the first use of this clock in the process.
pub fn now_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Starts recording (or changes the options while recording): the ring
/// keeps the newest `max_entries` events. Restarting while recording
/// keeps the events that fit and the live blocks; starting after a stop
/// starts empty.
pub fn start(max_entries: usize, backtraces: bool) -> Result<()> {
    crate::ensure!(
        max_entries > 0,
        InvalidArgument,
        "memory history: max_entries is 0; expected at least 1 (the ring's capacity in events)"
    );
    let _ = now_ns();
    let mut guard = lock();
    let ring = guard.get_or_insert_with(Ring::default);
    if !ring.recording {
        *ring = Ring::default();
        ring.recording = true;
    }
    ring.max_entries = max_entries;
    ring.backtraces = backtraces;
    BACKTRACES.store(backtraces, Relaxed);
    while ring.events.len() > max_entries {
        ring.events.pop_front();
    }
    active::set(active::HISTORY, true);
    Ok(())
}

/// Stops recording and forgets the events and live blocks (frees are no
/// longer observed, so the table could not stay true).
pub fn stop() {
    let mut guard = lock();
    active::set(active::HISTORY, false);
    BACKTRACES.store(false, Relaxed);
    *guard = None;
}

/// Whether history records now.
pub fn is_recording() -> bool {
    lock().as_ref().is_some_and(|r| r.recording)
}

/// The events in the ring now, oldest first (tests and snapshots).
pub fn events() -> Vec<Event> {
    lock()
        .as_ref()
        .map(|r| r.events.iter().cloned().collect())
        .unwrap_or_default()
}

fn capture() -> Stack {
    let mut ips = Vec::with_capacity(32);
    backtrace::trace(|frame| {
        ips.push(frame.ip() as usize);
        ips.len() < 64
    });
    ips.into()
}

fn push(ring: &mut Ring, event: Event) {
    if ring.events.len() >= ring.max_entries {
        ring.events.pop_front();
    }
    ring.recorded += 1;
    ring.events.push_back(event);
}

/// Records an allocation (`delta` > 0) or free (`delta` < 0) of the
/// allocator `tag` at `addr` (the reporter's slow path calls it).
#[cold]
pub(crate) fn record_change(tag: &Arc<Tag>, addr: usize, delta: i64) {
    let size = delta.unsigned_abs() as usize;
    let want_stack = delta > 0 && BACKTRACES.load(Relaxed);
    // Captured outside the lock: unwinding takes microseconds.
    let stack = want_stack.then(capture);
    let time_ns = now_ns();
    let mut guard = lock();
    let Some(ring) = guard.as_mut().filter(|r| r.recording) else {
        return;
    };
    let key = (Tag::key(tag), addr);
    let action = if delta >= 0 {
        ring.live.insert(
            key,
            LiveBlock {
                tag: tag.clone(),
                size,
                time_ns,
                stack: stack.clone(),
            },
        );
        Action::Alloc
    } else {
        ring.live.remove(&key);
        Action::Free
    };
    push(
        ring,
        Event {
            action,
            tag: tag.clone(),
            addr,
            size,
            time_ns,
            stack,
        },
    );
}

/// Records a failed allocation of `requested` bytes.
pub(crate) fn record_oom(tag: &Arc<Tag>, requested: usize) {
    if active::get() & active::HISTORY == 0 {
        return;
    }
    let want_stack = BACKTRACES.load(Relaxed);
    let stack = want_stack.then(capture);
    let time_ns = now_ns();
    let mut guard = lock();
    let Some(ring) = guard.as_mut().filter(|r| r.recording) else {
        return;
    };
    push(
        ring,
        Event {
            action: Action::Oom,
            tag: tag.clone(),
            addr: 0,
            size: requested,
            time_ns,
            stack,
        },
    );
}
