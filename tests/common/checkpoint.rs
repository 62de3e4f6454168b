//! What the checkpoint tests share: scratch files, tensors of known
//! bytes, comparisons of tensors and dicts, the check of a handle against
//! `serialize::load`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use tessera::serialize::{self, Checkpoint, FetchOptions, Format, LoadFlags, TensorDict};
use tessera::{DType, Device, Tensor};

pub const COPY: LoadFlags = LoadFlags {
    mmap: false,
    skip_unknown: false,
    read_only: false,
};

pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("ckpt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::remove_file(&p);
    p
}

/// A tensor of `sizes` and `dtype` whose bytes follow from `seed`.
pub fn filled(sizes: &[i64], dtype: DType, seed: u8) -> Tensor {
    let t = Tensor::empty(sizes, dtype, Device::CPU).unwrap();
    let n = t.numel() as usize * t.itemsize();
    if n > 0 {
        // SAFETY: a fresh contiguous CPU tensor of n bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(t.data_in_storage().unwrap() as *mut u8, n) };
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed) & 0x3f;
        }
    }
    t
}

pub fn sample() -> TensorDict {
    let mut d = TensorDict::new();
    d.set("embed", filled(&[64, 16], DType::Float, 1)).unwrap();
    d.set("layer.0", filled(&[16, 16], DType::Half, 2)).unwrap();
    d.set("layer.1", filled(&[32, 8], DType::Float, 3)).unwrap();
    d.set("norm", filled(&[16], DType::Double, 4)).unwrap();
    d.set("step", filled(&[], DType::Long, 5)).unwrap();
    d.set("empty", filled(&[0, 3], DType::Float, 6)).unwrap();
    d
}

pub fn assert_same(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.dtype(), b.dtype(), "{what}: dtype");
    assert_eq!(a.sizes(), b.sizes(), "{what}: sizes");
    assert_eq!(
        serialize::row_major(a),
        serialize::row_major(b),
        "{what}: values"
    );
}

pub fn assert_dicts(a: &TensorDict, b: &TensorDict, what: &str) {
    let names = |d: &TensorDict| d.iter().map(|(n, _)| n.to_owned()).collect::<Vec<_>>();
    assert_eq!(names(a), names(b), "{what}: names in order");
    for (name, t) in a.iter() {
        assert_same(t, b.get(name).unwrap(), &format!("{what}: {name}"));
    }
    let meta = |d: &TensorDict| {
        d.metadata_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    assert_eq!(meta(a), meta(b), "{what}: metadata");
}

/// Saves `dict` at `path` in `format`.
pub fn saved(dict: &TensorDict, name: &str, format: Format) -> PathBuf {
    let path = scratch(name);
    serialize::save(dict, &path, format).unwrap();
    path
}

/// Opens `path` and checks the handle against `serialize::load`: names,
/// info, each tensor alone and all at once, by copy and mapped.
pub fn check_against_load(path: &Path, what: &str) {
    let expected = serialize::load(path, Format::Auto, COPY).unwrap();
    for flags in [COPY, LoadFlags { mmap: true, ..COPY }] {
        let c = Checkpoint::open(path, Format::Auto, flags).unwrap();
        assert_eq!(c.len(), expected.len(), "{what}: tensors");
        for (i, (name, t)) in expected.iter().enumerate() {
            assert_eq!(c.name(i), Some(name), "{what}: name {i}");
            let (dtype, sizes, nbytes) = c.info(i).unwrap();
            assert_eq!(
                (dtype, sizes),
                (t.dtype(), t.sizes()),
                "{what}: {name} info"
            );
            assert_eq!(nbytes, t.numel() as u64 * t.itemsize() as u64);
            assert_same(
                &c.load(name, Device::CPU).unwrap(),
                t,
                &format!("{what}: {name}"),
            );
        }
        let all = c
            .load_many(None, Device::CPU, FetchOptions::default())
            .unwrap();
        assert_dicts(&all, &expected, what);
    }
}

pub fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    files.sort();
    files
}
