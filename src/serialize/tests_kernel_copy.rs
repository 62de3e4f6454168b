//! Saves of tensors whose bytes are a read-only mapping of a file copy
//! those bytes from the file inside the kernel (`kernel_copy`), each at
//! its source's offset within a page where alignment allows, and write
//! the values a save from memory writes; a private mapping, which may
//! hold changed pages, is always saved from memory.
// Every test here is Linux's (in-kernel copies): the helpers are unused
// elsewhere.
#![cfg_attr(not(target_os = "linux"), allow(unused))]

use super::safetensors_format::row_major;
use super::tests::filled;
use super::*;
use crate::dtype::DType;
use crate::files::COPIED;
use crate::tensor::Tensor;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

const MIB: u64 = 1 << 20;

/// The tests here that count copied bytes run one at a time (the count
/// is the process's).
static COUNTING: Mutex<()> = Mutex::new(());

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("tessera-kcopy-{}-{name}", std::process::id()))
}

/// 2 MiB and 4 MiB of floats (copied when contiguous), 600 KiB of halfs
/// (too few: written from memory), the 4 MiB one saved transposed.
fn dict() -> TensorDict {
    let mut d = TensorDict::new();
    d.set("a", filled(&[512, 1024], DType::Float, 1)).unwrap();
    d.set("b", filled(&[300, 1024], DType::Half, 2)).unwrap();
    let c = filled(&[1024, 1024], DType::Float, 3);
    d.set("c", c.transpose(0, 1).unwrap()).unwrap();
    d.set_metadata("note", "kept").unwrap();
    d
}

fn flags(mmap: bool, read_only: bool) -> LoadFlags {
    LoadFlags {
        mmap,
        read_only,
        ..Default::default()
    }
}

/// Where `name`'s bytes start in the file `mapped` (a read-only mapped
/// load) maps: the whole storage for torch, the tensor's bytes for
/// safetensors.
fn source_offset(mapped: &TensorDict, name: &str, whole_storage: bool) -> u64 {
    let t = mapped.get(name).unwrap();
    let (start, len) = if whole_storage {
        (0, t.storage().nbytes())
    } else {
        (
            t.storage_offset() as usize * t.itemsize(),
            t.numel() as usize * t.itemsize(),
        )
    };
    super::source::file_extent(t.storage(), start, len)
        .unwrap()
        .2
}

/// Where the data of the torch archive record of the `k`-th storage
/// starts.
fn record_offset(bytes: &[u8], k: usize) -> u64 {
    let name = format!("archive/data/{k}");
    let entries = super::zip_index::entries(bytes).unwrap();
    entries.iter().find(|e| e.name == name).unwrap().data
}

// Only Linux copies inside the kernel (copy_file_range; platform::fs).
#[cfg(target_os = "linux")]
#[test]
fn read_only_mapped_tensors_are_copied_by_the_kernel() {
    let _one = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    // (input format, output format, MiB the kernel copies): torch writes
    // whole storages (a's 2 and c's 4); safetensors writes each tensor's
    // row-major bytes, which a transposed c (from torch) is not.
    let cases = [
        (Format::Torch, Format::Torch, 6),
        (Format::Torch, Format::Safetensors, 2),
        (Format::Safetensors, Format::Torch, 6),
        (Format::Safetensors, Format::Safetensors, 6),
    ];
    for (from, to, mib) in cases {
        let input = temp(&format!("in-{}", from.name()));
        save(&dict(), &input, from).unwrap();
        let mapped = load(&input, from, flags(true, true)).unwrap();
        assert!(mapped.iter().all(|(_, t)| t.is_read_only()));
        let out = temp("kernel");
        let before = COPIED.load(Ordering::Relaxed);
        save(&mapped, &out, to).unwrap();
        let moved = COPIED.load(Ordering::Relaxed) - before;
        let what = format!("{} -> {}", from.name(), to.name());
        assert_eq!(moved, mib * MIB, "{what}: bytes copied inside the kernel");
        // Read back, values and all.
        let back = load(&out, to, LoadFlags::default()).unwrap();
        for (name, t) in dict().iter() {
            let got = back.get(name).unwrap();
            assert_eq!(got.sizes(), t.sizes(), "{what}: {name}");
            assert_eq!(row_major(got), row_major(t), "{what}: {name}");
        }
        assert_eq!(back.metadata("note"), Some("kept"));
        // Each copied record starts at its source's offset within a page
        // where the source is 64-aligned, and 64-aligned otherwise; the
        // first tensor of a safetensors file where its source is
        // 8-aligned.
        let bytes = std::fs::read(&out).unwrap();
        let whole = from == Format::Torch;
        if to == Format::Torch {
            // Each tensor has a storage of its own: records in dict order.
            for name in ["a", "c"] {
                let k = mapped.iter().position(|(n, _)| n == name).unwrap();
                let (src, dst) = (
                    source_offset(&mapped, name, whole),
                    record_offset(&bytes, k),
                );
                if src % 64 == 0 {
                    assert_eq!(
                        dst % 4096,
                        src % 4096,
                        "{what}: {name} at {dst}, from {src}"
                    );
                } else {
                    assert_eq!(dst % 64, 0, "{what}: {name} at {dst}");
                }
            }
        } else {
            let header = u64::from_le_bytes(bytes[..8].try_into().unwrap());
            // a is the first tensor of the data (the largest first).
            let src = source_offset(&mapped, "a", false);
            let first = back.get("a").unwrap();
            assert_eq!(first.storage_offset(), 0);
            if src % 8 == 0 && from == Format::Torch {
                assert_eq!((8 + header) % 4096, src % 4096, "{what}: from {src}");
            }
            assert_eq!((8 + header) % 8, 0, "{what}");
        }
        // And the same values as a save from memory writes.
        let copied = load(&input, from, LoadFlags::default()).unwrap();
        let memory = temp("memory");
        save(&copied, &memory, to).unwrap();
        let again = load(&memory, to, LoadFlags::default()).unwrap();
        for (name, t) in back.iter() {
            assert_eq!(
                row_major(t),
                row_major(again.get(name).unwrap()),
                "{what}: {name}"
            );
        }
        for p in [&input, &out, &memory] {
            std::fs::remove_file(p).unwrap();
        }
    }
}

// Only Linux copies inside the kernel (copy_file_range; platform::fs).
#[cfg(target_os = "linux")]
#[test]
fn a_read_only_file_storage_is_copied_from_its_file() {
    let _one = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let raw = temp("raw");
    let bytes: Vec<u8> = (0..3 * MIB as usize + 100)
        .map(|i| (i % 251) as u8)
        .collect();
    std::fs::write(&raw, &bytes).unwrap();
    let storage = Storage::from_file(&raw, crate::storage::file::FileMode::ReadOnly, 0).unwrap();
    // Two MiB of floats from byte 100 of the file.
    let t = Tensor::from_storage(&storage, 25, &[512, 1024], None, DType::Float).unwrap();
    let mut d = TensorDict::new();
    d.set("t", t).unwrap();
    let out = temp("raw-out");
    let before = COPIED.load(Ordering::Relaxed);
    save(&d, &out, Format::Safetensors).unwrap();
    assert_eq!(COPIED.load(Ordering::Relaxed) - before, 2 * MIB);
    let back = load(&out, Format::Safetensors, LoadFlags::default()).unwrap();
    assert_eq!(
        &*row_major(back.get("t").unwrap()),
        &bytes[100..100 + 2 * MIB as usize]
    );
    std::fs::remove_file(&raw).unwrap();
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn a_changed_private_mapping_is_saved_as_changed() {
    let input = temp("private-in");
    save(&dict(), &input, Format::Safetensors).unwrap();
    let mapped = load(&input, Format::Safetensors, flags(true, false)).unwrap();
    let a = mapped.get("a").unwrap();
    assert!(!a.is_read_only());
    // SAFETY: a is a writable (copy-on-write) CPU tensor of 2 MiB that
    // only this test holds; its first 4 bytes are changed.
    unsafe { std::ptr::write_bytes(a.data_ptr() as *mut u8, 0xAB, 4) };
    let out = temp("private-out");
    save(&mapped, &out, Format::Torch).unwrap();
    let back = load(&out, Format::Torch, LoadFlags::default()).unwrap();
    assert_eq!(
        &row_major(back.get("a").unwrap())[..5],
        &[0xAB, 0xAB, 0xAB, 0xAB, 4 * 31 + 1]
    );
    // The file it was mapped from did not change.
    let again = load(&input, Format::Safetensors, LoadFlags::default()).unwrap();
    assert_eq!(row_major(again.get("a").unwrap())[0], 1);
    std::fs::remove_file(&input).unwrap();
    std::fs::remove_file(&out).unwrap();
}
