//! Real scalar types (integers and floating types, half included) and
//! the C-like conversions between every pair (see elem.rs for the rules).

use half::{bf16, f16};

/// Real scalar types (integers and floating types, half included) with
/// C-like conversions between every pair, by double dispatch: `x.to::<D>()`
/// calls `D::from_<type of x>(x)`.
pub trait Real: Copy + Send + Sync + 'static {
    /// Zero.
    const ZERO: Self;
    /// Converts from u8.
    fn from_u8(v: u8) -> Self;
    /// Converts from i8.
    fn from_i8(v: i8) -> Self;
    /// Converts from i16.
    fn from_i16(v: i16) -> Self;
    /// Converts from i32.
    fn from_i32(v: i32) -> Self;
    /// Converts from i64.
    fn from_i64(v: i64) -> Self;
    /// Converts from u16.
    fn from_u16(v: u16) -> Self;
    /// Converts from u32.
    fn from_u32(v: u32) -> Self;
    /// Converts from u64.
    fn from_u64(v: u64) -> Self;
    /// Converts from f16.
    fn from_f16(v: f16) -> Self;
    /// Converts from bf16.
    fn from_bf16(v: bf16) -> Self;
    /// Converts from f32.
    fn from_f32(v: f32) -> Self;
    /// Converts from f64.
    fn from_f64(v: f64) -> Self;
    /// Converts a float8 type's (exact) f32 value: `from_f32`, except that
    /// NaNs become bfloat16's one NaN (c10's float8 -> BFloat16 drops NaN
    /// payloads and signs, where the `half` crate keeps them).
    #[inline(always)]
    fn from_float8_value(v: f32) -> Self {
        Self::from_f32(v)
    }
    /// Converts to another real type.
    fn to<D: Real>(self) -> D;
    /// Whether the value is non-zero (NaN counts as non-zero).
    fn nonzero(self) -> bool;
}

/// `Real` for a primitive type: `as` conversions; half types through f32.
macro_rules! real_primitive {
    ($t:ty, $from_self:ident) => {
        impl Real for $t {
            const ZERO: Self = 0 as $t;
            #[inline(always)]
            fn from_u8(v: u8) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_i8(v: i8) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_i16(v: i16) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_u16(v: u16) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_u32(v: u32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f16(v: f16) -> Self {
                v.to_f32() as $t
            }
            #[inline(always)]
            fn from_bf16(v: bf16) -> Self {
                v.to_f32() as $t
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to<D: Real>(self) -> D {
                D::$from_self(self)
            }
            #[inline(always)]
            #[allow(clippy::float_cmp)]
            fn nonzero(self) -> bool {
                self != <Self as Real>::ZERO
            }
        }
    };
}

real_primitive!(u8, from_u8);
real_primitive!(i8, from_i8);
real_primitive!(i16, from_i16);
real_primitive!(i32, from_i32);
real_primitive!(i64, from_i64);
real_primitive!(u16, from_u16);
real_primitive!(u32, from_u32);
real_primitive!(u64, from_u64);
real_primitive!(f32, from_f32);
real_primitive!(f64, from_f64);

/// `Real` for a half type: integers and f32 through `from_f32`, f64
/// through `from_f64`, the other half type through f32.
macro_rules! real_half {
    ($t:ty, $from_self:ident, $from_other:ident, $other:ty, $nan:expr) => {
        impl Real for $t {
            const ZERO: Self = <$t>::ZERO;
            #[inline(always)]
            fn from_float8_value(v: f32) -> Self {
                if v.is_nan() {
                    $nan(v)
                } else {
                    <$t>::from_f32(v)
                }
            }
            #[inline(always)]
            fn from_u8(v: u8) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn from_i8(v: i8) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn from_i16(v: i16) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn from_u16(v: u16) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn from_u32(v: u32) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn $from_self(v: $t) -> Self {
                v
            }
            #[inline(always)]
            fn $from_other(v: $other) -> Self {
                <$t>::from_f32(v.to_f32())
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                <$t>::from_f64(v)
            }
            #[inline(always)]
            fn to<D: Real>(self) -> D {
                D::$from_self(self)
            }
            #[inline(always)]
            fn nonzero(self) -> bool {
                // +0 and -0 are zero; NaN is not.
                self.to_bits() & 0x7fff != 0
            }
        }
    };
}

// c10's NaNs: Half keeps the payload as the half crate does, BFloat16 has
// one NaN (0x7FC0, no sign).
real_half!(f16, from_f16, from_bf16, bf16, |v: f32| f16::from_f32(v));
real_half!(bf16, from_bf16, from_f16, f16, |_v: f32| bf16::from_bits(
    0x7FC0
));
