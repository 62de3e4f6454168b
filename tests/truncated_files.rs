//! Every format's real files cut short at several points: the load fails
//! with a message in the user's terms (issue 58): it names the file and
//! says "truncated" with the file's size, and no internal mechanism
//! (opcodes, the zip crate's terms, storage records). A cut that loses
//! only padding may load: then it loads everything the whole file holds.

use std::path::{Path, PathBuf};
use tessera::serialize::{self, Format, LoadFlags, TensorDict};
use tessera::{DType, Device, Tensor};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Words of tessera's or its crates' insides that a message must not use.
const INTERNAL: &[&str] = &[
    "opcode",
    "EOCD",
    "end-of-central-directory",
    "storage record",
    "incomplete metadata",
    "not fully covered",
];

fn names(d: &TensorDict) -> Vec<(String, Vec<u8>)> {
    d.iter()
        .map(|(n, t)| (n.to_owned(), serialize::row_major(t).into_owned()))
        .collect()
}

fn check_cuts(file: &Path) {
    let bytes = std::fs::read(file).unwrap();
    let whole = serialize::load(file, Format::Auto, LoadFlags::default()).unwrap();
    let dir = std::env::temp_dir().join(format!(
        "tessera-cut-{}-{}",
        std::process::id(),
        file.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let cut_path = dir.join(file.file_name().unwrap());
    let mut cuts: Vec<usize> = [10, 30, 50, 70, 90, 99]
        .iter()
        .map(|p| bytes.len() * p / 100)
        .collect();
    cuts.push(bytes.len() - 1);
    cuts.retain(|&n| n >= 16);
    for n in cuts {
        std::fs::write(&cut_path, &bytes[..n]).unwrap();
        for mmap in [false, true] {
            let flags = LoadFlags {
                mmap,
                skip_unknown: false,
                ..Default::default()
            };
            let what = format!(
                "{} cut to {n} of {} bytes (mmap {mmap})",
                file.display(),
                bytes.len()
            );
            match serialize::load(&cut_path, Format::Auto, flags) {
                Ok(d) => assert_eq!(names(&d), names(&whole), "{what}: loaded, but not whole"),
                Err(e) => {
                    let m = e.message();
                    assert!(m.contains("truncated"), "{what}: {m}");
                    assert!(
                        m.contains(&n.to_string()),
                        "{what}: the size is not named: {m}"
                    );
                    assert!(
                        m.contains(&cut_path.display().to_string()),
                        "{what}: no file: {m}"
                    );
                    for word in INTERNAL {
                        assert!(!m.contains(word), "{what}: '{word}' in: {m}");
                    }
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn torch_files_cut_short_say_so() {
    for f in [
        "tests/data/torch_save/module_parameters.pt",
        "tests/data/torch_save/legacy_module_parameters.pt",
        "tests/data/torch_save/torchscript_module.pt",
        "tests/data/torch_wild/tar_state_dict.pt",
    ] {
        check_cuts(&root().join(f));
    }
}

#[test]
fn numpy_files_cut_short_say_so() {
    for f in [
        "tests/fixtures/npy/c_f4.npy",
        "tests/fixtures/npz/savez.npz",
        "tests/fixtures/npz/savez_compressed.npz",
    ] {
        check_cuts(&root().join(f));
    }
}

#[test]
fn gguf_files_cut_short_say_so() {
    check_cuts(&root().join("tests/fixtures/gguf/gguf_py.gguf"));
}

#[test]
fn safetensors_files_cut_short_say_so() {
    let dir = std::env::temp_dir().join(format!("tessera-st-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join("w.safetensors");
    let mut d = TensorDict::new();
    for (name, n) in [("a", 64), ("b", 300)] {
        let t = Tensor::empty(&[n], DType::Float, Device::CPU).unwrap();
        t.fill_(tessera::Scalar::Float(0.5)).unwrap();
        d.set(name, t).unwrap();
    }
    serialize::save(&d, &path, Format::Safetensors).unwrap();
    check_cuts(&path);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A save into a directory that does not exist says so.
#[test]
fn a_save_into_a_missing_directory_names_it() {
    let missing = std::env::temp_dir().join(format!("tessera-missing-{}", std::process::id()));
    let path = missing.join("w.safetensors");
    let e = serialize::save(&TensorDict::new(), &path, Format::Safetensors).unwrap_err();
    let m = e.message();
    assert!(
        m.contains(&format!(
            "the directory '{}' does not exist",
            missing.display()
        )),
        "{m}"
    );
}
