//! Fuzzes reading a memory snapshot's TORCH form (the pickle
//! torch.cuda.memory._snapshot() returns, or tessera's own) into
//! tessera's JSON form, what `tessera memory-view` shows, from arbitrary
//! bytes (corpus: tests/data/memory_snapshot/, a real PyTorch profile
//! snapshot and the CUDA layout).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera::allocator::snapshot::json_from_torch;

fuzz_target!(|data: &[u8]| {
    match json_from_torch(data) {
        Ok(text) => {
            // Valid JSON in the schema's shape: the marker, events in
            // time order, every event naming an allocator of the file.
            let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            assert_eq!(v["format"], "tessera-memory-snapshot");
            let events = v["events"].as_array().expect("events");
            let times: Vec<u64> = events
                .iter()
                .map(|e| e["time_ns"].as_u64().expect("time_ns"))
                .collect();
            assert!(times.windows(2).all(|w| w[0] <= w[1]), "time order");
            let allocators = v["allocators"].as_array().expect("allocators");
            for e in events {
                assert!(allocators
                    .iter()
                    .any(|a| a["name"] == e["allocator"] && a["device"] == e["device"]));
                for i in e["stack"].as_array().map_or(&[][..], |s| s.as_slice()) {
                    assert!(
                        i.as_u64().expect("index") < v["frames"].as_array().unwrap().len() as u64
                    );
                }
            }
        }
        Err(e) => {
            assert_eq!(e.kind(), tessera::ErrorKind::Format, "{e}");
            assert!(
                e.message().starts_with("memory snapshot: ") || e.message().starts_with("pickle: "),
                "{e}"
            );
        }
    }
});
