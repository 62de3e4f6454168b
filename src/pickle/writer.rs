//! The pickle writer: a [`Value`] tree to the bytes of a pickle.
//! Nothing is memoized unless the tree says so ([`Value::Memo`]).

use super::opcodes::*;
use super::value::Value;
use crate::error::Result;

/// Items per APPENDS / SETITEMS batch (as Python's pickler).
const BATCH: usize = 1000;

/// Pickles `value` with protocol 2 (torch.save's default).
///
/// Errors: `InvalidArgument` when the value holds bytes (protocol 3 and
/// later only).
pub fn write(value: &Value) -> Result<Vec<u8>> {
    write_protocol(value, 2)
}

/// Pickles `value` with `protocol` (2 to 5). Protocols 4 and 5 use the
/// same opcodes as 3 (no frames, no memo): every reader of those
/// protocols accepts them.
///
/// Errors: `InvalidArgument` for a protocol outside 2..=5, or bytes with
/// protocol 2.
pub fn write_protocol(value: &Value, protocol: u8) -> Result<Vec<u8>> {
    crate::ensure!(
        (2..=5).contains(&protocol),
        InvalidArgument,
        "pickle protocol {protocol} is not supported: expected 2 to 5"
    );
    let mut w = Writer {
        out: vec![PROTO, protocol],
        protocol,
    };
    w.value(value)?;
    w.out.push(STOP);
    Ok(w.out)
}

struct Writer {
    out: Vec<u8>,
    protocol: u8,
}

impl Writer {
    fn value(&mut self, v: &Value) -> Result<()> {
        match v {
            Value::None => self.out.push(NONE),
            Value::Bool(b) => self.out.push(if *b { NEWTRUE } else { NEWFALSE }),
            Value::Int(i) => self.int(*i),
            Value::Float(f) => {
                self.out.push(BINFLOAT);
                self.out.extend_from_slice(&f.to_be_bytes());
            }
            Value::Str(s) => {
                self.out.push(BINUNICODE);
                self.len_u32(s.len())?;
                self.out.extend_from_slice(s.as_bytes());
            }
            Value::Bytes(b) => {
                crate::ensure!(
                    self.protocol >= 3,
                    InvalidArgument,
                    "pickle protocol {}: bytes need protocol 3 or later",
                    self.protocol
                );
                self.out.push(BINBYTES);
                self.len_u32(b.len())?;
                self.out.extend_from_slice(b);
            }
            Value::List(items) => {
                self.out.push(EMPTY_LIST);
                for chunk in items.chunks(BATCH) {
                    self.out.push(MARK);
                    for item in chunk {
                        self.value(item)?;
                    }
                    self.out.push(APPENDS);
                }
            }
            Value::Tuple(items) => self.tuple(items)?,
            Value::Dict(items) => {
                self.out.push(EMPTY_DICT);
                self.set_items(items)?;
            }
            Value::Global { module, name } => {
                for part in [module, name] {
                    crate::ensure!(
                        !part.contains('\n'),
                        InvalidArgument,
                        "pickle global {module:?}.{name:?} holds a newline"
                    );
                }
                self.out.push(GLOBAL);
                self.out.extend_from_slice(module.as_bytes());
                self.out.push(b'\n');
                self.out.extend_from_slice(name.as_bytes());
                self.out.push(b'\n');
            }
            Value::Reduce {
                callable,
                args,
                items,
                state,
            } => {
                self.value(callable)?;
                self.value(args)?;
                self.out.push(REDUCE);
                self.set_items(items)?;
                if let Some(state) = state {
                    self.value(state)?;
                    self.out.push(BUILD);
                }
            }
            Value::PersistentId(id) => {
                self.value(id)?;
                self.out.push(BINPERSID);
            }
            Value::Memo { id, value } => {
                self.value(value)?;
                self.memo_op(*id, BINPUT, LONG_BINPUT);
            }
            Value::MemoGet(id) => self.memo_op(*id, BINGET, LONG_BINGET),
        }
        Ok(())
    }

    fn int(&mut self, i: i64) {
        if (0..256).contains(&i) {
            self.out.extend_from_slice(&[BININT1, i as u8]);
        } else if (0..65536).contains(&i) {
            self.out.push(BININT2);
            self.out.extend_from_slice(&(i as u16).to_le_bytes());
        } else if i32::try_from(i).is_ok() {
            self.out.push(BININT);
            self.out.extend_from_slice(&(i as i32).to_le_bytes());
        } else {
            // LONG1: little-endian two's complement, 8 bytes always fits.
            self.out.extend_from_slice(&[LONG1, 8]);
            self.out.extend_from_slice(&i.to_le_bytes());
        }
    }

    fn memo_op(&mut self, id: u32, short: u8, long: u8) {
        match u8::try_from(id) {
            Ok(b) => self.out.extend_from_slice(&[short, b]),
            Err(_) => {
                self.out.push(long);
                self.out.extend_from_slice(&id.to_le_bytes());
            }
        }
    }

    fn len_u32(&mut self, n: usize) -> Result<()> {
        let n = u32::try_from(n).map_err(|_| {
            crate::err!(
                InvalidArgument,
                "pickle: a string of {n} bytes is too long: expected < 4 GiB"
            )
        })?;
        self.out.extend_from_slice(&n.to_le_bytes());
        Ok(())
    }

    fn tuple(&mut self, items: &[Value]) -> Result<()> {
        match items.len() {
            0 => self.out.push(EMPTY_TUPLE),
            1..=3 => {
                for item in items {
                    self.value(item)?;
                }
                self.out.push([TUPLE1, TUPLE2, TUPLE3][items.len() - 1]);
            }
            _ => {
                self.out.push(MARK);
                for item in items {
                    self.value(item)?;
                }
                self.out.push(TUPLE);
            }
        }
        Ok(())
    }

    fn set_items(&mut self, items: &[(Value, Value)]) -> Result<()> {
        for chunk in items.chunks(BATCH) {
            self.out.push(MARK);
            for (k, v) in chunk {
                self.value(k)?;
                self.value(v)?;
            }
            self.out.push(SETITEMS);
        }
        Ok(())
    }
}
