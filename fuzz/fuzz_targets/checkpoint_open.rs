//! Fuzzes the checkpoint handle (`tsr_checkpoint_*`'s core,
//! `serialize::Checkpoint`) on arbitrary bytes written to a file: opened
//! (the safetensors header read through a byte source, every other format
//! by its reader over a mapping), then every tensor loaded by name, rows
//! along dim 0 picked from the input, all of them at once in small chunks
//! on two threads, and read into a buffer (corpus: the load_safetensors,
//! load_torch, load_npy and load_gguf corpora's files).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Write;
use tessera::serialize::{Checkpoint, FetchOptions, Format, LoadFlags};
use tessera::Device;

/// A refusal is a clean error: never Internal, always a message.
fn clean(e: &tessera::Error) {
    assert!(
        !matches!(e.kind(), tessera::ErrorKind::Internal),
        "an internal error: {e}"
    );
    assert!(!e.message().is_empty());
}

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("tessera-fuzz-ckpt-{}", std::process::id()));
    let mut f = std::fs::File::create(&path).expect("a temporary file");
    f.write_all(data).expect("written");
    drop(f);
    let flags = LoadFlags {
        skip_unknown: true,
        ..Default::default()
    };
    match Checkpoint::open(&path, Format::Auto, flags) {
        Err(e) => clean(&e),
        Ok(c) => {
            let pick = data.first().copied().unwrap_or(0) as i64;
            for i in 0..c.len() {
                let name = c.name(i).expect("a name").to_owned();
                let (dtype, sizes, nbytes) = c.info(i).expect("info");
                let sizes = sizes.to_vec();
                match c.load(&name, Device::CPU) {
                    Ok(t) => {
                        assert_eq!(t.sizes(), &sizes[..], "{name}");
                        assert_eq!(t.dtype(), dtype);
                        // Every element lies inside its storage and can be read.
                        let bytes = tessera::serialize::row_major(&t);
                        assert_eq!(bytes.len() as u64, nbytes);
                    }
                    Err(e) => clean(&e),
                }
                if let Some(&rows) = sizes.first() {
                    let a = pick.rem_euclid(rows + 1);
                    match c.load_rows(&name, a, rows, Device::CPU) {
                        Ok(t) => assert_eq!(t.sizes()[0], rows - a),
                        Err(e) => clean(&e),
                    }
                }
                if nbytes <= 1 << 20 {
                    let mut buf = vec![0u8; nbytes as usize];
                    if let Err(e) = c.read_into(&name, &mut buf) {
                        clean(&e);
                    }
                }
            }
            let opts = FetchOptions {
                concurrency: 2,
                chunk_bytes: 64,
                progress: None,
            };
            match c.load_many(None, Device::CPU, opts) {
                Ok(d) => assert_eq!(d.len(), c.len()),
                Err(e) => clean(&e),
            }
        }
    }
    let _ = std::fs::remove_file(&path);
});
