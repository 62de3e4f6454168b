//! The reductions: sum (in c10's opmath type) and the NaN-propagating
//! amax, their element types, identities and folds.

use super::pairwise::{lanes_op, pairwise, Reducer};
use crate::kernels::elem::{Bool, Complex, Elem};
use crate::kernels::ops::{Arith, Max};
use half::{bf16, f16};

/// The accumulation type of a sum of `Self` elements.
pub trait SumAcc: Elem {
    /// Long for bool and integers, float for half types and float, ...
    type Acc: Elem + Arith;
    /// Converts one element to the accumulator type.
    fn widen(self) -> Self::Acc;
}

macro_rules! sum_acc {
    ($($t:ty => $acc:ty, |$v:ident| $e:expr;)*) => {$(
        impl SumAcc for $t {
            type Acc = $acc;
            #[inline(always)]
            fn widen(self) -> $acc {
                let $v = self;
                $e
            }
        }
    )*};
}

sum_acc! {
    Bool => i64, |v| (v.0 != 0) as i64;
    u8 => i64, |v| v as i64;
    i8 => i64, |v| v as i64;
    i16 => i64, |v| v as i64;
    i32 => i64, |v| v as i64;
    i64 => i64, |v| v;
    u16 => i64, |v| v as i64;
    u32 => i64, |v| v as i64;
    u64 => i64, |v| v as i64;
    f16 => f32, |v| v.to_f32();
    bf16 => f32, |v| v.to_f32();
    f32 => f32, |v| v;
    f64 => f64, |v| v;
    Complex<f16> => Complex<f32>, |v| Complex::new(v.re.to_f32(), v.im.to_f32());
    Complex<bf16> => Complex<f32>, |v| Complex::new(v.re.to_f32(), v.im.to_f32());
    Complex<f32> => Complex<f32>, |v| v;
    Complex<f64> => Complex<f64>, |v| v;
}

/// Sum of `T` elements.
pub(super) struct Sum<T>(std::marker::PhantomData<T>);

impl<T: SumAcc> Reducer for Sum<T> {
    type In = T;
    type Acc = T::Acc;
    const IS_SUM: bool = true;
    #[inline(always)]
    fn identity() -> T::Acc {
        <T::Acc as Arith>::ZERO
    }
    #[inline(always)]
    fn combine(a: T::Acc, b: T::Acc) -> T::Acc {
        a.add(b)
    }
    #[inline(always)]
    fn lift(x: T) -> T::Acc {
        x.widen()
    }
    #[inline(always)]
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> T::Acc {
        // SAFETY: reduce_run's contract (a run of n readable elements) is
        // pairwise's.
        unsafe { pairwise::<Self>(p, stride, n, |a, b| a.add(b)) }
    }
}

/// Maximum of `T` elements, NaN propagating.
pub(super) struct AMax<T>(std::marker::PhantomData<T>);

impl<T: Elem> Reducer for AMax<T>
where
    T::Op: Max,
{
    type In = T;
    type Acc = T;
    const IS_SUM: bool = false;
    #[inline(always)]
    fn identity() -> T {
        T::from_op(<T::Op as Max>::LOWEST)
    }
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        T::from_op(a.to_op().max_nan(b.to_op()))
    }
    #[inline(always)]
    fn lift(x: T) -> T {
        x
    }
    #[inline(always)]
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> T {
        // Lanes hold op math values: compare in f32 for half types.
        // SAFETY: the caller's run of n readable elements, n >= 1 (amax
        // refuses a reduced dim of size 0 before any run), is what
        // lanes_op requires.
        T::from_op(unsafe { lanes_op::<T>(p, stride, n) })
    }
}
