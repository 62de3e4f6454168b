//! Dtype dispatch: a `match` over the dtype that runs a body with a local
//! type alias bound to the element type (as c10's AT_DISPATCH macros).
//! Dtypes a macro does not list (quantized, bits and sub-byte everywhere,
//! float8 outside the `convert` set) are refused with TSR_ERR_UNSUPPORTED
//! naming the operation and the dtype.

use crate::dtype::DType;
use crate::error::Error;

/// The error for a dtype a kernel does not handle.
pub(crate) fn unsupported(op: &str, dtype: DType) -> Error {
    crate::err!(Unsupported, "{op} is not implemented for dtype {dtype}")
}

/// Selects groups of the dtype table (dtype/table.rs) for a dispatch set
/// and emits one match arm per dtype of them: `DType::X => { type $T =
/// <X's element type>; $body }`, any other dtype returning an Unsupported
/// error from the enclosing function. The sets, by group: `all` = Bool,
/// Int, UInt, Float, Complex; `convert` = all + Float8; `signed` = all
/// without Bool; `floating` = Float, Complex; `real` = Int, UInt, Float.
macro_rules! dispatch_groups {
    ([$set:ident, $dtype:expr, $op:expr, $T:ident, $body:expr]
        Bool { $($bool:tt)* } Int { $($int:tt)* } UInt { $($uint:tt)* }
        Float { $($float:tt)* } Complex { $($complex:tt)* } Float8 { $($float8:tt)* }
        $($storage_only:tt)*) => {
        $crate::kernels::dispatch::dispatch_groups!(@$set [$dtype, $op, $T, $body]
            [$($bool)*] [$($int)* $($uint)*] [$($float)*] [$($complex)*] [$($float8)*])
    };
    (@all $args:tt [$($b:tt)*] [$($i:tt)*] [$($f:tt)*] [$($c:tt)*] $f8:tt) => {
        $crate::kernels::dispatch::dispatch_arms!($args $($b)* $($i)* $($f)* $($c)*)
    };
    (@convert $args:tt [$($b:tt)*] [$($i:tt)*] [$($f:tt)*] [$($c:tt)*] [$($f8:tt)*]) => {
        $crate::kernels::dispatch::dispatch_arms!($args $($b)* $($i)* $($f)* $($c)* $($f8)*)
    };
    (@signed $args:tt $b:tt [$($i:tt)*] [$($f:tt)*] [$($c:tt)*] $f8:tt) => {
        $crate::kernels::dispatch::dispatch_arms!($args $($i)* $($f)* $($c)*)
    };
    (@floating $args:tt $b:tt $i:tt [$($f:tt)*] [$($c:tt)*] $f8:tt) => {
        $crate::kernels::dispatch::dispatch_arms!($args $($f)* $($c)*)
    };
    (@real $args:tt $b:tt [$($i:tt)*] [$($f:tt)*] $c:tt $f8:tt) => {
        $crate::kernels::dispatch::dispatch_arms!($args $($i)* $($f)*)
    };
}

/// The match of a dispatch set: one arm per table row given.
macro_rules! dispatch_arms {
    ([$dtype:expr, $op:expr, $T:ident, $body:expr]
        $( ($variant:ident, $number:literal, $name:literal, $size:literal, $sign:ident,
            [$($elem:tt)*], $($formats:tt)*) )*) => {{
        match $dtype {
            $(
                $crate::dtype::DType::$variant => {
                    #[allow(unused_imports)]
                    use $crate::kernels::elem;
                    #[allow(dead_code)]
                    type $T = $($elem)*;
                    $body
                }
            )*
            #[allow(unreachable_patterns)]
            other => return Err($crate::kernels::dispatch::unsupported($op, other)),
        }
    }};
}

/// Runs `$body` with `$T` bound to the element type of `$dtype` when the
/// dtype is in dispatch set `$set` (dispatch_groups lists the sets: `all`,
/// `convert`, `signed`, `floating`, `real`); any other dtype returns an
/// Unsupported error naming `$op` from the enclosing function.
///
/// ```ignore
/// dispatch!(real, dtype, "amax", T => reduce_into::<Pick<T, true>>(a, &out, &mask))?;
/// ```
macro_rules! dispatch {
    ($set:ident, $dtype:expr, $op:expr, $T:ident => $body:expr) => {
        $crate::dtype::table::dtype_table!(
            [$crate::kernels::dispatch::dispatch_groups],
            $set,
            $dtype,
            $op,
            $T,
            $body
        )
    };
}

pub(crate) use {dispatch, dispatch_arms, dispatch_groups};

/// Runs `$body` with `$T` bound to a plain type of `$itemsize` bytes (u8,
/// u16, u32, u64, or a 16-byte Complex<f64>), for code that moves elements
/// without looking at their values; every cast of such a type to itself is
/// a bit-exact move.
macro_rules! dispatch_width {
    ($itemsize:expr, $T:ident => $body:expr) => {
        $crate::kernels::dispatch::dispatch_width!(@arms $itemsize, $T, $body;
            1 => u8, 2 => u16, 4 => u32, 8 => u64,
            16 => $crate::kernels::elem::Complex<f64>)
    };
    (@arms $itemsize:expr, $T:ident, $body:expr; $($width:literal => $plain:ty),*) => {{
        match $itemsize {
            $(
                $width => {
                    type $T = $plain;
                    $body
                }
            )*
            other => unreachable!("no dtype has itemsize {other}"),
        }
    }};
}

pub(crate) use dispatch_width;
