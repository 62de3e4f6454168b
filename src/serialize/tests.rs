use super::safetensors_format::row_major;
use super::*;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::pickle::{self, Value};
use crate::tensor::Tensor;

pub(super) fn filled(sizes: &[i64], dtype: DType, seed: u8) -> Tensor {
    let t = Tensor::empty(sizes, dtype, Device::CPU).unwrap();
    let s = t.storage();
    if s.nbytes() == 0 {
        return t;
    }
    // SAFETY: a fresh CPU storage of nbytes bytes, used by this test only.
    let bytes = unsafe { std::slice::from_raw_parts_mut(s.data() as *mut u8, s.nbytes()) };
    for (i, b) in bytes.iter_mut().enumerate() {
        // Bools must stay 0 / 1.
        *b = if dtype == DType::Bool {
            (i % 2) as u8
        } else {
            (i as u8).wrapping_mul(31).wrapping_add(seed)
        };
    }
    t
}

fn same(a: &Tensor, b: &Tensor, name: &str, strides_too: bool) {
    assert_eq!(a.dtype(), b.dtype(), "{name}");
    assert_eq!(a.sizes(), b.sizes(), "{name}");
    if strides_too {
        assert_eq!(a.strides(), b.strides(), "{name}");
        assert_eq!(a.storage_offset(), b.storage_offset(), "{name}");
    }
    assert_eq!(row_major(a), row_major(b), "{name}: values");
}

/// Saves `dict` to a file and loads it back (copy loading: each record
/// gets its own storage, offsets as saved).
fn round_trip(dict: &TensorDict, format: Format) -> TensorDict {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "tessera-rt-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    save(dict, &path, format).unwrap();
    let back = load(&path, Format::Auto, LoadFlags::default()).unwrap();
    std::fs::remove_file(&path).unwrap();
    back
}

fn torch_dtypes() -> Vec<DType> {
    DType::ALL
        .iter()
        .copied()
        .filter(|d| dtypes::torch_names(*d).is_some())
        .collect()
}

#[test]
fn torch_round_trip_keeps_every_dtype_bit_for_bit() {
    let mut d = TensorDict::new();
    for (i, dt) in torch_dtypes().into_iter().enumerate() {
        d.set(&format!("t{i}_{}", dt.name()), filled(&[3, 5], dt, i as u8))
            .unwrap();
    }
    assert!(d.len() >= 17, "{}", d.len());
    let back = round_trip(&d, Format::Torch);
    let names: Vec<_> = back.iter().map(|(n, _)| n.to_owned()).collect();
    let want: Vec<_> = d.iter().map(|(n, _)| n.to_owned()).collect();
    assert_eq!(names, want);
    for (name, t) in d.iter() {
        same(t, back.get(name).unwrap(), name, true);
    }
}

fn views() -> TensorDict {
    let base = filled(&[4, 6], DType::Float, 7);
    let mut d = TensorDict::new();
    d.set("base", base.clone()).unwrap();
    d.set("permuted", base.permute(&[1, 0]).unwrap()).unwrap();
    d.set("sliced", base.narrow(1, 2, 3).unwrap()).unwrap();
    let row = filled(&[6], DType::Double, 1);
    d.set("expanded", row.expand(&[5, 6]).unwrap()).unwrap();
    d.set("scalar", filled(&[], DType::Long, 3)).unwrap();
    d.set("empty", filled(&[0, 3], DType::Half, 3)).unwrap();
    d
}

#[test]
fn torch_round_trip_keeps_views_geometry() {
    let d = views();
    let back = round_trip(&d, Format::Torch);
    for (name, t) in d.iter() {
        same(t, back.get(name).unwrap(), name, true);
    }
}

#[test]
fn safetensors_round_trip_keeps_values_of_views() {
    // safetensors holds no strides: non-contiguous tensors come back
    // contiguous; views of one storage that overlap are refused, so save
    // each view as its own dict.
    for (name, t) in views().iter() {
        let mut d = TensorDict::new();
        d.set(name, t.clone()).unwrap();
        let back = round_trip(&d, Format::Safetensors);
        let u = back.get(name).unwrap();
        same(t, u, name, false);
        assert!(u.is_contiguous(crate::tensor::MemoryFormat::Contiguous));
    }
}

#[test]
fn safetensors_round_trip_every_dtype_and_metadata() {
    let mut d = TensorDict::new();
    let mut n = 0;
    for (i, dt) in DType::ALL.iter().copied().enumerate() {
        if dtypes::safetensors_dtype(dt).is_some() {
            d.set(&format!("t{i}"), filled(&[2, 3], dt, i as u8))
                .unwrap();
            n += 1;
        }
    }
    assert!(n >= 15);
    d.set_metadata("format", "pt").unwrap();
    d.set_metadata("epoch", "7").unwrap();
    let back = round_trip(&d, Format::Safetensors);
    assert_eq!(back.len(), d.len());
    for (name, t) in d.iter() {
        same(t, back.get(name).unwrap(), name, true);
    }
    assert_eq!(back.metadata("format"), Some("pt"));
    assert_eq!(back.metadata("epoch"), Some("7"));
}

#[test]
fn torch_metadata_round_trips() {
    let mut d = TensorDict::new();
    d.set("w", filled(&[2], DType::Float, 0)).unwrap();
    d.set_metadata("k", "v").unwrap();
    assert_eq!(round_trip(&d, Format::Torch).metadata("k"), Some("v"));
}

#[test]
fn torch_round_trip_preserves_sharing() {
    let a = filled(&[4, 4], DType::Float, 0);
    let b = a.narrow(0, 1, 2).unwrap();
    let c = a.permute(&[1, 0]).unwrap().narrow(0, 2, 2).unwrap();
    let other = filled(&[3], DType::Float, 9);
    let mut d = TensorDict::new();
    for (n, t) in [("a", &a), ("b", &b), ("c", &c), ("other", &other)] {
        d.set(n, t.clone()).unwrap();
    }
    let bytes = save_to_bytes(&d, Format::Torch).unwrap();
    let zip = zip::ZipArchive::new(std::io::Cursor::new(&bytes)).unwrap();
    let records = zip.file_names().filter(|n| n.contains("/data/")).count();
    assert_eq!(records, 2, "one record per storage");
    for back in [round_trip(&d, Format::Torch)] {
        let (la, lb, lc) = (
            back.get("a").unwrap(),
            back.get("b").unwrap(),
            back.get("c").unwrap(),
        );
        assert!(Storage::ptr_eq(la.storage(), lb.storage()));
        assert!(Storage::ptr_eq(la.storage(), lc.storage()));
        assert!(!Storage::ptr_eq(
            la.storage(),
            back.get("other").unwrap().storage()
        ));
        for (orig, l) in [(&a, la), (&b, lb), (&c, lc)] {
            same(orig, l, "shared", true);
        }
        // A write through a shows in b (element [1, 0] of a is b[0, 0]).
        // SAFETY: la's storage is CPU memory of 64 bytes owned by this test.
        unsafe { *(la.data_ptr() as *mut f32).add(4) = 42.5 };
        // SAFETY: lb shares la's 64-byte CPU storage (ptr_eq above) and
        // starts at element 4 of it (same() checked b's offset, row 1 of
        // a 4x4), so this reads the f32 written just above.
        assert_eq!(unsafe { *(lb.data_ptr() as *const f32) }, 42.5);
    }
}

#[test]
fn files_round_trip_in_both_formats() {
    let dir = std::env::temp_dir().join(format!("tessera-serialize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut d = TensorDict::new();
    d.set("x", filled(&[8, 3], DType::Float, 2)).unwrap();
    d.set("y", filled(&[5], DType::Long, 4)).unwrap();
    for (file, format) in [
        ("m.pt", Format::Torch),
        ("m.safetensors", Format::Safetensors),
    ] {
        let path = dir.join(file);
        save(&d, &path, Format::Auto).unwrap();
        let head = std::fs::read(&path).unwrap();
        assert_eq!(detect(&head).unwrap(), format, "{file}");
        let back = load(&path, Format::Auto, LoadFlags::default()).unwrap();
        for (name, t) in d.iter() {
            same(t, back.get(name).unwrap(), name, true);
        }
    }
    let e = load(&dir, Format::Auto, LoadFlags::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{}", e.message());
    let e = save(&d, &dir, Format::Torch).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{}", e.message());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn safetensors_refuses_tensors_sharing_memory_naming_both() {
    let a = filled(&[4], DType::Float, 0);
    let mut d = TensorDict::new();
    d.set("first", a.clone()).unwrap();
    d.set("second", a.narrow(0, 1, 2).unwrap()).unwrap();
    let e = save_to_bytes(&d, Format::Safetensors).unwrap_err();
    assert!(
        e.message().contains("'first'") && e.message().contains("'second'"),
        "{}",
        e.message()
    );
}

#[test]
fn quantized_dtypes_are_refused_by_both_formats() {
    let mut d = TensorDict::new();
    d.set("q", filled(&[2], DType::QInt8, 0)).unwrap();
    for f in [Format::Torch, Format::Safetensors] {
        let e = save_to_bytes(&d, f).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DType);
        assert!(e.message().contains("'q'") && e.message().contains("QInt8"));
    }
}

// ---- hostile files ----

/// A stored archive with `data.pkl` = `pkl` and the given data records.
pub(super) fn archive(pkl: &[u8], records: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .with_alignment(64);
    z.start_file("archive/data.pkl", o).unwrap();
    z.write_all(pkl).unwrap();
    for (k, v) in records {
        z.start_file(format!("archive/data/{k}"), o).unwrap();
        z.write_all(v).unwrap();
    }
    z.finish().unwrap().into_inner()
}

pub(super) fn load_bytes(bytes: &[u8]) -> crate::error::Result<TensorDict> {
    let s = Storage::new(bytes.len(), Device::CPU, false).unwrap();
    // SAFETY: fresh storage of bytes.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.data() as *mut u8, bytes.len()) };
    load_from_storage(&s, Format::Auto)
}

pub(super) fn format_error(bytes: &[u8], needle: &str) {
    let e = load_bytes(bytes).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Format, "{}", e.message());
    assert!(
        e.message().contains(needle),
        "{:?} lacks {needle:?}",
        e.message()
    );
}

/// A dict {"t": tensor} pickled with the given storage id and geometry.
pub(super) fn tensor_pickle(
    class: &str,
    key: &str,
    numel: i64,
    offset: i64,
    sizes: &[i64],
    strides: &[i64],
) -> Vec<u8> {
    let ints = |v: &[i64]| Value::Tuple(v.iter().map(|&i| Value::Int(i)).collect());
    let pid = Value::Tuple(vec![
        Value::str("storage"),
        Value::global("torch", class),
        Value::str(key),
        Value::str("cpu"),
        Value::Int(numel),
    ]);
    let t = Value::call(
        Value::global("torch._utils", "_rebuild_tensor_v2"),
        vec![
            Value::PersistentId(Box::new(pid)),
            Value::Int(offset),
            ints(sizes),
            ints(strides),
            Value::Bool(false),
            Value::call(Value::global("collections", "OrderedDict"), vec![]),
        ],
    );
    pickle::write(&Value::Dict(vec![(Value::str("t"), t)])).unwrap()
}

#[test]
fn a_plain_dict_with_a_tensor_loads() {
    let pkl = tensor_pickle("FloatStorage", "0", 4, 1, &[3], &[1]);
    let d = load_bytes(&archive(&pkl, &[("0", &[0u8; 16])])).unwrap();
    assert_eq!(d.get("t").unwrap().sizes(), &[3]);
}

#[test]
fn every_truncation_of_a_torch_file_is_a_format_error() {
    let mut d = TensorDict::new();
    d.set("w", filled(&[3], DType::Float, 0)).unwrap();
    let bytes = save_to_bytes(&d, Format::Torch).unwrap();
    for n in 0..bytes.len() {
        let e = load_bytes(&bytes[..n]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format, "length {n}: {}", e.message());
    }
}

#[test]
fn every_truncation_of_a_safetensors_file_is_a_format_error() {
    let mut d = TensorDict::new();
    d.set("w", filled(&[3], DType::Float, 0)).unwrap();
    let bytes = save_to_bytes(&d, Format::Safetensors).unwrap();
    for n in 0..bytes.len() {
        let e = load_bytes(&bytes[..n]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format, "length {n}: {}", e.message());
    }
}

#[test]
fn a_pickle_calling_os_system_is_refused() {
    let pkl = pickle::write(&Value::call(
        Value::global("os", "system"),
        vec![Value::str("echo pwned")],
    ))
    .unwrap();
    format_error(&archive(&pkl, &[]), "global os.system is not allowed");
}

#[test]
fn deep_nesting_and_huge_memo_indices_are_refused() {
    let mut pkl = vec![0x80, 2, b'N'];
    pkl.extend(std::iter::repeat_n(0x85u8, 100_000));
    pkl.push(b'.');
    // Values without a tensor nested past the bound are left out, named
    // (issue 68: values kept up to 32 levels); the walk of values holding
    // tensors still refuses past 100.
    let d = load_bytes(&archive(&pkl, &[])).unwrap();
    assert_eq!(
        d.metadata(SKIPPED_KEY),
        Some("0 (a value nested more than 32 deep: not kept)")
    );
    assert_eq!(d.value_count(), 0);
    format_error(
        &archive(b"\x80\x02}r\xff\xff\xff\x7f.", &[]),
        "memo index 2147483647",
    );
}

#[test]
fn a_missing_storage_key_is_named() {
    let pkl = tensor_pickle("FloatStorage", "7", 4, 0, &[4], &[1]);
    format_error(
        &archive(&pkl, &[("0", &[0u8; 16])]),
        "storage key '7' has no record",
    );
}

#[test]
fn offsets_and_strides_past_the_record_are_refused() {
    let rec: &[u8] = &[0u8; 16];
    let pkl = tensor_pickle("FloatStorage", "0", 4, 0, &[4], &[100]);
    format_error(
        &archive(&pkl, &[("0", rec)]),
        "past its storage record of 16 bytes",
    );
    let pkl = tensor_pickle("FloatStorage", "0", 4, 3, &[2], &[1]);
    format_error(&archive(&pkl, &[("0", rec)]), "past its storage record");
    let pkl = tensor_pickle("FloatStorage", "0", 5, 0, &[4], &[1]);
    format_error(
        &archive(&pkl, &[("0", rec)]),
        "its record archive/data/0 holds 16",
    );
}

#[test]
fn numel_overflow_is_refused() {
    let rec: &[u8] = &[0u8; 16];
    let pkl = tensor_pickle("FloatStorage", "0", i64::MAX, 0, &[4], &[1]);
    format_error(&archive(&pkl, &[("0", rec)]), "overflows");
    let pkl = tensor_pickle("FloatStorage", "0", 4, 0, &[1 << 62, 1 << 62], &[0, 0]);
    format_error(&archive(&pkl, &[("0", rec)]), "overflows");
}

#[test]
fn a_compressed_entry_is_refused() {
    let mut d = TensorDict::new();
    d.set("w", filled(&[3], DType::Float, 0)).unwrap();
    let mut bytes = save_to_bytes(&d, Format::Torch).unwrap();
    // Mark every entry deflated (method 8) in the local and central headers.
    let mut i = 0;
    while i + 12 < bytes.len() {
        if bytes[i..].starts_with(b"PK\x03\x04") {
            bytes[i + 8] = 8;
        } else if bytes[i..].starts_with(b"PK\x01\x02") {
            bytes[i + 10] = 8;
        }
        i += 1;
    }
    format_error(&bytes, "is compressed");
}

pub(super) fn safetensors_file(header: &str, data_len: usize) -> Vec<u8> {
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    b.resize(b.len() + data_len, 0);
    b
}

#[test]
fn safetensors_bad_headers_are_refused() {
    let overlap = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#;
    format_error(
        &safetensors_file(overlap, 12),
        "tensor 'b': its data_offsets",
    );
    let out_of_range = r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#;
    format_error(&safetensors_file(out_of_range, 8), "safetensors");
    let mut huge = (1u64 << 63).to_le_bytes().to_vec();
    huge.extend_from_slice(b"{}");
    format_error(&huge, "safetensors");
}

#[test]
fn mmap_loading_views_a_private_mapping() {
    let dir = std::env::temp_dir().join(format!("tessera-mmap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = views();
    let a = filled(&[4, 4], DType::Float, 0);
    let mut shared = TensorDict::new();
    shared.set("a", a.clone()).unwrap();
    shared.set("b", a.narrow(0, 1, 2).unwrap()).unwrap();
    for (file, format, dict) in [
        ("v.pt", Format::Torch, &d),
        ("s.pt", Format::Torch, &shared),
        ("v.safetensors", Format::Safetensors, &shared),
    ] {
        let path = dir.join(file);
        let dict = if format == Format::Safetensors {
            let mut one = TensorDict::new();
            one.set("a", a.clone()).unwrap();
            one.set("scalar", filled(&[], DType::Long, 3)).unwrap();
            one
        } else {
            dict.clone()
        };
        save(&dict, &path, format).unwrap();
        let before = std::fs::read(&path).unwrap();
        let back = load(
            &path,
            Format::Auto,
            LoadFlags {
                mmap: true,
                ..Default::default()
            },
        )
        .unwrap();
        for (name, t) in dict.iter() {
            let u = back.get(name).unwrap();
            same(t, u, name, format == Format::Torch);
            if u.numel() > 0 {
                // A view of the mapping: no allocator made its memory.
                assert!(u.storage().allocator().is_none(), "{file} {name}");
            }
        }
        if format == Format::Torch && back.get("b").is_some() {
            let (la, lb) = (back.get("a").unwrap(), back.get("b").unwrap());
            assert!(Storage::ptr_eq(la.storage(), lb.storage()));
            // SAFETY: a private mapping of 64 bytes, writable.
            unsafe { *(la.data_ptr() as *mut f32).add(4) = 7.0 };
            // SAFETY: lb views the same 64-byte mapping as la (ptr_eq
            // above) at element 4 (same() checked b's storage offset for
            // Torch), so this reads the f32 just written, in bounds.
            assert_eq!(unsafe { *(lb.data_ptr() as *const f32) }, 7.0);
        }
        drop(back);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{file}: the file never changes"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tensors_loaded_from_a_read_only_storage_are_read_only() {
    let mut d = TensorDict::new();
    d.set("w", filled(&[16], DType::Float, 0)).unwrap();
    let s = save_to_storage(&d, Format::Torch).unwrap();
    s.make_read_only();
    let back = load_from_storage(&s, Format::Torch).unwrap();
    assert!(back.get("w").unwrap().storage().is_read_only());
}

/// A pickle shaped like Python's torch.save of
/// `{"model": model.state_dict(), "epoch": 3, "opt": {"lr": 0.1, "w": t}}`
/// (an OrderedDict with `_metadata` state, nn.Parameter rebuilds, nested
/// dicts, non-tensor values), storages memoized as Python's pickler does.
#[test]
fn a_python_style_checkpoint_loads_nested_and_skips_non_tensors() {
    let od = |items: Vec<(Value, Value)>, state: Option<Value>| Value::Reduce {
        callable: Box::new(Value::global("collections", "OrderedDict")),
        args: Box::new(Value::Tuple(vec![])),
        items,
        state: state.map(Box::new),
    };
    let tensor = |key: &str, memo: u32, offset: i64, sizes: &[i64], strides: &[i64]| {
        let ints = |v: &[i64]| Value::Tuple(v.iter().map(|&i| Value::Int(i)).collect());
        let storage = if key == "0" && memo == 1 {
            Value::MemoGet(0)
        } else {
            Value::Memo {
                id: memo,
                value: Box::new(Value::PersistentId(Box::new(Value::Tuple(vec![
                    Value::str("storage"),
                    Value::global("torch", "FloatStorage"),
                    Value::str(key),
                    Value::str("cpu"),
                    Value::Int(6),
                ])))),
            }
        };
        Value::call(
            Value::global("torch._utils", "_rebuild_tensor_v2"),
            vec![
                storage,
                Value::Int(offset),
                ints(sizes),
                ints(strides),
                Value::Bool(true),
                od(vec![], None),
            ],
        )
    };
    let param = |t: Value| {
        Value::call(
            Value::global("torch._utils", "_rebuild_parameter"),
            vec![t, Value::Bool(true), od(vec![], None)],
        )
    };
    let model = od(
        vec![
            (
                Value::str("fc.weight"),
                param(tensor("0", 0, 0, &[2, 3], &[3, 1])),
            ),
            (Value::str("fc.bias"), param(tensor("0", 1, 3, &[3], &[1]))),
        ],
        Some(Value::Dict(vec![(
            Value::str("_metadata"),
            od(
                vec![(
                    Value::str(""),
                    Value::Dict(vec![(Value::str("version"), Value::Int(1))]),
                )],
                None,
            ),
        )])),
    );
    let root = Value::Dict(vec![
        (Value::str("model"), model),
        (Value::str("epoch"), Value::Int(3)),
        (
            Value::str("opt"),
            Value::Dict(vec![
                (Value::str("lr"), Value::Float(0.1)),
                (Value::str("w"), tensor("1", 2, 0, &[6], &[1])),
            ]),
        ),
    ]);
    let pkl = pickle::write(&root).unwrap();
    let rec0: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let rec1: Vec<u8> = (0..6)
        .flat_map(|i| (10.0 + i as f32).to_le_bytes())
        .collect();
    let d = load_bytes(&archive(&pkl, &[("0", &rec0), ("1", &rec1)])).unwrap();
    let names: Vec<_> = d.iter().map(|(n, _)| n.to_owned()).collect();
    assert_eq!(names, ["model.fc.weight", "model.fc.bias", "opt.w"]);
    let (w, b) = (
        d.get("model.fc.weight").unwrap(),
        d.get("model.fc.bias").unwrap(),
    );
    assert!(
        Storage::ptr_eq(w.storage(), b.storage()),
        "one storage for weight and bias"
    );
    assert_eq!(b.storage_offset() - w.storage_offset(), 3);
    // SAFETY: b is a float [3] tensor of CPU memory.
    assert_eq!(unsafe { *(b.data_ptr() as *const f32) }, 3.0);
    // SAFETY: opt.w is a float [6] tensor of CPU memory, so element 5 (its
    // last) is readable from its data pointer.
    let last = unsafe { *(d.get("opt.w").unwrap().data_ptr() as *const f32).add(5) };
    assert_eq!(last, 15.0);
    // The non-tensor values are kept (issue 68), not skipped.
    assert_eq!(d.metadata(SKIPPED_KEY), None);
    assert_eq!(d.value("epoch"), Some(&serde_json::json!(3)));
    assert_eq!(d.value("opt.lr"), Some(&serde_json::json!(0.1)));
}

#[test]
fn zip64_entries_are_read() {
    use std::io::Write;
    let pkl = tensor_pickle("FloatStorage", "0", 4, 0, &[4], &[1]);
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(true);
    z.start_file("big/data.pkl", o).unwrap();
    z.write_all(&pkl).unwrap();
    z.start_file("big/data/0", o).unwrap();
    z.write_all(&[0u8; 16]).unwrap();
    let bytes = z.finish().unwrap().into_inner();
    // ZIP64 extra fields (header id 0x0001) are present.
    assert!(bytes
        .windows(4)
        .any(|w| w == [1, 0, 16, 0] || w == [1, 0, 8, 0] || w == [1, 0, 24, 0]));
    let d = load_bytes(&bytes).unwrap();
    assert_eq!(d.get("t").unwrap().sizes(), &[4]);
}

#[test]
fn loading_from_a_storage_views_that_storage() {
    let a = filled(&[4, 4], DType::Float, 0);
    let mut d = TensorDict::new();
    d.set("a", a.clone()).unwrap();
    d.set("b", a.narrow(0, 1, 2).unwrap()).unwrap();
    d.set("x", filled(&[3], DType::Double, 1)).unwrap();
    for format in [Format::Torch, Format::Safetensors] {
        let mut d = d.clone();
        if format == Format::Safetensors {
            d = TensorDict::new();
            d.set("a", a.clone()).unwrap();
            d.set("x", filled(&[3], DType::Double, 1)).unwrap();
        }
        let bytes = save_to_storage(&d, format).unwrap();
        let back = load_from_storage(&bytes, format).unwrap();
        for (name, t) in d.iter() {
            let u = back.get(name).unwrap();
            // The tensors view the caller's storage itself, at their
            // record's offset, so they follow what is done to it later.
            assert!(Storage::ptr_eq(u.storage(), &bytes), "{name}");
            same(t, u, name, false);
            assert_eq!(t.strides(), u.strides());
        }
        if format == Format::Torch {
            let (la, lb) = (back.get("a").unwrap(), back.get("b").unwrap());
            assert_eq!(
                lb.storage_offset() - la.storage_offset(),
                4,
                "relative offsets kept"
            );
        }
        assert!(bytes.use_count() > 1);
        drop(back);
        assert_eq!(bytes.use_count(), 1, "nothing kept after the dict is gone");
    }
}
