//! The restricted pickle reader: bytes to a [`Pickle`] arena, nothing
//! called, every resource bounded (module docs).

use super::arena::{CallRec, Node, Pickle, EMPTY_TUPLE_ID, FALSE_ID, NO, NONE_ID, TRUE_ID};
use super::limits::Limits;
use super::opcodes::*;
use super::value::Value;
use crate::error::{Error, Result};
use std::collections::HashMap;

/// What APPEND(S), SETITEM(S) and ADDITEMS add to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Add {
    List,
    Items,
    Set,
}

struct Reader<'a, 'f> {
    pos: usize,
    op_pos: usize,
    p: Pickle<'a>,
    /// Node ids.
    stack: Vec<u32>,
    marks: Vec<usize>,
    /// Memo slots below `dense_memo_limit` (NO where unset) ...
    memo: Vec<u32>,
    /// ... and the others, which only a rewritten pickle has.
    sparse_memo: HashMap<u32, u32>,
    /// Memo slots set, the index MEMOIZE uses.
    memo_count: u32,
    dense_memo_limit: u32,
    limits: Limits,
    allow: &'f dyn Fn(&str, &str) -> bool,
}

/// Reads the pickle in `data` (up to its STOP; bytes after it are
/// ignored) into an arena. `allow(module, name)` decides which globals
/// may appear; any other is refused.
///
/// Errors: `Format`, the message naming the opcode and byte position and
/// what is wrong (a refused global, a limit passed, a truncated pickle, an
/// opcode that does not fit the stack).
pub fn parse<'a>(
    data: &'a [u8],
    allow: &dyn Fn(&str, &str) -> bool,
    limits: Limits,
) -> Result<Pickle<'a>> {
    parse_prefix(data, allow, limits).map(|(p, _)| p)
}

/// As [`parse`], for a pickle followed by other data (torch.save's legacy
/// files hold several pickles in a row): also gives the position just
/// past its STOP.
pub fn parse_prefix<'a>(
    data: &'a [u8],
    allow: &dyn Fn(&str, &str) -> bool,
    limits: Limits,
) -> Result<(Pickle<'a>, usize)> {
    crate::ensure!(
        u32::try_from(data.len()).is_ok(),
        Format,
        "pickle: {} bytes: pickles of 4 GiB or more are not read",
        data.len()
    );
    let mut r = Reader {
        pos: 0,
        op_pos: 0,
        p: Pickle::new(data),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Vec::new(),
        sparse_memo: HashMap::new(),
        memo_count: 0,
        dense_memo_limit: (data.len() / 2 + 256).min(limits.max_memo as usize) as u32,
        limits,
        allow,
    };
    r.p.root = r.run()?;
    let used = r.pos;
    Ok((r.p, used))
}

/// Reads the pickle in `data` as [`parse`] does and gives its value as a
/// tree ([`super::Val::to_value`]: values reached twice are copied, at
/// most `limits.max_depth` deep and [`Limits::max_values`] in all).
pub fn read(data: &[u8], allow: &dyn Fn(&str, &str) -> bool, limits: Limits) -> Result<Value> {
    let p = parse(data, allow, limits)?;
    p.root()
        .to_value(limits.max_depth, limits.max_values(data.len()))
}

impl<'a> Reader<'a, '_> {
    fn fail(&self, what: impl std::fmt::Display) -> Error {
        let op = self.p.data.get(self.op_pos).copied().unwrap_or(0);
        crate::err!(
            Format,
            "pickle: {what} (opcode 0x{op:02x} at byte {})",
            self.op_pos
        )
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let data = self.p.data;
        let end = self.pos.checked_add(n).filter(|&e| e <= data.len());
        match end {
            Some(end) => {
                let s = &data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(crate::err!(
                Format,
                "pickle: cut short: its {} bytes end inside a value that needs {} more",
                data.len(),
                self.pos + n - data.len()
            )),
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

    /// A node for the `n` bytes at the reading position: (start, length).
    fn span(&mut self, n: usize) -> Result<(u32, u32)> {
        let start = self.pos as u32;
        self.take(n)?;
        Ok((start, n as u32))
    }

    /// A str node of `n` UTF-8 bytes of the input.
    fn utf8(&mut self, n: usize) -> Result<u32> {
        let (start, len) = self.span(n)?;
        let bytes = &self.p.data[start as usize..(start + len) as usize];
        if std::str::from_utf8(bytes).is_err() {
            return Err(self.fail("a string that is not UTF-8"));
        }
        Ok(self.p.nodes.push(Node::Str(start, len)))
    }

    /// A str node of `n` bytes read as Latin-1 (Python 2's str).
    fn latin1(&mut self, n: usize) -> Result<u32> {
        let (start, len) = self.span(n)?;
        let bytes = &self.p.data[start as usize..(start + len) as usize];
        if bytes.is_ascii() {
            return Ok(self.p.nodes.push(Node::Str(start, len)));
        }
        let s: String = bytes.iter().map(|&b| b as char).collect();
        let i = self.p.texts.push(s);
        Ok(self.p.nodes.push(Node::Text(i)))
    }

    /// A GLOBAL line: a str node of the bytes up to the newline.
    fn line(&mut self) -> Result<u32> {
        let rest = &self.p.data[self.pos..];
        let max = 256.min(rest.len());
        let Some(nl) = rest[..max].iter().position(|&b| b == b'\n') else {
            return Err(self.fail("a GLOBAL line without a newline in its first 256 bytes"));
        };
        let id = self
            .utf8(nl)
            .map_err(|_| self.fail("a GLOBAL line that is not UTF-8"))?;
        self.pos += 1;
        Ok(id)
    }

    fn push(&mut self, id: u32) -> Result<()> {
        if self.stack.len() >= self.limits.max_stack {
            return Err(self.fail(format_args!(
                "more than {} values on the stack",
                self.limits.max_stack
            )));
        }
        self.stack.push(id);
        Ok(())
    }

    fn push_node(&mut self, n: Node) -> Result<()> {
        let id = self.p.nodes.push(n);
        self.push(id)
    }

    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn pop(&mut self) -> Result<u32> {
        if self.stack.len() <= self.floor() {
            return Err(self.fail("the stack is empty"));
        }
        Ok(self.stack.pop().unwrap())
    }

    fn top(&self) -> Result<u32> {
        if self.stack.len() <= self.floor() {
            return Err(self.fail("the stack is empty"));
        }
        Ok(*self.stack.last().unwrap())
    }

    /// The values above the last MARK, removed with it.
    fn pop_mark(&mut self) -> Result<Vec<u32>> {
        let Some(mark) = self.marks.pop() else {
            return Err(self.fail("no MARK before this opcode"));
        };
        let mut parts = Vec::with_capacity(self.stack.len() - mark);
        parts.extend(self.stack.drain(mark..));
        Ok(parts)
    }

    /// Appends `parts` to the vector in `*slot`, made if it is [`NO`].
    fn extend_vec(&mut self, slot: u32, parts: &[u32]) -> u32 {
        if parts.is_empty() {
            return slot;
        }
        if slot == NO {
            return self.p.vecs.push(parts.to_vec());
        }
        self.p.vecs.get_mut(slot).extend_from_slice(parts);
        slot
    }

    /// APPEND(S), SETITEM(S), ADDITEMS (`op`, in messages): `parts` added
    /// to the container on top of the stack (a list, dict or set, or a
    /// call's result: list or dict items).
    fn extend_top(&mut self, parts: &[u32], add: Add, op: &str) -> Result<()> {
        if add == Add::Items && parts.len() % 2 != 0 {
            return Err(self.fail(format_args!("{op} with an odd number of values")));
        }
        let top = self.top()?;
        let node = *self.p.nodes.get(top);
        let ok = match (node, add) {
            (Node::List(v), Add::List) => {
                let v = self.extend_vec(v, parts);
                *self.p.nodes.get_mut(top) = Node::List(v);
                true
            }
            (Node::Dict(v), Add::Items) => {
                let v = self.extend_vec(v, parts);
                *self.p.nodes.get_mut(top) = Node::Dict(v);
                true
            }
            (Node::Set(v), Add::Set) => {
                let v = self.extend_vec(v, parts);
                *self.p.nodes.get_mut(top) = Node::Set(v);
                true
            }
            (Node::Call(c), Add::List) => {
                let rec = *self.p.calls.get(c);
                self.p.calls.get_mut(c).list = self.extend_vec(rec.list, parts);
                true
            }
            (Node::Call(c), Add::Items) => {
                let rec = *self.p.calls.get(c);
                self.p.calls.get_mut(c).items = self.extend_vec(rec.items, parts);
                true
            }
            _ => false,
        };
        if !ok {
            let what = self.p.val(top).describe();
            return Err(self.fail(format_args!("{op} on {what}")));
        }
        Ok(())
    }

    fn memo_put(&mut self, index: u32) -> Result<()> {
        if index >= self.limits.max_memo {
            return Err(self.fail(format_args!(
                "memo index {index} is past the limit {}",
                self.limits.max_memo
            )));
        }
        let top = self.top()?;
        let fresh = if index < self.dense_memo_limit {
            let i = index as usize;
            if self.memo.len() <= i {
                self.memo.resize(i + 1, NO);
            }
            std::mem::replace(&mut self.memo[i], top) == NO
        } else {
            self.sparse_memo.insert(index, top).is_none()
        };
        self.memo_count += fresh as u32;
        Ok(())
    }

    fn memo_get(&mut self, index: u32) -> Result<()> {
        let id = if index < self.dense_memo_limit {
            self.memo.get(index as usize).copied().unwrap_or(NO)
        } else {
            self.sparse_memo.get(&index).copied().unwrap_or(NO)
        };
        if id == NO {
            return Err(self.fail(format_args!("memo index {index} was never stored")));
        }
        self.push(id)
    }

    fn global(&mut self, module: u32, name: u32) -> Result<()> {
        let (m, n) = (self.p.val(module), self.p.val(name));
        let (Some(m), Some(n)) = (m.as_str(), n.as_str()) else {
            return Err(self.fail("STACK_GLOBAL of values that are not strings"));
        };
        if !(self.allow)(m, n) {
            return Err(self.fail(format_args!(
                "global {m}.{n} is not allowed in a tensor file"
            )));
        }
        self.push_node(Node::Global(module, name))
    }

    /// A tuple node of `parts`.
    fn tuple(&mut self, parts: &[u32]) -> Result<()> {
        match *parts {
            [] => self.push(EMPTY_TUPLE_ID),
            [a] => self.push_node(Node::Tuple1(a)),
            [a, b] => self.push_node(Node::Tuple2(a, b)),
            _ => {
                let start = self.p.kids.len();
                if start + parts.len() > u32::MAX as usize {
                    return Err(self.fail("more than 2^32 tuple elements"));
                }
                self.p.kids.extend_from_slice(parts);
                self.push_node(Node::TupleN(start as u32, parts.len() as u32))
            }
        }
    }

    /// REDUCE, NEWOBJ and NEWOBJ_EX: `callable(*args, **kwargs)`.
    fn call(&mut self, callable: u32, args: u32, kwargs: u32) -> Result<()> {
        if !matches!(self.p.val(args).kind(), super::Kind::Tuple(_)) {
            let what = self.p.val(args).describe();
            return Err(self.fail(format_args!(
                "a call with {what} as arguments: expected a tuple"
            )));
        }
        let callable_kind = self.p.val(callable).kind();
        if !matches!(
            callable_kind,
            super::Kind::Global(..) | super::Kind::PersistentId(_)
        ) {
            let what = self.p.val(callable).describe();
            return Err(self.fail(format_args!(
                "a call of {what}: expected a global (or a persistent id naming one)"
            )));
        }
        if kwargs != NO && !matches!(self.p.val(kwargs).kind(), super::Kind::Dict(_)) {
            let what = self.p.val(kwargs).describe();
            return Err(self.fail(format_args!(
                "NEWOBJ_EX with {what} as keyword arguments: expected a dict"
            )));
        }
        let c = self.p.calls.push(CallRec {
            callable,
            args,
            kwargs,
            items: NO,
            list: NO,
            state: NO,
        });
        self.push_node(Node::Call(c))
    }

    fn build(&mut self) -> Result<()> {
        let state = self.pop()?;
        let top = self.top()?;
        match *self.p.nodes.get(top) {
            Node::Call(c) if self.p.calls.get(c).state == NO => {
                self.p.calls.get_mut(c).state = state;
                Ok(())
            }
            Node::Call(_) => {
                Err(self.fail("a second BUILD on one object (its first state would be dropped)"))
            }
            _ => {
                let what = self.p.val(top).describe();
                Err(self.fail(format_args!("BUILD on {what}")))
            }
        }
    }

    fn int(&mut self, v: i64) -> Result<()> {
        let b = v as u64;
        self.push_node(Node::Int(b as u32, (b >> 32) as u32))
    }

    fn run(&mut self) -> Result<u32> {
        loop {
            self.op_pos = self.pos;
            let op = self.u8().map_err(|_| {
                crate::err!(
                    Format,
                    "pickle: cut short: its {} bytes end before the pickle does",
                    self.p.data.len()
                )
            })?;
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
                STOP => return self.pop(),
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
                DUP => {
                    let top = self.top()?;
                    self.push(top)?
                }
                NONE => self.push(NONE_ID)?,
                NEWTRUE => self.push(TRUE_ID)?,
                NEWFALSE => self.push(FALSE_ID)?,
                BININT => {
                    let v = self.u32()? as i32;
                    self.int(v as i64)?
                }
                BININT1 => {
                    let v = self.u8()?;
                    self.int(v as i64)?
                }
                BININT2 => {
                    let v = self.u16()?;
                    self.int(v as i64)?
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
                    self.int(i64::from_le_bytes(buf))?
                }
                BINFLOAT => {
                    let b = u64::from_be_bytes(self.take(8)?.try_into().unwrap());
                    self.push_node(Node::Float(b as u32, (b >> 32) as u32))?
                }
                SHORT_BINUNICODE | BINUNICODE | BINUNICODE8 => {
                    let n = match op {
                        SHORT_BINUNICODE => self.u8()? as usize,
                        BINUNICODE => self.u32()? as usize,
                        _ => self.len_u64()?,
                    };
                    let id = self.utf8(n)?;
                    self.push(id)?
                }
                SHORT_BINSTRING | BINSTRING => {
                    let n = if op == SHORT_BINSTRING {
                        self.u8()? as usize
                    } else {
                        self.u32()? as usize
                    };
                    let id = self.latin1(n)?;
                    self.push(id)?
                }
                SHORT_BINBYTES | BINBYTES | BINBYTES8 | BYTEARRAY8 => {
                    let n = match op {
                        SHORT_BINBYTES => self.u8()? as usize,
                        BINBYTES => self.u32()? as usize,
                        _ => self.len_u64()?,
                    };
                    let (start, len) = self.span(n)?;
                    self.push_node(Node::Bytes(start, len))?
                }
                EMPTY_LIST => self.push_node(Node::List(NO))?,
                EMPTY_DICT => self.push_node(Node::Dict(NO))?,
                EMPTY_SET => self.push_node(Node::Set(NO))?,
                EMPTY_TUPLE => self.push(EMPTY_TUPLE_ID)?,
                APPEND => {
                    let v = self.pop()?;
                    self.extend_top(&[v], Add::List, "APPEND")?
                }
                APPENDS => {
                    let parts = self.pop_mark()?;
                    self.extend_top(&parts, Add::List, "APPENDS")?
                }
                SETITEM => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.extend_top(&[k, v], Add::Items, "SETITEM")?
                }
                SETITEMS => {
                    let parts = self.pop_mark()?;
                    self.extend_top(&parts, Add::Items, "SETITEMS")?
                }
                ADDITEMS => {
                    let parts = self.pop_mark()?;
                    self.extend_top(&parts, Add::Set, "ADDITEMS")?
                }
                LIST | DICT | FROZENSET => {
                    let parts = self.pop_mark()?;
                    if op == DICT && parts.len() % 2 != 0 {
                        return Err(self.fail("DICT with an odd number of values"));
                    }
                    let v = self.extend_vec(NO, &parts);
                    self.push_node(match op {
                        LIST => Node::List(v),
                        DICT => Node::Dict(v),
                        _ => Node::Set(v),
                    })?
                }
                TUPLE => {
                    let parts = self.pop_mark()?;
                    self.tuple(&parts)?
                }
                TUPLE1 | TUPLE2 | TUPLE3 => {
                    let n = (op - TUPLE1 + 1) as usize;
                    if self.stack.len() < self.floor() + n {
                        return Err(self.fail("the stack is empty"));
                    }
                    let parts = self.stack.split_off(self.stack.len() - n);
                    self.tuple(&parts)?
                }
                BINPUT => {
                    let i = self.u8()? as u32;
                    self.memo_put(i)?
                }
                LONG_BINPUT => {
                    let i = self.u32()?;
                    self.memo_put(i)?
                }
                MEMOIZE => self.memo_put(self.memo_count)?,
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
                    self.global(module, name)?
                }
                REDUCE | NEWOBJ => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    self.call(callable, args, NO)?
                }
                NEWOBJ_EX => {
                    let kwargs = self.pop()?;
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    self.call(callable, args, kwargs)?
                }
                BUILD => self.build()?,
                BINPERSID => {
                    let id = self.pop()?;
                    self.push_node(Node::PersistentId(id))?
                }
                other => {
                    return Err(self.fail(format_args!("unknown or refused opcode 0x{other:02x}")));
                }
            }
        }
    }
}
