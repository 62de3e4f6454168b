//! `tessera memory-view` (cli/memory_view.rs): the viewer page with a
//! snapshot embedded, from tessera's JSON or a pickle PyTorch wrote
//! (tests/data/memory_snapshot/, made by
//! scripts/make_memory_snapshot_fixtures.py), and what it refuses (status
//! 3 for an input that is not a snapshot, 1 for an output it cannot
//! write).

#[path = "common/cli.rs"]
mod cli;

use cli::{tessera, weights, Scratch};
use serde_json::Value;
use std::path::Path;

fn snapshot_of(page: &str) -> Value {
    let start = page
        .find(r#"<script type="application/json" id="snapshot""#)
        .expect("a snapshot block");
    let open = start + page[start..].find('>').unwrap() + 1;
    let close = open + page[open..].find("</script>").unwrap();
    serde_json::from_str(&page[open..close]).expect("the embedded snapshot is JSON")
}

#[test]
fn memory_view_embeds_a_json_snapshot() {
    let dir = Scratch::new("memory-view");
    let snap = dir.path("snap.json");
    let json = r#"{"format": "tessera-memory-snapshot", "version": 1, "process": {"pid": 1},
        "taken": {"unix_time_ms": 0, "time_ns": 10},
        "history": {"recording": true, "max_entries": 4, "backtraces": false, "recorded": 1, "dropped": 0},
        "allocators": [{"name": "cpu</script>", "device": {"type": 0, "index": -1}, "kind": "cpu",
            "stats": {"allocated_bytes": 64, "peak_bytes": 64, "num_allocs": 1, "num_frees": 0, "num_failed": 0},
            "blocks": [{"addr": "0x1000", "size": 64}]}],
        "frames": [],
        "events": [{"action": "alloc", "allocator": "cpu</script>", "device": {"type": 0, "index": -1},
            "addr": "0x1000", "size": 64, "time_ns": 5}]}"#;
    std::fs::write(&snap, json).unwrap();
    let page = dir.path("page.html");
    tessera(&[
        "memory-view",
        snap.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ])
    .expect(0);
    let html = std::fs::read_to_string(&page).unwrap();
    let viewer = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/memory_viewer.html"
    ))
    .unwrap();
    assert!(html.starts_with(&viewer[..200]), "the viewer page");
    assert_eq!(
        html.matches("</script>").count(),
        viewer.matches("</script>").count()
    );
    assert!(html.contains(r#"data-source="snap.json""#));
    let embedded = snapshot_of(&html);
    let original: Value = serde_json::from_str(json).unwrap();
    assert_eq!(embedded, original);
    assert_eq!(dir.files(), ["page.html", "snap.json"]);
}

#[test]
fn memory_view_reads_pytorch_snapshots() {
    let dir = Scratch::new("memory-view-torch");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/memory_snapshot");
    let page = dir.path("cuda.html");
    let src = data.join("torch_cuda_layout.pickle");
    tessera(&[
        "memory-view",
        src.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ])
    .expect(0);
    let s = snapshot_of(&std::fs::read_to_string(&page).unwrap());
    assert_eq!(s["format"], "tessera-memory-snapshot");
    let allocs = s["allocators"].as_array().unwrap();
    assert_eq!(allocs.len(), 2, "one allocator per device");
    assert_eq!(
        allocs[0]["device"],
        serde_json::json!({"type": 1, "index": 0})
    );
    assert_eq!(
        allocs[1]["device"],
        serde_json::json!({"type": 1, "index": 1})
    );
    // Device 0: 1 MiB allocated and 500 B (a 512-byte block) pending free,
    // still live; the peak is before the 1024-byte block was freed. Live
    // blocks count the bytes asked for, as the trace does; segment blocks
    // the rounded size.
    assert_eq!(allocs[0]["stats"]["allocated_bytes"], (1 << 20) + 500);
    assert_eq!(allocs[0]["stats"]["peak_bytes"], (1 << 20) + 500 + 1024);
    assert_eq!(allocs[0]["blocks"][1]["size"], 500);
    let seg0 = &allocs[0]["segments"][0]["blocks"][1];
    assert_eq!(
        (&seg0["size"], &seg0["requested"]),
        (&512.into(), &500.into())
    );
    assert_eq!(allocs[0]["stats"]["num_failed"], 1);
    assert_eq!(allocs[0]["segments"][0]["blocks"][2]["state"], "free");
    // Before PyTorch 2.1 a block's requested size and frames were under
    // "history".
    assert_eq!(allocs[1]["blocks"][0]["size"], 4000);
    assert!(allocs[1]["blocks"][0]["stack"].is_array());
    let events = s["events"].as_array().unwrap();
    let actions: Vec<&str> = events
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "segment_alloc",
            "alloc",
            "alloc",
            "alloc",
            "alloc",
            "free",
            "oom"
        ],
        "free_requested and snapshot entries left out, devices merged by time"
    );
    let times: Vec<u64> = events
        .iter()
        .map(|e| e["time_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(times, [0, 10_000, 20_000, 25_000, 30_000, 41_000, 60_000]);
    assert_eq!(s["taken"]["unix_time_ms"], 1_790_000_000_000u64);
    // A PyTorch frame in a .py file is a Python frame (the viewer names a
    // site after it, as after tessera.numpy_allocator's).
    let f0 = &s["frames"][events[0]["stack"][0].as_u64().unwrap() as usize];
    assert_eq!(
        f0,
        &serde_json::json!({"function": "load_weights", "file": "train.py", "line": 8, "host": "python"})
    );

    // Written by PyTorch itself (torch.profiler, _profile_to_snapshot):
    // blocks without addresses, a trace without times.
    let src = data.join("torch_profile.pickle");
    let page = dir.path("profile.html");
    tessera(&[
        "memory-view",
        src.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ])
    .expect(0);
    let s = snapshot_of(&std::fs::read_to_string(&page).unwrap());
    let a = &s["allocators"][0];
    let seg = &a["segments"][0];
    let blocks = seg["blocks"].as_array().unwrap();
    let total: u64 = blocks.iter().map(|b| b["size"].as_u64().unwrap()).sum();
    assert_eq!(
        total,
        seg["size"].as_u64().unwrap(),
        "the blocks tile the segment"
    );
    let live: u64 = a["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["size"].as_u64().unwrap())
        .sum();
    assert_eq!(live, a["stats"]["allocated_bytes"].as_u64().unwrap());
    assert!(a["stats"]["num_allocs"].as_u64().unwrap() > 10);
    let times: Vec<u64> = s["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["time_ns"].as_u64().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "positions as times, increasing"
    );
}

#[test]
fn memory_view_refuses_what_is_not_a_snapshot() {
    let dir = Scratch::new("memory-view-bad");
    let page = dir.path("page.html");
    let weights = weights(&dir);
    let other_json = dir.path("other.json");
    std::fs::write(&other_json, r#"{"format": "something else"}"#).unwrap();
    let truncated = dir.path("truncated.pickle");
    let pickle = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/memory_snapshot/torch_cuda_layout.pickle"),
    )
    .unwrap();
    std::fs::write(&truncated, &pickle[..pickle.len() / 2]).unwrap();
    for (input, why) in [
        (dir.path("missing.json"), "cannot open"),
        (dir.0.clone(), "not a regular file"),
        (weights, "neither"),
        (other_json, "\"something else\""),
        (truncated, "pickle"),
    ] {
        let r = tessera(&[
            "memory-view",
            input.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
        ])
        .expect(3);
        assert!(
            r.stderr.contains(input.to_str().unwrap()) && r.stderr.contains(why),
            "{}: says '{why}': {}",
            input.display(),
            r.stderr
        );
    }
    assert!(!page.exists());
    // An output in a missing directory: status 1, nothing written.
    let snap = dir.path("ok.pickle");
    std::fs::write(&snap, &pickle).unwrap();
    let nowhere = dir.path("nowhere/page.html");
    let r = tessera(&[
        "memory-view",
        snap.to_str().unwrap(),
        "-o",
        nowhere.to_str().unwrap(),
    ])
    .expect(1);
    assert!(r.stderr.contains("nowhere/page.html"), "{}", r.stderr);
}
