//! GGUF: files the `gguf` package's GGUFWriter wrote (tests/fixtures/gguf/,
//! scripts/make_gguf_fixtures.py) load with their metadata, dtypes,
//! shapes (ggml's dims reversed) and values, quantized tensors as their
//! raw blocks, copied and mapped, viewing the file's bytes; tessera's own
//! files load back with every type kept; hostile files (counts and
//! lengths of 2^60, overflowing dims, offsets past the end, every
//! truncation) are refused by name.

use std::path::PathBuf;
use tessera::serialize::{
    detect, load, load_from_storage, save, save_to_bytes, Format, LoadFlags, TensorDict,
};
use tessera::{DType, Device, ErrorKind, Storage, Tensor};

fn fixture(name: &str) -> PathBuf {
    std::env::var_os("TESSERA_GGUF_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf"))
        .join(name)
}

fn storage_of(bytes: &[u8]) -> Storage {
    let s = Storage::new(bytes.len(), Device::CPU, true).unwrap();
    if !bytes.is_empty() {
        // SAFETY: s is a fresh CPU storage of bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.data() as *mut u8, bytes.len()) };
    }
    s
}

/// The values of `t` as f64, row-major.
fn values(t: &Tensor) -> Vec<f64> {
    let c = t
        .to_dtype(DType::Double)
        .unwrap()
        .contiguous(tessera::MemoryFormat::Contiguous)
        .unwrap();
    let n = c.numel() as usize;
    if n == 0 {
        return Vec::new();
    }
    // SAFETY: c is a contiguous CPU tensor of n f64 values.
    unsafe { std::slice::from_raw_parts(c.data_ptr() as *const f64, n) }.to_vec()
}

fn pattern(n: usize, modulo: usize) -> Vec<f64> {
    (0..n).map(|i| ((i * 7 + 3) % modulo) as f64).collect()
}

const PLAIN: &[(&str, DType, &[i64])] = &[
    ("f32", DType::Float, &[2, 3, 4]),
    ("f16", DType::Half, &[3, 4]),
    ("f64", DType::Double, &[5]),
    ("i8", DType::Char, &[2, 2]),
    ("i16", DType::Short, &[4]),
    ("i32", DType::Int, &[2, 3]),
    ("i64", DType::Long, &[3]),
    ("blk.0.attn_q.weight", DType::Float, &[4, 8]),
    ("bf16", DType::BFloat16, &[2, 4]),
];

/// name, ggml type, logical shape, stored byte shape.
const QUANT: &[(&str, &str, &str, &[i64])] = &[
    ("q4_0", "Q4_0", "[2, 64]", &[2, 36]),
    ("q8_0", "Q8_0", "[3, 32]", &[3, 34]),
    ("q4_k", "Q4_K", "[2, 256]", &[2, 144]),
    ("q6_k", "Q6_K", "[1, 256]", &[1, 210]),
    ("iq4_nl", "IQ4_NL", "[2, 32]", &[2, 18]),
];

fn check_dict(d: &TensorDict, what: &str) {
    for (key, want) in [
        ("general.architecture", "tessera-test"),
        ("test.u8", "200"),
        ("test.i8", "-100"),
        ("test.u16", "60000"),
        ("test.i16", "-30000"),
        ("test.u32", "4000000000"),
        ("test.i32", "-2000000000"),
        ("test.u64", "9223372036854775813"),
        ("test.i64", "-4611686018427387904"),
        ("test.f32", "0.5"),
        ("test.f64", "-1.25"),
        ("test.bool", "true"),
        ("test.string", "héllo wörld"),
        ("test.strings", r#"["a","b c","\"q\""]"#),
        ("test.ints", "[1,-2,3]"),
        ("test.floats", "[0.5,1.5]"),
    ] {
        assert_eq!(d.metadata(key), Some(want), "{what}: {key}");
    }
    let types: serde_json::Value = serde_json::from_str(d.metadata("gguf.types").unwrap()).unwrap();
    assert_eq!(types["test.u64"], "uint64", "{what}");
    assert_eq!(types["test.ints"], "array[int32]", "{what}");
    assert_eq!(types["test.strings"], "array[string]", "{what}");
    for (name, dtype, shape) in PLAIN {
        let t = d.get(name).unwrap_or_else(|| panic!("{what}: no {name}"));
        assert_eq!((t.dtype(), t.sizes()), (*dtype, *shape), "{what}: {name}");
        let n = shape.iter().product::<i64>() as usize;
        assert_eq!(values(t), pattern(n, 100), "{what}: {name}");
        assert!(d.metadata(&format!("{name}.ggml_type")).is_none());
    }
    for (name, ty, logical, bytes) in QUANT {
        let t = d.get(name).unwrap();
        assert_eq!(
            (t.dtype(), t.sizes()),
            (DType::Byte, *bytes),
            "{what}: {name}"
        );
        let n = bytes.iter().product::<i64>() as usize;
        assert_eq!(values(t), pattern(n, 256), "{what}: {name}");
        assert_eq!(d.metadata(&format!("{name}.ggml_type")), Some(*ty));
        assert_eq!(d.metadata(&format!("{name}.ggml_shape")), Some(*logical));
    }
    assert_eq!(d.len(), PLAIN.len() + QUANT.len(), "{what}");
}

fn mmap(on: bool) -> LoadFlags {
    LoadFlags {
        mmap: on,
        ..Default::default()
    }
}

#[test]
fn gguf_py_files_load() {
    for file in ["gguf_py.gguf", "align64.gguf", "v2.gguf"] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        assert_eq!(detect(&bytes).unwrap(), Format::Gguf);
        for on in [false, true] {
            let d = load(&fixture(file), Format::Auto, mmap(on)).unwrap();
            check_dict(&d, &format!("{file} mmap={on}"));
        }
    }
    let d = load(&fixture("align64.gguf"), Format::Gguf, mmap(false)).unwrap();
    assert_eq!(d.metadata("general.alignment"), Some("64"));
}

/// A big-endian file (GGUFWriter with endianess=BIG: the header, the keys
/// and the plain tensors byte-swapped, bf16 stored big-endian, quantized
/// blocks as they are; GGUFReader reads back the values of
/// gguf_py.gguf) loads with the same keys, types and values, swapped to
/// the machine's order, copied and mapped.
#[test]
fn big_endian_file_loads_swapped() {
    let bytes = std::fs::read(fixture("big_endian.gguf")).unwrap();
    assert_eq!(detect(&bytes).ok(), Some(Format::Gguf));
    for on in [false, true] {
        let d = load(&fixture("big_endian.gguf"), Format::Auto, mmap(on))
            .unwrap_or_else(|e| panic!("big_endian.gguf mmap={on}: {e}"));
        check_dict(&d, &format!("big_endian.gguf mmap={on}"));
    }
}

#[test]
fn tensors_view_the_bytes_in_place() {
    let s = storage_of(&std::fs::read(fixture("gguf_py.gguf")).unwrap());
    let d = load_from_storage(&s, Format::Gguf).unwrap();
    for (name, t) in d.iter() {
        assert_eq!(t.storage().data(), s.data(), "{name} was copied");
    }
}

#[test]
fn tessera_files_keep_types_and_blocks() {
    let d = load(&fixture("gguf_py.gguf"), Format::Gguf, mmap(false)).unwrap();
    let bytes = save_to_bytes(&d, Format::Gguf).unwrap();
    let back = load_from_storage(&storage_of(&bytes), Format::Auto).unwrap();
    check_dict(&back, "tessera's gguf");
    // Same keys and tensors in the same order: the same bytes as gguf-py.
    assert_eq!(bytes, std::fs::read(fixture("gguf_py.gguf")).unwrap());
    let d = load(&fixture("align64.gguf"), Format::Gguf, mmap(false)).unwrap();
    let bytes = save_to_bytes(&d, Format::Gguf).unwrap();
    assert_eq!(bytes, std::fs::read(fixture("align64.gguf")).unwrap());
}

#[test]
fn writes_reference_file() {
    let dir = std::env::var_os("TESSERA_GGUF_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("tessera-gguf-{}", std::process::id()))
        });
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tessera.gguf");
    let d = load(&fixture("gguf_py.gguf"), Format::Auto, mmap(true)).unwrap();
    save(&d, &path, Format::Auto).unwrap();
    check_dict(&load(&path, Format::Auto, mmap(true)).unwrap(), "saved");
    if std::env::var_os("TESSERA_GGUF_OUT").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn dicts_from_elsewhere_save_as_gguf() {
    let mut d = TensorDict::new();
    let t = Tensor::empty(&[], DType::Float, Device::CPU).unwrap();
    d.set("scalar", t).unwrap();
    d.set(
        "m",
        Tensor::empty(&[2, 3], DType::Half, Device::CPU).unwrap(),
    )
    .unwrap();
    d.set_metadata("note", "no type given: a string").unwrap();
    let back = load_from_storage(
        &storage_of(&save_to_bytes(&d, Format::Gguf).unwrap()),
        Format::Gguf,
    )
    .unwrap();
    // ggml has no 0-dim tensors: one dim of 1.
    assert_eq!(back.get("scalar").unwrap().sizes(), &[1]);
    assert_eq!(back.get("m").unwrap().sizes(), &[2, 3]);
    assert_eq!(back.metadata("note"), Some("no type given: a string"));

    let refuse = |d: &TensorDict, says: &str| {
        let e = save_to_bytes(d, Format::Gguf).unwrap_err();
        assert!(e.message().contains(says), "{says}: {e}");
    };
    let mut d = TensorDict::new();
    d.set("u", Tensor::empty(&[4], DType::Byte, Device::CPU).unwrap())
        .unwrap();
    refuse(&d, "u.ggml_type");
    d.set_metadata("u.ggml_type", "Q4_0").unwrap();
    refuse(&d, "u.ggml_shape");
    d.set_metadata("u.ggml_shape", "[32]").unwrap();
    refuse(&d, "needs 18");
    d.set_metadata("u.ggml_type", "Q9_9").unwrap();
    refuse(&d, "Q9_9");
    let mut d = TensorDict::new();
    d.set(
        "five",
        Tensor::empty(&[1, 1, 1, 1, 1], DType::Float, Device::CPU).unwrap(),
    )
    .unwrap();
    refuse(&d, "5 dims");
    let mut d = TensorDict::new();
    d.set_metadata("k", "x").unwrap();
    d.set_metadata("gguf.types", r#"{"k": "uint32"}"#).unwrap();
    refuse(&d, "'k'");
    d.set_metadata("general.alignment", "3").unwrap();
    d.set_metadata("k", "7").unwrap();
    refuse(&d, "general.alignment");
}

/// A GGUF file: header, raw key-value bytes and tensor-info bytes.
fn file(version: u32, n_tensors: u64, n_kv: u64, body: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&n_tensors.to_le_bytes());
    b.extend_from_slice(&n_kv.to_le_bytes());
    b.extend_from_slice(body);
    b.resize(b.len() + 64, 0);
    b
}

fn string(s: &str) -> Vec<u8> {
    let mut b = (s.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(s.as_bytes());
    b
}

/// A tensor info: name, dims (ggml order), type, offset.
fn info(name: &str, ne: &[u64], ty: u32, offset: u64) -> Vec<u8> {
    let mut b = string(name);
    b.extend_from_slice(&(ne.len() as u32).to_le_bytes());
    for d in ne {
        b.extend_from_slice(&d.to_le_bytes());
    }
    b.extend_from_slice(&ty.to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    b
}

fn refused(bytes: &[u8], says: &str) {
    for format in [Format::Gguf, Format::Auto] {
        match load_from_storage(&storage_of(bytes), format) {
            Ok(_) => panic!("accepted: {says}"),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Format, "{says}: {e}");
                assert!(e.message().contains(says), "{says}: {e}");
            }
        }
    }
}

#[test]
fn hostile_files_are_refused_before_allocating() {
    let huge = 1u64 << 60;
    refused(&file(3, huge, 0, &[]), "tensor count");
    refused(&file(3, 0, huge, &[]), "key-value count");
    // A key of 2^60 bytes.
    refused(
        &file(3, 0, 1, &huge.to_le_bytes()),
        "string of 1152921504606846976",
    );
    // An array of 2^60 uint32.
    let mut kv = string("k");
    kv.extend_from_slice(&9u32.to_le_bytes());
    kv.extend_from_slice(&4u32.to_le_bytes());
    kv.extend_from_slice(&huge.to_le_bytes());
    refused(&file(3, 0, 1, &kv), "the array's count");
    // A value type that does not exist; a bool of 2.
    let mut kv = string("k");
    kv.extend_from_slice(&13u32.to_le_bytes());
    refused(&file(3, 0, 1, &kv), "value type 13");
    let mut kv = string("k");
    kv.extend_from_slice(&7u32.to_le_bytes());
    kv.push(2);
    refused(&file(3, 0, 1, &kv), "bool value is 2");
    // Arrays nested without end.
    let mut kv = string("k");
    kv.extend_from_slice(&9u32.to_le_bytes());
    for _ in 0..20 {
        kv.extend_from_slice(&9u32.to_le_bytes());
        kv.extend_from_slice(&1u64.to_le_bytes());
    }
    refused(&file(3, 0, 1, &kv), "nested");
    // Dims whose product overflows, in elements or bytes.
    refused(
        &file(3, 1, 0, &info("w", &[1 << 40, 1 << 40], 0, 0)),
        "overflows",
    );
    refused(&file(3, 1, 0, &info("w", &[u64::MAX], 0, 0)), "overflows");
    // Data past the end; an offset past the end; a misaligned offset.
    refused(&file(3, 1, 0, &info("w", &[1000], 0, 0)), "past the end");
    refused(&file(3, 1, 0, &info("w", &[1], 0, 1 << 62)), "past the end");
    refused(
        &file(3, 1, 0, &info("w", &[1], 0, 4)),
        "multiple of the alignment",
    );
    // Types and dims ggml does not have; a row that is not whole blocks.
    refused(&file(3, 1, 0, &info("w", &[1], 4, 0)), "ggml type 4");
    refused(&file(3, 1, 0, &info("w", &[1; 5], 0, 0)), "5 dims");
    refused(&file(3, 1, 0, &info("w", &[31], 2, 0)), "block of 32");
    // Two tensors of one name.
    let mut two = info("w", &[1], 0, 0);
    two.extend_from_slice(&info("w", &[1], 0, 32));
    refused(&file(3, 2, 0, &two), "appears twice");
    // Versions and byte order.
    refused(&file(1, 0, 0, &[]), "version 1");
    // Big-endian files are read (big_endian_file_loads_swapped); their
    // version is checked as a little-endian file's.
    refused(&file(1u32.swap_bytes(), 0, 0, &[]), "version 1");
    refused(&file(0x0100_0100, 0, 0, &[]), "version 16777472");
    // An alignment that is not a power of two, or not a uint32.
    let mut kv = string("general.alignment");
    kv.extend_from_slice(&4u32.to_le_bytes());
    kv.extend_from_slice(&24u32.to_le_bytes());
    refused(&file(3, 0, 1, &kv), "power of two");
}

#[test]
fn every_truncation_is_refused_cleanly() {
    // Refused, or (cut in the last tensor's padding, after all its data)
    // loaded whole.
    let good = std::fs::read(fixture("gguf_py.gguf")).unwrap();
    let mut accepted = 0;
    for len in 0..good.len() {
        for format in [Format::Gguf, Format::Auto] {
            match load_from_storage(&storage_of(&good[..len]), format) {
                Ok(d) => {
                    check_dict(&d, &format!("[..{len}]"));
                    accepted += 1;
                }
                Err(e) => assert_eq!(e.kind(), ErrorKind::Format, "[..{len}]: {e}"),
            }
        }
    }
    // iq4_nl's 36 bytes end 28 bytes before the end of the file.
    assert_eq!(accepted, 2 * 28);
}

#[test]
fn nested_and_empty_arrays_round_trip() {
    let le32 = |v: u32| v.to_le_bytes().to_vec();
    let le64 = |v: u64| v.to_le_bytes().to_vec();
    // k = [[1, 2], []] (array of arrays of int32); e = [] (of arrays).
    let mut body = string("k");
    for part in [le32(9), le32(9), le64(2), le32(5), le64(2)] {
        body.extend_from_slice(&part);
    }
    body.extend_from_slice(&1i32.to_le_bytes());
    body.extend_from_slice(&2i32.to_le_bytes());
    body.extend_from_slice(&le32(5));
    body.extend_from_slice(&le64(0));
    body.extend_from_slice(&string("e"));
    for part in [le32(9), le32(9), le64(0)] {
        body.extend_from_slice(&part);
    }
    let d = load_from_storage(&storage_of(&file(3, 0, 2, &body)), Format::Gguf).unwrap();
    assert_eq!(d.metadata("k"), Some("[[1,2],[]]"));
    assert_eq!(d.metadata("e"), Some("[]"));
    let bytes = save_to_bytes(&d, Format::Gguf).unwrap();
    assert_eq!(
        &bytes[24..24 + body.len()],
        &body[..],
        "the same key-value bytes"
    );
    let back = load_from_storage(&storage_of(&bytes), Format::Gguf).unwrap();
    assert_eq!(back.metadata("k"), Some("[[1,2],[]]"));
    assert_eq!(back.metadata("gguf.types"), d.metadata("gguf.types"));
}

/// A file of `n_kv` keys and `n_tensors` tensor infos in `body`, with
/// 256 bytes of data.
fn with_data(n_tensors: u64, n_kv: u64, body: &[u8]) -> Vec<u8> {
    let mut b = file(3, n_tensors, n_kv, body);
    b.resize(b.len() + 256, 0);
    b
}

#[test]
fn tensors_over_the_same_bytes_are_refused() {
    // b's data lie inside a's: both used to load (copied, mapped or from
    // a storage) as two storages over the same bytes.
    let mut infos = info("a", &[16], 0, 0);
    infos.extend(info("b", &[4], 0, 32));
    let says = "tensors 'a' (data bytes 0..64) and 'b' (data bytes 32..48) overlap";
    refused(&with_data(2, 0, &infos), says);
    // Listed the other way round: the same message.
    let mut infos = info("b", &[4], 0, 32);
    infos.extend(info("a", &[16], 0, 0));
    refused(&with_data(2, 0, &infos), says);
    // One range twice.
    let mut infos = info("a", &[8], 0, 32);
    infos.extend(info("c", &[8], 0, 32));
    refused(&with_data(2, 0, &infos), "'a' (data bytes 32..64) and 'c'");
    // Side by side, an empty tensor at another's offset, and a gap: fine.
    let mut infos = info("a", &[8], 0, 0);
    infos.extend(info("b", &[8], 0, 32));
    infos.extend(info("e", &[0], 0, 32));
    infos.extend(info("f", &[4], 0, 128));
    let d = load_from_storage(&storage_of(&with_data(4, 0, &infos)), Format::Gguf).unwrap();
    assert_eq!(d.len(), 4);
}

#[test]
fn a_key_named_as_a_tensors_type_or_shape_metadata_is_refused() {
    // A key "w.ggml_type" beside a Q8_0 tensor w used to be overwritten
    // by the type tessera gives w; beside a plain one it would be dropped
    // on save.
    for (suffix, ty) in [("ggml_type", 8u32), ("ggml_shape", 8), ("ggml_type", 0)] {
        let key = format!("w.{suffix}");
        let mut body = string(&key);
        body.extend_from_slice(&8u32.to_le_bytes()); // a string
        body.extend(string("Q4_0"));
        body.extend(info("w", &[32], ty, 0));
        refused(&with_data(1, 1, &body), &format!("key '{key}' is named as"));
    }
    // Beside no tensor of that name: an ordinary key.
    let mut body = string("v.ggml_type");
    body.extend_from_slice(&8u32.to_le_bytes());
    body.extend(string("Q4_0"));
    body.extend(info("w", &[32], 8, 0));
    let d = load_from_storage(&storage_of(&with_data(1, 1, &body)), Format::Gguf).unwrap();
    assert_eq!(d.metadata("v.ggml_type"), Some("Q4_0"));
    assert_eq!(d.metadata("w.ggml_type"), Some("Q8_0"));
}
