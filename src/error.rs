//! Errors of the safe core.
//!
//! Every fallible operation returns [`Result`]. An [`Error`] carries a kind
//! (mapped one to one onto a C status code by the FFI layer) and a message in
//! c10's style: it names the bad value and what was expected. The FFI layer
//! prefixes the name of the exported function, so a message reaching C reads
//! "tsr_tensor_view: shape [3, 5] is invalid for input of size 16".

use std::fmt;

/// What went wrong, coarse enough to branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An argument has a value outside what the operation accepts.
    InvalidArgument,
    /// A required pointer was NULL (only produced at the C boundary).
    NullPointer,
    /// An allocation failed or its size cannot be represented.
    OutOfMemory,
    /// Sizes, strides or dims do not fit together.
    Shape,
    /// A dtype is not accepted, or two dtypes do not go together.
    DType,
    /// A device is not accepted, unavailable, or two devices differ.
    Device,
    /// Operands overlap in memory in a way the operation refuses.
    Overlap,
    /// A storage was asked to resize but is not resizable.
    NotResizable,
    /// A valid request that this build does not implement.
    Unsupported,
    /// A bug in tessera (a broken invariant, or a caught panic).
    Internal,
    /// A handle whose strong count already reached zero was used.
    DeadObject,
    /// An integer division by zero.
    ZeroDivision,
    /// A write into read-only memory (a read-only storage or tensor).
    ReadOnly,
    /// A file or shared-memory operation failed (path and OS reason in the
    /// message).
    Io,
    /// A malformed, truncated or refused file or buffer.
    Format,
    /// The host cancelled the operation (a load's progress callback).
    Cancelled,
}

/// An error with its kind and message.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// Builds an error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// Builds an error of `kind` from format arguments, out of line and
    /// marked cold: what [`err!`] expands to, so that the formatting code
    /// of every error site stays out of the hot paths' instruction stream
    /// (the compiler lays the blocks that call it at the function's end).
    #[cold]
    #[inline(never)]
    pub fn from_args(kind: ErrorKind, args: fmt::Arguments<'_>) -> Self {
        Error::new(kind, fmt::format(args))
    }

    /// The kind of the error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the exported function's name.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Prefixes the message with context, keeping the kind: used when an
    /// operation reports the failure of a step it delegated.
    pub fn context(mut self, prefix: impl fmt::Display) -> Self {
        self.message = format!("{prefix}: {}", self.message);
        self
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

/// The result type of the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error`]: `err!(Shape, "size {} is invalid", n)`.
#[macro_export]
macro_rules! err {
    ($kind:ident, $($arg:tt)+) => {
        $crate::error::Error::from_args($crate::error::ErrorKind::$kind, format_args!($($arg)+))
    };
}

/// Returns early with an [`Error`]: `bail!(Shape, "size {} is invalid", n)`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)+) => {
        return Err($crate::err!($kind, $($arg)+))
    };
}

/// Returns early with an [`Error`] unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $kind:ident, $($arg:tt)+) => {
        if !$cond {
            $crate::bail!($kind, $($arg)+);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macros_build_kind_and_message() {
        let e = err!(Shape, "shape {:?} is invalid", [3, 5]);
        assert_eq!(e.kind(), ErrorKind::Shape);
        assert_eq!(e.message(), "shape [3, 5] is invalid");
        assert_eq!(e.to_string(), "shape [3, 5] is invalid");
        let e = e.context("view");
        assert_eq!(e.message(), "view: shape [3, 5] is invalid");
        assert_eq!(e.kind(), ErrorKind::Shape);
    }

    fn checked(x: i64) -> Result<i64> {
        ensure!(
            x >= 0,
            InvalidArgument,
            "expected a non-negative value, got {x}"
        );
        Ok(x)
    }

    #[test]
    fn ensure_returns_early() {
        assert_eq!(checked(3).unwrap(), 3);
        let e = checked(-1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("-1"));
    }
}
