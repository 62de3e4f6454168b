//! Fuzzes the zip-based readers (NPZ, TORCH, TORCHSCRIPT and detection)
//! with archives built from the input: 1-4 local entries (an npy file,
//! a torch data.pkl, a storage's 16 bytes, or bytes of the input; stored
//! or deflated; names from a small set, so they repeat) and 0-6
//! central-directory records, each naming an entry under its own name or
//! another one. Byte mutation alone rarely keeps such an archive
//! readable; built here, two records of one name, two records over one
//! entry (a deflate bomb when it is deflated) and a record naming another
//! file than its local header come up in most runs.
//!
//! Model: an archive with any of those three is refused with a format
//! error by every reader and by detection; an archive without them that
//! loads as NPZ holds one tensor per record. Every load also passes
//! tessera_fuzz::fuzz_load's checks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tessera::serialize::{load_from_storage, save_to_bytes, Format, TensorDict};
use tessera::{DType, Device, ErrorKind, Storage, Tensor};
use tessera_fuzz::Input;

/// Entry and record names: npz entries, a torch archive's records, a
/// TorchScript archive's code.
const NAMES: &[&str] = &[
    "a.npy",
    "b.npy",
    "archive/data.pkl",
    "archive/data/0",
    "archive/data/1",
    "archive/constants.pkl",
    "archive/code/m.py",
];

/// The payloads an entry may hold: an npy file of 64 floats, and the
/// data.pkl and data/0 records of a torch archive of one float [4]
/// tensor (all written by tessera).
struct Payloads {
    npy: Vec<u8>,
    pickle: Vec<u8>,
    storage: Vec<u8>,
}

/// A stored record's bytes in a zip archive the `zip` crate wrote
/// (sizes in its local header).
fn record(zip: &[u8], name: &str) -> Vec<u8> {
    let at = zip
        .windows(name.len())
        .position(|w| w == name.as_bytes())
        .expect("the record's local header");
    let h = at - 30;
    let le16 = |i: usize| u16::from_le_bytes([zip[i], zip[i + 1]]) as usize;
    let size = u32::from_le_bytes(zip[h + 18..h + 22].try_into().unwrap()) as usize;
    let data = h + 30 + le16(h + 26) + le16(h + 28);
    zip[data..data + size].to_vec()
}

fn payloads() -> &'static Payloads {
    static P: OnceLock<Payloads> = OnceLock::new();
    P.get_or_init(|| {
        let dict = |n: i64| {
            let mut d = TensorDict::new();
            let t = Tensor::empty(&[n], DType::Float, Device::CPU).unwrap();
            t.fill_(tessera::Scalar::Float(0.0)).unwrap();
            d.set("t", t).unwrap();
            d
        };
        let torch = save_to_bytes(&dict(4), Format::Torch).unwrap();
        Payloads {
            npy: save_to_bytes(&dict(64), Format::Npy).unwrap(),
            pickle: record(&torch, "archive/data.pkl"),
            storage: record(&torch, "archive/data/0"),
        }
    })
}

/// A local entry: its name, method (0 stored, 8 deflated), CRC, sizes
/// and offset.
struct Entry {
    name: &'static str,
    method: u16,
    crc: u32,
    packed: u32,
    size: u32,
    offset: u32,
}

/// The fields a local header and a central-directory record share,
/// from the method to the name's length.
fn fields(out: &mut Vec<u8>, e: &Entry, name: &str) {
    out.extend_from_slice(&e.method.to_le_bytes());
    out.extend_from_slice(&[0; 4]); // time, date
    for v in [e.crc, e.packed, e.size] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
}

/// The archive the input describes, whether it holds two records of one
/// name, two records over one entry, or a record naming another file
/// than its entry, and its number of records.
fn archive(input: &mut Input<'_>) -> (Vec<u8>, bool, usize) {
    let p = payloads();
    let mut out = Vec::new();
    let mut entries = Vec::new();
    for _ in 0..input.range(1, 4) {
        let name = NAMES[input.range(0, NAMES.len() as i64 - 1) as usize];
        let data = match input.range(0, 3) {
            0 => p.npy.clone(),
            1 => p.pickle.clone(),
            2 => p.storage.clone(),
            _ => (0..input.range(0, 64)).map(|_| input.u8()).collect(),
        };
        let deflate = input.bool();
        let body = if deflate {
            miniz_oxide::deflate::compress_to_vec(&data, 6)
        } else {
            data.clone()
        };
        let e = Entry {
            name,
            method: if deflate { 8 } else { 0 },
            crc: crc32fast::hash(&data),
            packed: body.len() as u32,
            size: data.len() as u32,
            offset: out.len() as u32,
        };
        out.extend_from_slice(b"PK\x03\x04\x14\x00\x00\x00");
        fields(&mut out, &e, name);
        out.extend_from_slice(&[0, 0]); // extra
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&body);
        entries.push(e);
    }
    let cd_start = out.len();
    let (mut names, mut used) = (Vec::new(), Vec::new());
    let mut hostile = false;
    let records = input.range(0, 6) as u16;
    for _ in 0..records {
        let i = input.range(0, entries.len() as i64 - 1) as usize;
        let e = &entries[i];
        let name = if input.range(0, 3) == 0 {
            NAMES[input.range(0, NAMES.len() as i64 - 1) as usize]
        } else {
            e.name
        };
        hostile |= names.contains(&name) || used.contains(&i) || name != e.name;
        names.push(name);
        used.push(i);
        out.extend_from_slice(b"PK\x01\x02\x14\x00\x14\x00\x00\x00");
        fields(&mut out, e, name);
        out.extend_from_slice(&[0; 12]); // extra, comment, disk, attributes
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
    }
    let cd_len = (out.len() - cd_start) as u32;
    out.extend_from_slice(b"PK\x05\x06\x00\x00\x00\x00");
    out.extend_from_slice(&records.to_le_bytes());
    out.extend_from_slice(&records.to_le_bytes());
    out.extend_from_slice(&cd_len.to_le_bytes());
    out.extend_from_slice(&(cd_start as u32).to_le_bytes());
    out.extend_from_slice(&[0, 0]); // comment
    (out, hostile, records as usize)
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let (bytes, hostile, records) = archive(&mut input);
    let storage = Storage::new(bytes.len(), Device::CPU, false).unwrap();
    // SAFETY: a fresh CPU storage of bytes.len() bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), storage.data() as *mut u8, bytes.len())
    };
    for format in [
        Format::Npz,
        Format::Torch,
        Format::TorchScript,
        Format::Auto,
    ] {
        match load_from_storage(&storage, format) {
            Err(e) => assert!(
                !hostile || e.kind() == ErrorKind::Format,
                "{format:?}: a hostile archive refused with {e}"
            ),
            Ok(d) => {
                assert!(!hostile, "{format:?} loaded a hostile archive: {d:?}");
                if format == Format::Npz {
                    assert_eq!(d.len(), records, "npz: one tensor per record");
                }
            }
        }
    }
    drop(storage);
    for format in [
        tessera::ffi::TSR_FORMAT_NPZ,
        tessera::ffi::TSR_FORMAT_TORCH,
        tessera::ffi::TSR_FORMAT_TORCHSCRIPT,
    ] {
        tessera_fuzz::fuzz_load(&bytes, format);
    }
});
