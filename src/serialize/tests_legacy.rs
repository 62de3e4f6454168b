//! Issue 52: torch.save's legacy format refuses a storage key listed
//! twice (one copy would silently win) and a storage read in two dtypes
//! through its views (tsr_load_from_storage placed the second tensor by
//! the first dtype's element offset); views of one storage share it.

use super::tests::load_bytes;
use super::tests_archives::{float_bytes, floats};
use super::*;
use crate::error::ErrorKind;
use crate::pickle::{self, Value};

/// torch.save's legacy format: magic, protocol version, sys_info, the
/// main pickle `root`, the storage keys, then each storage's element
/// count and bytes.
fn legacy_file(root: &Value, keys: &[&str], storages: &[(u64, &[u8])]) -> Vec<u8> {
    let mut b = vec![0x80, 0x02, 0x8a, 0x0a];
    b.extend_from_slice(&[0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19]);
    b.push(b'.');
    b.extend(pickle::write(&Value::Int(1001)).unwrap());
    let sys_info = Value::Dict(vec![
        (Value::str("protocol_version"), Value::Int(1001)),
        (Value::str("little_endian"), Value::Bool(true)),
    ]);
    b.extend(pickle::write(&sys_info).unwrap());
    b.extend(pickle::write(root).unwrap());
    let keys = Value::List(keys.iter().map(|k| Value::str(k)).collect());
    b.extend(pickle::write(&keys).unwrap());
    for (count, bytes) in storages {
        b.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(bytes);
    }
    b
}

/// `_rebuild_tensor_v2` of a 1-d tensor of `n` elements at `offset` on
/// storage `key` of `class`, through the view `(view key, offset, numel)`
/// when given.
fn legacy_tensor(
    class: &str,
    key: &str,
    numel: i64,
    view: Option<(&str, i64, i64)>,
    n: i64,
) -> Value {
    let view = view.map_or(Value::None, |(k, o, m)| {
        Value::Tuple(vec![Value::str(k), Value::Int(o), Value::Int(m)])
    });
    let pid = Value::Tuple(vec![
        Value::str("storage"),
        Value::global("torch", class),
        Value::str(key),
        Value::str("cpu"),
        Value::Int(numel),
        view,
    ]);
    Value::call(
        Value::global("torch._utils", "_rebuild_tensor_v2"),
        vec![
            Value::PersistentId(Box::new(pid)),
            Value::Int(0),
            Value::Tuple(vec![Value::Int(n)]),
            Value::Tuple(vec![Value::Int(1)]),
            Value::Bool(false),
            Value::call(Value::global("collections", "OrderedDict"), vec![]),
        ],
    )
}

/// Loads `bytes` by copy, by mapping, from a storage and through a
/// checkpoint handle (indexed by reads).
fn every_load(bytes: &[u8]) -> Vec<(&'static str, crate::error::Result<TensorDict>)> {
    let path = std::env::temp_dir().join(format!(
        "tessera-archives-{}-{}.pt",
        std::process::id(),
        bytes.len()
    ));
    std::fs::write(&path, bytes).unwrap();
    let mmap = LoadFlags {
        mmap: true,
        ..Default::default()
    };
    let results = vec![
        ("load", load(&path, Format::Auto, LoadFlags::default())),
        ("load mmap", load(&path, Format::Auto, mmap)),
        ("load_from_storage", load_bytes(bytes)),
        (
            "checkpoint",
            Checkpoint::open(&path, Format::Auto, LoadFlags::default()).and_then(|c| {
                c.load_many(None, crate::device::Device::CPU, FetchOptions::default())
            }),
        ),
    ];
    std::fs::remove_file(&path).unwrap();
    results
}

#[test]
fn a_legacy_storage_key_listed_twice_is_refused() {
    let root = Value::Dict(vec![(
        Value::str("t"),
        legacy_tensor("FloatStorage", "0", 4, None, 4),
    )]);
    let (one, two) = (float_bytes(1.0), float_bytes(2.0));
    let good = legacy_file(&root, &["0"], &[(4, &one)]);
    assert_eq!(
        floats(load_bytes(&good).unwrap().get("t").unwrap()),
        [1.0; 4]
    );
    let bad = legacy_file(&root, &["0", "0"], &[(4, &one), (4, &two)]);
    for (how, r) in every_load(&bad) {
        let e = r.expect_err(how);
        assert_eq!(e.kind(), ErrorKind::Format, "{how}: {e}");
        assert!(
            e.message().contains("storage '0' is listed twice"),
            "{how}: {e}"
        );
    }
}

/// Finding 4: a view key read as float, then as double. Every load path
/// refuses the second dtype (tsr_load_from_storage used to place the
/// double tensor by the float view's element offset, in bytes of another
/// record).
#[test]
fn a_legacy_view_read_in_two_dtypes_is_refused() {
    let root = Value::Dict(vec![
        (
            Value::str("a"),
            legacy_tensor("FloatStorage", "0", 8, Some(("v", 2, 2)), 2),
        ),
        (
            Value::str("b"),
            legacy_tensor("DoubleStorage", "0", 4, Some(("v", 1, 1)), 1),
        ),
    ]);
    let rec: Vec<u8> = (0..32).collect();
    let bytes = legacy_file(&root, &["0"], &[(8, &rec)]);
    for (how, r) in every_load(&bytes) {
        let e = r.expect_err(how);
        assert_eq!(e.kind(), ErrorKind::Format, "{how}: {e}");
        assert!(
            e.message()
                .contains("storage '0' is read as Float and as Double"),
            "{how}: {e}"
        );
    }
}

/// Views of one storage share it (as torch's legacy loader shares the
/// root's memory), each placed at its own offset, on every load path;
/// a view key reused for another part of the root is a view of that part.
#[test]
fn legacy_views_share_their_root_storage() {
    let root = Value::Dict(vec![
        (
            Value::str("a"),
            legacy_tensor("FloatStorage", "0", 8, Some(("v", 0, 4)), 4),
        ),
        (
            Value::str("b"),
            legacy_tensor("FloatStorage", "0", 8, Some(("w", 2, 6)), 6),
        ),
        (
            Value::str("c"),
            legacy_tensor("FloatStorage", "0", 8, None, 8),
        ),
    ]);
    let values: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let rec: Vec<u8> = values.iter().flat_map(|f| f.to_le_bytes()).collect();
    let bytes = legacy_file(&root, &["0"], &[(8, &rec)]);
    for (how, r) in every_load(&bytes) {
        let d = r.expect(how);
        let (a, b, c) = (
            d.get("a").unwrap(),
            d.get("b").unwrap(),
            d.get("c").unwrap(),
        );
        assert_eq!(floats(a), values[..4], "{how}");
        assert_eq!(floats(b), values[2..], "{how}");
        assert_eq!(floats(c), values, "{how}");
        assert!(Storage::ptr_eq(a.storage(), b.storage()), "{how}");
        assert!(Storage::ptr_eq(a.storage(), c.storage()), "{how}");
        assert_eq!(b.storage_offset() - a.storage_offset(), 2, "{how}");
    }
}

/// A legacy file opened as a checkpoint reads its pickles and each
/// storage's element count, never a storage's bytes: a main pickle over
/// 256 KiB (read again four times longer) and two storages of 1 MiB.
/// Loads by name as the whole-file load does; a file cut inside its last
/// storage fails to open with the whole-file load's message.
#[test]
fn a_legacy_file_opens_by_reads_without_its_storages() {
    let note = "n".repeat(300 << 10);
    let root = Value::Dict(vec![
        (
            Value::str("a"),
            legacy_tensor("FloatStorage", "0", 1 << 18, None, 1 << 18),
        ),
        (Value::str("note"), Value::str(&note)),
        (
            Value::str("b"),
            legacy_tensor("FloatStorage", "1", 1 << 18, Some(("v", 4, 8)), 8),
        ),
    ]);
    let (x, y): (Vec<u8>, Vec<u8>) = (
        (0..1u32 << 20).map(|i| (i % 251) as u8).collect(),
        (0..1u32 << 20).map(|i| (i % 241) as u8).collect(),
    );
    let bytes = legacy_file(&root, &["0", "1"], &[(1 << 18, &x), (1 << 18, &y)]);
    let pickles = bytes.len() as u64 - 2 * ((1 << 20) + 8);
    let path = std::env::temp_dir().join(format!("tessera-legacy-reads-{}.pt", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let c = Checkpoint::open(&path, Format::Auto, LoadFlags::default()).unwrap();
    assert_eq!(c.format(), Format::TorchLegacy);
    let read = c.bytes_read();
    // 16 bytes to detect the format, the front (past 256 KiB the
    // pickles' second read is 1 MiB: it holds the first count and part of
    // the first storage), the second storage's count; never the second
    // storage.
    assert!(read > pickles, "{read} bytes read at open");
    assert_eq!(read, 16 + (1 << 20) + 8);
    let whole = load(&path, Format::Auto, LoadFlags::default()).unwrap();
    let cpu = crate::device::Device::CPU;
    for name in ["a", "b"] {
        let t = c.load(name, cpu).unwrap();
        assert_eq!(floats(&t), floats(whole.get(name).unwrap()), "{name}");
    }
    assert_eq!(
        floats(&c.load("b", cpu).unwrap()),
        floats(whole.get("b").unwrap())
    );
    let cut = &bytes[..bytes.len() - 100];
    std::fs::write(&path, cut).unwrap();
    let opened = Checkpoint::open(&path, Format::Auto, LoadFlags::default()).map(|_| ());
    let loaded = load(&path, Format::Auto, LoadFlags::default()).map(|_| ());
    std::fs::remove_file(&path).unwrap();
    let (opened, loaded) = (opened.unwrap_err(), loaded.unwrap_err());
    assert!(opened.message().contains("truncated"), "{opened}");
    assert_eq!(opened.message(), loaded.message());
}
