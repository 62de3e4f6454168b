//! Reading the TORCH form back: the dictionary `torch.cuda.memory._snapshot()`
//! returns, pickled (what PyTorch's memory_viz loads; tessera's own TORCH
//! snapshots, `torch.rs`, have the same shape), made into tessera's JSON
//! form (docs/MEMORY_SNAPSHOT.md), so that the memory viewer shows either.
//!
//! How the fields map:
//! - Each (device, allocator name) pair is one allocator of kind
//!   `caching`: PyTorch's snapshots number CUDA devices (device `d` is
//!   `{type: 1, index: d}`, named `CUDACachingAllocator`); tessera's own name
//!   their allocator in each segment and event (`allocator`) and their
//!   devices in `tessera_devices`.
//! - A segment is a segment; its blocks tile it from its address (a block
//!   without an address, as `_profile_to_snapshot` writes them, starts where
//!   the one before ended). `active_allocated` and `active_pending_free`
//!   (`active_awaiting_free` in PyTorch's documentation) blocks are
//!   allocated, `inactive` ones free. An allocated block is also a live
//!   block of the allocator, of the size the caller asked for
//!   (`requested_size`, as the trace's `alloc` and `free` entries count it;
//!   the segment block keeps the rounded size), its frames as its stack.
//! - Trace entries: `alloc` is `alloc`, `free_completed` is `free`
//!   (`free_requested` is left out: the block stays live until the free
//!   completes), `segment_alloc` / `segment_map` are `segment_alloc`,
//!   `segment_free` / `segment_unmap` are `segment_free`, `oom` is `oom`;
//!   other actions (`snapshot`, `annotate`) are left out. `time_us` counts
//!   from the first event (PyTorch writes Unix time); a trace without times
//!   (older PyTorch) gets its entries' positions as microseconds.
//! - Statistics: what the snapshot shows (bytes allocated now, counts of the
//!   events, the peak over the events); history as if the ring held every
//!   event (PyTorch does not say what it dropped).
//!
//! The pickle is read by [`crate::pickle::parse`] with no global allowed:
//! a snapshot holds plain values only.

use crate::device::DeviceType;
use crate::error::Result;
use crate::pickle::{self, Kind, Limits, Pairs, Val};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The allocator name of PyTorch's snapshots, which name none.
const TORCH_ALLOCATOR: &str = "CUDACachingAllocator";

/// One allocator being filled.
struct Alloc {
    name: String,
    device: (i64, i64),
    blocks: Vec<Value>,
    segments: Vec<Value>,
    allocated: u64,
    /// Its events' (action, size), oldest first: for the counts and peak.
    events: Vec<(&'static str, u64)>,
}

/// The document being built.
struct Doc {
    allocators: Vec<Alloc>,
    by_key: HashMap<(i64, String), usize>,
    devices: Vec<(i64, i64)>,
    frames: Vec<Value>,
    frame_index: HashMap<(String, String, i64, Option<String>), usize>,
    /// Frame lists already interned, by pickle node (PyTorch's pickles
    /// share them through the memo).
    stacks: HashMap<u32, Vec<usize>>,
}

fn bad(what: &str, got: Val<'_>, expected: &str) -> crate::error::Error {
    crate::err!(
        Format,
        "memory snapshot: {what} is {}: expected {expected}",
        got.describe()
    )
}

fn dict<'p>(v: Val<'p>, what: &str) -> Result<Pairs<'p>> {
    match v.kind() {
        Kind::Dict(d) => Ok(d),
        _ => Err(bad(what, v, "a dict")),
    }
}

/// An int field that must be there and be >= 0.
fn count(d: &Pairs<'_>, key: &str, what: &str) -> Result<u64> {
    let v = d.get(key).ok_or_else(|| {
        crate::err!(
            Format,
            "memory snapshot: {what} has no '{key}': expected an int"
        )
    })?;
    v.as_int()
        .and_then(|i| u64::try_from(i).ok())
        .ok_or_else(|| bad(&format!("{what}'s '{key}'"), v, "an int >= 0"))
}

/// An optional int field (absent or None: None).
fn opt_count(d: &Pairs<'_>, key: &str, what: &str) -> Result<Option<u64>> {
    match d.get(key) {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(_) => count(d, key, what).map(Some),
    }
}

fn hex(addr: u64) -> Value {
    Value::String(format!("{addr:#x}"))
}

/// A device named as tessera writes them ("cpu", "cuda:1").
fn device_named(name: &str) -> Option<(i64, i64)> {
    let (ty, index) = match name.split_once(':') {
        Some((t, i)) => (t, i.parse::<i64>().ok()?),
        None => (name, -1),
    };
    (0..=127i8)
        .filter_map(|raw| DeviceType::from_raw(raw).ok())
        .find(|t| t.name() == ty)
        .map(|t| (t.raw() as i64, index))
}

impl Doc {
    /// The allocator of `name` on device number `d`, made on first use.
    fn allocator(&mut self, d: i64, name: Option<&str>) -> usize {
        let name = name.unwrap_or(TORCH_ALLOCATOR).to_owned();
        let key = (d, name);
        if let Some(&i) = self.by_key.get(&key) {
            return i;
        }
        let device = usize::try_from(d)
            .ok()
            .and_then(|i| self.devices.get(i).copied())
            .unwrap_or((DeviceType::Cuda.raw() as i64, d.clamp(-1, 127)));
        self.allocators.push(Alloc {
            name: key.1.clone(),
            device,
            blocks: Vec::new(),
            segments: Vec::new(),
            allocated: 0,
            events: Vec::new(),
        });
        self.by_key.insert(key, self.allocators.len() - 1);
        self.allocators.len() - 1
    }

    /// The frame indices of a list of `{filename, line, name}` dicts.
    fn stack(&mut self, frames: Val<'_>, what: &str) -> Result<Vec<usize>> {
        if let Some(s) = self.stacks.get(&frames.id()) {
            return Ok(s.clone());
        }
        let seq = frames
            .as_seq()
            .ok_or_else(|| bad(&format!("{what}'s 'frames'"), frames, "a list"))?;
        let mut out = Vec::with_capacity(seq.len());
        for f in seq.iter() {
            let fd = dict(f, &format!("a frame of {what}"))?;
            let text = |k: &str| fd.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
            let function = Some(text("name")).filter(|s| !s.is_empty());
            let function = function.unwrap_or_else(|| "??".into());
            let file = text("filename");
            let line = fd.get("line").and_then(|v| v.as_int()).unwrap_or(0).max(0);
            // A host's frame: tessera writes whose it is; PyTorch's Python
            // frames are the ones in a .py file.
            let host = Some(text("host"))
                .filter(|h| !h.is_empty())
                .or_else(|| file.ends_with(".py").then(|| "python".to_owned()));
            let key = (function, file, line, host);
            let next = self.frames.len();
            let i = *self.frame_index.entry(key.clone()).or_insert(next);
            if i == next {
                let mut o = Map::new();
                o.insert("function".into(), json!(key.0));
                if !key.1.is_empty() {
                    o.insert("file".into(), json!(key.1));
                }
                o.insert("line".into(), json!(key.2));
                if let Some(host) = &key.3 {
                    o.insert("host".into(), json!(host));
                }
                self.frames.push(Value::Object(o));
            }
            out.push(i);
        }
        self.stacks.insert(frames.id(), out.clone());
        Ok(out)
    }

    /// The stack of a block or trace entry: its `frames`, or (snapshots
    /// before PyTorch 2.1) the first `history` entry's.
    fn stack_of(&mut self, d: &Pairs<'_>, what: &str) -> Result<Vec<usize>> {
        if let Some(f) = d.get("frames") {
            return self.stack(f, what);
        }
        let first = d
            .get("history")
            .and_then(|h| h.as_seq())
            .and_then(|h| h.get(0));
        match first.and_then(|h| dict(h, what).ok()?.get("frames")) {
            Some(f) => self.stack(f, what),
            None => Ok(Vec::new()),
        }
    }

    fn segment(&mut self, seg: Val<'_>, n: usize) -> Result<()> {
        let what = format!("segment {n}");
        let s = dict(seg, &what)?;
        let d = s.get("device").and_then(|v| v.as_int()).unwrap_or(0);
        let a = self.allocator(d, s.get("allocator").and_then(|v| v.as_str()));
        let addr = opt_count(&s, "address", &what)?.unwrap_or(0);
        let blocks_val = s
            .get("blocks")
            .ok_or_else(|| crate::err!(Format, "memory snapshot: {what} has no 'blocks'"))?;
        let blocks = blocks_val
            .as_seq()
            .ok_or_else(|| bad(&format!("{what}'s 'blocks'"), blocks_val, "a list"))?;
        let mut at = addr;
        let mut seg_blocks = Vec::with_capacity(blocks.len());
        for (j, b) in blocks.iter().enumerate() {
            let bwhat = format!("{what}, block {j}");
            let bd = dict(b, &bwhat)?;
            let size = count(&bd, "size", &bwhat)?;
            let baddr = opt_count(&bd, "address", &bwhat)?.unwrap_or(at);
            at = baddr.saturating_add(size);
            let state = bd.get("state").and_then(|v| v.as_str()).unwrap_or("");
            let allocated = match state {
                "active_allocated" | "active_pending_free" | "active_awaiting_free" => true,
                "inactive" => false,
                _ => {
                    return Err(bad(
                        &format!("{bwhat}'s 'state'"),
                        bd.get("state").unwrap_or(b),
                        "active_allocated, active_pending_free (active_awaiting_free) or \
                         inactive",
                    ))
                }
            };
            let requested = match opt_count(&bd, "requested_size", &bwhat)? {
                Some(r) => Some(r),
                None => bd
                    .get("history")
                    .and_then(|h| h.as_seq()?.get(0))
                    .and_then(|h| dict(h, &bwhat).ok()?.get("real_size")?.as_int())
                    .and_then(|r| u64::try_from(r).ok()),
            }
            .filter(|&r| r != size && allocated);
            let mut sb = Map::new();
            sb.insert("addr".into(), hex(baddr));
            sb.insert("size".into(), json!(size));
            sb.insert(
                "state".into(),
                json!(if allocated { "allocated" } else { "free" }),
            );
            if let Some(r) = requested {
                sb.insert("requested".into(), json!(r));
            }
            seg_blocks.push(Value::Object(sb));
            if allocated {
                let stack = self.stack_of(&bd, &bwhat)?;
                let live = requested.unwrap_or(size);
                let mut lb = Map::new();
                lb.insert("addr".into(), hex(baddr));
                lb.insert("size".into(), json!(live));
                if !stack.is_empty() {
                    lb.insert("stack".into(), json!(stack));
                }
                let al = &mut self.allocators[a];
                al.allocated = al.allocated.saturating_add(live);
                al.blocks.push(Value::Object(lb));
            }
        }
        let total = opt_count(&s, "total_size", &what)?.unwrap_or(at.saturating_sub(addr));
        let mut o = Map::new();
        o.insert("addr".into(), hex(addr));
        o.insert("size".into(), json!(total));
        if let Some(pool) = s.get("segment_type").and_then(|v| v.as_str()) {
            o.insert("pool".into(), json!(pool));
        }
        o.insert("blocks".into(), Value::Array(seg_blocks));
        self.allocators[a].segments.push(Value::Object(o));
        Ok(())
    }
}

/// One trace entry kept: (time in µs or position, allocator, action, JSON
/// without time_ns).
type Entry = (u64, usize, &'static str, Map<String, Value>);

/// Converts the TORCH form of a memory snapshot (the pickled dictionary
/// `torch.cuda.memory._snapshot()` returns, or what tessera wrote with
/// `Format::Torch`) into tessera's JSON form (docs/snapshot.schema.json),
/// as text. A pickled list is read as the segments alone (the older
/// `torch.cuda.memory_snapshot()`).
///
/// Errors: `Format`, naming the field that is missing or of the wrong type
/// (`segment 3, block 2 has no 'size'`), or what in the pickle cannot be
/// read (any global: a snapshot holds plain values only).
pub fn json_from_torch(bytes: &[u8]) -> Result<String> {
    let p = pickle::parse(bytes, &|_, _| false, Limits::default())?;
    let root = p.root();
    let (segments, traces, devices) = match root.kind() {
        Kind::Dict(d) => (
            d.get("segments"),
            d.get("device_traces"),
            d.get("tessera_devices"),
        ),
        Kind::List(_) => (Some(root), None, None),
        _ => {
            return Err(bad(
                "the pickle",
                root,
                "the dict torch.cuda.memory._snapshot() returns (with 'segments' and \
                 'device_traces')",
            ))
        }
    };
    crate::ensure!(
        segments.is_some() || traces.is_some(),
        Format,
        "memory snapshot: the dict has neither 'segments' nor 'device_traces': expected \
         what torch.cuda.memory._snapshot() returns"
    );
    let mut doc = Doc {
        allocators: Vec::new(),
        by_key: HashMap::new(),
        devices: Vec::new(),
        frames: Vec::new(),
        frame_index: HashMap::new(),
        stacks: HashMap::new(),
    };
    if let Some(names) = devices.and_then(|d| d.as_seq()) {
        doc.devices = names
            .iter()
            .map(|n| n.as_str().and_then(device_named).unwrap_or((20, -1)))
            .collect();
    }
    if let Some(segs) = segments {
        let list = segs
            .as_seq()
            .ok_or_else(|| bad("'segments'", segs, "a list"))?;
        for (n, seg) in list.iter().enumerate() {
            doc.segment(seg, n)?;
        }
    }
    let mut entries: Vec<Entry> = Vec::new();
    let mut timed = true;
    if let Some(traces) = traces {
        let per_device = traces
            .as_seq()
            .ok_or_else(|| bad("'device_traces'", traces, "a list (one per device)"))?;
        for (d, trace) in per_device.iter().enumerate() {
            let list = trace
                .as_seq()
                .ok_or_else(|| bad(&format!("device trace {d}"), trace, "a list"))?;
            for (i, e) in list.iter().enumerate() {
                let what = format!("device trace {d}, entry {i}");
                let ed = dict(e, &what)?;
                let action = match ed.get("action").and_then(|v| v.as_str()) {
                    Some("alloc") => "alloc",
                    Some("free_completed") => "free",
                    Some("segment_alloc" | "segment_map") => "segment_alloc",
                    Some("segment_free" | "segment_unmap") => "segment_free",
                    Some("oom") => "oom",
                    Some(_) => continue,
                    None => {
                        return Err(crate::err!(
                            Format,
                            "memory snapshot: {what} has no 'action' str"
                        ))
                    }
                };
                let a = doc.allocator(d as i64, ed.get("allocator").and_then(|v| v.as_str()));
                let size = count(&ed, "size", &what)?;
                let addr = if action == "oom" {
                    0
                } else {
                    count(&ed, "addr", &what)?
                };
                let time = opt_count(&ed, "time_us", &what)?;
                timed &= time.is_some();
                let stack = doc.stack_of(&ed, &what)?;
                let mut o = Map::new();
                o.insert("action".into(), json!(action));
                o.insert("allocator".into(), json!(doc.allocators[a].name));
                let (t, idx) = doc.allocators[a].device;
                o.insert("device".into(), json!({"type": t, "index": idx}));
                o.insert("addr".into(), hex(addr));
                o.insert("size".into(), json!(size));
                if !stack.is_empty() {
                    o.insert("stack".into(), json!(stack));
                }
                entries.push((time.unwrap_or(0), a, action, o));
            }
        }
    }
    if !timed {
        // No times (or only some): the order of the traces, one µs apart.
        for (i, e) in entries.iter_mut().enumerate() {
            e.0 = i as u64;
        }
    }
    // Times are non-decreasing in the JSON form: merged by time (stable:
    // each trace keeps its order), counted from the first.
    entries.sort_by_key(|e| e.0);
    let t0 = entries.first().map_or(0, |e| e.0);
    let t_last = entries.last().map_or(0, |e| e.0);
    let mut events = Vec::with_capacity(entries.len());
    for (t, a, action, mut o) in entries {
        o.insert("time_ns".into(), json!((t - t0).saturating_mul(1000)));
        if matches!(action, "alloc" | "free" | "oom") {
            let size = o["size"].as_u64().unwrap_or(0);
            doc.allocators[a].events.push((action, size));
        }
        events.push(Value::Object(o));
    }
    let backtraces = !doc.frames.is_empty();
    let allocators: Vec<Value> = doc.allocators.iter().map(allocator_json).collect();
    // PyTorch's time_us is Unix time: the snapshot was taken at the last
    // event (or later); a count from an origin of its own says nothing.
    let unix_ms = if timed && t_last > 1_000_000_000_000_000 {
        t_last / 1000
    } else {
        0
    };
    let n = events.len();
    let out = json!({
        "format": "tessera-memory-snapshot",
        "version": 1,
        "producer": {"name": "PyTorch (torch.cuda.memory._snapshot), converted by tessera",
                     "version": crate::VERSION},
        "process": {"pid": 0},
        "taken": {"unix_time_ms": unix_ms, "time_ns": (t_last - t0).saturating_mul(1000)},
        "history": {"recording": n > 0, "max_entries": n, "backtraces": backtraces,
                    "recorded": n, "dropped": 0},
        "allocators": allocators,
        "frames": doc.frames,
        "events": events,
    });
    serde_json::to_string(&out)
        .map_err(|e| crate::err!(Internal, "memory snapshot: JSON output failed: {e}"))
}

/// An allocator's JSON object, its statistics from what the snapshot shows.
fn allocator_json(a: &Alloc) -> Value {
    let mut in_use = a.allocated as i128;
    let mut peak = in_use;
    for &(action, size) in a.events.iter().rev() {
        match action {
            "alloc" => in_use -= size as i128,
            "free" => in_use += size as i128,
            _ => {}
        }
        peak = peak.max(in_use);
    }
    let n = |action: &str| a.events.iter().filter(|e| e.0 == action).count();
    json!({
        "name": a.name,
        "device": {"type": a.device.0, "index": a.device.1},
        "kind": "caching",
        "stats": {
            "allocated_bytes": a.allocated,
            "peak_bytes": peak.clamp(0, u64::MAX as i128) as u64,
            "num_allocs": n("alloc"),
            "num_frees": n("free"),
            "num_failed": n("oom"),
        },
        "blocks": a.blocks,
        "segments": a.segments,
    })
}
