//! Checkpoints written by the reference tools, opened and loaded in
//! parts: every zip archive PyTorch wrote (tests/data/torch_save,
//! torch_wild) indexed by reads; NumPy's npy and npz and gguf-py's GGUF
//! files (big-endian, Fortran order, complex, 0-d, compressed) by name,
//! rows and 16-byte chunks as the whole-file load gives them; a GGUF
//! header read in growing steps.

#[path = "common/checkpoint.rs"]
mod common;
use common::*;
use std::path::Path;
use tessera::serialize::{self, Checkpoint, FetchOptions, Format, LoadFlags, TensorDict};
use tessera::{DType, Device};

#[test]
fn torch_archives_pytorch_wrote_are_indexed_by_reads() {
    // Every zip archive of the torch fixtures (torch.save of every era
    // since 1.6, big-endian, protocol 5, modules, TorchScript) opens by
    // reads (no mapping: bytes counted at open) and loads what the
    // mapped whole-file load does; the legacy formats are not zip
    // archives and open through their mapped reader.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let flags = LoadFlags {
        skip_unknown: true,
        ..COPY
    };
    let mapped = LoadFlags {
        mmap: true,
        ..flags
    };
    let mut zips = 0;
    for dir in ["torch_save", "torch_wild"] {
        for path in files_in(&root.join(dir), ".pt") {
            let what = path.display().to_string();
            let Ok(expected) = serialize::load(&path, Format::Auto, mapped) else {
                continue; // the refused fixtures
            };
            let first = std::fs::read(&path).unwrap();
            let c = Checkpoint::open(&path, Format::Auto, flags).unwrap();
            if first.starts_with(b"PK") {
                zips += 1;
                assert!(c.bytes_read() > 0, "{what}: indexed by reads");
            }
            let all = c
                .load_many(None, Device::CPU, FetchOptions::default())
                .unwrap();
            assert_dicts(&all, &expected, &what);
            assert_dicts(
                &serialize::load(&path, Format::Auto, flags).unwrap(),
                &expected,
                &what,
            );
        }
    }
    assert!(zips >= 10, "{zips} zip archives among the fixtures");
}

#[test]
fn files_numpy_and_gguf_py_wrote_load_as_a_whole_load_does() {
    // Big-endian data (swapped when fetched), Fortran order, complex,
    // 0-d and empty arrays, GGUF versions 2 and 3, alignment 64. Each
    // against the mapped whole-file load, by name, by rows and all at once
    // in chunks of 16 bytes (a swapped record across many chunks).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mapped = LoadFlags { mmap: true, ..COPY };
    for dir in ["npy", "npz", "gguf"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for path in files {
            let what = path.display().to_string();
            let expected = serialize::load(&path, Format::Auto, mapped).unwrap();
            let c = Checkpoint::open(&path, Format::Auto, COPY).unwrap();
            assert!(c.bytes_read() > 0, "{what}: indexed by reads");
            let opts = FetchOptions {
                chunk_bytes: 16,
                concurrency: 3,
                progress: None,
            };
            let all = c.load_many(None, Device::CPU, opts).unwrap();
            assert_dicts(&all, &expected, &what);
            for (name, t) in expected.iter() {
                assert_same(&c.load(name, Device::CPU).unwrap(), t, &what);
                if let Some(&rows) = t.sizes().first() {
                    let half = rows / 2;
                    let r = c.load_rows(name, half, rows, Device::CPU).unwrap();
                    assert_same(&r, &t.narrow(0, half, rows - half).unwrap(), &what);
                }
            }
            // A copy load is the same index and fetch.
            assert_dicts(
                &serialize::load(&path, Format::Auto, COPY).unwrap(),
                &expected,
                &what,
            );
        }
    }
}

#[test]
fn a_gguf_header_past_the_first_step_is_read_in_growing_steps() {
    let mut d = TensorDict::new();
    d.set("w", filled(&[64, 64], DType::Float, 3)).unwrap();
    d.set_metadata("general.notes", &"x".repeat(600 << 10))
        .unwrap();
    let path = saved(&d, "long-header.gguf", Format::Gguf);
    let c = Checkpoint::open(&path, Format::Auto, COPY).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(c.bytes_read(), len.min(1 << 20), "256 KiB, then 1 MiB");
    assert_eq!(
        c.metadata()
            .iter()
            .find(|(k, _)| k == "general.notes")
            .unwrap()
            .1
            .len(),
        600 << 10
    );
    assert_same(&c.load("w", Device::CPU).unwrap(), d.get("w").unwrap(), "w");
}
