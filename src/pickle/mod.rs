//! tessera's own pickle module: a writer and a restricted reader of
//! Python's pickle format, enough for tensor files (torch.save's
//! `data.pkl`) and for other plain-data pickles (memory snapshots).
//!
//! - [`write`] emits the opcodes of the protocol asked for (2 by default,
//!   as torch.save; bytes need 3 or later) from a [`Value`] tree (None,
//!   bools, ints, floats, strings, bytes, lists, tuples, dicts, globals,
//!   calls with the items and state pickle adds to their result,
//!   persistent ids, and memo puts and gets).
//! - [`parse`] is a restricted machine that reads a pickle into a
//!   [`Pickle`]: an arena with one node per value built, walked through
//!   [`Val`] handles (`kind()` gives a [`Kind`]). A value referred to
//!   twice (the memo, DUP) is one node reached twice, and a container
//!   filled after it was memoized is seen full through every reference,
//!   as in Python. A global is accepted only when the caller's allowlist
//!   names it (anything else, `os.system` included, is a `Format` error
//!   naming it); nothing is ever called: a call stays a [`Call`] for the
//!   caller to interpret. The stack, the nested MARKs and the memo index
//!   are bounded by [`Limits`]; the memory a pickle makes the reader hold
//!   is at most [`Limits::bound`] of its length (1 MiB + 32 bytes per
//!   input byte) by construction (12-byte nodes in chunks, 4-byte ids,
//!   strings left in the input). A hostile pickle is an error, never a
//!   crash or an unbounded allocation.
//! - Walking an arena can meet a container that holds itself (Python's
//!   pickle can build one) or a value reached many times: a walker keeps
//!   a depth limit and counts what it visits. [`Val::to_value`] (and
//!   [`read`], which uses it) does.
//!
//! Opcodes read: protocols 2-5's binary opcodes (PROTO, FRAME, STOP,
//! MARK, POP, POP_MARK, DUP, NONE, NEWTRUE / NEWFALSE, BININT / BININT1 /
//! BININT2, LONG1, BINFLOAT, SHORT_BINUNICODE / BINUNICODE / BINUNICODE8,
//! SHORT_BINBYTES / BINBYTES / BINBYTES8 / BYTEARRAY8, SHORT_BINSTRING /
//! BINSTRING (Python 2's str, read as Latin-1), EMPTY_LIST / APPEND /
//! APPENDS / LIST, EMPTY_TUPLE / TUPLE / TUPLE1-3, EMPTY_DICT / DICT /
//! SETITEM / SETITEMS, EMPTY_SET / ADDITEMS / FROZENSET, BINPUT /
//! LONG_BINPUT / MEMOIZE, BINGET / LONG_BINGET, GLOBAL / STACK_GLOBAL,
//! REDUCE, NEWOBJ, NEWOBJ_EX, BUILD, BINPERSID). Text-mode opcodes (INT,
//! STRING, PUT, ...), ints of more than 8 bytes and out-of-band buffers
//! are refused.

mod arena;
mod limits;
mod opcodes;
mod reader;
mod value;
mod writer;

pub use arena::{Call, Kind, Pairs, Pickle, Seq, Val};
pub use limits::{Limits, BASE_BYTES, PER_INPUT_BYTE};
pub use reader::{parse, parse_prefix, read};
pub use value::Value;
pub use writer::{write, write_protocol};

#[cfg(test)]
mod tests;
