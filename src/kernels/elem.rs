//! The element types the kernels are generated for, one Rust type per
//! dtype, and the conversions between them.
//!
//! - [`Bool`] is a byte read as "non-zero is true", so any byte pattern in
//!   a bool tensor is a valid value (Rust's `bool` would make other bytes
//!   undefined behaviour).
//! - [`Complex`] is a `(re, im)` pair of a real type; `Complex<f16>` is
//!   ComplexHalf, `Complex<bf16>` BComplex32.
//! - Conversions are C-like, as c10's `static_cast`: integers wrap,
//!   floating to integer truncates toward zero (out of range saturates,
//!   NaN gives 0, which is Rust's `as`), complex to real keeps the real
//!   part, anything to bool is "non-zero", and half / bfloat16 round to
//!   nearest even through the `half` crate (integers go through `f32`
//!   first, as c10's `Half(float)` constructor does).
//!
//! - The float8 types convert as c10's do, through f32: decoding is exact,
//!   anything else becomes an f32 first (integers and f64 round to f32,
//!   half types widen) and is then encoded with the format's rounding
//!   (`dtype::float8`); to integers and bool they go as their f32 value.
//!
//! Arithmetic runs in each type's "op math" type ([`Elem::Op`]): `f32`
//! for half and bfloat16, `Complex<f32>` for ComplexHalf and BComplex32, `bool` for
//! Bool, the type itself otherwise (c10's `opmath_type`).

use super::ops::Arith;
pub use super::real::Real;
pub use super::value_types::{
    Bool, Complex, Float8E4M3Fn, Float8E4M3Fnuz, Float8E5M2, Float8E5M2Fnuz, Float8E8M0Fnu,
};
use crate::dtype::float8::Float8Format;
use crate::dtype::{convert::scalar_to_bytes, DType, Scalar};
use crate::error::Result;
use half::{bf16, f16};

/// One element type of a dtype the kernels support.
///
/// # Safety
/// An implementation promises that `Self` is the in-memory element of
/// [`Elem::DTYPE`]: `size_of::<Self>()` is that dtype's itemsize, every
/// bit pattern of that size is a valid `Self`, and no other `Elem` type
/// has the same `DTYPE`. The kernels rely on it: they read and write a
/// tensor's memory of that dtype as `Self`, and after comparing `DTYPE`s
/// (constants, so the comparison costs nothing) they cast a run of `Self`
/// to the concrete type the dtype names, or `transmute_copy` a value
/// (cast.rs, reduce.rs). An unsafe trait rather than a `TypeId`
/// comparison at each cast: the contract also covers the reads of raw
/// tensor memory as `Self`, which a `TypeId` check would not, and the
/// constant `DTYPE` matches also pick the SIMD paths.
pub unsafe trait Elem: Copy + Send + Sync + Default + 'static {
    /// The dtype this type stores.
    const DTYPE: DType;
    /// The type arithmetic runs in (c10's opmath type).
    type Op: Arith;
    /// Widens to the op math type.
    fn to_op(self) -> Self::Op;
    /// Narrows from the op math type (rounding to nearest even).
    fn from_op(v: Self::Op) -> Self;
    /// Converts to another element type (c10's static_cast rules).
    fn cast<D: Elem>(self) -> D;
    /// The value of a bool in this type (0 or 1).
    fn from_bool(b: bool) -> Self;
    /// A real value converted to this type.
    fn from_real<R: Real>(r: R) -> Self;
    /// A complex value converted to this type.
    fn from_complex<R: Real>(re: R, im: R) -> Self;

    /// Widens a contiguous run to op math (half types override this with
    /// the `half` crate's vectorized slice conversion).
    #[inline(always)]
    fn load_op(src: &[Self], dst: &mut [Self::Op]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.to_op();
        }
    }

    /// Narrows a contiguous run from op math.
    #[inline(always)]
    fn store_op(src: &[Self::Op], dst: &mut [Self]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = Self::from_op(*s);
        }
    }

    /// A scalar converted to this type with the rules of `fill_`.
    fn from_scalar(value: Scalar) -> Result<Self> {
        let bytes = scalar_to_bytes(value, Self::DTYPE)?;
        debug_assert!(std::mem::size_of::<Self>() <= bytes.len());
        // SAFETY: `bytes` holds one element of DTYPE, which has the size of
        // Self, and every bit pattern of that size is a valid Self.
        Ok(unsafe { (bytes.as_ptr() as *const Self).read_unaligned() })
    }
}

// SAFETY: Bool is one byte (repr(transparent) over u8), every byte is a
// valid Bool, and it is the only Elem type of DType::Bool.
unsafe impl Elem for Bool {
    const DTYPE: DType = DType::Bool;
    type Op = bool;
    #[inline(always)]
    fn to_op(self) -> bool {
        self.0 != 0
    }
    #[inline(always)]
    fn from_op(v: bool) -> Self {
        Bool(v as u8)
    }
    #[inline(always)]
    fn cast<D: Elem>(self) -> D {
        D::from_bool(self.0 != 0)
    }
    #[inline(always)]
    fn from_bool(b: bool) -> Self {
        Bool(b as u8)
    }
    #[inline(always)]
    fn from_real<R: Real>(r: R) -> Self {
        Bool(r.nonzero() as u8)
    }
    #[inline(always)]
    fn from_complex<R: Real>(re: R, im: R) -> Self {
        Bool((re.nonzero() || im.nonzero()) as u8)
    }
}

/// `Elem` for a real type; `$op` is its op math type.
macro_rules! elem_real {
    ($t:ty, $dtype:ident, $op:ty) => {
        // SAFETY: $t is DType::$dtype's element (a primitive of its itemsize,
        // any bit pattern valid), listed once in the invocations below.
        unsafe impl Elem for $t {
            const DTYPE: DType = DType::$dtype;
            type Op = $op;
            #[inline(always)]
            fn to_op(self) -> $op {
                self.to::<$op>()
            }
            #[inline(always)]
            fn from_op(v: $op) -> Self {
                v.to::<$t>()
            }
            #[inline(always)]
            fn cast<D: Elem>(self) -> D {
                D::from_real(self)
            }
            #[inline(always)]
            fn from_bool(b: bool) -> Self {
                <$t as Real>::from_u8(b as u8)
            }
            #[inline(always)]
            fn from_real<R: Real>(r: R) -> Self {
                r.to::<$t>()
            }
            #[inline(always)]
            fn from_complex<R: Real>(re: R, _im: R) -> Self {
                re.to::<$t>()
            }
        }
    };
}

elem_real!(u8, Byte, u8);
elem_real!(i8, Char, i8);
elem_real!(i16, Short, i16);
elem_real!(i32, Int, i32);
elem_real!(i64, Long, i64);
elem_real!(u16, UInt16, u16);
elem_real!(u32, UInt32, u32);
elem_real!(u64, UInt64, u64);
elem_real!(f32, Float, f32);
elem_real!(f64, Double, f64);

/// `Elem` for a half type: op math in f32, runs widened and narrowed with
/// the `half` crate's slice conversions.
macro_rules! elem_half {
    ($t:ty, $dtype:ident) => {
        // SAFETY: $t (the half crate's 16-bit type, repr(transparent) over
        // u16) is DType::$dtype's element: its itemsize, any bit pattern
        // valid, listed once in the invocations below.
        unsafe impl Elem for $t {
            const DTYPE: DType = DType::$dtype;
            type Op = f32;
            #[inline(always)]
            fn to_op(self) -> f32 {
                self.to_f32()
            }
            #[inline(always)]
            fn from_op(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            #[inline(always)]
            fn cast<D: Elem>(self) -> D {
                D::from_real(self)
            }
            #[inline(always)]
            fn from_bool(b: bool) -> Self {
                <$t as Real>::from_u8(b as u8)
            }
            #[inline(always)]
            fn from_real<R: Real>(r: R) -> Self {
                r.to::<$t>()
            }
            #[inline(always)]
            fn from_complex<R: Real>(re: R, _im: R) -> Self {
                re.to::<$t>()
            }
            #[inline(always)]
            fn load_op(src: &[Self], dst: &mut [f32]) {
                use half::slice::HalfFloatSliceExt;
                src.convert_to_f32_slice(&mut dst[..src.len()]);
            }
            #[inline(always)]
            fn store_op(src: &[f32], dst: &mut [Self]) {
                use half::slice::HalfFloatSliceExt;
                let n = dst.len();
                dst.convert_from_f32_slice(&src[..n]);
            }
        }
    };
}

elem_half!(f16, Half);
elem_half!(bf16, BFloat16);

/// `Real` and `Elem` for a float8 type: its value is its f32 decoding;
/// every other type reaches it through f32 (c10's float8 constructors take
/// a float), and it reaches every other type as that f32. Op math is f32.
macro_rules! elem_float8 {
    ($t:ident, $dtype:ident, $format:ident) => {
        impl $t {
            /// The element's value (exact).
            #[inline(always)]
            pub fn value(self) -> f32 {
                Float8Format::$format.decode(self.0)
            }
            /// The element nearest to `v` (c10's rounding, NaN and overflow
            /// rules).
            #[inline(always)]
            pub const fn new(v: f32) -> Self {
                $t(Float8Format::$format.encode(v))
            }
        }

        impl Real for $t {
            /// The encoding of 0.0 (for Float8_e8m0fnu, which has no zero,
            /// its smallest value, as c10 encodes 0.0).
            const ZERO: Self = $t::new(0.0);
            #[inline(always)]
            fn from_u8(v: u8) -> Self {
                $t::new(v as f32)
            }
            #[inline(always)]
            fn from_i8(v: i8) -> Self {
                $t::new(v as f32)
            }
            #[inline(always)]
            fn from_i16(v: i16) -> Self {
                $t::new(v as f32)
            }
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                $t::new(v as f32)
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                $t::new(v as f32)
            }
            #[inline(always)]
            fn from_u16(v: u16) -> Self {
                $t::new(v as f32)
            }
            #[inline(always)]
            fn from_u32(v: u32) -> Self {
                $t::new(v as f32)
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                $t::new(v as f32)
            }
            #[inline(always)]
            fn from_f16(v: f16) -> Self {
                $t::new(v.to_f32())
            }
            #[inline(always)]
            fn from_bf16(v: bf16) -> Self {
                $t::new(v.to_f32())
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                $t::new(v)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                $t::new(v as f32)
            }
            #[inline(always)]
            fn to<D: Real>(self) -> D {
                D::from_float8_value(self.value())
            }
            #[inline(always)]
            fn nonzero(self) -> bool {
                // NaN is non-zero, as c10's conversion to bool through float.
                self.value() != 0.0
            }
        }

        // SAFETY: $t is a repr(transparent) byte, DType::$dtype's one-byte
        // element; every byte is a valid value; listed once below.
        unsafe impl Elem for $t {
            const DTYPE: DType = DType::$dtype;
            type Op = f32;
            #[inline(always)]
            fn to_op(self) -> f32 {
                self.value()
            }
            #[inline(always)]
            fn from_op(v: f32) -> Self {
                $t::new(v)
            }
            #[inline(always)]
            fn cast<D: Elem>(self) -> D {
                D::from_real(self)
            }
            #[inline(always)]
            fn from_bool(b: bool) -> Self {
                $t::new(b as u8 as f32)
            }
            #[inline(always)]
            fn from_real<R: Real>(r: R) -> Self {
                r.to::<$t>()
            }
            #[inline(always)]
            fn from_complex<R: Real>(re: R, _im: R) -> Self {
                re.to::<$t>()
            }
        }
    };
}

elem_float8!(Float8E5M2, Float8E5M2, E5M2);
elem_float8!(Float8E4M3Fn, Float8E4M3Fn, E4M3Fn);
elem_float8!(Float8E5M2Fnuz, Float8E5M2Fnuz, E5M2Fnuz);
elem_float8!(Float8E4M3Fnuz, Float8E4M3Fnuz, E4M3Fnuz);
elem_float8!(Float8E8M0Fnu, Float8E8M0Fnu, E8M0Fnu);

/// `Elem` for a complex type of components `$r`, op math `Complex<$op>`.
macro_rules! elem_complex {
    ($r:ty, $dtype:ident, $op:ty) => {
        // SAFETY: Complex<$r> is repr(C) (re, im), twice the itemsize of
        // $r, any bit pattern valid, the only Elem type of DType::$dtype.
        unsafe impl Elem for Complex<$r> {
            const DTYPE: DType = DType::$dtype;
            type Op = Complex<$op>;
            #[inline(always)]
            fn to_op(self) -> Complex<$op> {
                Complex::new(self.re.to::<$op>(), self.im.to::<$op>())
            }
            #[inline(always)]
            fn from_op(v: Complex<$op>) -> Self {
                Complex::new(v.re.to::<$r>(), v.im.to::<$r>())
            }
            #[inline(always)]
            fn cast<D: Elem>(self) -> D {
                D::from_complex(self.re, self.im)
            }
            #[inline(always)]
            fn from_bool(b: bool) -> Self {
                Complex::new(<$r as Real>::from_u8(b as u8), <$r as Real>::ZERO)
            }
            #[inline(always)]
            fn from_real<R: Real>(r: R) -> Self {
                Complex::new(r.to::<$r>(), <$r as Real>::ZERO)
            }
            #[inline(always)]
            fn from_complex<R: Real>(re: R, im: R) -> Self {
                Complex::new(re.to::<$r>(), im.to::<$r>())
            }
        }
    };
}

elem_complex!(f16, ComplexHalf, f32);
elem_complex!(bf16, BComplex32, f32);
elem_complex!(f32, ComplexFloat, f32);
elem_complex!(f64, ComplexDouble, f64);

#[cfg(test)]
mod tests {
    use super::*;

    /// Elem's safety contract, the part a test can see: each type has its
    /// dtype's itemsize, and no two types share a dtype.
    #[test]
    fn each_elem_type_is_its_dtype_element() {
        fn entry<T: Elem>() -> DType {
            assert_eq!(
                std::mem::size_of::<T>(),
                T::DTYPE.itemsize(),
                "{}",
                T::DTYPE
            );
            T::DTYPE
        }
        macro_rules! entries {
            ($($t:ty),*) => { [$(entry::<$t>()),*] };
        }
        let all = entries!(
            Bool,
            u8,
            i8,
            i16,
            i32,
            i64,
            u16,
            u32,
            u64,
            f32,
            f64,
            f16,
            bf16,
            Complex<f16>,
            Complex<bf16>,
            Complex<f32>,
            Complex<f64>,
            Float8E5M2,
            Float8E4M3Fn,
            Float8E5M2Fnuz,
            Float8E4M3Fnuz,
            Float8E8M0Fnu
        );
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b, "two Elem types of one dtype");
            }
        }
    }

    #[test]
    fn casts_follow_c_rules() {
        assert_eq!((-1i64).cast::<u8>(), 255);
        assert_eq!(300i32.cast::<i8>(), 44);
        assert_eq!(2.9f32.cast::<i32>(), 2);
        assert_eq!((-2.9f64).cast::<i64>(), -2);
        assert_eq!(f32::NAN.cast::<Bool>(), Bool(1));
        assert_eq!((-0.0f32).cast::<Bool>(), Bool(0));
        assert_eq!(f16::from_f32(-0.0).cast::<Bool>(), Bool(0));
        assert_eq!(Bool(7).cast::<f32>(), 1.0);
        assert_eq!(Complex::new(1.5f32, 2.0).cast::<i32>(), 1);
        assert_eq!(Complex::new(0.0f64, 2.0).cast::<Bool>(), Bool(1));
        assert_eq!(3u8.cast::<Complex<f64>>(), Complex::new(3.0, 0.0));
        assert_eq!(
            (1.0f64 / 3.0).cast::<f16>(),
            f16::from_f64(1.0 / 3.0),
            "f64 -> f16 goes through half's from_f64"
        );
        assert_eq!(
            f16::from_f32(1.5).cast::<bf16>(),
            bf16::from_f32(1.5),
            "half types convert through f32"
        );
        assert_eq!(u64::MAX.cast::<i64>(), -1);
    }

    #[test]
    fn scalars_convert_like_fill() {
        assert_eq!(i16::from_scalar(Scalar::Int(-2)).unwrap(), -2);
        assert_eq!(
            f16::from_scalar(Scalar::Float(0.1)).unwrap(),
            f16::from_f64(0.1)
        );
        assert_eq!(Bool::from_scalar(Scalar::Float(0.5)).unwrap(), Bool(1));
        assert_eq!(
            Complex::<f32>::from_scalar(Scalar::Complex(1.0, -1.0)).unwrap(),
            Complex::new(1.0, -1.0)
        );
    }
}
