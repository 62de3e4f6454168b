//! A zip record whose bytes do not match its CRC-32 (issue 68, item 4):
//! refused by every copy load that reads the record whole (`load`,
//! `Checkpoint::load`, `load_many`, `read_into`), naming the file, the record and both
//! CRCs; loaded as before by a mapped load (which reads no record) and by
//! a partial read (`load_rows`, which cannot check it).

#[path = "common/damage.rs"]
mod damage;

use tessera::serialize::{self, Checkpoint, Format, LoadFlags, TensorDict};
use tessera::{DType, Device, Tensor};

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("damaged-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A dict of two float tensors: `w` [64, 16], `b` [16].
fn dict() -> TensorDict {
    let mut d = TensorDict::new();
    let w: Vec<f32> = (0..64 * 16).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..16).map(|i| -(i as f32)).collect();
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let t = |v: &[f32], sizes: &[i64]| {
        Tensor::from_data(&bytes(v), sizes, DType::Float, Device::CPU).unwrap()
    };
    d.set("w", t(&w, &[64, 16])).unwrap();
    d.set("b", t(&b, &[16])).unwrap();
    d
}

fn copy() -> LoadFlags {
    LoadFlags::default()
}

fn mapped() -> LoadFlags {
    LoadFlags {
        mmap: true,
        ..LoadFlags::default()
    }
}

#[test]
fn a_flipped_byte_in_a_torch_storage_is_refused_on_copy_load() {
    let dir = scratch("torch");
    let p = dir.join("model.pt");
    serialize::save(&dict(), &p, Format::Torch).unwrap();
    serialize::load(&p, Format::Auto, copy()).expect("undamaged: loads");
    // Record data/0 is w's storage (the first saved).
    damage::flip_in_record(&p, "data/0", 100);
    let e = serialize::load(&p, Format::Auto, copy()).expect_err("a damaged record");
    let m = e.message();
    assert!(
        m.contains(&p.display().to_string())
            && m.contains("record '")
            && m.contains("data/0'")
            && m.contains("CRC-32 0x")
            && m.contains("the archive says 0x"),
        "{m}"
    );
    // The handle: a whole tensor is checked, rows are not.
    let c = Checkpoint::open(&p, Format::Auto, copy()).unwrap();
    let e = c.load("w", Device::CPU).expect_err("w read whole");
    assert!(e.message().contains("CRC-32"), "{}", e.message());
    c.load("b", Device::CPU).expect("b's record is whole");
    let mut buf = vec![0u8; 64 * 16 * 4];
    let e = c
        .read_into("w", &mut buf)
        .expect_err("read into a buffer whole");
    assert!(e.message().contains("CRC-32"), "{}", e.message());
    let mut few = vec![0u8; 16 * 4];
    c.read_into("b", &mut few).expect("b is undamaged");
    c.load_rows("w", 0, 2, Device::CPU)
        .expect("a partial read cannot check the CRC");
    // A mapped load reads no record: as before.
    let d = serialize::load(&p, Format::Auto, mapped()).expect("mapped: loads");
    assert_eq!(d.len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_flipped_byte_in_a_pickle_or_an_npz_entry_is_refused_on_copy_load() {
    let dir = scratch("others");
    let p = dir.join("model.pt");
    serialize::save(&dict(), &p, Format::Torch).unwrap();
    damage::flip_in_record(&p, "data.pkl", 3);
    let e = serialize::load(&p, Format::Auto, copy()).expect_err("a damaged pickle");
    assert!(
        e.message().contains("data.pkl'") && e.message().contains("CRC-32"),
        "{}",
        e.message()
    );
    let z = dir.join("arrays.npz");
    serialize::save(&dict(), &z, Format::Npz).unwrap();
    serialize::load(&z, Format::Auto, copy()).expect("undamaged: loads");
    // Past the npy header (128 bytes at most here): the array's bytes.
    damage::flip_in_record(&z, "w.npy", 200);
    let e = serialize::load(&z, Format::Auto, copy()).expect_err("a damaged array");
    assert!(
        e.message().contains("w.npy'") && e.message().contains("CRC-32"),
        "{}",
        e.message()
    );
    serialize::load(&z, Format::Auto, mapped()).expect("mapped: loads");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Hugging Face index of torch shards, opened as a checkpoint (each
/// shard indexed by reads): a damaged record of one shard fails the
/// whole load naming that shard.
#[test]
fn a_damaged_shard_is_refused_by_a_checkpoint_load() {
    let dir = scratch("shards");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/shards/hf_bin");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    let index = dir.join("pytorch_model.bin.index.json");
    let c = Checkpoint::open(&index, Format::Auto, copy()).unwrap();
    c.load_many(None, Device::CPU, Default::default())
        .expect("undamaged: loads");
    let shard = "pytorch_model-00002-of-00004.bin";
    damage::flip_in_record(&dir.join(shard), "data/0", 1);
    let c = Checkpoint::open(&index, Format::Auto, copy()).unwrap();
    let e = c
        .load_many(None, Device::CPU, Default::default())
        .expect_err("a damaged shard");
    assert!(
        e.message().contains(shard) && e.message().contains("CRC-32"),
        "{}",
        e.message()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
