//! The pairwise tree that adds K values (rows of registers or scalars):
//! below both the portable loops and the AVX2 kernels, which share it.

/// `v[0] + .. + v[K-1]` as a balanced pairwise tree ((v0 + v1) + (v2 + v3)
/// for K = 4, and that plus the same of v4..v7 for K = 8) with `add`; the
/// one order every K-row fold uses, in registers or in scalars. K is a
/// power of two.
#[inline(always)]
pub(super) fn tree<V: Copy, const K: usize>(mut v: [V; K], add: impl Fn(V, V) -> V) -> V {
    let mut len = K;
    while len > 1 {
        len /= 2;
        for j in 0..len {
            v[j] = add(v[2 * j], v[2 * j + 1]);
        }
    }
    v[0]
}
