//! A small pickle writer (protocol 2) for the values a memory snapshot
//! holds: dicts, lists, strings, integers, floats, booleans and None,
//! modelled as serde_json values. Python's `pickle.load` reads it; no
//! class is referenced, so loading runs no code.
//!
//! Opcodes (Python's Lib/pickletools.py documents them): PROTO 0x80,
//! STOP '.', NONE 'N', NEWTRUE 0x88, NEWFALSE 0x89, BININT 'J' (i32 LE),
//! LONG1 0x8a (length byte, two's-complement LE), BINFLOAT 'G' (f64 BE),
//! BINUNICODE 'X' (u32 LE length, UTF-8), EMPTY_LIST ']', EMPTY_DICT '}',
//! MARK '(', APPENDS 'e', SETITEMS 'u'.

use serde_json::Value;

/// The pickle of `v`.
pub(super) fn dumps(v: &Value) -> Vec<u8> {
    let mut out = vec![0x80, 2];
    write(&mut out, v);
    out.push(b'.');
    out
}

fn write_int(out: &mut Vec<u8>, n: i128) {
    if let Ok(small) = i32::try_from(n) {
        out.push(b'J');
        out.extend_from_slice(&small.to_le_bytes());
        return;
    }
    // LONG1: the shortest two's-complement little-endian form.
    let bytes = n.to_le_bytes();
    let mut len = bytes.len();
    while len > 1 {
        let last = bytes[len - 1];
        let prev_sign = bytes[len - 2] & 0x80;
        if (last == 0 && prev_sign == 0) || (last == 0xff && prev_sign != 0) {
            len -= 1;
        } else {
            break;
        }
    }
    out.push(0x8a);
    out.push(len as u8);
    out.extend_from_slice(&bytes[..len]);
}

fn write(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(b'N'),
        Value::Bool(true) => out.push(0x88),
        Value::Bool(false) => out.push(0x89),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                write_int(out, i as i128);
            } else if let Some(u) = n.as_u64() {
                write_int(out, u as i128);
            } else {
                out.push(b'G');
                out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_be_bytes());
            }
        }
        Value::String(s) => {
            out.push(b'X');
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        Value::Array(items) => {
            out.push(b']');
            if !items.is_empty() {
                out.push(b'(');
                for it in items {
                    write(out, it);
                }
                out.push(b'e');
            }
        }
        Value::Object(map) => {
            out.push(b'}');
            if !map.is_empty() {
                out.push(b'(');
                for (k, it) in map {
                    write(out, &Value::String(k.clone()));
                    write(out, it);
                }
                out.push(b'u');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_values_have_their_opcodes() {
        assert_eq!(dumps(&json!(null)), b"\x80\x02N.");
        assert_eq!(dumps(&json!(true)), b"\x80\x02\x88.");
        assert_eq!(dumps(&json!(-2)), b"\x80\x02J\xfe\xff\xff\xff.");
        assert_eq!(dumps(&json!("ab")), b"\x80\x02X\x02\x00\x00\x00ab.");
        assert_eq!(dumps(&json!([])), b"\x80\x02].");
        assert_eq!(
            dumps(&json!({"a": 1})),
            b"\x80\x02}(X\x01\x00\x00\x00aJ\x01\x00\x00\x00u."
        );
    }

    #[test]
    fn large_integers_use_long1() {
        // 2^31: 0x80000000 needs a fifth byte for the sign.
        assert_eq!(
            dumps(&json!(1u64 << 31)),
            b"\x80\x02\x8a\x05\x00\x00\x00\x80\x00."
        );
        assert_eq!(
            dumps(&json!(u64::MAX)),
            b"\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00."
        );
        assert_eq!(dumps(&json!(i64::MIN + 1))[2], 0x8a);
    }
}
