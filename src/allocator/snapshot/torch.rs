//! The TORCH form: the dictionary torch.cuda.memory._snapshot() returns,
//! pickled, which PyTorch's memory_viz (pytorch.org/memory_viz) loads:
//! `segments` (each with its `blocks`) and `device_traces` (one list of
//! trace entries per device). tessera's allocators map onto it as
//! follows: each distinct allocator device is one "device" (index into
//! device_traces, in the order allocators were created); a caching
//! allocator's segments are segments; every other allocator's live block
//! is a segment of its own; a free is `free_requested` then
//! `free_completed` (tessera frees at once). Addresses are integers here,
//! as PyTorch writes them.

use super::{Frames, Gathered};
use crate::device::Device;
use crate::error::Result;
use crate::pickle::Value as P;
use serde_json::{json, Value};
use std::collections::HashMap;

fn frames_of(frames: &mut Frames, stack: Option<&super::Stack>) -> Value {
    let Some(stack) = stack else {
        return json!([]);
    };
    let idx = frames.stack(stack);
    Value::Array(
        idx.iter()
            .map(|&i| {
                let f = &frames.table[i];
                let mut o = json!({
                    "filename": f.file.clone().unwrap_or_else(|| "??".into()),
                    "line": f.line.unwrap_or(0),
                    "name": f.function,
                });
                // A host's frame says whose (memory_viz reads the other
                // three keys only).
                if let Some(host) = &f.host {
                    o["host"] = json!(&**host);
                }
                o
            })
            .collect(),
    )
}

/// The pickle, as bytes.
pub(super) fn render(g: &Gathered) -> Result<Vec<u8>> {
    let mut frames = Frames::default();
    let mut devices: Vec<Device> = Vec::new();
    let dev_index = |d: Device, devices: &mut Vec<Device>| -> usize {
        match devices.iter().position(|&x| x == d) {
            Some(i) => i,
            None => {
                devices.push(d);
                devices.len() - 1
            }
        }
    };
    let mut segments = Vec::new();
    for a in &g.allocators {
        let dev = dev_index(a.tag.device, &mut devices);
        let by_addr: HashMap<usize, &super::LiveBlock> =
            a.blocks.iter().map(|(addr, b)| (*addr, b)).collect();
        match &a.segments {
            Some(segs) => {
                for seg in segs {
                    let mut allocated = 0usize;
                    let mut requested = 0usize;
                    let blocks: Vec<Value> = seg
                        .blocks
                        .iter()
                        .map(|b| {
                            let live = by_addr.get(&b.addr);
                            if b.allocated {
                                allocated += b.size;
                                requested += b.requested.unwrap_or(b.size);
                            }
                            json!({
                                "address": b.addr,
                                "size": b.size,
                                "requested_size": b.requested.unwrap_or(0),
                                "state": if b.allocated { "active_allocated" } else { "inactive" },
                                "frames": frames_of(&mut frames, live.and_then(|l| l.stack.as_ref())),
                            })
                        })
                        .collect();
                    segments.push(json!({
                        "device": dev,
                        "address": seg.addr,
                        "total_size": seg.size,
                        "allocated_size": allocated,
                        "active_size": allocated,
                        "requested_size": requested,
                        "stream": seg.stream,
                        "segment_type": if seg.pool == "small" { "small" } else { "large" },
                        "segment_pool_id": [0, 0],
                        "is_expandable": seg.expandable,
                        "frames": [],
                        "blocks": blocks,
                        "allocator": a.tag.name,
                    }));
                }
            }
            None => {
                for (addr, b) in &a.blocks {
                    let fr = frames_of(&mut frames, b.stack.as_ref());
                    segments.push(json!({
                        "device": dev,
                        "address": addr,
                        "total_size": b.size,
                        "allocated_size": b.size,
                        "active_size": b.size,
                        "requested_size": b.size,
                        "stream": 0,
                        "segment_type": "large",
                        "segment_pool_id": [0, 0],
                        "is_expandable": false,
                        "frames": fr.clone(),
                        "blocks": [{
                            "address": addr,
                            "size": b.size,
                            "requested_size": b.size,
                            "state": "active_allocated",
                            "frames": fr,
                        }],
                        "allocator": a.tag.name,
                    }));
                }
            }
        }
    }
    let mut traces: Vec<Vec<Value>> = vec![Vec::new(); devices.len()];
    for e in &g.events {
        let dev = dev_index(e.tag.device, &mut devices);
        if traces.len() < devices.len() {
            traces.resize(devices.len(), Vec::new());
        }
        let fr = frames_of(&mut frames, e.stack.as_ref());
        let entry = |action: &str| {
            let mut v = json!({
                "action": action,
                "addr": e.addr,
                "size": e.size,
                "stream": 0,
                "time_us": g.scale.ns(e.ticks) / 1000,
                "frames": fr.clone(),
                "allocator": e.tag.name,
            });
            if action == "oom" {
                v["device_free"] = json!(0);
            }
            v
        };
        match e.action {
            super::history::Action::Alloc => traces[dev].push(entry("alloc")),
            super::history::Action::Free => {
                traces[dev].push(entry("free_requested"));
                traces[dev].push(entry("free_completed"));
            }
            super::history::Action::Oom => traces[dev].push(entry("oom")),
        }
    }
    let device_names: Vec<Value> = devices.iter().map(|d| json!(d.to_string())).collect();
    let doc = json!({
        "segments": segments,
        "device_traces": traces,
        "allocator_settings": {},
        "tessera_devices": device_names,
    });
    crate::pickle::write(&to_pickle(&doc))
}

/// The JSON model of the document as a pickle value (the crate's pickle
/// module writes it: protocol 2, plain values, no classes). Integers above
/// i64::MAX (none in practice: addresses and sizes stay below 2^63) become
/// floats.
fn to_pickle(v: &Value) -> P {
    match v {
        Value::Null => P::None,
        Value::Bool(b) => P::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => P::Int(i),
            (None, Some(f)) => P::Float(f),
            (None, None) => P::None,
        },
        Value::String(s) => P::Str(s.clone()),
        Value::Array(items) => P::List(items.iter().map(to_pickle).collect()),
        Value::Object(map) => P::Dict(
            map.iter()
                .map(|(k, v)| (P::Str(k.clone()), to_pickle(v)))
                .collect(),
        ),
    }
}
