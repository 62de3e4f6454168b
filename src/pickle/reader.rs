//! The restricted pickle reader: bytes to a [`Value`] tree, nothing
//! called, every resource bounded (module docs).

use super::limits::Limits;
use super::opcodes::*;
use super::value::Value;
use crate::error::{Error, Result};
use std::collections::HashMap;

/// A value on the stack with its nesting depth and accounted bytes: the
/// heap it owns, its own slot excluded (what a copy costs beyond a slot).
#[derive(Clone)]
struct Item {
    value: Value,
    depth: u32,
    bytes: u64,
}

/// Bytes of a value's slot on the stack or in the memo.
const ITEM: u64 = std::mem::size_of::<Item>() as u64;
/// Bytes of a value in a container or a box.
const VALUE: u64 = std::mem::size_of::<Value>() as u64;

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    op_pos: usize,
    stack: Vec<Item>,
    marks: Vec<usize>,
    memo: HashMap<u32, Item>,
    /// Bytes of values built so far (never credited back).
    bytes: u64,
    /// The most `bytes` may reach: [`Limits::bound`] of the input.
    bound: u64,
    limits: Limits,
    allow: &'a dyn Fn(&str, &str) -> bool,
}

/// Reads the pickle in `data` (up to its STOP; bytes after it are
/// ignored). `allow(module, name)` decides which globals may appear; any
/// other is refused.
///
/// Errors: `Format`, the message naming the opcode and byte position and
/// what is wrong (a refused global, a limit passed, a truncated pickle, an
/// opcode that does not fit the stack).
pub fn read(data: &[u8], allow: &dyn Fn(&str, &str) -> bool, limits: Limits) -> Result<Value> {
    read_measured(data, allow, limits).0
}

/// As [`read`], for a pickle followed by other data (torch.save's legacy
/// files hold several pickles in a row): also gives the position just
/// past its STOP.
pub fn read_prefix(
    data: &[u8],
    allow: &dyn Fn(&str, &str) -> bool,
    limits: Limits,
) -> Result<(Value, usize)> {
    let mut r = Reader::new(data, allow, limits);
    let value = r.run()?;
    Ok((value, r.pos))
}

/// As [`read`], also giving the bytes the reader accounted for the values
/// it built (never more than [`Limits::bound`] of the input's length).
pub fn read_measured(
    data: &[u8],
    allow: &dyn Fn(&str, &str) -> bool,
    limits: Limits,
) -> (Result<Value>, u64) {
    let mut r = Reader::new(data, allow, limits);
    let result = r.run();
    (result, r.bytes)
}

impl<'a> Reader<'a> {
    /// A reader at the start of `data`.
    fn new(data: &'a [u8], allow: &'a dyn Fn(&str, &str) -> bool, limits: Limits) -> Self {
        Reader {
            data,
            pos: 0,
            op_pos: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            bytes: 0,
            bound: limits.bound(data.len()),
            limits,
            allow,
        }
    }

    fn fail(&self, what: impl std::fmt::Display) -> Error {
        let op = self.data.get(self.op_pos).copied().unwrap_or(0);
        crate::err!(
            Format,
            "pickle: {what} (opcode 0x{op:02x} at byte {})",
            self.op_pos
        )
    }

    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.fail(format_args!(
                "truncated: {n} bytes needed, {} left",
                self.data.len() - self.pos
            ))),
        }
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }

    fn len_u64(&mut self) -> Result<usize> {
        let n = self.u64()?;
        usize::try_from(n).map_err(|_| self.fail(format_args!("length {n} is too large")))
    }

    fn line(&mut self) -> Result<String> {
        let rest = &self.data[self.pos..];
        let max = 256.min(rest.len());
        let Some(nl) = rest[..max].iter().position(|&b| b == b'\n') else {
            return Err(self.fail("a GLOBAL line without a newline in its first 256 bytes"));
        };
        let s = std::str::from_utf8(&rest[..nl])
            .map_err(|_| self.fail("a GLOBAL line that is not UTF-8"))?
            .to_owned();
        self.pos += nl + 1;
        Ok(s)
    }

    fn utf8(&mut self, n: usize) -> Result<Value> {
        let bytes = self.take(n)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(Value::Str(s.to_owned())),
            Err(_) => Err(self.fail("a string that is not UTF-8")),
        }
    }

    /// Accounts `bytes` more; past the bound, the pickle is refused.
    fn charge(&mut self, bytes: u64) -> Result<()> {
        let total = self.bytes.saturating_add(bytes);
        if total > self.bound {
            return Err(self.fail(format_args!(
                "its values would take more than {} bytes, the limit for a {}-byte pickle \
                 (min({}, {} + {} per input byte)): it builds or repeats too much",
                self.bound,
                self.data.len(),
                self.limits.max_bytes,
                super::limits::BASE_BYTES,
                self.limits.bytes_per_input_byte
            )));
        }
        self.bytes = total;
        Ok(())
    }

    fn push_item(&mut self, item: Item) -> Result<()> {
        if item.depth > self.limits.max_depth {
            return Err(self.fail(format_args!(
                "values nested {} deep: the limit is {}",
                item.depth, self.limits.max_depth
            )));
        }
        if self.stack.len() >= self.limits.max_stack {
            return Err(self.fail(format_args!(
                "more than {} values on the stack",
                self.limits.max_stack
            )));
        }
        self.stack.push(item);
        Ok(())
    }

    /// Pushes a new leaf value (its slot and its heap accounted).
    fn push(&mut self, value: Value) -> Result<()> {
        let heap = match &value {
            Value::Str(s) => s.capacity() as u64,
            Value::Bytes(b) => b.capacity() as u64,
            Value::Global { module, name } => (module.capacity() + name.capacity()) as u64,
            _ => 0,
        };
        self.charge(ITEM + heap)?;
        self.push_item(Item {
            value,
            depth: 0,
            bytes: heap,
        })
    }

    /// Pushes a container holding parts of (depth, bytes) `parts`, moved
    /// in: its slot and `heap` bytes of its own are accounted.
    fn push_built(&mut self, value: Value, parts: &[(u32, u64)], heap: u64) -> Result<()> {
        let depth = 1 + parts.iter().map(|p| p.0).max().unwrap_or(0);
        let bytes = heap + parts.iter().map(|p| p.1).sum::<u64>();
        self.charge(ITEM + heap)?;
        self.push_item(Item {
            value,
            depth,
            bytes,
        })
    }

    /// Pushes a copy of the top value (DUP): its slot and whole cost.
    fn dup(&mut self) -> Result<()> {
        let bytes = self.top()?.bytes;
        self.charge(ITEM + bytes)?;
        let item = self.top()?.clone();
        self.push_item(item)
    }

    fn pop(&mut self) -> Result<Item> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.fail("the stack is empty"));
        }
        Ok(self.stack.pop().unwrap())
    }

    fn pop_mark(&mut self) -> Result<Vec<Item>> {
        let Some(mark) = self.marks.pop() else {
            return Err(self.fail("no MARK before this opcode"));
        };
        Ok(self.stack.split_off(mark))
    }

    fn top(&mut self) -> Result<&mut Item> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.fail("the stack is empty"));
        }
        Ok(self.stack.last_mut().unwrap())
    }

    /// Adds items to the container on top of the stack (grown in place,
    /// its depth and bytes updated, the growth of its capacity accounted).
    fn extend_top(&mut self, parts: Vec<Item>, pairs: bool) -> Result<()> {
        if pairs && parts.len() % 2 != 0 {
            return Err(self.fail("SETITEMS with an odd number of values"));
        }
        let max_depth = self.limits.max_depth;
        let depth = 1 + parts.iter().map(|p| p.depth).max().unwrap_or(0);
        let owned: u64 = parts.iter().map(|p| p.bytes).sum();
        let outcome = {
            let top = self.top()?;
            let what = top.value.describe();
            let mut it = parts.into_iter().map(|p| p.value);
            let grown = match (&mut top.value, pairs) {
                (Value::Dict(items), true) | (Value::Reduce { items, .. }, true) => {
                    let before = items.capacity();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        items.push((k, v));
                    }
                    Some((items.capacity() - before) as u64 * 2 * VALUE)
                }
                (Value::List(items), false) => {
                    let before = items.capacity();
                    items.extend(it);
                    Some((items.capacity() - before) as u64 * VALUE)
                }
                _ => None,
            };
            match grown {
                Some(grown) => {
                    top.depth = top.depth.max(depth);
                    top.bytes += owned + grown;
                    if top.depth > max_depth {
                        Err(format!(
                            "values nested {} deep: the limit is {max_depth}",
                            top.depth
                        ))
                    } else {
                        Ok(grown)
                    }
                }
                None => Err(format!(
                    "{} on {what}",
                    if pairs { "SETITEMS" } else { "APPENDS" }
                )),
            }
        };
        match outcome {
            Ok(grown) => self.charge(grown),
            Err(msg) => Err(self.fail(msg)),
        }
    }

    fn memo_put(&mut self, index: u32) -> Result<()> {
        if index >= self.limits.max_memo {
            return Err(self.fail(format_args!(
                "memo index {index} is past the limit {}",
                self.limits.max_memo
            )));
        }
        // The memo's copy: a slot, its key and the value's whole cost.
        let bytes = self.top()?.bytes;
        self.charge(ITEM + 8 + bytes)?;
        let item = self.top()?.clone();
        self.memo.insert(index, item);
        Ok(())
    }

    fn memo_get(&mut self, index: u32) -> Result<()> {
        let Some(bytes) = self.memo.get(&index).map(|i| i.bytes) else {
            return Err(self.fail(format_args!("memo index {index} was never stored")));
        };
        self.charge(ITEM + bytes)?;
        let item = self.memo[&index].clone();
        self.push_item(item)
    }

    fn global(&mut self, module: String, name: String) -> Result<()> {
        if !(self.allow)(&module, &name) {
            return Err(self.fail(format_args!(
                "global {module}.{name} is not allowed in a tensor file"
            )));
        }
        self.push(Value::Global { module, name })
    }

    fn run(&mut self) -> Result<Value> {
        loop {
            self.op_pos = self.pos;
            let op = self
                .u8()
                .map_err(|_| self.fail("truncated: no STOP opcode"))?;
            match op {
                PROTO => {
                    let p = self.u8()?;
                    if p > 5 {
                        return Err(self.fail(format_args!(
                            "protocol {p} is not supported: expected 2 to 5"
                        )));
                    }
                }
                FRAME => {
                    self.u64()?;
                }
                STOP => {
                    let item = self.pop()?;
                    return Ok(item.value);
                }
                MARK => {
                    if self.marks.len() >= self.limits.max_depth as usize {
                        return Err(self.fail(format_args!(
                            "more than {} nested MARKs",
                            self.limits.max_depth
                        )));
                    }
                    self.marks.push(self.stack.len());
                }
                POP => {
                    if self.marks.last() == Some(&self.stack.len()) {
                        self.marks.pop();
                    } else {
                        self.pop()?;
                    }
                }
                POP_MARK => {
                    self.pop_mark()?;
                }
                DUP => self.dup()?,
                NONE => self.push(Value::None)?,
                NEWTRUE => self.push(Value::Bool(true))?,
                NEWFALSE => self.push(Value::Bool(false))?,
                BININT => {
                    let v = self.u32()? as i32;
                    self.push(Value::Int(v as i64))?
                }
                BININT1 => {
                    let v = self.u8()?;
                    self.push(Value::Int(v as i64))?
                }
                BININT2 => {
                    let v = self.u16()?;
                    self.push(Value::Int(v as i64))?
                }
                LONG1 => {
                    let n = self.u8()? as usize;
                    if n > 8 {
                        return Err(self.fail(format_args!(
                            "an int of {n} bytes: expected at most 8 (int64)"
                        )));
                    }
                    let bytes = self.take(n)?;
                    let mut buf = [0u8; 8];
                    buf[..n].copy_from_slice(bytes);
                    if n > 0 && n < 8 && bytes[n - 1] & 0x80 != 0 {
                        buf[n..].fill(0xff);
                    }
                    self.push(Value::Int(i64::from_le_bytes(buf)))?
                }
                BINFLOAT => {
                    let b: [u8; 8] = self.take(8)?.try_into().unwrap();
                    self.push(Value::Float(f64::from_be_bytes(b)))?
                }
                SHORT_BINUNICODE => {
                    let n = self.u8()? as usize;
                    let v = self.utf8(n)?;
                    self.push(v)?
                }
                BINUNICODE => {
                    let n = self.u32()? as usize;
                    let v = self.utf8(n)?;
                    self.push(v)?
                }
                BINUNICODE8 => {
                    let n = self.len_u64()?;
                    let v = self.utf8(n)?;
                    self.push(v)?
                }
                SHORT_BINSTRING | BINSTRING => {
                    let n = if op == SHORT_BINSTRING {
                        self.u8()? as usize
                    } else {
                        self.u32()? as usize
                    };
                    // Python 2 str: bytes, read as Latin-1.
                    let s: String = self.take(n)?.iter().map(|&b| b as char).collect();
                    self.push(Value::Str(s))?
                }
                SHORT_BINBYTES | BINBYTES | BINBYTES8 => {
                    let n = match op {
                        SHORT_BINBYTES => self.u8()? as usize,
                        BINBYTES => self.u32()? as usize,
                        _ => self.len_u64()?,
                    };
                    let v = self.take(n)?.to_vec();
                    self.push(Value::Bytes(v))?
                }
                EMPTY_LIST => self.push(Value::List(Vec::new()))?,
                EMPTY_DICT => self.push(Value::Dict(Vec::new()))?,
                EMPTY_TUPLE => self.push(Value::Tuple(Vec::new()))?,
                APPEND => {
                    let v = self.pop()?;
                    self.extend_top(vec![v], false)?
                }
                APPENDS => {
                    let parts = self.pop_mark()?;
                    self.extend_top(parts, false)?
                }
                SETITEM => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.extend_top(vec![k, v], true)?
                }
                SETITEMS => {
                    let parts = self.pop_mark()?;
                    self.extend_top(parts, true)?
                }
                LIST | TUPLE | DICT => {
                    let parts = self.pop_mark()?;
                    let costs: Vec<(u32, u64)> = parts.iter().map(|p| (p.depth, p.bytes)).collect();
                    let n = parts.len() as u64;
                    let mut values = parts.into_iter().map(|p| p.value);
                    let value = match op {
                        LIST => Value::List(values.collect()),
                        TUPLE => Value::Tuple(values.collect()),
                        _ => {
                            if n % 2 != 0 {
                                return Err(self.fail("DICT with an odd number of values"));
                            }
                            let mut items = Vec::with_capacity(n as usize / 2);
                            while let (Some(k), Some(v)) = (values.next(), values.next()) {
                                items.push((k, v));
                            }
                            Value::Dict(items)
                        }
                    };
                    self.push_built(value, &costs, n * VALUE)?
                }
                TUPLE1 | TUPLE2 | TUPLE3 => {
                    let n = (op - TUPLE1 + 1) as usize;
                    let mut parts = Vec::with_capacity(n);
                    for _ in 0..n {
                        parts.push(self.pop()?);
                    }
                    parts.reverse();
                    let costs: Vec<(u32, u64)> = parts.iter().map(|p| (p.depth, p.bytes)).collect();
                    let value = Value::Tuple(parts.into_iter().map(|p| p.value).collect());
                    self.push_built(value, &costs, n as u64 * VALUE)?
                }
                BINPUT => {
                    let i = self.u8()? as u32;
                    self.memo_put(i)?
                }
                LONG_BINPUT => {
                    let i = self.u32()?;
                    self.memo_put(i)?
                }
                MEMOIZE => {
                    let i = u32::try_from(self.memo.len()).unwrap_or(u32::MAX);
                    self.memo_put(i)?
                }
                BINGET => {
                    let i = self.u8()? as u32;
                    self.memo_get(i)?
                }
                LONG_BINGET => {
                    let i = self.u32()?;
                    self.memo_get(i)?
                }
                GLOBAL => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.global(module, name)?
                }
                STACK_GLOBAL => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (module.value, name.value) {
                        (Value::Str(m), Value::Str(n)) => self.global(m, n)?,
                        _ => return Err(self.fail("STACK_GLOBAL of values that are not strings")),
                    }
                }
                REDUCE | NEWOBJ => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    if !matches!(args.value, Value::Tuple(_)) {
                        return Err(self.fail(format_args!(
                            "a call with {} as arguments: expected a tuple",
                            args.value.describe()
                        )));
                    }
                    if !matches!(callable.value, Value::Global { .. }) {
                        return Err(self.fail(format_args!(
                            "a call of {}: expected a global",
                            callable.value.describe()
                        )));
                    }
                    let costs = [(callable.depth, callable.bytes), (args.depth, args.bytes)];
                    let value = Value::Reduce {
                        callable: Box::new(callable.value),
                        args: Box::new(args.value),
                        items: Vec::new(),
                        state: None,
                    };
                    self.push_built(value, &costs, 2 * VALUE)?
                }
                BUILD => {
                    let state = self.pop()?;
                    self.charge(VALUE)?; // the state's box
                    let max_depth = self.limits.max_depth;
                    let top = self.top()?;
                    match &mut top.value {
                        Value::Reduce { state: slot, .. } => {
                            top.depth = top.depth.max(state.depth + 1);
                            top.bytes += state.bytes + VALUE;
                            *slot = Some(Box::new(state.value));
                            if top.depth > max_depth {
                                let d = top.depth;
                                return Err(self.fail(format_args!(
                                    "values nested {d} deep: the limit is {max_depth}"
                                )));
                            }
                        }
                        other => {
                            let what = other.describe();
                            return Err(self.fail(format_args!("BUILD on {what}")));
                        }
                    }
                }
                BINPERSID => {
                    let id = self.pop()?;
                    let costs = [(id.depth, id.bytes)];
                    let value = Value::PersistentId(Box::new(id.value));
                    self.push_built(value, &costs, VALUE)?
                }
                other => {
                    return Err(self.fail(format_args!("unknown or refused opcode 0x{other:02x}")));
                }
            }
        }
    }
}
