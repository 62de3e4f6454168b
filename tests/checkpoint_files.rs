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
    // mapped whole-file load does; so do the legacy files (their pickles
    // and storage counts read), but for the tar
    // container of PyTorch before 0.1.10, opened through its mapped
    // reader.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let flags = LoadFlags {
        skip_unknown: true,
        ..COPY
    };
    let mapped = LoadFlags {
        mmap: true,
        ..flags
    };
    let (mut zips, mut legacy) = (0, 0);
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
            } else if first.get(257..262) != Some(b"ustar") {
                legacy += 1;
                // Files under 256 KiB are read whole by the first read of
                // their pickles; src/serialize/tests_legacy.rs checks a
                // larger one reads no storage.
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
    assert!(legacy >= 10, "{legacy} legacy files among the fixtures");
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

#[test]
fn a_shard_index_is_indexed_by_reads_across_its_shards() {
    // A sharded save of 8 tensors of 1 MiB in shards of at most 2.5 MiB:
    // opening reads the index and each shard's header (safetensors) or
    // its last 128 KiB, directory and pickle (torch), never a whole
    // tensor; one tensor
    // then costs exactly its bytes; the whole set loads as the mapped
    // load of the index does, and so does a copy load.
    let mut d = TensorDict::new();
    for i in 0..8u8 {
        d.set(&format!("layer.{i}"), filled(&[512, 512], DType::Float, i))
            .unwrap();
    }
    for (format, stem) in [(Format::Safetensors, "st"), (Format::Torch, "pt")] {
        let dir = scratch(&format!("shards-by-reads-{stem}"));
        let index =
            serialize::save_sharded(&d, &dir, format, 5 << 19, serialize::SaveFlags::default())
                .unwrap();
        let shards = std::fs::read_dir(&dir).unwrap().count() - 1;
        assert_eq!(shards, 4, "{stem}: two tensors a shard");
        let what = index.display().to_string();
        let c = Checkpoint::open(&index, Format::Auto, COPY).unwrap();
        assert_eq!(c.format(), format, "{what}");
        assert_eq!(c.len(), 8, "{what}");
        let opened = c.bytes_read();
        let index_len = std::fs::metadata(&index).unwrap().len();
        assert!(
            opened > index_len && opened < index_len + shards as u64 * (160 << 10),
            "{what}: {opened} bytes read at open: the index ({index_len}) and each shard's \
             head, no tensor"
        );
        let one = c.load("layer.5", Device::CPU).unwrap();
        assert_same(&one, d.get("layer.5").unwrap(), &what);
        assert_eq!(
            c.bytes_read() - opened,
            1 << 20,
            "{what}: one tensor's bytes"
        );
        let mapped = LoadFlags { mmap: true, ..COPY };
        let expected = serialize::load(&index, Format::Auto, mapped).unwrap();
        let all = c
            .load_many(None, Device::CPU, FetchOptions::default())
            .unwrap();
        assert_dicts(&all, &expected, &what);
        assert_dicts(&all, &d, &what);
        assert_dicts(
            &serialize::load(&index, Format::Auto, COPY).unwrap(),
            &expected,
            &what,
        );
        // The handle and the mappings first: Windows refuses to remove an
        // open or mapped file.
        drop((c, expected, all));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_shard_index_opened_by_reads_keeps_the_checks_of_a_load() {
    // The checks of a load of the shards hold when they are indexed by
    // reads: a shard of another save, a tensor the index does not list,
    // a tensor the index puts in a shard that lacks it.
    let mut d = TensorDict::new();
    for i in 0..4u8 {
        d.set(&format!("w{i}"), filled(&[32, 32], DType::Float, i))
            .unwrap();
    }
    let save = |dir: &Path| {
        serialize::save_sharded(
            &d,
            dir,
            Format::Safetensors,
            5000,
            serialize::SaveFlags::default(),
        )
        .unwrap()
    };
    let dir = scratch("shards-checked");
    let other = scratch("shards-checked-other");
    let index = save(&dir);
    let other_index = save(&other);
    let first = "model-00001-of-00004.safetensors";
    std::fs::copy(other.join(first), dir.join(first)).unwrap();
    let open = |index: &Path| Checkpoint::open(index, Format::Auto, COPY).err().unwrap();
    let err = open(&index);
    assert!(err.to_string().contains("save id"), "{err}");
    let copy_load = serialize::load(&index, Format::Auto, COPY).unwrap_err();
    assert!(copy_load.to_string().contains("save id"), "{copy_load}");

    let json = std::fs::read_to_string(&other_index).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut unlisted = v.clone();
    let map = unlisted["weight_map"].as_object_mut().unwrap();
    let shard = map.remove("w3").unwrap();
    map.insert("w9".into(), shard);
    let path = other.join("unlisted.index.json");
    std::fs::write(&path, unlisted.to_string()).unwrap();
    let err = open(&path);
    assert!(err.to_string().contains("'w3', which"), "{err}");
    let mut lacking = v.clone();
    lacking["weight_map"]["w3"] = "model-00003-of-00004.safetensors".into();
    let path = other.join("lacking.index.json");
    std::fs::write(&path, lacking.to_string()).unwrap();
    let err = open(&path);
    assert!(err.to_string().contains("does not hold it"), "{err}");

    let mut moved = v;
    moved["weight_map"]["w0"] = "model-00002-of-00004.safetensors".into();
    moved["weight_map"]["w1"] = first.into();
    let path = other.join("moved.index.json");
    std::fs::write(&path, moved.to_string()).unwrap();
    let err = open(&path);
    assert!(err.to_string().contains("puts in"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
}

#[test]
fn dcp_checkpoints_torch_wrote_are_indexed_by_reads() {
    // One process's save and two ranks' DTensors (rows split unevenly,
    // columns split: one run a row, replicated, a rank with no rows):
    // opening reads the metadata and each chunk archive's head, not the
    // tensors; each tensor then costs its bytes; all of it loads as the
    // mapped load (which stitches) gives it, and so does a copy load.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/shards");
    for name in ["dcp_1rank", "dcp_2ranks"] {
        let dir = root.join(name);
        let what = dir.display().to_string();
        let mapped = LoadFlags { mmap: true, ..COPY };
        let expected = serialize::load(&dir, Format::Auto, mapped).unwrap();
        let c = Checkpoint::open(&dir, Format::Auto, COPY).unwrap();
        assert_eq!(c.format(), Format::Dcp, "{what}");
        let opened = c.bytes_read();
        assert!(opened > 0, "{what}: indexed by reads");
        for (name, t) in expected.iter() {
            let before = c.bytes_read();
            let one = c.load(name, Device::CPU).unwrap();
            assert_same(&one, t, &format!("{what}: {name}"));
            let bytes = t.numel() as u64 * t.itemsize() as u64;
            assert_eq!(c.bytes_read() - before, bytes, "{what}: {name}'s bytes");
        }
        let opts = FetchOptions {
            chunk_bytes: 16,
            concurrency: 3,
            progress: None,
        };
        let all = c.load_many(None, Device::CPU, opts).unwrap();
        assert_dicts(&all, &expected, &what);
        assert_dicts(
            &serialize::load(&dir, Format::Auto, COPY).unwrap(),
            &expected,
            &what,
        );
        let meta = dir.join(".metadata");
        let c = Checkpoint::open(&meta, Format::Auto, COPY).unwrap();
        assert!(c.bytes_read() > 0, "{what}/.metadata: indexed by reads");
    }
}
