//! Sharded and distributed checkpoints (issue 53): Hugging Face shard
//! indexes and torch.distributed.checkpoint (DCP) directories.
//!
//! tests/data/shards/ holds checkpoints real PyTorch 2.15 wrote
//! (scripts/make_shard_fixtures.py): HF safetensors shards (the
//! safetensors package) and torch .bin shards with their indexes, DCP
//! from one process and from two ranks of DTensors (Shard(0), Shard(1),
//! Replicate(), an empty local shard), and beside each what torch itself
//! loads from it. Each loads equal, by copy and mapped. hostile/ holds
//! copies with one thing wrong each, refused naming it. tessera's own
//! saves round-trip here; TESSERA_SHARDS_OUT=DIR writes them for the
//! script's --check (torch.distributed.checkpoint.load on one and two
//! ranks, the safetensors package, torch.load).

#[path = "common/torch_expected.rs"]
mod torch_expected;

use std::path::{Path, PathBuf};
use tessera::serialize::{self, Format, LoadFlags, SaveFlags, TensorDict};
use tessera::{DType, Device, ErrorKind, Tensor};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/shards")
}

fn scratch(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("tsr-shards-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

const COPY: LoadFlags = LoadFlags {
    mmap: false,
    skip_unknown: false,
    read_only: false,
};
const MMAP: LoadFlags = LoadFlags {
    mmap: true,
    skip_unknown: false,
    read_only: false,
};

/// Loads `path` both ways and compares with NAME.expected.jsonl.
fn check_fixture(name: &str, path: &Path) {
    let expected = torch_expected::read(&data(), name);
    for (flags, how) in [(COPY, "copy"), (MMAP, "mmap")] {
        let d = serialize::load(path, Format::Auto, flags)
            .unwrap_or_else(|e| panic!("{name} ({how}): {e}"));
        torch_expected::check(&expected, &format!("{name} ({how})"), &d);
    }
}

#[test]
fn hf_safetensors_shards_load_equal_to_the_safetensors_package() {
    check_fixture(
        "hf_safetensors",
        &data().join("hf_safetensors/model.safetensors.index.json"),
    );
}

#[test]
fn hf_bin_shards_load_equal_to_torch_load() {
    check_fixture(
        "hf_bin",
        &data().join("hf_bin/pytorch_model.bin.index.json"),
    );
    // The format of the shards may be named instead of detected.
    let path = data().join("hf_bin/pytorch_model.bin.index.json");
    let d = serialize::load(&path, Format::Torch, COPY).unwrap();
    assert_eq!(d.len(), 8);
}

#[test]
fn dcp_from_one_rank_loads_equal_to_torch() {
    check_fixture("dcp_1rank", &data().join("dcp_1rank"));
    // Its .metadata file stands for the directory; TSR_FORMAT_DCP too.
    let d = serialize::load(&data().join("dcp_1rank/.metadata"), Format::Auto, COPY).unwrap();
    assert_eq!(d.len(), 7);
    let d = serialize::load(&data().join("dcp_1rank"), Format::Dcp, MMAP).unwrap();
    assert_eq!(d.len(), 7);
}

#[test]
fn dcp_from_two_ranks_of_dtensors_loads_equal_to_torch() {
    check_fixture("dcp_2ranks", &data().join("dcp_2ranks"));
}

/// The file a mapped address belongs to, from /proc/self/maps.
#[cfg(unix)]
fn mapped_file(addr: usize) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let mut parts = l.split_whitespace();
        let (lo, hi) = parts.next()?.split_once('-')?;
        let (lo, hi) = (
            usize::from_str_radix(lo, 16).ok()?,
            usize::from_str_radix(hi, 16).ok()?,
        );
        let path = parts.nth(4)?;
        (lo <= addr && addr < hi).then(|| path.to_owned())
    })
}

/// The file a mapped address belongs to, from GetMappedFileNameW, with
/// `/` for each backslash. (Not /proc/self/maps under Wine: the wineserver opens
/// files for its programs, so there /proc/self is the server's.)
#[cfg(windows)]
fn mapped_file(addr: usize) -> Option<String> {
    use windows_sys::Win32::System::ProcessStatus::K32GetMappedFileNameW;
    use windows_sys::Win32::System::Threading::GetCurrentProcess;
    let mut name = [0u16; 1024];
    // SAFETY: name is a writable buffer of name.len() UTF-16 units; the
    // call only queries the address (an unmapped one returns 0).
    let n = unsafe {
        K32GetMappedFileNameW(
            GetCurrentProcess(),
            addr as *const std::ffi::c_void,
            name.as_mut_ptr(),
            name.len() as u32,
        )
    };
    (n > 0).then(|| String::from_utf16_lossy(&name[..n as usize]).replace('\\', "/"))
}

#[test]
fn a_dcp_tensor_in_one_chunk_views_the_mapping() {
    let d = serialize::load(&data().join("dcp_2ranks"), Format::Auto, MMAP).unwrap();
    // model.plain is one chunk (rank 1's file); model.row is stitched
    // from two.
    let plain = d.get("model.plain").unwrap();
    let at = plain.data_in_storage().unwrap() as usize;
    assert!(
        mapped_file(at).is_some_and(|f| f.ends_with("dcp_2ranks/__1_0.distcp")),
        "model.plain at {at:#x} is in {:?}",
        mapped_file(at)
    );
    let row = d.get("model.row").unwrap();
    let at = row.data_in_storage().unwrap() as usize;
    assert!(
        !mapped_file(at).is_some_and(|f| f.ends_with(".distcp")),
        "a stitched tensor has memory of its own"
    );
}

fn sample_dict() -> TensorDict {
    let mut d = TensorDict::new();
    let mut add = |name: &str, sizes: &[i64], dtype: DType, seed: u8| {
        let t = Tensor::empty(sizes, dtype, Device::CPU).unwrap();
        let n = t.numel() as usize * t.itemsize();
        if n > 0 {
            // SAFETY: a fresh contiguous CPU tensor of n bytes.
            let bytes = unsafe {
                std::slice::from_raw_parts_mut(t.data_in_storage().unwrap() as *mut u8, n)
            };
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(7).wrapping_add(seed) & 0x3f;
            }
        }
        d.set(name, t).unwrap();
    };
    add("model.embed.weight", &[16, 8], DType::Float, 1);
    add("model.layers.0.weight", &[8, 8], DType::BFloat16, 2);
    add("model.layers.1.weight", &[12, 8], DType::Float, 3);
    add("model.norm", &[8], DType::Double, 4);
    add("step", &[], DType::Long, 5);
    add("empty", &[0, 3], DType::Float, 6);
    d
}

fn assert_same(a: &TensorDict, b: &TensorDict, what: &str) {
    let names = |d: &TensorDict| d.iter().map(|(n, _)| n.to_owned()).collect::<Vec<_>>();
    let (mut na, mut nb) = (names(a), names(b));
    na.sort();
    nb.sort();
    assert_eq!(na, nb, "{what}: names");
    for (name, t) in a.iter() {
        let u = b.get(name).unwrap();
        assert_eq!(t.dtype(), u.dtype(), "{what}: {name} dtype");
        assert_eq!(t.sizes(), u.sizes(), "{what}: {name} sizes");
        assert_eq!(
            serialize::row_major(t),
            serialize::row_major(u),
            "{what}: {name} values"
        );
    }
}

/// TESSERA_SHARDS_OUT: where tessera's saves go for the Python check,
/// with expected.jsonl (the source dict's values).
fn out_dir() -> Option<PathBuf> {
    std::env::var_os("TESSERA_SHARDS_OUT").map(PathBuf::from)
}

#[test]
fn dcp_saves_round_trip_and_replace_the_old_checkpoint() {
    let dir = scratch("dcp");
    let d = sample_dict();
    serialize::save(&d, &dir, Format::Dcp).unwrap();
    assert!(dir.join(".metadata").is_file() && dir.join("__0_0.distcp").is_file());
    for flags in [COPY, MMAP] {
        let back = serialize::load(&dir, Format::Auto, flags).unwrap();
        assert_same(&d, &back, "dcp");
        let order: Vec<&str> = back.iter().map(|(n, _)| n).collect();
        assert_eq!(order, d.iter().map(|(n, _)| n).collect::<Vec<_>>());
    }
    // A second save replaces it; a view's values are saved, not its
    // whole storage.
    let mut e = TensorDict::new();
    let big = d.get("model.embed.weight").unwrap();
    e.set("slice", big.narrow(0, 2, 3).unwrap()).unwrap();
    serialize::save(&e, &dir, Format::Dcp).unwrap();
    let back = serialize::load(&dir, Format::Auto, COPY).unwrap();
    assert_same(&e, &back, "dcp replaced");
    let len = std::fs::metadata(dir.join("__0_0.distcp")).unwrap().len();
    assert!(
        len < 2000,
        "the slice's 96 bytes, not the 512 of its storage: {len}"
    );
    // Only tessera's files are in the parent: no temporary directory left.
    let parent = dir.parent().unwrap();
    let stem = dir.file_name().unwrap().to_str().unwrap().to_owned();
    let left: Vec<_> = std::fs::read_dir(parent)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .contains(&format!(".{stem}.tsr-tmp"))
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    if let Some(out) = out_dir() {
        std::fs::create_dir_all(&out).unwrap();
        serialize::save(&d, &out.join("dcp"), Format::Dcp).unwrap();
        for (fmt, sub) in [
            (Format::Safetensors, "hf_safetensors"),
            (Format::Torch, "hf_bin"),
        ] {
            serialize::save_sharded(&d, &out.join(sub), fmt, 700, SaveFlags::default()).unwrap();
        }
        write_expected(&d, &out.join("expected.jsonl"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn write_expected(d: &TensorDict, path: &Path) {
    let torch = |t: DType| match t {
        DType::Float => "float32",
        DType::Double => "float64",
        DType::BFloat16 => "bfloat16",
        DType::Long => "int64",
        other => panic!("{other:?}"),
    };
    let mut lines = String::new();
    for (name, t) in d.iter() {
        let hex: String = serialize::row_major(t)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        lines += &serde_json::json!({"name": name, "dtype": torch(t.dtype()), "sizes": t.sizes(), "bytes": hex}).to_string();
        lines.push('\n');
    }
    std::fs::write(path, lines).unwrap();
}

#[test]
fn a_failed_dcp_save_leaves_the_old_checkpoint() {
    let dir = scratch("dcp-fail");
    let d = sample_dict();
    serialize::save(&d, &dir, Format::Dcp).unwrap();
    let before = std::fs::read(dir.join("__0_0.distcp")).unwrap();
    // A dtype torch cannot save: refused before anything is written.
    let mut bad = TensorDict::new();
    bad.set("ok", d.get("model.norm").unwrap().clone()).unwrap();
    bad.set("q", Tensor::empty(&[2], DType::QInt8, Device::CPU).unwrap())
        .unwrap();
    let err = serialize::save(&bad, &dir, Format::Dcp).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DType, "{err}");
    assert_eq!(std::fs::read(dir.join("__0_0.distcp")).unwrap(), before);
    // Metadata: refused, named.
    let mut meta = d.clone();
    meta.set_metadata("k", "v").unwrap();
    let err = serialize::save(&meta, &dir, Format::Dcp).unwrap_err();
    assert!(err.to_string().contains("metadata"), "{err}");
    // A directory holding other files is not replaced.
    let other = scratch("dcp-other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"keep").unwrap();
    let err = serialize::save(&d, &other, Format::Dcp).unwrap_err();
    assert!(err.to_string().contains("notes.txt"), "{err}");
    assert_eq!(std::fs::read(other.join("notes.txt")).unwrap(), b"keep");
    // A DCP save to bytes is refused, saying why.
    let err = serialize::save_to_bytes(&d, Format::Dcp).unwrap_err();
    assert!(err.to_string().contains("directory"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
}

#[test]
fn sharded_saves_are_named_as_transformers_names_them() {
    let d = sample_dict();
    for (fmt, stem, ext) in [
        (Format::Safetensors, "model", "safetensors"),
        (Format::Torch, "pytorch_model", "bin"),
    ] {
        let dir = scratch(&format!("hf-{ext}"));
        let index = serialize::save_sharded(&d, &dir, fmt, 700, SaveFlags::default()).unwrap();
        assert_eq!(index, dir.join(format!("{stem}.{ext}.index.json")));
        // 512 + 128 | 384 + 64 + 8 + 0 bytes: the second tensor fits in
        // the first shard (640 <= 700), the third does not.
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            vec![
                format!("{stem}-00001-of-00002.{ext}"),
                format!("{stem}-00002-of-00002.{ext}"),
                format!("{stem}.{ext}.index.json"),
            ]
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
        assert_eq!(json["metadata"]["total_size"], 512 + 128 + 384 + 64 + 8);
        assert_eq!(
            json["weight_map"]["model.layers.1.weight"],
            format!("{stem}-00002-of-00002.{ext}")
        );
        for flags in [COPY, MMAP] {
            let back = serialize::load(&index, Format::Auto, flags).unwrap();
            assert_same(&d, &back, ext);
        }
        // Saved again in one shard: one file, the old shards and index gone.
        let one =
            serialize::save_sharded(&d, &dir, fmt, 1 << 20, SaveFlags { sync: true }).unwrap();
        assert_eq!(one, dir.join(format!("{stem}.{ext}")));
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        assert_same(
            &d,
            &serialize::load(&one, Format::Auto, COPY).unwrap(),
            "one shard",
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let err = serialize::save_sharded(&d, &scratch("x"), Format::Npy, 10, SaveFlags::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let err = serialize::save_sharded(&d, &scratch("x"), Format::Auto, 0, SaveFlags::default())
        .unwrap_err();
    assert!(err.to_string().contains("max_shard_bytes"), "{err}");
}

#[test]
fn a_failed_sharded_save_changes_nothing() {
    let dir = scratch("hf-fail");
    let d = sample_dict();
    serialize::save_sharded(&d, &dir, Format::Safetensors, 700, SaveFlags::default()).unwrap();
    let snapshot = |dir: &Path| {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let before = snapshot(&dir);
    // The last shard's tensors share memory: safetensors refuses, after
    // the first shard was written in the temporary directory.
    let mut bad = d.clone();
    let w = d.get("model.norm").unwrap();
    bad.set("tied", w.clone()).unwrap();
    let err = serialize::save_sharded(&bad, &dir, Format::Safetensors, 700, SaveFlags::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(snapshot(&dir) == before, "the checkpoint changed");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every hostile fixture is refused naming what is wrong, by copy and
/// mapped.
#[test]
fn hostile_checkpoints_are_refused_naming_what_is_wrong() {
    let h = data().join("hostile");
    let cases: &[(&str, ErrorKind, &str)] = &[
        ("dcp_overlap", ErrorKind::Format, "overlap"),
        ("dcp_hole", ErrorKind::Format, "not fully covered"),
        ("dcp_past_tensor", ErrorKind::Format, "past the tensor"),
        (
            "dcp_past_file",
            ErrorKind::Format,
            "past the end of '__1_0.distcp'",
        ),
        ("dcp_missing_file", ErrorKind::Io, "__1_0.distcp"),
        ("dcp_outside", ErrorKind::Format, "'..'"),
        ("dcp_symlink_out", ErrorKind::Format, "outside"),
        ("dcp_layout", ErrorKind::Format, "torch.sparse_coo"),
        ("dcp_transform", ErrorKind::Format, "stream.zstd"),
        ("dcp_unknown_global", ErrorKind::Format, "posix.system"),
        // Built by the crate (src/serialize/tests_dcp.rs), issue 65.
        ("dcp_alias", ErrorKind::Format, "share bytes"),
        ("dcp_expand", ErrorKind::Format, "expected a compact tensor"),
        (
            "hf_dotdot/model.safetensors.index.json",
            ErrorKind::Format,
            "'..'",
        ),
        (
            "hf_absolute/model.safetensors.index.json",
            ErrorKind::Format,
            "absolute path",
        ),
        (
            "hf_missing_file/model.safetensors.index.json",
            ErrorKind::Io,
            "model-00009-of-00009",
        ),
        (
            "hf_two_shards/model.safetensors.index.json",
            ErrorKind::Format,
            "puts in",
        ),
        (
            "hf_missing_tensor/model.safetensors.index.json",
            ErrorKind::Format,
            "does not hold it",
        ),
        (
            "hf_total_size/model.safetensors.index.json",
            ErrorKind::Format,
            "total_size",
        ),
        (
            "hf_symlink_out/model.safetensors.index.json",
            ErrorKind::Format,
            "outside",
        ),
    ];
    for &(case, kind, says) in cases {
        for flags in [COPY, MMAP] {
            let err = serialize::load(&h.join(case), Format::Auto, flags)
                .map(|_| ())
                .expect_err(case);
            assert_eq!(err.kind(), kind, "{case}: {err}");
            assert!(
                err.to_string().contains(says),
                "{case}: '{says}' not in: {err}"
            );
        }
    }
}

/// A Hugging Face cache snapshot links each file to a blob outside the
/// snapshot's directory: followed, since the index itself leads there.
/// (Unix: a symbolic link on Windows needs a privilege.)
#[cfg(unix)]
#[test]
fn a_hugging_face_cache_snapshot_loads() {
    let root = scratch("hf-cache");
    let blobs = root.join("blobs");
    let snap = root.join("snapshots/abc");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    let src = data().join("hf_safetensors");
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        let blob = blobs.join(format!("blob-{}", e.file_name().to_string_lossy()));
        std::fs::copy(e.path(), &blob).unwrap();
        std::os::unix::fs::symlink(
            Path::new("../..")
                .join("blobs")
                .join(blob.file_name().unwrap()),
            snap.join(e.file_name()),
        )
        .unwrap();
    }
    check_fixture("hf_safetensors", &snap.join("model.safetensors.index.json"));
    std::fs::remove_dir_all(&root).unwrap();
}

/// Copies the files of fixture `name` into `dir`, the index under
/// `index_name`.
fn copy_fixture(name: &str, index: &str, dir: &Path, index_name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for e in std::fs::read_dir(data().join(name)).unwrap() {
        let e = e.unwrap();
        let to = if e.file_name() == index {
            index_name.into()
        } else {
            e.file_name()
        };
        std::fs::copy(e.path(), dir.join(to)).unwrap();
    }
    dir.join(index_name)
}

/// The format of an index's shards is told by their bytes, never by the
/// index's name (issue 65, finding 7).
#[test]
fn a_shard_index_is_reported_in_its_shards_format_whatever_its_name() {
    let dir = scratch("index-names");
    for (fixture, index, name, format) in [
        (
            "hf_safetensors",
            "model.safetensors.index.json",
            "model.index.json",
            Format::Safetensors,
        ),
        (
            "hf_bin",
            "pytorch_model.bin.index.json",
            "model.safetensors.index.json",
            Format::Torch,
        ),
    ] {
        let sub = dir.join(fixture);
        let p = copy_fixture(fixture, index, &sub, name);
        for flags in [COPY, MMAP] {
            let (got, d) = serialize::load_as(&p, Format::Auto, flags).unwrap();
            assert_eq!(got, format, "{fixture} as {name}");
            check_fixture_dict(fixture, &d);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn check_fixture_dict(name: &str, d: &TensorDict) {
    let expected = torch_expected::read(&data(), name);
    torch_expected::check(&expected, name, d);
}
