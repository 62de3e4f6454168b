//! NumPy's .npz: files np.savez and np.savez_compressed wrote
//! (tests/fixtures/npz/, scripts/make_npz_fixtures.py) load with their
//! names, dtypes, shapes and values, copied and mapped; tessera's own npz
//! files load back with every array viewing the file's bytes; lying and
//! truncated archives are refused by name.

#[path = "common/numpy.rs"]
mod numpy;

use numpy::{expected, storage_of, values};
use std::path::PathBuf;
use tessera::serialize::{
    detect, load, load_from_storage, save, save_to_bytes, Format, LoadFlags, TensorDict,
};
use tessera::{DType, Device, ErrorKind, Tensor};

/// A NumPy-written npz file (TESSERA_NPZ_FIXTURES or tests/fixtures/npz).
fn fixture(name: &str) -> PathBuf {
    numpy::fixture("TESSERA_NPZ_FIXTURES", "npz", name)
}

/// make_npz_fixtures.py's ARRAYS: name, dtype, shape.
const ARRAYS: &[(&str, DType, &[i64])] = &[
    ("f4", DType::Float, &[2, 3, 4]),
    ("i8", DType::Long, &[5]),
    ("b1", DType::Bool, &[3, 2]),
    ("u2", DType::UInt16, &[4]),
    ("c16_fortran", DType::ComplexDouble, &[2, 3, 4]),
    ("i4_big", DType::Int, &[2, 3]),
    ("f8_scalar", DType::Double, &[]),
    ("f2_empty", DType::Half, &[0, 4]),
    ("layer.0/weight", DType::Float, &[3, 2]),
];

fn check_arrays(d: &TensorDict, what: &str) {
    assert_eq!(d.len(), ARRAYS.len(), "{what}");
    for (i, (name, dtype, shape)) in ARRAYS.iter().enumerate() {
        assert_eq!(d.name(i), Some(*name), "{what}: order");
        let t = d.get(name).unwrap();
        assert_eq!((t.dtype(), t.sizes()), (*dtype, *shape), "{what}: {name}");
        let n = shape.iter().product::<i64>() as usize;
        assert_eq!(values(t), expected(*dtype, n), "{what}: {name}");
    }
}

fn mmap(on: bool) -> LoadFlags {
    LoadFlags {
        mmap: on,
        ..Default::default()
    }
}

#[test]
fn numpy_savez_and_savez_compressed_load() {
    for file in ["savez.npz", "savez_compressed.npz"] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        assert_eq!(detect(&bytes).unwrap(), Format::Npz, "{file}");
        for on in [false, true] {
            let d = load(&fixture(file), Format::Auto, mmap(on)).unwrap();
            check_arrays(&d, &format!("{file} mmap={on}"));
            // Fortran order stays a column-major view.
            assert_eq!(d.get("c16_fortran").unwrap().strides(), &[1, 2, 6]);
        }
    }
    let d = load(&fixture("positional.npz"), Format::Npz, mmap(false)).unwrap();
    assert_eq!((d.name(0), d.name(1)), (Some("arr_0"), Some("arr_1")));
    assert_eq!(values(d.get("arr_1").unwrap()), expected(DType::Long, 5));
    let d = load(&fixture("empty.npz"), Format::Auto, mmap(false)).unwrap();
    assert!(d.is_empty());
}

fn reference_dict() -> TensorDict {
    let src = load(&fixture("savez.npz"), Format::Npz, mmap(false)).unwrap();
    let mut d = TensorDict::new();
    for (name, t) in src.iter() {
        d.set(name, t.clone()).unwrap();
    }
    d
}

#[test]
fn tessera_npz_views_its_bytes_in_place() {
    let d = reference_dict();
    let bytes = save_to_bytes(&d, Format::Npz).unwrap();
    assert_eq!(detect(&bytes).unwrap(), Format::Npz);
    let s = storage_of(&bytes);
    let back = load_from_storage(&s, Format::Auto).unwrap();
    check_arrays(&back, "tessera's npz");
    // Every non-empty array views the bytes' storage itself (64-byte
    // aligned entries: nothing copied).
    for (name, t) in back.iter() {
        if t.numel() > 0 {
            assert_eq!(t.storage().data(), s.data(), "{name} was copied");
        }
    }
    // np.savez's entries are not aligned: those arrays are copies, still
    // equal (checked above through the file).
}

#[test]
fn writes_reference_file() {
    let dir = std::env::var_os("TESSERA_NPZ_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("tessera-npz-{}", std::process::id()))
        });
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tessera.npz");
    save(&reference_dict(), &path, Format::Auto).unwrap();
    let back = load(&path, Format::Auto, mmap(true)).unwrap();
    check_arrays(&back, "saved by extension, mapped");
    // The mapping first: Windows refuses to remove a mapped file.
    drop(back);
    if std::env::var_os("TESSERA_NPZ_OUT").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn what_npz_cannot_hold_is_refused() {
    let mut d = reference_dict();
    d.set_metadata("k", "v").unwrap();
    let e = save_to_bytes(&d, Format::Npz).unwrap_err();
    assert!(e.message().contains("metadata"), "{e}");
    let mut d = TensorDict::new();
    d.set(
        "b",
        Tensor::empty(&[2], DType::BFloat16, Device::CPU).unwrap(),
    )
    .unwrap();
    let e = save_to_bytes(&d, Format::Npz).unwrap_err();
    assert!(e.message().contains("BFloat16"), "{e}");
}

fn refused(bytes: &[u8], format: Format) -> tessera::Error {
    match load_from_storage(&storage_of(bytes), format) {
        Ok(d) => panic!("accepted {} bytes as {:?}: {d:?}", bytes.len(), format),
        Err(e) => e,
    }
}

#[test]
fn every_truncation_is_refused_cleanly() {
    for file in ["savez.npz", "savez_compressed.npz", "positional.npz"] {
        let good = std::fs::read(fixture(file)).unwrap();
        for len in 0..good.len() {
            for format in [Format::Npz, Format::Auto] {
                let e = refused(&good[..len], format);
                assert_eq!(e.kind(), ErrorKind::Format, "{file}[..{len}]: {e}");
            }
        }
    }
}

/// The offset of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}

#[test]
fn lying_entries_are_refused_by_name() {
    // A stored entry whose npy header claims more data than it holds.
    let mut b = std::fs::read(fixture("savez.npz")).unwrap();
    let at = find(&b, b"'shape': (5,)");
    b[at + 10] = b'9';
    let e = refused(&b, Format::Npz);
    assert_eq!(e.kind(), ErrorKind::Format);
    assert!(e.message().contains("i8.npy"), "{e}");
    assert!(e.message().contains("cut short"), "{e}");

    // A deflated entry declaring a larger size than it inflates to: the
    // central directory's size of the first entry (offset 24 in it).
    let good = std::fs::read(fixture("savez_compressed.npz")).unwrap();
    let cd = find(&good, b"PK\x01\x02");
    for size in [200u32, u32::MAX - 1] {
        let mut b = good.clone();
        b[cd + 24..cd + 28].copy_from_slice(&size.to_le_bytes());
        let e = refused(&b, Format::Npz);
        assert_eq!(e.kind(), ErrorKind::Format, "{e}");
        assert!(e.message().contains("f4.npy"), "{e}");
    }
    // A flipped byte of compressed data: a deflate error or a CRC mismatch.
    let mut b = good.clone();
    b[cd - 40] ^= 0x55;
    let e = refused(&b, Format::Npz);
    assert_eq!(e.kind(), ErrorKind::Format, "{e}");

    // An entry that is not .npy, named explicitly as npz (renamed in its
    // local header and its central-directory record alike).
    let mut b = std::fs::read(fixture("positional.npz")).unwrap();
    for start in [0, find(&b, b"PK\x01\x02")] {
        let at = find(&b[start..], b"arr_0.npy") + start;
        b[at + 6..at + 9].copy_from_slice(b"pkl");
    }
    let e = refused(&b, Format::Npz);
    assert!(e.message().contains("not an .npy file"), "{e}");
    // ... which auto-detection no longer takes for npz.
    assert_ne!(detect(&b).ok(), Some(Format::Npz));
}

#[test]
fn torch_archives_are_not_taken_for_npz() {
    let mut d = TensorDict::new();
    d.set("w", Tensor::empty(&[2], DType::Float, Device::CPU).unwrap())
        .unwrap();
    let bytes = save_to_bytes(&d, Format::Torch).unwrap();
    assert_eq!(detect(&bytes).unwrap(), Format::Torch);
}

/// The central-directory record of entry `name` in `b`.
fn central_record(b: &[u8], name: &[u8]) -> usize {
    let cd = find(b, b"PK\x01\x02");
    find(&b[cd..], name) + cd - 46
}

#[test]
fn two_entries_of_one_name_are_refused() {
    // np.savez's file with its second entry renamed as the first (local
    // header and central directory): the first array used to vanish, the
    // second loading under its name.
    let mut b = std::fs::read(fixture("savez.npz")).unwrap();
    for start in [0, find(&b, b"PK\x01\x02")] {
        let at = find(&b[start..], b"i8.npy") + start;
        b[at..at + 2].copy_from_slice(b"f4");
    }
    for format in [Format::Npz, Format::Auto] {
        let e = refused(&b, format);
        assert_eq!(e.kind(), ErrorKind::Format, "{e}");
        assert!(
            e.message()
                .contains("two records named 'f4.npy' (central directory records 0 and 1)"),
            "{e}"
        );
    }
}

#[test]
fn entries_over_the_same_bytes_are_refused() {
    // np.savez_compressed's file with the second record pointing at the
    // first entry: that entry would inflate once per record.
    let mut b = std::fs::read(fixture("savez_compressed.npz")).unwrap();
    let rec = central_record(&b, b"i8.npy");
    b[rec + 42..rec + 46].copy_from_slice(&0u32.to_le_bytes());
    for format in [Format::Npz, Format::Auto] {
        let e = refused(&b, format);
        assert_eq!(e.kind(), ErrorKind::Format, "{e}");
        for part in [
            "'f4.npy' (central directory record 0",
            "'i8.npy' (record 1",
            "overlap",
        ] {
            assert!(e.message().contains(part), "{e}");
        }
    }
}

#[test]
fn a_local_header_naming_another_entry_is_refused() {
    // Python's zipfile refuses it too ("File name in directory ... and
    // header ... differ").
    let mut b = std::fs::read(fixture("savez.npz")).unwrap();
    let at = find(&b, b"i8.npy");
    b[at..at + 2].copy_from_slice(b"x9");
    let e = refused(&b, Format::Npz);
    assert!(
        e.message()
            .contains("'i8.npy' (central directory record 1): its local header at byte"),
        "{e}"
    );
    assert!(e.message().contains("names 'x9.npy'"), "{e}");
}
