//! The one trait every reduction implements (sum, prod, amax, amin): what the
//! cascade (pairwise.rs), the AVX2 kernels (avx2_sum.rs, avx2_pick.rs)
//! and the geometry (geometry.rs) fold.

use crate::kernels::elem::Elem;

/// A reduction: how elements fold into accumulators stored in the output.
pub(super) trait Reducer {
    type In: Elem;
    type Acc: Elem;
    /// Which reduction this is (the AVX2 kernels' switch).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    const KIND: Kind;
    /// The accumulator of an empty set.
    fn identity() -> Self::Acc;
    /// Folds two accumulators (the left one covers earlier elements).
    fn combine(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// One element as an accumulator.
    fn lift(x: Self::In) -> Self::Acc;
    /// An element already widened to its op math type (the accumulator's
    /// type, for the reducers that widen) as an accumulator: `lift`
    /// after the widening (the portable loop widens half types a buffer
    /// at a time).
    #[inline(always)]
    fn lift_widened(v: Self::Acc) -> Self::Acc {
        v
    }
    /// Reduces `n` elements of a run to one accumulator.
    ///
    /// # Safety
    /// The run must address `n` readable elements.
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> Self::Acc;
    /// [`reduce_run`](Reducer::reduce_run) of four contiguous runs of `n`
    /// elements, each with that function's bits (reducers with a
    /// four-stream kernel read them in one pass).
    ///
    /// # Safety
    /// Each run must address `n` readable contiguous elements.
    #[inline(always)]
    unsafe fn reduce_runs_x4(q: [*const u8; 4], n: usize) -> [Self::Acc; 4] {
        let item = std::mem::size_of::<Self::In>() as isize;
        // SAFETY: each run's n readable elements (the caller's).
        q.map(|p| unsafe { Self::reduce_run(p, item, n) })
    }
}

/// What a reducer folds with, for the code that has a kernel per kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    /// A sum in the accumulator type.
    Sum,
    /// A sum of squares in the accumulator type (the 2-norm's).
    SumSquares,
    /// A product in the accumulator type.
    Prod,
    /// The NaN-propagating maximum (amax).
    Max,
    /// The NaN-propagating minimum (amin).
    Min,
}
