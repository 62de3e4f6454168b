//! Fuzzes `tessera::serialize::verify` (what `tessera verify` runs: a
//! mapped load, every zip record read and CRC-checked, stored or
//! inflated, every tensor byte read) on arbitrary bytes written to a file
//! (corpus: the load_torch and load_npz corpora's archives, stored and
//! deflated).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Write;
use tessera::serialize::{verify, LoadFlags};

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("tessera-fuzz-verify-{}", std::process::id()));
    let mut f = std::fs::File::create(&path).expect("a temporary file");
    f.write_all(data).expect("written");
    drop(f);
    let mut last = (0u64, 0u64);
    let flags = LoadFlags {
        mmap: true,
        skip_unknown: true,
        ..Default::default()
    };
    let result = verify(&path, flags, &mut |done, total| {
        // Progress only grows, within its total.
        assert!(
            done >= last.0 && done <= total,
            "{done} of {total} after {last:?}"
        );
        last = (done, total);
    });
    match result {
        Ok(v) => assert_eq!(v.bytes_read, last.0),
        Err(e) => {
            assert!(
                !matches!(e.kind(), tessera::ErrorKind::Internal),
                "an internal error: {e}"
            );
            assert!(!e.message().is_empty());
        }
    }
    let _ = std::fs::remove_file(&path);
});
