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

/// The float8 element types: the byte as stored, its value given by
/// `dtype::float8` (c10's formats and rounding).
macro_rules! float8_types {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name(pub u8);
    )*};
}

float8_types! {
    /// A Float8_e5m2 element.
    Float8E5M2;
    /// A Float8_e4m3fn element.
    Float8E4M3Fn;
    /// A Float8_e5m2fnuz element.
    Float8E5M2Fnuz;
    /// A Float8_e4m3fnuz element.
    Float8E4M3Fnuz;
    /// A Float8_e8m0fnu element.
    Float8E8M0Fnu;
}
