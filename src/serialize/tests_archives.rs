//! Issue 52: hostile archives, built byte by byte, are refused by every
//! zip-based reader (npz, torch, TorchScript) through the one central
//! directory walk of `zip_index`: two records of one name, records over
//! the same bytes (a deflate bomb of many records naming one entry), a
//! local header naming another file, a central directory that lies.

use super::tests::{load_bytes, tensor_pickle};
use super::*;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::tensor::Tensor;

/// A local entry of a [`Zip`] under construction.
struct Local {
    offset: u32,
    method: u16,
    crc: u32,
    packed: u32,
    size: u32,
}

/// A zip archive written byte by byte: local entries, then
/// central-directory records that may name any entry under any name.
#[derive(Default)]
pub(super) struct Zip {
    out: Vec<u8>,
    locals: Vec<Local>,
    central: Vec<u8>,
    records: u16,
}

impl Zip {
    /// Appends a local entry `name` holding `data` (deflated when
    /// `deflate`); returns its number.
    pub(super) fn entry(&mut self, name: &str, data: &[u8], deflate: bool) -> usize {
        let body = if deflate {
            miniz_oxide::deflate::compress_to_vec(data, 6)
        } else {
            data.to_vec()
        };
        let local = Local {
            offset: self.out.len() as u32,
            method: if deflate { 8 } else { 0 },
            crc: crc32fast::hash(data),
            packed: body.len() as u32,
            size: data.len() as u32,
        };
        self.out.extend_from_slice(b"PK\x03\x04");
        self.out.extend_from_slice(&20u16.to_le_bytes()); // version needed
        self.out.extend_from_slice(&0u16.to_le_bytes()); // flags
        self.out.extend_from_slice(&local.method.to_le_bytes());
        self.out.extend_from_slice(&[0; 4]); // time, date
        for v in [local.crc, local.packed, local.size] {
            self.out.extend_from_slice(&v.to_le_bytes());
        }
        self.out
            .extend_from_slice(&(name.len() as u16).to_le_bytes());
        self.out.extend_from_slice(&0u16.to_le_bytes()); // extra
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(&body);
        self.locals.push(local);
        self.locals.len() - 1
    }

    /// Adds a central-directory record named `name` for entry `i`.
    pub(super) fn record(&mut self, name: &str, i: usize) -> &mut Self {
        self.central_record(name, i, false, &[])
    }

    /// Adds a record for entry `i` under `name` whose offset (and, with
    /// `sizes`, both sizes) read "in the ZIP64 extra field", which holds
    /// `field`, values in the field's order.
    pub(super) fn record_zip64(
        &mut self,
        name: &str,
        i: usize,
        sizes: bool,
        field: &[u64],
    ) -> &mut Self {
        let mut extra = 1u16.to_le_bytes().to_vec();
        extra.extend_from_slice(&(8 * field.len() as u16).to_le_bytes());
        for v in field {
            extra.extend_from_slice(&v.to_le_bytes());
        }
        self.central_record(name, i, sizes, &extra)
    }

    fn central_record(
        &mut self,
        name: &str,
        i: usize,
        zip64_sizes: bool,
        extra: &[u8],
    ) -> &mut Self {
        let l = &self.locals[i];
        let c = &mut self.central;
        c.extend_from_slice(b"PK\x01\x02");
        c.extend_from_slice(&20u16.to_le_bytes()); // made by
        c.extend_from_slice(&20u16.to_le_bytes()); // needed
        c.extend_from_slice(&0u16.to_le_bytes()); // flags
        c.extend_from_slice(&l.method.to_le_bytes());
        c.extend_from_slice(&[0; 4]); // time, date
        let ones = u32::MAX;
        let (packed, size) = if zip64_sizes {
            (ones, ones)
        } else {
            (l.packed, l.size)
        };
        for v in [l.crc, packed, size] {
            c.extend_from_slice(&v.to_le_bytes());
        }
        c.extend_from_slice(&(name.len() as u16).to_le_bytes());
        c.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        c.extend_from_slice(&[0; 10]); // comment, disk, attributes
        let offset = if extra.is_empty() { l.offset } else { ones };
        c.extend_from_slice(&offset.to_le_bytes());
        c.extend_from_slice(name.as_bytes());
        c.extend_from_slice(extra);
        self.records += 1;
        self
    }

    /// The archive's bytes: the entries, the central directory, the end
    /// record.
    pub(super) fn finish(&self) -> Vec<u8> {
        let mut b = self.out.clone();
        b.extend_from_slice(&self.central);
        b.extend_from_slice(b"PK\x05\x06");
        b.extend_from_slice(&[0; 4]); // disks
        b.extend_from_slice(&self.records.to_le_bytes());
        b.extend_from_slice(&self.records.to_le_bytes());
        b.extend_from_slice(&(self.central.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.out.len() as u32).to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes()); // comment
        b
    }
}

/// The npy file of a float tensor of `values`.
fn npy(values: &[f32]) -> Vec<u8> {
    let t = Tensor::empty(&[values.len() as i64], DType::Float, Device::CPU).unwrap();
    if !values.is_empty() {
        // SAFETY: a fresh float storage of values.len() elements.
        unsafe {
            std::ptr::copy_nonoverlapping(values.as_ptr(), t.data_ptr() as *mut f32, values.len())
        };
    }
    let mut d = TensorDict::new();
    d.set("x", t).unwrap();
    save_to_bytes(&d, Format::Npy).unwrap()
}

pub(super) fn floats(t: &Tensor) -> Vec<f32> {
    super::row_major(&t.to_dtype(DType::Float).unwrap())
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Loads `bytes` from a storage as `format`: a Format error naming every
/// one of `needles`.
fn refused_as(bytes: &[u8], format: Format, needles: &[&str]) {
    let s = Storage::new(bytes.len(), Device::CPU, false).unwrap();
    // SAFETY: a fresh storage of bytes.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.data() as *mut u8, bytes.len()) };
    let e = match load_from_storage(&s, format) {
        Ok(d) => panic!("{format:?} accepted {} bytes: {d:?}", bytes.len()),
        Err(e) => e,
    };
    assert_eq!(e.kind(), ErrorKind::Format, "{format:?}: {e}");
    for n in needles {
        assert!(
            e.message().contains(n),
            "{format:?}: {:?} lacks {n:?}",
            e.message()
        );
    }
}

/// `refused_as` for the reader named and for detection.
fn refused(bytes: &[u8], format: Format, needles: &[&str]) {
    refused_as(bytes, format, needles);
    refused_as(bytes, Format::Auto, needles);
}

#[test]
fn an_npz_with_two_records_of_one_name_is_refused() {
    let mut z = Zip::default();
    let (a, b) = (
        z.entry("a.npy", &npy(&[1.0, 2.0]), false),
        z.entry("a.npy", &npy(&[3.0, 4.0]), false),
    );
    z.record("a.npy", a).record("a.npy", b);
    refused(
        &z.finish(),
        Format::Npz,
        &["two records named 'a.npy'", "records 0 and 1"],
    );
    // Each alone loads.
    let mut z = Zip::default();
    let a = z.entry("a.npy", &npy(&[1.0, 2.0]), false);
    z.record("a.npy", a);
    let d = load_bytes(&z.finish()).unwrap();
    assert_eq!(floats(d.get("a").unwrap()), [1.0, 2.0]);
}

#[test]
fn npz_records_sharing_one_deflated_entry_are_refused() {
    // 16 records naming one entry of 1 MiB of zeros (about 1 KB deflated):
    // each record would inflate it again.
    let zeros = vec![0.0f32; 1 << 18];
    let mut z = Zip::default();
    let e = z.entry("a0.npy", &npy(&zeros), true);
    for i in 0..16 {
        z.record(&format!("a{i}.npy"), e);
    }
    let bytes = z.finish();
    assert!(bytes.len() < 4096, "{} bytes", bytes.len());
    refused(
        &bytes,
        Format::Npz,
        &[
            "'a0.npy' (central directory record 0",
            "'a1.npy' (record 1",
            "overlap",
        ],
    );
    // Two entries whose bytes overlap part way: the first record's size
    // reaches into the second's local header.
    let mut z = Zip::default();
    let (a, b) = (
        z.entry("a.npy", &npy(&[1.0; 4]), false),
        z.entry("b.npy", &npy(&[2.0; 4]), false),
    );
    z.record("a.npy", a).record("b.npy", b);
    let mut bytes = z.finish();
    let cd = bytes.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    for at in [cd + 20, cd + 24] {
        let v = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) + 8;
        bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    refused(&bytes, Format::Npz, &["'a.npy'", "'b.npy'", "overlap"]);
}

#[test]
fn a_local_header_naming_another_file_is_refused() {
    let mut z = Zip::default();
    let e = z.entry("b.npy", &npy(&[1.0]), false);
    z.record("a.npy", e);
    refused(
        &z.finish(),
        Format::Npz,
        &["'a.npy'", "local header at byte 0 names 'b.npy'"],
    );
}

/// A torch archive: `archive/data.pkl` (a tensor `t` of 4 floats on
/// storage "0"), then `extra` entries; every entry gets a record under
/// its own name.
fn torch_zip(extra: &[(&str, &[u8])]) -> Zip {
    let pkl = tensor_pickle("FloatStorage", "0", 4, 0, &[4], &[1]);
    let mut z = Zip::default();
    let e = z.entry("archive/data.pkl", &pkl, false);
    z.record("archive/data.pkl", e);
    for (name, data) in extra {
        let e = z.entry(name, data, false);
        z.record(name, e);
    }
    z
}

pub(super) fn float_bytes(v: f32) -> Vec<u8> {
    [v; 4].iter().flat_map(|f| f.to_le_bytes()).collect()
}

#[test]
fn torch_archives_with_two_records_of_one_name_are_refused() {
    let (one, two) = (float_bytes(1.0), float_bytes(2.0));
    let good = torch_zip(&[("archive/data/0", &one)]).finish();
    assert_eq!(
        floats(load_bytes(&good).unwrap().get("t").unwrap()),
        [1.0; 4]
    );
    // A second data/0: the last copy used to win.
    let z = torch_zip(&[("archive/data/0", &one), ("archive/data/0", &two)]);
    refused(
        &z.finish(),
        Format::Torch,
        &["two records named 'archive/data/0'", "records 1 and 2"],
    );
    // A second data.pkl.
    let pkl = tensor_pickle("FloatStorage", "0", 4, 0, &[4], &[1]);
    let z = torch_zip(&[("archive/data/0", &one), ("archive/data.pkl", &pkl)]);
    refused(
        &z.finish(),
        Format::Torch,
        &["two records named 'archive/data.pkl'"],
    );
    // TorchScript (an archive with code/): its reader uses the same walk.
    let z = torch_zip(&[
        ("archive/code/m.py", b"pass"),
        ("archive/data/0", &one),
        ("archive/data/0", &two),
    ]);
    refused(
        &z.finish(),
        Format::TorchScript,
        &["two records named 'archive/data/0'"],
    );
}

#[test]
fn torch_records_over_the_same_bytes_are_refused() {
    // data/0 and data/1 are one entry under two names.
    let pkl = tensor_pickle("FloatStorage", "0", 4, 0, &[4], &[1]);
    let mut z = Zip::default();
    let p = z.entry("archive/data.pkl", &pkl, false);
    let e = z.entry("archive/data/0", &float_bytes(1.0), false);
    z.record("archive/data.pkl", p)
        .record("archive/data/0", e)
        .record("archive/data/1", e);
    refused(
        &z.finish(),
        Format::Torch,
        &["'archive/data/0'", "'archive/data/1'", "overlap"],
    );
    z.record("archive/code/m.py", e);
    refused(&z.finish(), Format::TorchScript, &["overlap"]);
}

#[test]
fn central_directory_lies_are_refused_by_name() {
    let one = float_bytes(1.0);
    let good = torch_zip(&[("archive/data/0", &one)]).finish();
    let cd = good.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    let end = good.len() - 22;
    let patched = |at: usize, v: &[u8]| {
        let mut b = good.clone();
        b[at..at + v.len()].copy_from_slice(v);
        b
    };
    // The end record counts one record fewer than the directory holds.
    refused(
        &patched(end + 8, &[1, 0, 1, 0]),
        Format::Torch,
        &["bytes past its 1 records"],
    );
    // ... or one more.
    refused(
        &patched(end + 8, &[3, 0, 3, 0]),
        Format::Torch,
        &["counts 3 records"],
    );
    // A local header offset past the data.
    refused(
        &patched(cd + 42, &(cd as u32).to_le_bytes()),
        Format::Torch,
        &["'archive/data.pkl'", "expected a local header"],
    );
    // A stored record whose two sizes differ.
    refused(
        &patched(cd + 24, &1u32.to_le_bytes()),
        Format::Torch,
        &["'archive/data.pkl' is stored with"],
    );
    // A second disk.
    refused(
        &patched(end + 4, &[1, 0]),
        Format::Torch,
        &["several disks"],
    );
    // Bytes appended after the end record.
    let mut b = good.clone();
    b.push(0);
    refused(&b, Format::Torch, &["bytes appended after its end"]);
}

#[test]
fn zip_names_decode_as_the_format_says() {
    // Without the UTF-8 flag a name is CP437 (as CPython's zipfile and
    // the zip crate read it); with it, UTF-8.
    let mut z = Zip::default();
    let e = z.entry("\u{80}.npy", &npy(&[1.0]), false);
    z.record("\u{80}.npy", e);
    let mut b = z.finish();
    // The builder wrote the name's UTF-8 bytes (C2 80) with no flag.
    let d = load_bytes(&b).unwrap();
    assert!(d.get("┬Ç").is_some(), "{d:?}");
    // Flagged as UTF-8 in the central directory.
    let cd = b.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    b[cd + 9] |= 0x08;
    let d = load_bytes(&b).unwrap();
    assert!(d.get("\u{80}").is_some(), "{d:?}");
    // Flagged, and not UTF-8.
    b[cd + 46] = 0xff;
    refused(&b, Format::Npz, &["not UTF-8"]);
}

#[test]
fn zip64_extra_fields_are_read_as_their_writers_mean_them() {
    let one = float_bytes(1.0);
    let pkl = tensor_pickle("FloatStorage", "0", 4, 0, &[4], &[1]);
    let build = |sizes: bool, field: &[u64]| {
        let mut z = Zip::default();
        let p = z.entry("archive/data.pkl", &pkl, false);
        let d = z.entry("archive/data/0", &one, false);
        z.record("archive/data.pkl", p);
        z.record_zip64("archive/data/0", d, sizes, field);
        z.finish()
    };
    let offset = (30 + "archive/data.pkl".len() + pkl.len()) as u64;
    // CPython: only the fields that read all ones, in order.
    for bytes in [build(true, &[16, 16, offset]), build(false, &[offset])] {
        assert_eq!(
            floats(load_bytes(&bytes).unwrap().get("t").unwrap()),
            [1.0; 4]
        );
    }
    // The zip crate: a 24-byte field holds both sizes and the offset even
    // when the record's sizes are its own.
    let d = load_bytes(&build(false, &[16, 16, offset])).unwrap();
    assert_eq!(floats(d.get("t").unwrap()), [1.0; 4]);
    // The offset read from the wrong place, a field too short, none.
    refused(
        &build(false, &[offset + 1]),
        Format::Torch,
        &["expected a local header"],
    );
    refused(&build(true, &[16, 16]), Format::Torch, &["too few"]);
    refused(&build(true, &[]), Format::Torch, &["too few"]);
}
