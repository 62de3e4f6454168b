//! Issue 36 (items 6 and 8): metadata lookups cost O(1) (a file of many
//! metadata keys loads in linear work), and every record's geometry is
//! checked the same way in both formats and both load paths.

use super::name_index::comparisons;
use super::tests::load_bytes;
use super::*;
use crate::dtype::DType;
use crate::tensor::Tensor;

/// A safetensors file of one small tensor and `keys` metadata keys.
fn many_keys(keys: usize) -> Vec<u8> {
    let mut d = TensorDict::new();
    d.set("t", Tensor::empty(&[2], DType::Float, Device::CPU).unwrap())
        .unwrap();
    for i in 0..keys {
        d.set_metadata(&format!("key{i:06}"), "v").unwrap();
    }
    save_to_bytes(&d, Format::Safetensors).unwrap()
}

/// Key comparisons made while loading `bytes` and reading every key back.
fn load_work(bytes: &[u8], keys: usize) -> u64 {
    let before = comparisons();
    let d = load_bytes(bytes).unwrap();
    for i in (0..keys).step_by(97) {
        assert_eq!(d.metadata(&format!("key{i:06}")), Some("v"));
    }
    comparisons() - before
}

#[test]
fn loading_many_metadata_keys_is_linear_work() {
    let (small, large) = (5_000, 40_000);
    let (a, b) = (many_keys(small), many_keys(large));
    let (wa, wb) = (load_work(&a, small), load_work(&b, large));
    // 8x the keys: linear work grows 8x; a linear search per key 64x.
    assert!(
        wb <= 10 * wa.max(1) && wb <= 4 * large as u64,
        "{small} keys: {wa} comparisons, {large} keys: {wb}"
    );
}

/// Loads `bytes` from a file (copy and mmap) and from a storage; every
/// load must be a Format error naming `needles`.
fn refused_everywhere(bytes: &[u8], needles: &[&str]) {
    let path = std::env::temp_dir().join(format!(
        "tessera-geometry-{}-{}.pt",
        std::process::id(),
        needles[0].len() + bytes.len()
    ));
    std::fs::write(&path, bytes).unwrap();
    let results = [
        load(&path, Format::Auto, LoadFlags::default()),
        load(
            &path,
            Format::Auto,
            LoadFlags {
                mmap: true,
                ..Default::default()
            },
        ),
        load_bytes(bytes),
    ];
    std::fs::remove_file(&path).unwrap();
    for (how, r) in ["load", "load mmap", "load_from_storage"]
        .iter()
        .zip(results)
    {
        let e = r.expect_err(how);
        assert_eq!(e.kind(), crate::error::ErrorKind::Format, "{how}: {e:?}");
        for n in needles {
            assert!(
                e.message().contains(n),
                "{how}: {:?} lacks {n:?}",
                e.message()
            );
        }
    }
}

#[test]
fn an_empty_tensor_with_an_offset_past_its_record_is_refused() {
    use super::tests::{archive, tensor_pickle};
    let rec: &[u8] = &[0u8; 16];
    for offset in [i64::MAX - 1, i64::MAX / 4 + 1, 5] {
        let pkl = tensor_pickle("FloatStorage", "0", 4, offset, &[0], &[1]);
        refused_everywhere(
            &archive(&pkl, &[("0", rec)]),
            &["tensor 't'", &format!("offset {offset}")],
        );
    }
    // At the record's end: accepted (an empty view of the last byte).
    let pkl = tensor_pickle("FloatStorage", "0", 4, 4, &[0], &[1]);
    let d = load_bytes(&archive(&pkl, &[("0", rec)])).unwrap();
    assert_eq!(d.get("t").unwrap().numel(), 0);
}

#[test]
fn negative_strides_are_refused_even_for_empty_tensors() {
    use super::tests::{archive, tensor_pickle};
    let rec: &[u8] = &[0u8; 16];
    for (sizes, strides) in [(&[0i64, 2][..], &[1i64, -1][..]), (&[2, 0], &[-3, 1])] {
        let pkl = tensor_pickle("FloatStorage", "0", 4, 0, sizes, strides);
        refused_everywhere(
            &archive(&pkl, &[("0", rec)]),
            &["tensor 't'", "negative stride"],
        );
    }
}

/// Two tensors that would get one name (a key "a.t" and a nested dict
/// {"a": {"t": ..}}) are refused naming it, never one silently replacing
/// the other.
#[test]
fn two_tensors_of_one_name_are_refused() {
    use super::tests::archive;
    use crate::pickle::{self, Value};
    let t = || {
        let pid = Value::Tuple(vec![
            Value::str("storage"),
            Value::global("torch", "FloatStorage"),
            Value::str("0"),
            Value::str("cpu"),
            Value::Int(4),
        ]);
        Value::call(
            Value::global("torch._utils", "_rebuild_tensor_v2"),
            vec![
                Value::PersistentId(Box::new(pid)),
                Value::Int(0),
                Value::Tuple(vec![Value::Int(4)]),
                Value::Tuple(vec![Value::Int(1)]),
                Value::Bool(false),
                Value::call(Value::global("collections", "OrderedDict"), vec![]),
            ],
        )
    };
    let root = Value::Dict(vec![
        (Value::str("a.t"), t()),
        (Value::str("a"), Value::Dict(vec![(Value::str("t"), t())])),
    ]);
    let pkl = pickle::write(&root).unwrap();
    refused_everywhere(
        &archive(&pkl, &[("0", &[0u8; 16])]),
        &["two tensors are named 'a.t'"],
    );
}

/// A safetensors save (the crate's header, then tessera's writes of the
/// tensors' bytes in the header's order) is byte for byte what the crate
/// itself serializes, dtypes of several alignments, an empty tensor and
/// metadata included.
#[test]
fn a_safetensors_save_is_the_crates_bytes() {
    use super::tests::filled;
    let mut d = TensorDict::new();
    d.set("z.half", filled(&[3, 5], DType::Half, 1)).unwrap();
    d.set("a.double", filled(&[7], DType::Double, 2)).unwrap();
    d.set("m.byte", filled(&[9], DType::Byte, 3)).unwrap();
    // Set before the empty tensor that the header puts at the same
    // offset (a zero-length range sorts first there).
    d.set("c.big", filled(&[512, 1024], DType::Float, 5))
        .unwrap();
    d.set("b.empty", filled(&[0, 4], DType::Float, 4)).unwrap();
    d.set_metadata("format", "pt").unwrap();
    let path = std::env::temp_dir().join(format!("tessera-st-{}.safetensors", std::process::id()));
    save(&d, &path, Format::Auto).unwrap();
    let file = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(file == save_to_bytes(&d, Format::Safetensors).unwrap());
}

/// A safetensors header naming a tensor (or a metadata key) twice is
/// refused: the crate keeps the last, other JSON readers the first.
#[test]
fn a_safetensors_name_twice_is_refused() {
    use super::tests::{format_error, safetensors_file};
    let dup = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}"#;
    format_error(&safetensors_file(dup, 8), "names tensor 'a' twice");
    let meta = r#"{"__metadata__":{"k":"1","k":"2"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    format_error(&safetensors_file(meta, 8), "names metadata key 'k' twice");
    let both = r#"{"__metadata__":{"k":"1"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"j":"1"}}"#;
    format_error(&safetensors_file(both, 8), "names '__metadata__' twice");
}

/// The one-pass header reader accepts exactly the headers the crate's
/// `read_metadata` accepts (names given once), with the same tensors.
#[test]
fn the_safetensors_header_reader_agrees_with_the_crate() {
    use super::safetensors_header;
    use super::tests::safetensors_file;
    let t = |name: &str, dtype: &str, shape: &str, s: usize, e: usize| {
        format!(r#""{name}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":[{s},{e}]}}"#)
    };
    let cases: Vec<(String, usize)> = vec![
        (format!("{{{}}}", t("a", "F32", "[2]", 0, 8)), 8),
        (
            format!(
                "{{{},{}}}",
                t("b", "F32", "[2]", 8, 16),
                t("a", "I8", "[8]", 0, 8)
            ),
            16,
        ),
        // Gaps, overlaps, a wrong size, a start past 0, data left over or missing.
        (
            format!(
                "{{{},{}}}",
                t("a", "F32", "[2]", 0, 8),
                t("b", "F32", "[2]", 12, 20)
            ),
            20,
        ),
        (
            format!(
                "{{{},{}}}",
                t("a", "F32", "[2]", 0, 8),
                t("b", "F32", "[2]", 4, 12)
            ),
            12,
        ),
        (format!("{{{}}}", t("a", "F32", "[3]", 0, 8)), 8),
        (format!("{{{}}}", t("a", "F32", "[2]", 4, 12)), 12),
        (format!("{{{}}}", t("a", "F32", "[2]", 0, 8)), 9),
        (format!("{{{}}}", t("a", "F32", "[2]", 0, 8)), 7),
        (format!("{{{}}}", t("a", "F32", "[2]", 8, 0)), 8),
        // Overflowing shapes, a sub-byte dtype off a byte boundary.
        (
            format!("{{{}}}", t("a", "F32", "[4294967296,4294967296]", 0, 8)),
            8,
        ),
        (format!("{{{}}}", t("a", "F4", "[3]", 0, 2)), 2),
        (format!("{{{}}}", t("a", "F4", "[3]", 0, 1)), 1),
        (format!("{{{}}}", t("a", "F4", "[4]", 0, 2)), 2),
        // Empty tensors, empty headers, metadata null, strings, not strings.
        (
            format!(
                "{{{},{}}}",
                t("z", "F32", "[0]", 0, 0),
                t("y", "F32", "[0,3]", 0, 0)
            ),
            0,
        ),
        ("{}".into(), 0),
        (r#"{"__metadata__":null}"#.into(), 0),
        (r#"{"__metadata__":{"k":"v"}}"#.into(), 0),
        (r#"{"__metadata__":{"k":1}}"#.into(), 0),
        (r#"{"__metadata__":[]}"#.into(), 0),
        // Unknown fields, missing fields, unknown dtypes, not JSON, spaces.
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}"#.into(),
            8,
        ),
        (r#"{"a":{"dtype":"F32","shape":[2]}}"#.into(), 8),
        (
            r#"{"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}}"#.into(),
            8,
        ),
        (r#"{"a":1}"#.into(), 8),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}"#.into(),
            8,
        ),
        (format!("{{{}}}   ", t("a", "F32", "[2]", 0, 8)), 8),
        (format!("  {{{}}}", t("a", "F32", "[2]", 0, 8)), 8),
        (format!("{{{}}} x", t("a", "F32", "[2]", 0, 8)), 8),
        ("[]".into(), 0),
    ];
    for (header, data) in &cases {
        let bytes = safetensors_file(header, *data);
        let theirs = safetensors::SafeTensors::read_metadata(&bytes);
        let ours = safetensors_header::read(&bytes, |e| crate::err!(Format, "{e}"));
        match (&theirs, &ours) {
            (Ok((n, meta)), Ok(h)) => {
                assert_eq!(*n, h.len, "{header}");
                let names: Vec<&str> = h.tensors.iter().map(|(n, _)| n.as_str()).collect();
                let mut theirs = meta.offset_keys();
                let mut ours: Vec<String> = names.iter().map(|s| s.to_string()).collect();
                // The crate orders empty tensors of one offset at random.
                theirs.sort();
                ours.sort();
                assert_eq!(theirs, ours, "{header}");
                for (name, info) in &h.tensors {
                    let c = meta.info(name).unwrap();
                    assert_eq!(
                        (c.dtype, &c.shape, c.data_offsets),
                        (info.dtype, &info.shape, info.data_offsets)
                    );
                }
                let pairs = |m: &Option<std::collections::HashMap<String, String>>| {
                    let mut v: Vec<(String, String)> =
                        m.clone().unwrap_or_default().into_iter().collect();
                    v.sort();
                    v
                };
                let mut mine = h.metadata.clone().unwrap_or_default();
                mine.sort();
                assert_eq!(pairs(meta.metadata()), mine, "{header}");
            }
            (Err(_), Err(_)) => {}
            _ => panic!(
                "{header} + {data} bytes: the crate says {:?}, the header reader {:?}",
                theirs.as_ref().map(|_| ()),
                ours.as_ref()
                    .map(|_| ())
                    .map_err(|e| e.message().to_owned())
            ),
        }
    }
    // Tensors of one offset keep the header's order.
    let empties = format!(
        "{{{},{}}}",
        t("z", "F32", "[0]", 0, 0),
        t("y", "F32", "[0]", 0, 0)
    );
    let h = safetensors_header::read(&safetensors_file(&empties, 0), |e| {
        crate::err!(Format, "{e}")
    })
    .unwrap();
    let names: Vec<&str> = h.tensors.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["z", "y"]);
}
