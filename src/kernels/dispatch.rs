//! Dtype dispatch: a `match` over the dtype that runs a body with a local
//! type alias bound to the element type (as c10's AT_DISPATCH macros).
//! The quantized, bits and sub-byte dtypes, and the float8 types outside
//! `dispatch_convert`, are refused with TSR_ERR_UNSUPPORTED naming the
//! operation and the dtype.

use crate::dtype::DType;
use crate::error::Error;

/// The error for a dtype a kernel does not handle.
pub(crate) fn unsupported(op: &str, dtype: DType) -> Error {
    crate::err!(Unsupported, "{op} is not implemented for dtype {dtype}")
}

/// The common body of the dispatch macros: one match arm per listed
/// `DType variant => element type`, any other dtype returning an
/// Unsupported error from the enclosing function.
macro_rules! dispatch_arms {
    ($dtype:expr, $op:expr, $T:ident => $body:expr; $($variant:ident => $ty:ty),* $(,)?) => {{
        match $dtype {
            $(
                $crate::dtype::DType::$variant => {
                    #[allow(dead_code)]
                    type $T = $ty;
                    $body
                }
            )*
            #[allow(unreachable_patterns)]
            other => return Err($crate::kernels::dispatch::unsupported($op, other)),
        }
    }};
}

/// Runs `$body` with `$T` bound to the element type of `$dtype`, for every
/// dtype with arithmetic (bool, integers, floating and complex types);
/// otherwise returns an Unsupported error naming `$op`.
macro_rules! dispatch_all {
    ($dtype:expr, $op:expr, $T:ident => $body:expr) => {
        $crate::kernels::dispatch::dispatch_arms!($dtype, $op, $T => $body;
            Bool => $crate::kernels::elem::Bool,
            Byte => u8, Char => i8, Short => i16, Int => i32, Long => i64,
            UInt16 => u16, UInt32 => u32, UInt64 => u64,
            Half => half::f16, BFloat16 => half::bf16, Float => f32, Double => f64,
            ComplexHalf => $crate::kernels::elem::Complex<half::f16>,
            BComplex32 => $crate::kernels::elem::Complex<half::bf16>,
            ComplexFloat => $crate::kernels::elem::Complex<f32>,
            ComplexDouble => $crate::kernels::elem::Complex<f64>,
        )
    };
}

/// As `dispatch_all`, plus the float8 types: the dtypes copies convert
/// between (float8 has no arithmetic kernels, as in c10).
macro_rules! dispatch_convert {
    ($dtype:expr, $op:expr, $T:ident => $body:expr) => {
        $crate::kernels::dispatch::dispatch_arms!($dtype, $op, $T => $body;
            Bool => $crate::kernels::elem::Bool,
            Byte => u8, Char => i8, Short => i16, Int => i32, Long => i64,
            UInt16 => u16, UInt32 => u32, UInt64 => u64,
            Half => half::f16, BFloat16 => half::bf16, Float => f32, Double => f64,
            ComplexHalf => $crate::kernels::elem::Complex<half::f16>,
            BComplex32 => $crate::kernels::elem::Complex<half::bf16>,
            ComplexFloat => $crate::kernels::elem::Complex<f32>,
            ComplexDouble => $crate::kernels::elem::Complex<f64>,
            Float8E5M2 => $crate::kernels::elem::Float8E5M2,
            Float8E4M3Fn => $crate::kernels::elem::Float8E4M3Fn,
            Float8E5M2Fnuz => $crate::kernels::elem::Float8E5M2Fnuz,
            Float8E4M3Fnuz => $crate::kernels::elem::Float8E4M3Fnuz,
            Float8E8M0Fnu => $crate::kernels::elem::Float8E8M0Fnu,
        )
    };
}

/// As `dispatch_all`, without Bool (negation, subtraction).
macro_rules! dispatch_signed {
    ($dtype:expr, $op:expr, $T:ident => $body:expr) => {
        $crate::kernels::dispatch::dispatch_arms!($dtype, $op, $T => $body;
            Byte => u8, Char => i8, Short => i16, Int => i32, Long => i64,
            UInt16 => u16, UInt32 => u32, UInt64 => u64,
            Half => half::f16, BFloat16 => half::bf16, Float => f32, Double => f64,
            ComplexHalf => $crate::kernels::elem::Complex<half::f16>,
            BComplex32 => $crate::kernels::elem::Complex<half::bf16>,
            ComplexFloat => $crate::kernels::elem::Complex<f32>,
            ComplexDouble => $crate::kernels::elem::Complex<f64>,
        )
    };
}

/// Floating and complex types (true division).
macro_rules! dispatch_floating {
    ($dtype:expr, $op:expr, $T:ident => $body:expr) => {
        $crate::kernels::dispatch::dispatch_arms!($dtype, $op, $T => $body;
            Half => half::f16, BFloat16 => half::bf16, Float => f32, Double => f64,
            ComplexHalf => $crate::kernels::elem::Complex<half::f16>,
            BComplex32 => $crate::kernels::elem::Complex<half::bf16>,
            ComplexFloat => $crate::kernels::elem::Complex<f32>,
            ComplexDouble => $crate::kernels::elem::Complex<f64>,
        )
    };
}

/// Real types: integers and floating types (no bool, no complex).
macro_rules! dispatch_real {
    ($dtype:expr, $op:expr, $T:ident => $body:expr) => {
        $crate::kernels::dispatch::dispatch_arms!($dtype, $op, $T => $body;
            Byte => u8, Char => i8, Short => i16, Int => i32, Long => i64,
            UInt16 => u16, UInt32 => u32, UInt64 => u64,
            Half => half::f16, BFloat16 => half::bf16, Float => f32, Double => f64,
        )
    };
}

pub(crate) use {
    dispatch_all, dispatch_arms, dispatch_convert, dispatch_floating, dispatch_real,
    dispatch_signed,
};

/// Runs `$body` with `$T` bound to a plain type of `$itemsize` bytes (u8,
/// u16, u32, u64, or a 16-byte Complex<f64>), for code that moves elements
/// without looking at their values; every cast of such a type to itself is
/// a bit-exact move.
macro_rules! dispatch_width {
    ($itemsize:expr, $T:ident => $body:expr) => {{
        match $itemsize {
            1 => {
                type $T = u8;
                $body
            }
            2 => {
                type $T = u16;
                $body
            }
            4 => {
                type $T = u32;
                $body
            }
            8 => {
                type $T = u64;
                $body
            }
            16 => {
                type $T = $crate::kernels::elem::Complex<f64>;
                $body
            }
            other => unreachable!("no dtype has itemsize {other}"),
        }
    }};
}

pub(crate) use dispatch_width;
