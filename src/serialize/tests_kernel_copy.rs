//! Saves of tensors whose bytes are a read-only mapping of a file copy
//! those bytes from the file inside the kernel (`kernel_copy`) and write
//! the very files a save from memory writes; a private mapping, which may
//! hold changed pages, is always saved from memory.

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

#[test]
fn read_only_mapped_tensors_are_copied_by_the_kernel_into_the_same_files() {
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
        let copied = load(&input, from, LoadFlags::default()).unwrap();
        let (by_kernel, by_memory) = (temp("kernel"), temp("memory"));
        let before = COPIED.load(Ordering::Relaxed);
        save(&mapped, &by_kernel, to).unwrap();
        let moved = COPIED.load(Ordering::Relaxed) - before;
        save(&copied, &by_memory, to).unwrap();
        let what = format!("{} -> {}", from.name(), to.name());
        assert_eq!(moved, mib * MIB, "{what}: bytes copied inside the kernel");
        assert!(
            std::fs::read(&by_kernel).unwrap() == std::fs::read(&by_memory).unwrap(),
            "{what}: the files differ"
        );
        // Read back by the readers, values and all.
        let back = load(&by_kernel, to, LoadFlags::default()).unwrap();
        for (name, t) in dict().iter() {
            let got = back.get(name).unwrap();
            assert_eq!(got.sizes(), t.sizes(), "{what}: {name}");
            assert_eq!(row_major(got), row_major(t), "{what}: {name}");
        }
        assert_eq!(back.metadata("note"), Some("kept"));
        for p in [&input, &by_kernel, &by_memory] {
            std::fs::remove_file(p).unwrap();
        }
    }
}

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
