//! tessera's JSON snapshot (docs/MEMORY_SNAPSHOT.md,
//! docs/snapshot.schema.json).

use super::{device_numbers, Frames, Gathered};
use crate::device::Device;
use serde_json::{json, Map, Value};

fn hex(addr: usize) -> Value {
    Value::String(format!("{addr:#x}"))
}

fn device(d: Device) -> Value {
    let (t, i) = device_numbers(d);
    json!({"type": t, "index": i})
}

/// The document, as bytes.
pub(super) fn render(g: &Gathered) -> Vec<u8> {
    let mut frames = Frames::default();
    let allocators: Vec<Value> = g
        .allocators
        .iter()
        .map(|a| {
            let blocks: Vec<Value> = a
                .blocks
                .iter()
                .map(|(addr, b)| {
                    let mut o = Map::new();
                    o.insert("addr".into(), hex(*addr));
                    o.insert("size".into(), json!(b.size));
                    o.insert("time_ns".into(), json!(g.scale.ns(b.ticks)));
                    if let Some(s) = &b.stack {
                        o.insert("stack".into(), json!(&*frames.stack(s)));
                    }
                    Value::Object(o)
                })
                .collect();
            let s = &a.stats;
            let mut o = Map::new();
            o.insert("name".into(), json!(a.tag.name));
            o.insert("device".into(), device(a.tag.device));
            o.insert("kind".into(), json!(a.tag.kind.as_str()));
            if let Some(inner) = &a.tag.inner {
                o.insert("inner".into(), json!(inner));
            }
            o.insert(
                "stats".into(),
                json!({
                    "allocated_bytes": s.allocated_bytes,
                    "peak_bytes": s.peak_bytes,
                    "num_allocs": s.num_allocs,
                    "num_frees": s.num_frees,
                    "num_failed": s.num_failed,
                }),
            );
            o.insert("blocks".into(), Value::Array(blocks));
            if let Some(segs) = &a.segments {
                let segs: Vec<Value> = segs
                    .iter()
                    .map(|seg| {
                        let blocks: Vec<Value> = seg
                            .blocks
                            .iter()
                            .map(|b| {
                                let mut o = Map::new();
                                o.insert("addr".into(), hex(b.addr));
                                o.insert("size".into(), json!(b.size));
                                o.insert(
                                    "state".into(),
                                    json!(if b.allocated { "allocated" } else { "free" }),
                                );
                                if let Some(r) = b.requested {
                                    o.insert("requested".into(), json!(r));
                                }
                                Value::Object(o)
                            })
                            .collect();
                        let mut v = json!({"addr": hex(seg.addr), "size": seg.size,
                                           "pool": seg.pool, "blocks": blocks});
                        if seg.expandable {
                            v["expandable"] = json!(true);
                        }
                        v
                    })
                    .collect();
                o.insert("segments".into(), Value::Array(segs));
            }
            Value::Object(o)
        })
        .collect();
    let events: Vec<Value> = g
        .events
        .iter()
        .map(|e| {
            let mut o = Map::new();
            o.insert("action".into(), json!(e.action.name()));
            o.insert("allocator".into(), json!(e.tag.name));
            o.insert("device".into(), device(e.tag.device));
            o.insert("addr".into(), hex(e.addr));
            o.insert("size".into(), json!(e.size));
            o.insert("time_ns".into(), json!(g.scale.ns(e.ticks)));
            if let Some(s) = &e.stack {
                o.insert("stack".into(), json!(&*frames.stack(s)));
            }
            Value::Object(o)
        })
        .collect();
    let frames: Vec<Value> = frames
        .table
        .iter()
        .map(|f| {
            let mut o = Map::new();
            o.insert("function".into(), json!(f.function));
            if let Some(file) = &f.file {
                o.insert("file".into(), json!(file));
            }
            if let Some(line) = f.line {
                o.insert("line".into(), json!(line));
            }
            if let Some(host) = &f.host {
                o.insert("host".into(), json!(&**host));
            }
            Value::Object(o)
        })
        .collect();
    let mut process = Map::new();
    process.insert("pid".into(), json!(std::process::id()));
    if let Ok(exe) = std::env::current_exe() {
        process.insert("executable".into(), json!(exe.display().to_string()));
    }
    let doc = json!({
        "format": "tessera-memory-snapshot",
        "version": 1,
        "producer": {"name": "tessera", "version": env!("CARGO_PKG_VERSION")},
        "process": process,
        "taken": {"unix_time_ms": g.unix_ms, "time_ns": g.taken_ns},
        "history": {
            "recording": g.recording,
            "max_entries": g.max_entries,
            "backtraces": g.backtraces,
            "recorded": g.recorded,
            "dropped": g.recorded.saturating_sub(g.events.len() as u64),
        },
        "allocators": allocators,
        "frames": frames,
        "events": events,
    });
    let mut out = serde_json::to_vec(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}
