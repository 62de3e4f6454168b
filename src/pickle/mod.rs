//! tessera's own pickle module: a writer and a restricted reader of
//! Python's pickle format, enough for tensor files (torch.save's
//! `data.pkl`) and for other plain-data pickles (memory snapshots).
//!
//! Values are a closed tree ([`Value`]): None, bools, ints, floats,
//! strings, bytes, lists, tuples, dicts, references to globals
//! (`module.name`), calls (`callable(*args)` with the dict items and the
//! state pickle adds to the result) and persistent ids (objects stored
//! outside the pickle, such as torch's storages).
//!
//! - [`write`] emits the opcodes of the protocol asked for (2 by default,
//!   as torch.save; bytes need 3 or later). Nothing is memoized: every
//!   value is written where it appears.
//! - [`read`] is a restricted machine: a global is accepted only when the
//!   caller's allowlist names it (anything else, `os.system` included, is
//!   a `Format` error naming it); the stack, the mark stack, the memo,
//!   the nesting depth and the bytes of the values built (copies by DUP
//!   and the memo included, in full) are bounded by [`Limits`], the bytes
//!   by a multiple of the input's length ([`Limits::bound`]). A hostile pickle is an
//!   error, never a crash or an unbounded allocation. Nothing is ever
//!   called: a call stays a [`Value::Reduce`] for the caller to interpret.
//!
//! Opcodes read: protocols 0-5's binary opcodes (PROTO, FRAME, STOP,
//! MARK, POP, POP_MARK, DUP, NONE, NEWTRUE / NEWFALSE, BININT / BININT1 /
//! BININT2, LONG1, BINFLOAT, SHORT_BINUNICODE / BINUNICODE / BINUNICODE8,
//! SHORT_BINBYTES / BINBYTES / BINBYTES8, SHORT_BINSTRING / BINSTRING,
//! EMPTY_LIST / APPEND / APPENDS / LIST, EMPTY_TUPLE / TUPLE / TUPLE1-3,
//! EMPTY_DICT / DICT / SETITEM / SETITEMS, BINPUT / LONG_BINPUT /
//! MEMOIZE, BINGET / LONG_BINGET, GLOBAL / STACK_GLOBAL, REDUCE, BUILD,
//! NEWOBJ, BINPERSID). Text-mode opcodes (INT, STRING, PUT, ...) are
//! refused.

mod limits;
mod opcodes;
mod reader;
mod value;
mod writer;

pub use limits::{Limits, BASE_BYTES, PER_INPUT_BYTE};
pub use reader::{read, read_measured, read_prefix};
pub use value::Value;
pub use writer::{write, write_protocol};

#[cfg(test)]
mod tests;
