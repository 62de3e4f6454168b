//! Frames of a host's own language (Python's file, line and function, as
//! PyTorch's memory history records them) added to the stack of each
//! allocation while history records backtraces.
//!
//! A host registers one source of frames ([`set_host_frames`]): a
//! function that, called on the allocating thread, reports the host's
//! current stack, innermost first. History calls it when it captures a
//! stack (an allocation while backtraces are on), never otherwise: the
//! allocation paths are unchanged while history is off, and allocations
//! pay nothing more while it records without backtraces.
//!
//! The registration is read with one atomic load and never freed (a
//! call on another thread may still be running the one it replaces), so
//! no lock is taken on the allocation path and none is held across a
//! fork. Names are interned per thread, so that a ring of events shares
//! the few distinct file and function names.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

/// At most this many host frames per stack (the innermost ones).
pub const MAX_HOST_FRAMES: usize = 128;

/// A source of host frames: the host's name, where its frames go in a
/// native stack, and the function that reports them.
pub struct HostFrames {
    /// The host's name, written on each of its frames (`"python"`).
    pub host: String,
    /// The native function through which the host runs its frames (e.g.
    /// CPython's `_PyEval_EvalFrameDefault`): a snapshot puts the host's
    /// frames before the innermost native frame of that name, and after
    /// the native frames when there is none or this is None.
    pub enter: Option<String>,
    /// Reports the calling thread's host frames, innermost first, into the
    /// sink. Called on the allocating thread, outside tessera's locks,
    /// from inside an allocation: it must not free or allocate tessera
    /// memory that it waits for (an allocation it makes is recorded
    /// without host frames).
    pub gather: Box<dyn Fn(&mut HostFrameSink) + Send + Sync>,
}

/// One host frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HostFrame {
    pub(crate) file: Option<Arc<str>>,
    pub(crate) function: Arc<str>,
    pub(crate) line: Option<u32>,
}

/// The host frames of one stack, with the registration that gave them.
#[derive(Debug)]
pub(crate) struct HostStack {
    pub(crate) source: &'static Registered,
    pub(crate) frames: Box<[HostFrame]>,
}

/// A registration, as kept (never freed, reachable from [`ALL`]).
pub(crate) struct Registered {
    pub(crate) host: Arc<str>,
    pub(crate) enter: Option<String>,
    gather: Box<dyn Fn(&mut HostFrameSink) + Send + Sync>,
    /// The registration made before this one ([`ALL`]'s list).
    older: AtomicPtr<Registered>,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("host", &self.host)
            .field("enter", &self.enter)
            .finish_non_exhaustive()
    }
}

/// Where a source reports its frames.
pub struct HostFrameSink {
    frames: Vec<HostFrame>,
}

impl HostFrameSink {
    /// Adds the next frame outwards: its file (None: unknown), function
    /// (None: `"??"`) and line (None: unknown). Returns false once
    /// [`MAX_HOST_FRAMES`] frames are in (the rest are left out).
    pub fn push(&mut self, file: Option<&str>, function: Option<&str>, line: Option<u32>) -> bool {
        if self.frames.len() >= MAX_HOST_FRAMES {
            return false;
        }
        self.frames.push(HostFrame {
            file: file.map(intern),
            function: intern(function.unwrap_or("??")),
            line,
        });
        self.frames.len() < MAX_HOST_FRAMES
    }
}

static SOURCE: AtomicPtr<Registered> = AtomicPtr::new(std::ptr::null_mut());

/// Every registration ever made, newest first, linked through `older`:
/// none is freed (a thread may be in its `gather`, a recorded stack names
/// it), and all stay reachable from here, so leak checkers (valgrind)
/// see memory still in use, not lost.
static ALL: AtomicPtr<Registered> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// Whether this thread is inside its source's `gather` (an allocation
    /// made there is recorded without host frames).
    static GATHERING: Cell<bool> = const { Cell::new(false) };
    /// This thread's interned names.
    static NAMES: RefCell<HashSet<Arc<str>>> = RefCell::new(HashSet::new());
}

/// Registers the source of host frames (None: none), replacing the
/// previous one. A registration is kept for the life of the process.
pub fn set_host_frames(source: Option<HostFrames>) {
    let new = source.map_or(std::ptr::null_mut(), |s| {
        let new = Box::into_raw(Box::new(Registered {
            host: s.host.into(),
            enter: s.enter.filter(|e| !e.is_empty()),
            gather: s.gather,
            older: AtomicPtr::new(std::ptr::null_mut()),
        }));
        keep(new);
        new
    });
    // The previous registration stays (in ALL): another thread may be
    // running its `gather` now.
    SOURCE.store(new, Ordering::Release);
}

/// Puts a new registration (a leaked Box) on [`ALL`]'s list.
fn keep(new: *mut Registered) {
    let mut head = ALL.load(Ordering::Acquire);
    loop {
        // SAFETY: `new` is a live leaked Box, never freed.
        unsafe { &*new }.older.store(head, Ordering::Relaxed);
        match ALL.compare_exchange_weak(head, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(now) => head = now,
        }
    }
}

/// The calling thread's host frames, if a source is registered and gives
/// any (not inside its own `gather`).
pub(crate) fn gather() -> Option<HostStack> {
    let p = SOURCE.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: a registration is never freed once stored (set_host_frames).
    let source: &'static Registered = unsafe { &*p };
    let entered = GATHERING.try_with(|g| !g.replace(true)).unwrap_or(false);
    if !entered {
        return None;
    }
    /// Clears GATHERING however `gather` returns.
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            let _ = GATHERING.try_with(|g| g.set(false));
        }
    }
    let _leave = Leave;
    let mut sink = HostFrameSink {
        frames: Vec::with_capacity(32),
    };
    (source.gather)(&mut sink);
    (!sink.frames.is_empty()).then(|| HostStack {
        source,
        frames: sink.frames.into_boxed_slice(),
    })
}

/// `s`, shared with the thread's earlier copies of the same name.
fn intern(s: &str) -> Arc<str> {
    NAMES
        .try_with(|names| {
            let mut names = names.borrow_mut();
            if let Some(a) = names.get(s) {
                return a.clone();
            }
            let a: Arc<str> = s.into();
            names.insert(a.clone());
            a
        })
        .unwrap_or_else(|_| s.into())
}

/// A registration that is not registered, for tests of what reads one.
#[cfg(test)]
pub(crate) fn test_source(host: &str, enter: Option<&str>) -> &'static Registered {
    let new = Box::into_raw(Box::new(Registered {
        host: host.into(),
        enter: enter.map(str::to_owned),
        gather: Box::new(|_| {}),
        older: AtomicPtr::new(std::ptr::null_mut()),
    }));
    // Reachable, as every registration (leak checkers: not lost).
    keep(new);
    // SAFETY: never freed (kept on ALL).
    unsafe { &*new }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_keeps_the_innermost_frames_and_shares_names() {
        let mut sink = HostFrameSink { frames: Vec::new() };
        for i in 0..MAX_HOST_FRAMES + 5 {
            sink.push(Some("model.py"), Some("forward"), Some(i as u32));
        }
        assert_eq!(sink.frames.len(), MAX_HOST_FRAMES);
        assert_eq!(sink.frames[0].line, Some(0));
        assert!(Arc::ptr_eq(
            sink.frames[0].file.as_ref().unwrap(),
            sink.frames[1].file.as_ref().unwrap()
        ));
        sink.frames.clear();
        sink.push(None, None, None);
        assert_eq!(&*sink.frames[0].function, "??");
        assert_eq!(sink.frames[0].file, None);
    }
}
