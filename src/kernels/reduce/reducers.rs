//! The reductions: sum and prod (in c10's opmath type) and the
//! NaN-propagating amax and amin, their element types, identities and
//! folds.

use super::pairwise::{pairwise, Reducer, BLOCK, STREAMS};
use super::pick::{pick, pick_identity};
use super::pick_lanes::{pick_run, pick_runs_x4};
use super::reducer::Kind;
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

/// Sum of `T` elements; with SQ, of their squares (the 2-norm's: each
/// widened, then squared, then added, read once with no temporary).
pub(super) struct Sum<T, const SQ: bool = false>(std::marker::PhantomData<T>);

/// The sum of squares of real floating `T` elements, in the sum's
/// accumulator type (float for half and bfloat16).
pub(super) type SumSquares<T> = Sum<T, true>;

impl<T: SumAcc, const SQ: bool> Reducer for Sum<T, SQ> {
    type In = T;
    type Acc = T::Acc;
    const KIND: Kind = if SQ { Kind::SumSquares } else { Kind::Sum };
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
        Self::lift_widened(x.widen())
    }
    #[inline(always)]
    fn lift_widened(v: T::Acc) -> T::Acc {
        if SQ {
            v.mul(v)
        } else {
            v
        }
    }
    #[inline(always)]
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> T::Acc {
        // SAFETY: reduce_run's contract (a run of n readable elements) is
        // pairwise's.
        unsafe { pairwise::<Self>(p, stride, n, |a, b| a.add(b)) }
    }
}

/// Product of `T` elements, in the sum's accumulator type (c10's opmath
/// for floating and complex inputs, Long for bool and integers).
pub(super) struct Prod<T>(std::marker::PhantomData<T>);

impl<T: SumAcc> Reducer for Prod<T> {
    type In = T;
    type Acc = T::Acc;
    const KIND: Kind = Kind::Prod;
    #[inline(always)]
    fn identity() -> T::Acc {
        <T::Acc as Arith>::ONE
    }
    #[inline(always)]
    fn combine(a: T::Acc, b: T::Acc) -> T::Acc {
        a.mul(b)
    }
    #[inline(always)]
    fn lift(x: T) -> T::Acc {
        x.widen()
    }
    #[inline(always)]
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> T::Acc {
        // SAFETY: reduce_run's contract (a run of n readable elements) is
        // pairwise's.
        unsafe { pairwise::<Self>(p, stride, n, |a, b| a.mul(b)) }
    }
}

/// Maximum (MAX) or minimum of `T` elements, NaN propagating.
pub(super) struct Pick<T, const MAX: bool>(std::marker::PhantomData<T>);

impl<T: Elem, const MAX: bool> Reducer for Pick<T, MAX>
where
    T::Op: Max,
{
    type In = T;
    type Acc = T;
    const KIND: Kind = if MAX { Kind::Max } else { Kind::Min };
    #[inline(always)]
    fn identity() -> T {
        T::from_op(pick_identity::<T::Op, MAX>())
    }
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        T::from_op(pick::<T::Op, MAX>(a.to_op(), b.to_op()))
    }
    #[inline(always)]
    fn lift(x: T) -> T {
        x
    }
    #[inline(always)]
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> T {
        // Lanes hold op math values: compare in f32 for half types.
        // SAFETY: the caller's run of n readable elements, n >= 1 (amax
        // and amin refuse a reduced dim of size 0 before any run), is what
        // lanes_pick requires.
        T::from_op(unsafe { pick_run::<T, MAX>(p, stride, n) })
    }
    #[inline(always)]
    unsafe fn reduce_runs_x4(q: [*const u8; 4], n: usize) -> [T; 4] {
        if n >= STREAMS * BLOCK {
            // Long runs read four streams each (pick_run).
            let item = std::mem::size_of::<T>() as isize;
            // SAFETY: each run's n readable elements (the caller's).
            return q.map(|p| unsafe { Self::reduce_run(p, item, n) });
        }
        // SAFETY: four contiguous runs of n readable elements, n >= 1
        // (as in reduce_run), pick_runs_x4's requirement; each result is
        // pick_run's for a run this short.
        unsafe { pick_runs_x4::<T, MAX>(q, n) }.map(T::from_op)
    }
}
