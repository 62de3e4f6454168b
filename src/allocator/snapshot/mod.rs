//! Memory snapshots: what every allocator holds, the segments of caching
//! allocators and the recorded history, written as tessera's JSON
//! (docs/MEMORY_SNAPSHOT.md, json.rs) or as the pickle PyTorch's
//! memory_viz reads (torch.rs, written by crate::pickle); that pickle
//! (PyTorch's or tessera's) is read back into the JSON form by
//! from_torch.rs, for the viewer.
//!
//! Everything is gathered under the history ring's lock, after draining
//! every thread's event buffer into the ring (so no event falls between
//! the events and the live blocks), then symbolized and written outside
//! it.

mod from_torch;
mod json;
mod torch;

pub use from_torch::json_from_torch;

use super::caching::{self, SegmentView};
use super::history::{self, Event, LiveBlock, Stack, Tag};
use super::StatsSnapshot;
use crate::device::Device;
use crate::error::Result;
use std::collections::HashMap;
use std::sync::Arc;

/// The two forms of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// tessera's JSON (docs/snapshot.schema.json).
    Json,
    /// The pickle PyTorch's memory_viz loads.
    Torch,
}

/// One allocator as the snapshot sees it.
pub(crate) struct AllocatorView {
    pub(crate) tag: &'static Tag,
    pub(crate) stats: StatsSnapshot,
    /// Live blocks by address.
    pub(crate) blocks: Vec<(usize, LiveBlock)>,
    /// Caching allocators only.
    pub(crate) segments: Option<Vec<SegmentView>>,
}

/// Everything a snapshot holds, before symbolization.
pub(crate) struct Gathered {
    pub(crate) recording: bool,
    pub(crate) max_entries: usize,
    pub(crate) backtraces: bool,
    pub(crate) recorded: u64,
    pub(crate) events: Vec<Event>,
    pub(crate) allocators: Vec<AllocatorView>,
    pub(crate) taken_ns: u64,
    pub(crate) unix_ms: u64,
    /// Converts events' and blocks' ticks to nanoseconds.
    pub(crate) scale: history::TickScale,
}

/// Reads the state of every allocator and the ring, under the ring's lock.
pub(crate) fn gather() -> Gathered {
    let ring = history::lock_drained();
    let scale = history::TickScale::now();
    let taken_ns = scale.now_ns;
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut allocators: Vec<AllocatorView> = Vec::new();
    let mut index: HashMap<usize, usize> = HashMap::new();
    super::for_each_live(|a| {
        if let Some(tag) = a.stats().tag() {
            index.insert(Tag::key(tag), allocators.len());
            allocators.push(AllocatorView {
                tag,
                stats: a.stats().snapshot(),
                blocks: Vec::new(),
                segments: None,
            });
        }
    });
    for (key, segments) in caching::all_segments() {
        if let Some(&i) = index.get(&key) {
            allocators[i].segments = Some(segments);
        }
    }
    let mut g = Gathered {
        recording: false,
        max_entries: 0,
        backtraces: false,
        recorded: 0,
        events: Vec::new(),
        allocators,
        taken_ns,
        unix_ms,
        scale,
    };
    if let Some(r) = ring.as_ref() {
        g.recording = r.recording;
        g.max_entries = r.max_entries;
        g.backtraces = r.backtraces;
        g.recorded = r.recorded;
        g.events = r.event_list();
        for (&(key, addr), block) in r.live.iter() {
            let i = match index.get(&key) {
                Some(&i) => i,
                None => {
                    // An allocator gone with blocks still out (a caching
                    // allocator's orphaned state): listed from its blocks.
                    index.insert(key, g.allocators.len());
                    g.allocators.push(AllocatorView {
                        tag: block.tag,
                        stats: StatsSnapshot::default(),
                        blocks: Vec::new(),
                        segments: (block.tag.kind == crate::allocator::AllocatorKind::Caching)
                            .then(Vec::new),
                    });
                    g.allocators.len() - 1
                }
            };
            g.allocators[i].blocks.push((addr, block.clone()));
        }
    }
    drop(ring);
    for a in &mut g.allocators {
        a.blocks.sort_by_key(|(addr, _)| *addr);
    }
    g
}

/// A symbolized frame, or a host's frame (`host`: the host's name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    pub(crate) function: String,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
    pub(crate) host: Option<Arc<str>>,
}

/// Function-name prefixes of the frames a snapshot leaves out: tessera's
/// own code (the crate and its exported `tsr_` functions), the Rust
/// runtime, the unwinder that took the stack and the thread pool's
/// internals. A stack keeps its other frames, innermost first, so that its
/// first frame is the user's allocation site (docs/MEMORY_SNAPSHOT.md).
const INTERNAL_PREFIXES: &[&str] = &[
    "tessera::",
    "tsr_",
    "std::",
    "core::",
    "alloc::",
    "backtrace::",
    "rayon::",
    "rayon_core::",
    "crossbeam_deque::",
    "crossbeam_epoch::",
    "crossbeam_utils::",
    "__rust",
    "rust_",
];

/// Source-file markers of the frames a snapshot leaves out, for frames
/// whose name alone does not say (debug info with line tables only, as
/// CI builds, names an inlined frame `trace` or `{closure#0}` without its
/// path): the Rust standard library's sources and the unwinder's and the
/// thread pool's crates. tessera's own sources are recognised by
/// [`OWN_SOURCES`].
const INTERNAL_FILES: &[&str] = &[
    "/rustc/",
    "/library/std/",
    "/library/core/",
    "/library/alloc/",
    "/backtrace-0.",
    "/rayon-1.",
    "/rayon-core-1.",
    "/crossbeam-deque-",
    "/crossbeam-epoch-",
    "/crossbeam-utils-",
];

/// tessera's own source directory, as the compiler recorded it in the
/// debug info.
const OWN_SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/");

/// Whether a frame is tessera's own or the runtime's: by its source file
/// when the debug info names one ([`OWN_SOURCES`], [`INTERNAL_FILES`]),
/// else by its function's name ([`is_internal`]).
pub(crate) fn is_internal_frame(f: &Frame) -> bool {
    if let Some(file) = &f.file {
        if file.starts_with(OWN_SOURCES) || INTERNAL_FILES.iter().any(|m| file.contains(m)) {
            return true;
        }
    }
    is_internal(&f.function)
}

/// Whether a frame's function is tessera's own or the runtime's: one of
/// [`INTERNAL_PREFIXES`], also behind the `<` (and `&`, `&mut `) of a
/// trait method's path, as in
/// `<core::panic::unwind_safe::AssertUnwindSafe<F> as ...>::call_once` or
/// `<&F as core::ops::function::Fn<A>>::call`.
pub(crate) fn is_internal(function: &str) -> bool {
    let mut f = function;
    if let Some(rest) = f.strip_prefix('<') {
        f = rest.strip_prefix('&').unwrap_or(rest);
        f = f.strip_prefix("mut ").unwrap_or(f);
        // A generic parameter (`<F as core::...>`, no path of its own):
        // judged by its trait.
        if let Some((ty, tr)) = f.split_once(" as ") {
            if !ty.contains("::") {
                f = tr;
            }
        }
    }
    INTERNAL_PREFIXES.iter().any(|p| f.starts_with(p))
}

/// Interned frames, and each stack as indices into them.
#[derive(Default)]
pub(crate) struct Frames {
    pub(crate) table: Vec<Frame>,
    index: HashMap<Frame, usize>,
    /// Return address -> its frames, innermost first (several when inlined).
    by_ip: HashMap<usize, Arc<[Frame]>>,
    /// Stack (by address of its shared array) -> indices.
    by_stack: HashMap<usize, Arc<[usize]>>,
}

impl Frames {
    /// The indices of `stack`'s frames, innermost first, without tessera's
    /// own and the runtime's ([`is_internal`]): the first is the innermost
    /// frame of the caller. A stack with no other frame (an allocation
    /// made by tessera on a pool thread) keeps its innermost frame outside
    /// the allocator and the runtime, or else its innermost frame. A
    /// host's frames, all of them, go before the innermost native frame
    /// its registration names (`enter`), or after the native frames.
    /// Stacks are known by address: every stack given must stay alive
    /// while this `Frames` is used (the snapshot's events hold theirs).
    pub(crate) fn stack(&mut self, stack: &Stack) -> Arc<[usize]> {
        let key = Arc::as_ptr(stack) as usize;
        if let Some(s) = self.by_stack.get(&key) {
            return s.clone();
        }
        let all: Vec<Frame> = stack
            .ips
            .iter()
            .flat_map(|&ip| self.ip(ip).to_vec())
            .collect();
        let mut kept: Vec<&Frame> = all.iter().filter(|f| !is_internal_frame(f)).collect();
        if kept.is_empty() {
            let fallback = all
                .iter()
                .find(|f| {
                    let n = f.function.trim_start_matches('<');
                    n.starts_with("tessera::") && !n.starts_with("tessera::allocator::")
                })
                .or(all.first());
            kept.extend(fallback);
        }
        let host: Vec<Frame> = stack.host.as_ref().map_or_else(Vec::new, |h| {
            h.frames
                .iter()
                .map(|f| Frame {
                    function: f.function.to_string(),
                    file: f.file.as_deref().map(str::to_owned),
                    line: f.line,
                    host: Some(h.source.host.clone()),
                })
                .collect()
        });
        if !host.is_empty() {
            let enter = stack.host.as_ref().and_then(|h| h.source.enter.as_deref());
            let at = enter
                .and_then(|e| kept.iter().position(|f| f.function == e))
                .unwrap_or(kept.len());
            kept.splice(at..at, host.iter());
        }
        let out: Arc<[usize]> = kept.into_iter().map(|f| self.intern(f)).collect();
        self.by_stack.insert(key, out.clone());
        out
    }

    fn intern(&mut self, f: &Frame) -> usize {
        if let Some(&i) = self.index.get(f) {
            return i;
        }
        self.table.push(f.clone());
        self.index.insert(f.clone(), self.table.len() - 1);
        self.table.len() - 1
    }

    fn ip(&mut self, ip: usize) -> Arc<[Frame]> {
        if let Some(v) = self.by_ip.get(&ip) {
            return v.clone();
        }
        let mut found = Vec::new();
        // The return address points after the call; look up the call.
        backtrace::resolve(ip.saturating_sub(1) as *mut std::ffi::c_void, |sym| {
            found.push(Frame {
                function: sym
                    .name()
                    .map_or_else(|| "??".to_string(), |n| format!("{n:#}")),
                file: sym.filename().map(|f| f.display().to_string()),
                line: sym.lineno(),
                host: None,
            });
        });
        if found.is_empty() {
            found.push(Frame {
                function: "??".to_string(),
                file: None,
                line: None,
                host: None,
            });
        }
        let v: Arc<[Frame]> = found.into();
        self.by_ip.insert(ip, v.clone());
        v
    }
}

/// The device's JSON object fields: (type number, index).
pub(crate) fn device_numbers(d: Device) -> (i64, i64) {
    (d.device_type.raw() as i64, d.index as i64)
}

/// Writes a snapshot to `path`, atomically as a tensor save
/// (`crate::files::replace_file`): a new file beside it renamed over it,
/// a destination that is not a regular file (a FIFO, a device) refused,
/// and nothing changed on an error.
pub fn write(path: &std::path::Path, format: Format) -> Result<()> {
    let g = gather();
    let bytes = match format {
        Format::Json => json::render(&g),
        Format::Torch => torch::render(&g)?,
    };
    crate::files::replace_file(path, false, "the memory snapshot", |file, _| {
        std::io::Write::write_all(file, &bytes).map_err(|e| {
            crate::err!(
                Io,
                "can't write the memory snapshot to '{}': {}",
                path.display(),
                crate::files::reason(&e)
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::{is_internal, is_internal_frame, Frame, Frames, OWN_SOURCES};
    use crate::allocator::history::{test_source, Captured, HostFrame, HostStack};
    use std::sync::Arc;

    /// This test's own native stack, as history captures one.
    #[inline(never)]
    fn native_ips() -> Box<[usize]> {
        let mut ips = Vec::new();
        backtrace::trace(|f| {
            ips.push(f.ip() as usize);
            ips.len() < 64
        });
        ips.into()
    }

    fn functions(frames: &Frames, idx: &[usize]) -> Vec<String> {
        idx.iter()
            .map(|&i| frames.table[i].function.clone())
            .collect()
    }

    /// A host's frames go, all of them and in order, before the innermost
    /// native frame its registration names, else after the native frames;
    /// each carries the host's name.
    #[test]
    fn host_frames_are_spliced_where_the_host_enters() {
        let ips = native_ips();
        let mut frames = Frames::default();
        let native = Arc::new(Captured {
            ips: ips.clone(),
            host: None,
        });
        let idx = frames.stack(&native);
        let plain = functions(&frames, &idx);
        assert!(plain.len() >= 2, "{plain:?}");
        let host_frames: Box<[HostFrame]> = ["inner", "outer"]
            .iter()
            .enumerate()
            .map(|(i, f)| HostFrame {
                file: Some("model.py".into()),
                function: (*f).into(),
                line: Some(10 + i as u32),
            })
            .collect();
        // Every stack stays alive to the end, as the events keep theirs
        // while a snapshot is made: `Frames` knows a stack by its address,
        // which a dropped one could hand to the next.
        let mut alive = Vec::new();
        let mut cases = vec![(None, plain.len()), (Some("no_such_function"), plain.len())];
        // The host enters at a native function named once below it (the
        // innermost frame of that name is where its frames go). Where no
        // frame has a name of its own (a build without symbols: all
        // "??", as under qemu for aarch64), that case cannot be made.
        if let Some(at) = (1..plain.len()).find(|&i| !plain[..i].contains(&plain[i])) {
            cases.push((Some(plain[at].as_str()), at));
        }
        for (enter, at) in cases {
            let with_host = Arc::new(Captured {
                ips: ips.clone(),
                host: Some(HostStack {
                    source: test_source("python", enter),
                    frames: host_frames.clone(),
                }),
            });
            let idx = frames.stack(&with_host);
            alive.push(with_host);
            let mut want = plain.clone();
            want.splice(at..at, ["inner".to_owned(), "outer".to_owned()]);
            assert_eq!(functions(&frames, &idx), want, "enter {enter:?}");
            let f = &frames.table[idx[at]];
            assert_eq!(f.host.as_deref(), Some("python"));
            assert_eq!((f.file.as_deref(), f.line), (Some("model.py"), Some(10)));
            assert!(frames.table[idx[0]].host.is_none() || at == 0);
        }
    }

    fn frame(function: &str, file: Option<&str>) -> Frame {
        Frame {
            function: function.into(),
            file: file.map(Into::into),
            line: Some(1),
            host: None,
        }
    }

    /// With line tables only, inlined frames carry bare names: the file
    /// decides (CI's debug info; the C test of the same failed there).
    #[test]
    fn bare_named_frames_are_judged_by_their_file() {
        let own = format!("{OWN_SOURCES}allocator/reporter.rs");
        for (f, file) in [
            ("trace", "/root/.cargo/registry/src/index.crates.io-x/backtrace-0.3.77/src/backtrace/libunwind.rs"),
            ("record_history", own.as_str()),
            ("{closure#0}", own.as_str()),
            ("call_once", "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/ops/function.rs"),
            ("wait_until_cold", "/root/.cargo/registry/src/index.crates.io-x/rayon-core-1.13.0/src/registry.rs"),
        ] {
            assert!(is_internal_frame(&frame(f, Some(file))), "{f} in {file}");
        }
        for (f, file) in [
            (
                "c_user_site_allocates",
                Some("/tmp/ci/c_tests/test_memory_history.c"),
            ),
            ("main", Some("/home/user/app/src/main.rs")),
            ("load_weights", None),
        ] {
            assert!(!is_internal_frame(&frame(f, file)), "{f} in {file:?}");
        }
    }

    #[test]
    fn internal_frames_are_tesseras_and_the_runtimes() {
        for f in [
            "tessera::allocator::history::capture",
            "<tessera::allocator::caching::CachingAllocator as tessera::allocator::backend::OwnStats>::allocate_tracked",
            "tsr_storage_new",
            "std::panicking::catch_unwind",
            "<core::panic::unwind_safe::AssertUnwindSafe<F> as core::ops::function::FnOnce<()>>::call_once",
            "<&F as core::ops::function::Fn<A>>::call",
            "<alloc::boxed::Box<F,A> as core::ops::function::FnOnce<Args>>::call_once",
            "backtrace::backtrace::libunwind::trace",
            "rayon_core::registry::WorkerThread::wait_until_cold",
            "__rust_try",
        ] {
            assert!(is_internal(f), "{f}");
        }
        for f in [
            "load_weights",
            "main",
            "memory_history::user_site",
            "<memory_history::Limited as tessera::allocator::RawAllocator>::allocate",
            "_start",
            "??",
        ] {
            assert!(!is_internal(f), "{f}");
        }
    }
}
