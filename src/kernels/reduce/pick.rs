//! The one per-lane step of amax and amin (NaN propagating, ties keep
//! the earlier value), its identity, and the in-order fold of a pick's
//! lanes: what the portable lanes (pick_lanes.rs), the AVX2 lanes
//! (avx2_pick.rs), the reducers and max / min with indices share.

use crate::kernels::ops::Max;

/// The larger (MAX) or smaller of two op math values, NaN propagating:
/// `acc` stays unless `o` is strictly beyond it or NaN (so ties keep the
/// earlier value and a NaN stays). The one definition the portable lanes,
/// the AVX2 lanes (avx2_pick.rs, which mirror it) and combine use.
#[inline(always)]
pub(super) fn pick<O: Max, const MAX: bool>(acc: O, o: O) -> O {
    if MAX {
        acc.max_nan(o)
    } else {
        acc.min_nan(o)
    }
}

/// The identity of [`pick`]: the lowest value for max, the highest for min.
#[inline(always)]
pub(super) fn pick_identity<O: Max, const MAX: bool>() -> O {
    if MAX {
        O::LOWEST
    } else {
        O::HIGHEST
    }
}

/// The lanes of a pick folded in order from the identity: the one final
/// fold of the portable and the AVX2 lanes.
#[inline(always)]
pub(super) fn fold_picked<O: Max, const MAX: bool>(lanes: &[O]) -> O {
    lanes
        .iter()
        .fold(pick_identity::<O, MAX>(), |a, &b| pick::<O, MAX>(a, b))
}

/// Whether `o` replaces `best` (which came earlier): never after a NaN,
/// else where [`pick`] takes it (beyond `best`, or NaN). Ties keep the
/// earlier index.
#[inline(always)]
pub(super) fn replaces<O: Max + PartialEq, const MAX: bool>(best: O, o: O) -> bool {
    #[allow(clippy::eq_op)] // x != x: NaN, for every op math type.
    let (best_nan, o_nan) = (best != best, o != o);
    !best_nan && (o_nan || pick::<O, MAX>(best, o) != best)
}
