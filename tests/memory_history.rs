//! Memory history, snapshots (a host's frames in them too), out-of-memory
//! recovery and the CPU thread caches, through the Rust API (the C API:
//! c_tests/test_memory_history.c).
//!
//! History is process-wide, so the tests of this binary take one lock and
//! look only at the allocators they made (unique names) or at the CPU
//! allocator while nothing else in the binary allocates.
//!
//! The snapshot tests run python3: the JSON form is validated against
//! docs/snapshot.schema.json with the `jsonschema` package, and the TORCH
//! form is read back with plain `pickle.load` (no torch needed).

use std::any::Any;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard};
use tessera::allocator::caching::{self, CachingOptions};
use tessera::allocator::history::{self, Action};
use tessera::allocator::snapshot::{self, Format};
use tessera::allocator::{cpu, oom, Allocator, RawAllocator};
use tessera::data_ptr::DataPtr;
use tessera::device::Device;
use tessera::error::Result;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A backend over malloc that refuses every request above `limit` bytes.
struct Limited {
    limit: usize,
}

unsafe extern "C" fn libc_free(p: *mut std::ffi::c_void) {
    // SAFETY: p came from malloc in Limited::allocate.
    unsafe { libc::free(p) }
}

impl RawAllocator for Limited {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        if nbytes > self.limit {
            return Err(tessera::error::Error::new(
                tessera::error::ErrorKind::OutOfMemory,
                format!("limited: {nbytes} bytes refused"),
            ));
        }
        // SAFETY: plain malloc; freed by libc_free.
        let p = unsafe { libc::malloc(nbytes.max(1)) };
        // SAFETY: libc_free frees exactly this pointer.
        Ok(unsafe { DataPtr::from_raw_parts(p, p, Some(libc_free), device) })
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn events_of(name: &str) -> Vec<(Action, usize, usize)> {
    history::events()
        .into_iter()
        .filter(|e| e.tag.name == name)
        .map(|e| (e.action, e.addr, e.size))
        .collect()
}

/// A scratch path of this process (two runs of this binary side by side
/// must not share one).
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{}-{name}", std::process::id()))
}

#[test]
fn records_cpu_caching_and_other_allocators_with_free_sizes() {
    let _s = serial();
    history::start(10_000, false).unwrap();
    let plain = Allocator::new(
        "hist-plain",
        Device::CPU,
        Box::new(Limited { limit: 1 << 30 }),
    );
    let cache = caching::new(
        plain.clone(),
        CachingOptions {
            name: Some("hist-caching".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let a = plain.allocate(100).unwrap();
    let a_addr = a.get() as usize;
    let b = cache.allocate(1000).unwrap();
    let b_addr = b.get() as usize;
    drop(b);
    // Reuse of the cached block: a second alloc event, same address.
    let b2 = cache.allocate(1000).unwrap();
    assert_eq!(b2.get() as usize, b_addr);
    drop(a);
    let c = Allocator::cpu().allocate(4096).unwrap();
    let c_addr = c.get() as usize;
    drop(c);
    let plain_events = events_of("hist-plain");
    // The plain allocator: its block, then the caching allocator's segment
    // (2 MiB, small pool), then the free of its block with its size.
    assert_eq!(plain_events[0], (Action::Alloc, a_addr, 100));
    assert_eq!(plain_events[1].0, Action::Alloc);
    assert_eq!(plain_events[1].2, 2 << 20);
    assert_eq!(plain_events[2], (Action::Free, a_addr, 100));
    assert_eq!(
        events_of("hist-caching"),
        vec![
            (Action::Alloc, b_addr, 1000),
            (Action::Free, b_addr, 1000),
            (Action::Alloc, b_addr, 1000),
        ]
    );
    let cpu_events = events_of("cpu");
    assert!(cpu_events.contains(&(Action::Alloc, c_addr, 4096)));
    assert!(cpu_events.contains(&(Action::Free, c_addr, 4096)));
    drop(b2);
    drop(cache);
    history::stop();
    assert!(history::events().is_empty(), "stop forgets the events");
}

#[test]
fn ring_keeps_the_newest_max_entries() {
    let _s = serial();
    history::stop();
    let plain = Allocator::new(
        "hist-ring",
        Device::CPU,
        Box::new(Limited { limit: 1 << 30 }),
    );
    history::start(4, false).unwrap();
    let mut addrs = Vec::new();
    for i in 1..=10 {
        let p = plain.allocate(i * 8).unwrap();
        addrs.push(p.get() as usize);
        std::mem::forget(p); // keep addresses distinct; freed below
    }
    let ev = events_of("hist-ring");
    assert_eq!(ev.len(), 4);
    assert_eq!(
        ev.iter().map(|e| e.2).collect::<Vec<_>>(),
        vec![56, 64, 72, 80],
        "the newest four, oldest first"
    );
    // Restarting with a smaller ring keeps the newest that fit.
    history::start(2, false).unwrap();
    assert_eq!(
        events_of("hist-ring")
            .iter()
            .map(|e| e.2)
            .collect::<Vec<_>>(),
        vec![72, 80]
    );
    assert!(
        history::start(0, false).is_err(),
        "max_entries 0 is refused"
    );
    history::stop();
    for a in addrs {
        // SAFETY: malloc'd by Limited, forgotten above.
        unsafe { libc::free(a as *mut _) };
    }
}

fn python(args: &[&str]) -> String {
    let out = Command::new("python3")
        .args(args)
        .output()
        .expect("python3 runs (the snapshot tests need it)");
    assert!(
        out.status.success(),
        "python3 {:?} failed:\n{}\n{}",
        args,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn snapshots_validate_and_load() {
    let _s = serial();
    history::start(1000, true).unwrap();
    let plain = Allocator::new(
        "snap-plain",
        Device::CPU,
        Box::new(Limited { limit: 1 << 30 }),
    );
    let cache = caching::new(
        plain.clone(),
        CachingOptions {
            name: Some("snap-caching".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let keep = cache.allocate(3000).unwrap();
    let gone = cache.allocate(5000).unwrap();
    let raw = plain.allocate(777).unwrap();
    drop(gone);
    let json = scratch("snapshot.json");
    let torch = scratch("snapshot.pickle");
    snapshot::write(&json, Format::Json).unwrap();
    snapshot::write(&torch, Format::Torch).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let check = format!(
        r#"
import json, sys, jsonschema
doc = json.load(open({json:?}))
schema = json.load(open({root:?} + "/docs/snapshot.schema.json"))
jsonschema.validate(doc, schema)
al = {{a["name"]: a for a in doc["allocators"]}}
c = al["snap-caching"]
assert c["kind"] == "caching" and c["inner"] == "snap-plain", c
assert [b["size"] for b in c["blocks"]] == [3000], c["blocks"]
seg = c["segments"][0]
states = [b["state"] for b in seg["blocks"]]
assert "allocated" in states and "free" in states, seg
assert sum(b["size"] for b in seg["blocks"]) == seg["size"] == 2 << 20
p = al["snap-plain"]
assert sorted(b["size"] for b in p["blocks"]) == [777, 2 << 20], p["blocks"]
ev = [e for e in doc["events"] if e["allocator"] == "snap-caching"]
assert [(e["action"], e["size"]) for e in ev] == [("alloc", 3000), ("alloc", 5000), ("free", 5000)], ev
assert all("stack" in e for e in ev if e["action"] == "alloc")
assert doc["frames"] and all(isinstance(i, int) for i in ev[0]["stack"])
names = [doc["frames"][i]["function"] for i in ev[0]["stack"]]
assert any("snapshots_validate_and_load" in n for n in names), names
print("ok", len(doc["events"]))
"#,
        json = json.display().to_string()
    );
    assert!(python(&["-c", &check]).starts_with("ok"));
    let check_torch = format!(
        r#"
import pickle
s = pickle.load(open({torch:?}, "rb"))
assert set(s) >= {{"segments", "device_traces"}}, s.keys()
seg = [x for x in s["segments"] if x.get("allocator") == "snap-caching"][0]
for k in ("device", "address", "total_size", "allocated_size", "active_size", "stream", "segment_type", "blocks"):
    assert k in seg, k
assert seg["total_size"] == 2 << 20 and seg["allocated_size"] == 3072, seg
for b in seg["blocks"]:
    assert set(b) >= {{"address", "size", "requested_size", "state", "frames"}}, b
    assert b["state"] in ("active_allocated", "inactive")
trace = s["device_traces"][seg["device"]]
mine = [t for t in trace if t.get("allocator") == "snap-caching"]
assert [t["action"] for t in mine] == ["alloc", "alloc", "free_requested", "free_completed"], mine
for t in mine:
    assert set(t) >= {{"action", "addr", "size", "stream", "time_us", "frames"}}, t
f = mine[0]["frames"][0]
assert set(f) >= {{"filename", "line", "name"}}, f
print("ok")
"#,
        torch = torch.display().to_string()
    );
    assert!(python(&["-c", &check_torch]).starts_with("ok"));
    // The TORCH form read back into the JSON form (what `tessera
    // memory-view` does with a pickle): the same live blocks and the same
    // alloc / free events, allocator by allocator.
    let direct: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let back: serde_json::Value =
        serde_json::from_str(&snapshot::json_from_torch(&std::fs::read(&torch).unwrap()).unwrap())
            .unwrap();
    let blocks = |doc: &serde_json::Value, name: &str| {
        let a = doc["allocators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("allocator {name}"))
            .clone();
        let mut b: Vec<(String, u64)> = a["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["addr"].as_str().unwrap().to_owned(),
                    b["size"].as_u64().unwrap(),
                )
            })
            .collect();
        b.sort();
        b
    };
    let events = |doc: &serde_json::Value, name: &str| -> Vec<(String, String, u64)> {
        doc["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["allocator"] == name && e["action"] != "oom")
            .map(|e| {
                let f = |k: &str| e[k].as_str().unwrap().to_owned();
                (f("action"), f("addr"), e["size"].as_u64().unwrap())
            })
            .collect()
    };
    for name in ["snap-caching", "snap-plain"] {
        assert_eq!(
            blocks(&back, name),
            blocks(&direct, name),
            "{name}: live blocks"
        );
        assert_eq!(events(&back, name), events(&direct, name), "{name}: events");
    }
    std::fs::remove_file(&json).unwrap();
    std::fs::remove_file(&torch).unwrap();
    drop((keep, raw, cache));
    history::stop();
}

/// A host's frames (history::set_host_frames) in both forms: the JSON
/// form validates with them and names them, the TORCH form carries them
/// with a `host` key, and the TORCH form read back into the JSON form
/// keeps them, host included.
#[test]
fn host_frames_in_json_torch_and_back() {
    let _s = serial();
    history::set_host_frames(Some(history::HostFrames {
        host: "fixture-py".into(),
        enter: None,
        gather: Box::new(|sink| {
            sink.push(Some("train.py"), Some("step"), Some(41));
            sink.push(Some("train.py"), Some("<module>"), Some(7));
        }),
    }));
    history::start(1000, true).unwrap();
    let plain = Allocator::new(
        "host-plain",
        Device::CPU,
        Box::new(Limited { limit: 1 << 30 }),
    );
    let keep = plain.allocate(4321).unwrap();
    let json = scratch("host.json");
    let torch = scratch("host.pickle");
    snapshot::write(&json, Format::Json).unwrap();
    snapshot::write(&torch, Format::Torch).unwrap();
    history::set_host_frames(None);
    history::stop();
    drop(keep);
    let root = env!("CARGO_MANIFEST_DIR");
    let check = format!(
        r#"
import json, pickle, jsonschema
doc = json.load(open({json:?}))
jsonschema.validate(doc, json.load(open({root:?} + "/docs/snapshot.schema.json")))
b = [b for a in doc["allocators"] if a["name"] == "host-plain" for b in a["blocks"]][0]
host = [doc["frames"][i] for i in b["stack"] if "host" in doc["frames"][i]]
assert host == [
    {{"function": "step", "file": "train.py", "line": 41, "host": "fixture-py"}},
    {{"function": "<module>", "file": "train.py", "line": 7, "host": "fixture-py"}},
], host
# no `enter`: after the native frames
assert "host" in doc["frames"][b["stack"][-1]]
s = pickle.load(open({torch:?}, "rb"))
frames = [f for seg in s["segments"] if seg.get("allocator") == "host-plain"
          for bl in seg["blocks"] for f in bl["frames"]]
assert {{"filename": "train.py", "line": 41, "name": "step", "host": "fixture-py"}} in frames, frames
print("ok")
"#,
        json = json.display().to_string(),
        torch = torch.display().to_string()
    );
    assert!(python(&["-c", &check]).starts_with("ok"));
    let back: serde_json::Value =
        serde_json::from_str(&snapshot::json_from_torch(&std::fs::read(&torch).unwrap()).unwrap())
            .unwrap();
    let hosted: Vec<(String, String, i64, String)> = back["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f.get("host").is_some())
        .map(|f| {
            let t = |k: &str| f[k].as_str().unwrap().to_owned();
            (
                t("function"),
                t("file"),
                f["line"].as_i64().unwrap(),
                t("host"),
            )
        })
        .collect();
    assert_eq!(
        hosted,
        [
            ("step".into(), "train.py".into(), 41, "fixture-py".into()),
            ("<module>".into(), "train.py".into(), 7, "fixture-py".into()),
        ]
    );
    std::fs::remove_file(&json).unwrap();
    std::fs::remove_file(&torch).unwrap();
}

/// The allocation site of `snapshot_stacks_start_at_the_users_frame`.
#[inline(never)]
fn allocating_user_function(a: &Allocator, nbytes: usize) -> DataPtr {
    std::hint::black_box(a.allocate(nbytes).unwrap())
}

#[test]
fn snapshot_stacks_start_at_the_users_frame() {
    let _s = serial();
    history::start(1000, true).unwrap();
    let plain = Allocator::new(
        "site-plain",
        Device::CPU,
        Box::new(Limited { limit: 1 << 30 }),
    );
    let block = allocating_user_function(&plain, 4321);
    let json = scratch("site.json");
    let torch = scratch("site.pickle");
    snapshot::write(&json, Format::Json).unwrap();
    snapshot::write(&torch, Format::Torch).unwrap();
    // Both forms: the event's first frame is the function that allocated,
    // and no frame of tessera or the Rust runtime is left in any stack.
    let check = format!(
        r#"
import json, pickle
INTERNAL = tuple(p + q for p in ("", "<") for q in ("tessera::", "tsr_", "std::", "core::", "alloc::", "backtrace::"))
# Qualified with full debug info; bare with line tables only (CI's).
USER = ("memory_history::allocating_user_function", "allocating_user_function")
doc = json.load(open({json:?}))
ev = [e for e in doc["events"] if e["allocator"] == "site-plain" and e["action"] == "alloc"]
assert len(ev) == 1 and ev[0]["size"] == 4321, ev
names = [doc["frames"][i]["function"] for i in ev[0]["stack"]]
assert names[0] in USER, names[:5]
bad = [f["function"] for f in doc["frames"] if f["function"].startswith(INTERNAL)]
assert not bad, bad
s = pickle.load(open({torch:?}, "rb"))
tr = [t for d in s["device_traces"] for t in d if t.get("allocator") == "site-plain" and t["action"] == "alloc"]
assert len(tr) == 1, tr
names = [f["name"] for f in tr[0]["frames"]]
assert names[0] in USER, names[:5]
seg = [x for x in s["segments"] if x.get("allocator") == "site-plain"]
assert [f["name"] for f in seg[0]["blocks"][0]["frames"]][0] in USER, seg
every = [f["name"] for d in s["device_traces"] for t in d for f in t["frames"]]
every += [f["name"] for x in s["segments"] for b in x["blocks"] for f in b["frames"]]
bad = [n for n in every if n.startswith(INTERNAL)]
assert not bad, bad[:10]
print("ok")
"#,
        json = json.display().to_string(),
        torch = torch.display().to_string()
    );
    assert!(python(&["-c", &check]).starts_with("ok"));
    std::fs::remove_file(&json).unwrap();
    std::fs::remove_file(&torch).unwrap();
    drop((block, plain));
    history::stop();
}

#[test]
fn oom_observers_see_the_failure_once_after_recovery() {
    let _s = serial();
    let plain = Allocator::new(
        "oom-plain",
        Device::CPU,
        Box::new(Limited { limit: 4 << 20 }),
    );
    let seen: Arc<Mutex<Vec<(String, usize, u64)>>> = Arc::default();
    let s2 = seen.clone();
    oom::add_oom_observer(Arc::new(move |e: &oom::OomEvent<'_>| {
        let name = e.allocator.to_string_lossy().into_owned();
        if name.starts_with("oom-") {
            s2.lock()
                .unwrap()
                .push((name, e.requested, e.allocated_bytes));
        }
    }));
    let held = plain.allocate(1000).unwrap();
    assert!(plain.allocate(5 << 20).is_err());
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("oom-plain".to_string(), 5 << 20, 1000)]
    );
    // A caching allocator over it: the inner failure is not reported on its
    // own; the caching allocator's is, once.
    seen.lock().unwrap().clear();
    let cache = caching::new(
        plain.clone(),
        CachingOptions {
            name: Some("oom-caching".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(cache.allocate(5 << 20).is_err());
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("oom-caching".to_string(), 5 << 20, 0)]
    );
    drop((held, cache));
}

#[test]
fn release_all_caches_frees_other_threads_blocks() {
    let _s = serial();
    let (to_main, from_worker) = std::sync::mpsc::channel();
    let (to_worker, from_main) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        // Cache a few blocks on this thread.
        let blocks: Vec<DataPtr> = (0..4)
            .map(|_| Allocator::cpu().allocate(100_000).unwrap())
            .collect();
        drop(blocks);
        to_main.send(cpu::thread_cached_bytes()).unwrap();
        from_main.recv().unwrap();
        cpu::thread_cached_bytes()
    });
    let cached = from_worker.recv().unwrap();
    assert!(
        cached >= 4 * 100_000,
        "the worker cached its blocks ({cached})"
    );
    let freed = cpu::release_all_caches();
    assert!(freed >= cached, "freed {freed} of the worker's {cached}");
    to_worker.send(()).unwrap();
    assert_eq!(worker.join().unwrap(), 0, "the worker's cache is empty");
}

// fork(): Windows has none.
#[cfg(unix)]
#[test]
fn fork_while_recording_leaves_the_child_usable() {
    let _s = serial();
    history::start(1000, false).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    // Another thread records events (and frees into its thread cache) all
    // the time, so forks catch it inside the ring's lock now and then.
    let busy = std::thread::spawn(move || {
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            drop(Allocator::cpu().allocate(256).unwrap());
        }
    });
    for _ in 0..20 {
        // SAFETY: the child only allocates through tessera, writes a
        // snapshot and exits with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // A file of the child's own (a snapshot refuses /dev/null:
            // it replaces only regular files).
            let path = std::env::temp_dir()
                .join(format!("tessera-fork-snapshot-{}.json", std::process::id()));
            let ok = Allocator::cpu().allocate(128).is_ok()
                && snapshot::write(&path, Format::Json).is_ok()
                && std::fs::remove_file(&path).is_ok()
                && {
                    cpu::release_all_caches();
                    true
                };
            // SAFETY: ends the child without running the parent's handlers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just made.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child status {status}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.join().unwrap();
    history::stop();
}
