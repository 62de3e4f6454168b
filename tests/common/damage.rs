//! Damaging a zip archive's record in place (tests/cli_changes.rs,
//! tests/cli_verify_sets.rs, tests/damaged_records.rs): one byte flipped inside a record's data, the
//! central directory's CRC-32 left as it was.
#![allow(dead_code)]

use std::path::Path;

/// Flips one bit of byte `at` of the data of the record whose name ends
/// with `suffix` (found by its local header: the data follows the name
/// and the extra field).
pub fn flip_in_record(path: &Path, suffix: &str, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let mut h = 0;
    let data = loop {
        h += bytes[h..]
            .windows(4)
            .position(|w| w == b"PK\x03\x04")
            .unwrap_or_else(|| panic!("a local header named *{suffix}"));
        let n = u16::from_le_bytes([bytes[h + 26], bytes[h + 27]]) as usize;
        let e = u16::from_le_bytes([bytes[h + 28], bytes[h + 29]]) as usize;
        if bytes[h + 30..h + 30 + n].ends_with(suffix.as_bytes()) {
            break h + 30 + n + e;
        }
        h += 4;
    };
    bytes[data + at] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}
