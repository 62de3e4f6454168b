//! Memory snapshots: what every allocator holds, the segments of caching
//! allocators and the recorded history, written as tessera's JSON
//! (docs/MEMORY_SNAPSHOT.md, json.rs) or as the pickle PyTorch's
//! memory_viz reads (torch.rs, written by crate::pickle).
//!
//! Everything is gathered under the history ring's lock, after draining
//! every thread's event buffer into the ring (so no event falls between
//! the events and the live blocks), then symbolized and written outside
//! it.

mod json;
mod torch;

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
                        segments: (block.tag.kind == "caching").then(Vec::new),
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

/// A symbolized frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    pub(crate) function: String,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
}

/// Interned frames, and each stack as indices into them.
#[derive(Default)]
pub(crate) struct Frames {
    pub(crate) table: Vec<Frame>,
    index: HashMap<Frame, usize>,
    /// Return address -> its frames (several when inlined).
    by_ip: HashMap<usize, Vec<usize>>,
    /// Stack (by address of its shared array) -> indices.
    by_stack: HashMap<usize, Arc<[usize]>>,
}

impl Frames {
    /// The indices of `stack`'s frames, innermost first.
    pub(crate) fn stack(&mut self, stack: &Stack) -> Arc<[usize]> {
        let key = Arc::as_ptr(stack) as *const usize as usize;
        if let Some(s) = self.by_stack.get(&key) {
            return s.clone();
        }
        let mut out = Vec::new();
        for &ip in stack.iter() {
            out.extend(self.ip(ip));
        }
        let out: Arc<[usize]> = out.into();
        self.by_stack.insert(key, out.clone());
        out
    }

    fn ip(&mut self, ip: usize) -> Vec<usize> {
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
            });
        });
        if found.is_empty() {
            found.push(Frame {
                function: "??".to_string(),
                file: None,
                line: None,
            });
        }
        let v: Vec<usize> = found
            .into_iter()
            .map(|f| {
                let n = self.table.len();
                *self.index.entry(f.clone()).or_insert_with(|| {
                    self.table.push(f);
                    n
                })
            })
            .collect();
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
