//! The element types of the dtypes that have no Rust primitive: [`Bool`]
//! (a byte, so any bit pattern is valid) and [`Complex`]. A leaf of
//! kernels/: the element traits (elem.rs) and the arithmetic (ops.rs)
//! both build on these types. Re-exported from `elem`.

/// A bool element: one byte, true when non-zero.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bool(pub u8);

/// A complex element of two `T` components (`re` first, as C99 and c10).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Complex<T> {
    /// Real part.
    pub re: T,
    /// Imaginary part.
    pub im: T,
}

impl<T> Complex<T> {
    /// A complex value from its parts.
    pub const fn new(re: T, im: T) -> Self {
        Complex { re, im }
    }
}
