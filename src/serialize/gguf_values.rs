//! GGUF's header as it is read: a reading position over the file's
//! first bytes that knows the file's length and byte order
//! ([`Reader`]), and the key-value section's typed values as text
//! (scalars, nested arrays; JSON for tessera's metadata of types). The
//! reader of the format (`gguf.rs`) walks the header with them.

use super::gguf_types::{FullType, ValueType};
use crate::error::Result;

/// Arrays nested deeper than this are refused (no recursion without end).
pub(super) const MAX_NESTING: usize = 8;

/// A reading position in the first bytes of a file (all of them, or a
/// prefix a checkpoint's index read).
pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    /// The file's length (`bytes` may be only its start).
    pub(super) file_len: u64,
    /// A read ran past `bytes` but not past the file: more of the file
    /// is needed, nothing is wrong with it.
    pub(super) short: bool,
    /// The file is big-endian (gguf-py writes either order): numbers are
    /// read reversed.
    pub(super) big: bool,
}

impl<'a> Reader<'a> {
    /// The file's bytes after the position.
    pub(super) fn left(&self) -> u64 {
        self.file_len - self.pos as u64
    }

    /// The next `n` bytes, for `what`.
    pub(super) fn take(&mut self, n: u64, what: &dyn std::fmt::Display) -> Result<&'a [u8]> {
        crate::ensure!(
            n <= self.left(),
            Format,
            "gguf: the file is truncated: it is {} bytes, and {what} needs {n} bytes at byte {}, \
             past its end",
            self.file_len,
            self.pos
        );
        if n > (self.bytes.len() - self.pos) as u64 {
            self.short = true;
            crate::bail!(
                Format,
                "gguf: the header runs past the {} bytes read",
                self.bytes.len()
            );
        }
        let s = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    pub(super) fn array<const N: usize>(
        &mut self,
        what: &dyn std::fmt::Display,
    ) -> Result<[u8; N]> {
        Ok(self.take(N as u64, what)?.try_into().expect("N bytes"))
    }

    /// The next number's `N` bytes in little-endian order.
    pub(super) fn le<const N: usize>(&mut self, what: &dyn std::fmt::Display) -> Result<[u8; N]> {
        let mut b = self.array::<N>(what)?;
        if self.big {
            b.reverse();
        }
        Ok(b)
    }

    pub(super) fn u32(&mut self, what: &dyn std::fmt::Display) -> Result<u32> {
        self.le(what).map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self, what: &dyn std::fmt::Display) -> Result<u64> {
        self.le(what).map(u64::from_le_bytes)
    }

    /// A count of things of at least `min_size` bytes each, refused when
    /// the bytes left cannot hold that many.
    pub(super) fn count(&mut self, what: &dyn std::fmt::Display, min_size: u64) -> Result<u64> {
        let n = self.u64(what)?;
        crate::ensure!(
            n <= self.left() / min_size.max(1),
            Format,
            "gguf: the file is truncated or corrupt: {what} is {n}, which need {min_size} bytes \
             or more each, and only {} bytes follow (the file is {} bytes)",
            self.left(),
            self.file_len
        );
        Ok(n)
    }

    /// A GGUF string (a u64 length, then that many bytes).
    pub(super) fn string(&mut self, what: &dyn std::fmt::Display) -> Result<String> {
        let n = self.u64(what)?;
        let b = self.take(n, &format_args!("{what} (a string of {n} bytes)"))?;
        Ok(String::from_utf8_lossy(b).into_owned())
    }

    pub(super) fn value_type(&mut self, what: &dyn std::fmt::Display) -> Result<ValueType> {
        let n = self.u32(what)?;
        ValueType::from_u32(n).ok_or_else(|| {
            crate::err!(
                Format,
                "gguf: {what}: value type {n}: expected 0..=12 (uint8 .. float64)"
            )
        })
    }
}

/// A float as text: Rust's shortest form, or NaN, inf, -inf.
pub(super) fn float_text(v: impl std::fmt::Display, finite: bool, json: bool) -> String {
    if finite || !json {
        return format!("{v}");
    }
    format!("\"{v}\"")
}

/// Reads one scalar value of type `t` and appends its text (JSON when
/// `json`: strings quoted) to `out`.
pub(super) fn scalar(r: &mut Reader<'_>, t: ValueType, json: bool, out: &mut String) -> Result<()> {
    let what = &"a value";
    let text = match t {
        ValueType::U8 => r.array::<1>(what)?[0].to_string(),
        ValueType::I8 => (r.array::<1>(what)?[0] as i8).to_string(),
        ValueType::U16 => u16::from_le_bytes(r.le(what)?).to_string(),
        ValueType::I16 => i16::from_le_bytes(r.le(what)?).to_string(),
        ValueType::U32 => r.u32(what)?.to_string(),
        ValueType::I32 => i32::from_le_bytes(r.le(what)?).to_string(),
        ValueType::U64 => r.u64(what)?.to_string(),
        ValueType::I64 => i64::from_le_bytes(r.le(what)?).to_string(),
        ValueType::F32 => {
            let v = f32::from_le_bytes(r.le(what)?);
            float_text(v, v.is_finite(), json)
        }
        ValueType::F64 => {
            let v = f64::from_le_bytes(r.le(what)?);
            float_text(v, v.is_finite(), json)
        }
        ValueType::Bool => {
            let b = r.array::<1>(what)?[0];
            crate::ensure!(b <= 1, Format, "gguf: a bool value is {b}: expected 0 or 1");
            (if b == 1 { "true" } else { "false" }).to_string()
        }
        ValueType::String => {
            let s = r.string(what)?;
            if json {
                serde_json::to_string(&s).expect("a string serializes")
            } else {
                s
            }
        }
        ValueType::Array => unreachable!("arrays are read by `value`"),
    };
    out.push_str(&text);
    Ok(())
}

/// Reads one value of type `t` (arrays: their element type and count
/// first) into `out`, returning its full type.
pub(super) fn value(
    r: &mut Reader<'_>,
    key: &str,
    t: ValueType,
    json: bool,
    depth: usize,
    out: &mut String,
) -> Result<FullType> {
    if t != ValueType::Array {
        scalar(r, t, json, out).map_err(|e| e.context(format!("gguf key '{key}'")))?;
        return Ok(FullType::Scalar(t));
    }
    crate::ensure!(
        depth < MAX_NESTING,
        Format,
        "gguf: key '{key}': arrays nested {depth} deep: expected at most {MAX_NESTING}"
    );
    let what = format!("key '{key}': the array's element type");
    let inner = r.value_type(&what)?;
    let n = r.count(
        &format_args!("key '{key}': the array's count"),
        inner.min_size(),
    )?;
    out.push('[');
    // An empty array of arrays names no innermost type: any writes the
    // same bytes (type 9, count 0).
    let mut element = match inner {
        ValueType::Array => FullType::Array(Box::new(FullType::Scalar(ValueType::U8))),
        t => FullType::Scalar(t),
    };
    for i in 0..n {
        if i > 0 {
            out.push(',');
        }
        element = value(r, key, inner, true, depth + 1, out)?;
    }
    out.push(']');
    Ok(FullType::Array(Box::new(element)))
}
