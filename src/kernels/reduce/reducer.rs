//! The one trait every reduction implements (sum, amax): what the
//! cascade (pairwise.rs), the AVX2 sums (avx2_sum.rs) and the geometry
//! (geometry.rs) fold.

use crate::kernels::elem::Elem;

/// A reduction: how elements fold into accumulators stored in the output.
pub(super) trait Reducer {
    type In: Elem;
    type Acc: Elem;
    /// Whether this is a sum (whose floating lanes have AVX2 kernels).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    const IS_SUM: bool;
    /// The accumulator of an empty set.
    fn identity() -> Self::Acc;
    /// Folds two accumulators (the left one covers earlier elements).
    fn combine(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// One element as an accumulator.
    fn lift(x: Self::In) -> Self::Acc;
    /// Reduces `n` elements of a run to one accumulator.
    ///
    /// # Safety
    /// The run must address `n` readable elements.
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> Self::Acc;
}
