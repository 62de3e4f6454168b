//! The records of a zip archive, read from its central directory by hand:
//! the end record (ZIP64's locator and end record when present), each
//! central-directory record (its ZIP64 extra field when a size or offset
//! needs one) and the local header it points at. Every zip-based reader
//! (npz, torch, TorchScript) takes its records from [`entries`], so each
//! refuses the same lies, checked once here:
//!
//! - two records of one name (one would hide the other);
//! - records whose bytes overlap, a record's bytes being its local header
//!   and its data (CPython's zipfile refuses these too): one deflated entry
//!   named by many records would inflate once per record;
//! - a local header naming another file than its central-directory record
//!   (as CPython's zipfile refuses);
//! - a record, local header or data outside the bytes before the central
//!   directory, a central directory that does not hold exactly the records
//!   its end record counts, an archive spanning several disks;
//! - a stored record whose size differs from its stored size, a deflated one
//!   declaring more than deflate's largest ratio (1032:1) of its compressed
//!   bytes. Records cannot overlap, so the inflated sizes of all records
//!   together are then at most 1032 times the archive's length.
//!
//! Written by hand rather than through the `zip` crate's `ZipArchive`,
//! which keys its index by name: the first of two records of one name is
//! gone before a reader could see it, and overlaps are not checked.
//! (`zip::ZipWriter` still writes tessera's archives.)

use crate::error::Result;
use std::collections::HashMap;

/// A stored (uncompressed) record's method.
pub(crate) const STORED: u16 = 0;
/// A deflated record's method.
pub(crate) const DEFLATED: u16 = 8;
/// Deflate's largest compression ratio (a run of one byte: 258 bytes per
/// 2-bit code, about 1032:1); a larger declared size is a lie.
pub(crate) const MAX_DEFLATE_RATIO: u64 = 1032;

const END_SIG: [u8; 4] = *b"PK\x05\x06";
const END_LEN: usize = 22;
const LOCATOR_SIG: [u8; 4] = *b"PK\x06\x07";
const LOCATOR_LEN: usize = 20;
const END64_SIG: [u8; 4] = *b"PK\x06\x06";
const END64_LEN: u64 = 56;
const CENTRAL_SIG: [u8; 4] = *b"PK\x01\x02";
const CENTRAL_LEN: usize = 46;
const LOCAL_SIG: [u8; 4] = *b"PK\x03\x04";
const LOCAL_LEN: usize = 30;
/// The ZIP64 extended information extra field's id.
const ZIP64_EXTRA: u16 = 0x0001;
/// General purpose flag bits: encrypted, name in UTF-8.
const FLAG_ENCRYPTED: u16 = 1;
const FLAG_UTF8: u16 = 1 << 11;

/// CP437, the zip format's name encoding when the UTF-8 flag is clear
/// (bytes 0x80..=0xFF; below, ASCII).
const CP437_HIGH: &str = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐\
                          └┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u{a0}";

/// One record of an archive, as its central directory and local header
/// give it, every offset checked to lie in the archive.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Its number in the central directory (0 first).
    pub index: usize,
    pub name: String,
    /// Its compression method ([`STORED`], [`DEFLATED`], ...).
    pub method: u16,
    pub encrypted: bool,
    /// The CRC-32 of its uncompressed bytes.
    pub crc: u32,
    /// Its bytes in the archive (the compressed size).
    pub packed: u64,
    /// Its bytes once inflated (the uncompressed size).
    pub size: u64,
    /// Where its local header starts.
    pub header: u64,
    /// Where its data start, past the local header.
    pub data: u64,
}

impl Entry {
    /// Where its data lie in the archive.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.data as usize..(self.data + self.packed) as usize
    }

    /// Its method in words ("stored", "deflated", "method 12").
    pub fn method_name(&self) -> String {
        match self.method {
            STORED => "stored".to_owned(),
            DEFLATED => "deflated".to_owned(),
            m => format!("method {m}"),
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Where the central directory lies, from the end record(s).
struct Directory {
    count: u64,
    start: u64,
    size: u64,
}

/// The end-of-central-directory record's position: the last one whose
/// comment ends the bytes exactly.
fn find_end(bytes: &[u8]) -> Result<usize> {
    let len = bytes.len();
    let lowest = len.saturating_sub(END_LEN + u16::MAX as usize);
    let mut ends = (lowest..=len.saturating_sub(END_LEN))
        .rev()
        .filter(|&p| p + END_LEN <= len && bytes[p..p + 4] == END_SIG)
        .peekable();
    let last = ends.peek().copied();
    if let Some(end) = ends.find(|&p| p + END_LEN + u16_at(bytes, p + 20) as usize == len) {
        return Ok(end);
    }
    if let Some(p) = last {
        let ends_at = p + END_LEN + u16_at(bytes, p + 20) as usize;
        crate::bail!(
            Format,
            "the zip archive's end record at byte {p} (with its comment) ends at byte \
             {ends_at}, but the file is {len} bytes: bytes appended after its end, or its \
             comment cut short"
        );
    }
    if bytes.starts_with(&LOCAL_SIG) {
        crate::bail!(Format, "{}", truncation(bytes));
    }
    crate::bail!(
        Format,
        "no zip end record ends the {len} bytes: not a zip archive, or one with bytes \
         appended after its end"
    )
}

/// What is missing from a file that starts as a zip archive but has no
/// end record: the record it ends inside, or the index after the last.
fn truncation(bytes: &[u8]) -> String {
    let len = bytes.len();
    let head = format!(
        "the file is truncated: it is {len} bytes, and a zip archive (a torch, TorchScript or \
         npz file) ends with its index (central directory and end record), which is missing"
    );
    let mut at = 0usize;
    while at + 4 <= len && bytes[at..at + 4] == LOCAL_SIG {
        if at + LOCAL_LEN > len {
            return format!("{head}: the file ends inside a record's header at byte {at}");
        }
        let flags = u16_at(bytes, at + 6);
        let size = u32_at(bytes, at + 18) as usize;
        let name_len = u16_at(bytes, at + 26) as usize;
        let extra_len = u16_at(bytes, at + 28) as usize;
        let name_end = at + LOCAL_LEN + name_len;
        let name = String::from_utf8_lossy(&bytes[at + LOCAL_LEN..name_end.min(len)]);
        // Sizes after the data (flag 3) or in a ZIP64 field: stop guessing.
        if flags & 8 != 0 || size == u32::MAX as usize {
            return head;
        }
        let end = name_end + extra_len + size;
        if end > len {
            return format!(
                "{head}: the file ends inside the record '{name}' (its {size} bytes of data \
                 should run to byte {end})"
            );
        }
        at = end;
    }
    format!("{head}: the file ends after its last complete record, at byte {at}")
}

/// The central directory's place and record count, from the end record
/// and, when a ZIP64 locator precedes it, the ZIP64 end record.
fn directory(bytes: &[u8]) -> Result<(Directory, u64)> {
    let end = find_end(bytes)?;
    let several = |disk: u64, cd_disk: u64| {
        crate::err!(
            Format,
            "the zip archive's end record names disk {disk} (central directory on disk \
             {cd_disk}): archives spanning several disks are not read"
        )
    };
    if end >= LOCATOR_LEN && bytes[end - LOCATOR_LEN..end - LOCATOR_LEN + 4] == LOCATOR_SIG {
        let loc = end - LOCATOR_LEN;
        let (disk, at, disks) = (
            u32_at(bytes, loc + 4),
            u64_at(bytes, loc + 8),
            u32_at(bytes, loc + 16),
        );
        if disk != 0 || disks > 1 {
            return Err(several(disk as u64, disks as u64));
        }
        crate::ensure!(
            at.checked_add(END64_LEN).is_some_and(|e| e <= loc as u64)
                && bytes[at as usize..at as usize + 4] == END64_SIG,
            Format,
            "the zip archive's ZIP64 locator points at byte {at}: expected a ZIP64 end record \
             there, before the locator at byte {loc}"
        );
        let r = at as usize;
        let (disk, cd_disk) = (u32_at(bytes, r + 16), u32_at(bytes, r + 20));
        if disk != 0 || cd_disk != 0 || u64_at(bytes, r + 24) != u64_at(bytes, r + 32) {
            return Err(several(disk as u64, cd_disk as u64));
        }
        let dir = Directory {
            count: u64_at(bytes, r + 32),
            size: u64_at(bytes, r + 40),
            start: u64_at(bytes, r + 48),
        };
        return Ok((dir, at));
    }
    let (disk, cd_disk) = (u16_at(bytes, end + 4), u16_at(bytes, end + 6));
    if disk != 0 || cd_disk != 0 || u16_at(bytes, end + 8) != u16_at(bytes, end + 10) {
        return Err(several(disk as u64, cd_disk as u64));
    }
    let dir = Directory {
        count: u16_at(bytes, end + 10) as u64,
        size: u32_at(bytes, end + 12) as u64,
        start: u32_at(bytes, end + 16) as u64,
    };
    Ok((dir, end as u64))
}

/// A record's name: UTF-8 when its flag says so, else CP437.
fn decode_name(raw: &[u8], flags: u16, index: usize) -> Result<String> {
    if raw.is_ascii() {
        return Ok(String::from_utf8(raw.to_vec()).expect("ASCII"));
    }
    if flags & FLAG_UTF8 != 0 {
        return String::from_utf8(raw.to_vec()).map_err(|_| {
            crate::err!(
                Format,
                "zip central directory record {index}: its name {} is not UTF-8, though its \
                 flags say it is",
                String::from_utf8_lossy(raw)
            )
        });
    }
    let high: Vec<char> = CP437_HIGH.chars().collect();
    Ok(raw
        .iter()
        .map(|&b| {
            if b < 0x80 {
                b as char
            } else {
                high[b as usize - 0x80]
            }
        })
        .collect())
}

/// Replaces the sizes, offset and disk that read as "see the ZIP64
/// field" (all ones) with the values of the ZIP64 extra field, which
/// holds them in this order. A field of 24 bytes or more holds both sizes
/// and the offset whatever the record's own fields say (the `zip` crate
/// writes its large-file records so, and reads them so). Of several such
/// fields the last counts (as in CPython's zipfile; the `zip` crate's
/// writer puts a placeholder one first).
fn apply_zip64(extra: &[u8], index: usize, fields: &mut [(&mut u64, bool); 4]) -> Result<()> {
    if fields.iter().all(|(_, needed)| !needed) {
        return Ok(());
    }
    let mut last = None;
    let mut i = 0;
    while i + 4 <= extra.len() {
        let (id, len) = (u16_at(extra, i), u16_at(extra, i + 2) as usize);
        let Some(body) = extra.get(i + 4..i + 4 + len) else {
            break;
        };
        if id == ZIP64_EXTRA {
            last = Some(body);
        }
        i += 4 + len;
    }
    let Some(body) = last else {
        crate::bail!(
            Format,
            "zip central directory record {index}: its sizes or offset say \"in the ZIP64 \
             extra field\", and it has no such field"
        )
    };
    let all = body.len() >= 24;
    let mut at = 0;
    for (k, (value, needed)) in fields.iter_mut().enumerate() {
        if !(*needed || (all && k < 3)) {
            continue;
        }
        let width = if k == 3 { 4 } else { 8 };
        let Some(b) = body.get(at..at + width) else {
            crate::bail!(
                Format,
                "zip central directory record {index}: its ZIP64 extra field holds {} bytes: \
                 too few for the sizes and offset it must give",
                body.len()
            );
        };
        let mut v = [0u8; 8];
        v[..width].copy_from_slice(b);
        **value = u64::from_le_bytes(v);
        at += width;
    }
    Ok(())
}

/// Reads central-directory record `index` at `at` (within `cd`); returns
/// the entry (data not yet located), its name's bytes and where the next
/// record starts.
fn central_record(
    bytes: &[u8],
    at: usize,
    cd: (usize, usize),
    index: usize,
) -> Result<(Entry, &[u8], usize)> {
    let fixed_end = at + CENTRAL_LEN;
    crate::ensure!(
        fixed_end <= cd.1 && bytes[at..at + 4] == CENTRAL_SIG,
        Format,
        "zip central directory record {index} at byte {at}: expected its signature PK\\1\\2 \
         and {CENTRAL_LEN} bytes within the central directory (bytes {}..{})",
        cd.0,
        cd.1
    );
    let flags = u16_at(bytes, at + 8);
    let (n, m, k) = (
        u16_at(bytes, at + 28) as usize,
        u16_at(bytes, at + 30) as usize,
        u16_at(bytes, at + 32) as usize,
    );
    let next = fixed_end + n + m + k;
    crate::ensure!(
        next <= cd.1,
        Format,
        "zip central directory record {index} at byte {at}: its name, extra field and \
         comment ({n} + {m} + {k} bytes) run past the central directory's end at byte {}",
        cd.1
    );
    let raw = &bytes[fixed_end..fixed_end + n];
    let name = decode_name(raw, flags, index)?;
    let all_ones = |v: u64, w: u32| v == (1u64 << w) - 1;
    let mut size = u32_at(bytes, at + 24) as u64;
    let mut packed = u32_at(bytes, at + 20) as u64;
    let mut header = u32_at(bytes, at + 42) as u64;
    let mut disk = u16_at(bytes, at + 34) as u64;
    let needs = [
        all_ones(size, 32),
        all_ones(packed, 32),
        all_ones(header, 32),
        all_ones(disk, 16),
    ];
    apply_zip64(
        &bytes[fixed_end + n..fixed_end + n + m],
        index,
        &mut [
            (&mut size, needs[0]),
            (&mut packed, needs[1]),
            (&mut header, needs[2]),
            (&mut disk, needs[3]),
        ],
    )
    .map_err(|e| e.context(format!("record '{name}'")))?;
    crate::ensure!(
        disk == 0,
        Format,
        "zip record '{name}' (central directory record {index}) starts on disk {disk}: \
         archives spanning several disks are not read"
    );
    let entry = Entry {
        index,
        name,
        method: u16_at(bytes, at + 10),
        encrypted: flags & FLAG_ENCRYPTED != 0,
        crc: u32_at(bytes, at + 16),
        packed,
        size,
        header,
        data: 0,
    };
    Ok((entry, raw, next))
}

/// Finds `e`'s local header (before `limit`, the central directory's
/// start) and sets where its data start; returns the local header's name.
fn locate<'b>(bytes: &'b [u8], e: &mut Entry, limit: u64) -> Result<&'b [u8]> {
    let (name, index, h) = (&e.name, e.index, e.header);
    crate::ensure!(
        h.checked_add(LOCAL_LEN as u64)
            .is_some_and(|end| end <= limit)
            && bytes[h as usize..h as usize + 4] == LOCAL_SIG,
        Format,
        "zip record '{name}' (central directory record {index}): expected a local header \
         (signature PK\\3\\4) at byte {h}, before the central directory at byte {limit}"
    );
    let h = h as usize;
    let (n, m) = (u16_at(bytes, h + 26) as u64, u16_at(bytes, h + 28) as u64);
    let data = e.header + LOCAL_LEN as u64 + n + m;
    let end = data.checked_add(e.packed).filter(|&end| end <= limit);
    crate::ensure!(
        end.is_some(),
        Format,
        "zip record '{name}' (central directory record {index}): its local header at byte {} \
         and {} bytes of data run past the central directory's start at byte {limit}",
        e.header,
        e.packed
    );
    e.data = data;
    Ok(&bytes[h + LOCAL_LEN..h + LOCAL_LEN + n as usize])
}

/// Refuses two records whose bytes (local header through data) overlap,
/// naming both.
fn check_overlaps(entries: &[Entry]) -> Result<()> {
    let spans: Vec<((), u64, u64)> = entries
        .iter()
        .map(|e| ((), e.header, e.data + e.packed))
        .collect();
    let Some((a, b)) = super::ranges::first_overlap(&spans) else {
        return Ok(());
    };
    let (a, b) = (&entries[a.min(b)], &entries[a.max(b)]);
    let span = |e: &Entry| format!("bytes {}..{}", e.header, e.data + e.packed);
    crate::bail!(
        Format,
        "zip records '{}' (central directory record {}, {}) and '{}' (record {}, {}) overlap: \
         expected each record's local header and data on bytes of their own",
        a.name,
        a.index,
        span(a),
        b.name,
        b.index,
        span(b)
    )
}

/// A record's sizes: a stored one's two sizes agree; a deflated one's
/// inflated size is at most deflate's largest ratio of its compressed
/// bytes (plus 64 for the smallest streams).
fn check_sizes(e: &Entry) -> Result<()> {
    let name = &e.name;
    match e.method {
        STORED => crate::ensure!(
            e.size == e.packed,
            Format,
            "zip record '{name}' is stored with {} bytes in the archive and a size of {}: \
             expected the two to agree",
            e.packed,
            e.size
        ),
        DEFLATED => {
            let limit = e
                .packed
                .saturating_mul(MAX_DEFLATE_RATIO)
                .saturating_add(64);
            crate::ensure!(
                e.size <= limit,
                Format,
                "zip record '{name}' declares {} bytes inflated from {} compressed: expected \
                 at most {limit} (deflate's largest ratio is {MAX_DEFLATE_RATIO}:1)",
                e.size,
                e.packed
            );
        }
        _ => {}
    }
    Ok(())
}

/// A central-directory record (its data not yet located) and its raw
/// name.
pub(crate) type Central<'b> = (Entry, &'b [u8]);

/// The central directory of the zip archive `bytes` (its end record and
/// its records, each name once): where it starts, and its records, whose
/// data are not yet located (`data` 0), with their raw names. What a
/// reader of part of a file needs first: then the local headers.
pub(crate) fn central(bytes: &[u8]) -> Result<(u64, Vec<Central<'_>>)> {
    let (dir, limit) = directory(bytes)?;
    let cd_end = dir.start.checked_add(dir.size).filter(|&e| e <= limit);
    let Some(cd_end) = cd_end else {
        crate::bail!(
            Format,
            "the zip archive's central directory ({} bytes at byte {}) runs past its end \
             record at byte {limit}",
            dir.size,
            dir.start
        );
    };
    crate::ensure!(
        dir.count <= dir.size / CENTRAL_LEN as u64,
        Format,
        "the zip archive's end record counts {} records: its central directory of {} bytes \
         holds at most {} ({CENTRAL_LEN} bytes or more each)",
        dir.count,
        dir.size,
        dir.size / CENTRAL_LEN as u64
    );
    let cd = (dir.start as usize, cd_end as usize);
    // Grown record by record: the count is only bounded by the
    // directory's size so far.
    let mut records = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut at = cd.0;
    for index in 0..dir.count as usize {
        let (entry, raw, next) = central_record(bytes, at, cd, index)?;
        if let Some(first) = by_name.insert(entry.name.clone(), index) {
            crate::bail!(
                Format,
                "the zip archive holds two records named '{}' (central directory records \
                 {first} and {index}): expected one record per name",
                entry.name
            );
        }
        records.push((entry, raw));
        at = next;
    }
    crate::ensure!(
        at == cd.1,
        Format,
        "the zip archive's central directory holds {} bytes past its {} records (bytes \
         {at}..{}): expected exactly the records its end record counts",
        cd.1 - at,
        dir.count,
        cd.1
    );
    Ok((dir.start, records))
}

/// Where the central directory of the zip archive `bytes` lies (from its
/// end record): [start, end).
pub(crate) fn central_span(bytes: &[u8]) -> Result<(u64, u64)> {
    let (dir, _) = directory(bytes)?;
    Ok((dir.start, dir.start.saturating_add(dir.size)))
}

/// Every record of the zip archive `bytes`, in central-directory order,
/// after the checks of the module documentation.
///
/// Errors: `Format`, naming the record(s) and what was expected.
pub(crate) fn entries(bytes: &[u8]) -> Result<Vec<Entry>> {
    let (start, records) = central(bytes)?;
    let (mut entries, raw_names): (Vec<Entry>, Vec<&[u8]>) = records.into_iter().unzip();
    let mut local_names = Vec::with_capacity(entries.len());
    for e in &mut entries {
        local_names.push(locate(bytes, e, start)?);
    }
    check_overlaps(&entries)?;
    for ((e, local), raw) in entries.iter().zip(local_names).zip(raw_names) {
        crate::ensure!(
            local == raw,
            Format,
            "zip record '{}' (central directory record {}): its local header at byte {} names \
             '{}': expected the central directory's name",
            e.name,
            e.index,
            e.header,
            String::from_utf8_lossy(local)
        );
        check_sizes(e)?;
    }
    Ok(entries)
}
