//! Byte ranges that must not share a byte (a file's records, the
//! tensors a save writes from one storage): the first two that do, found
//! with one sort rather than a comparison of every pair.

/// The first two of `ranges` (group, start, end) in one group that share
/// a byte, as their indices in `ranges`, the one starting first first
/// (ties: the lower index). Empty ranges share no byte.
pub(crate) fn first_overlap<G: Ord + Copy>(ranges: &[(G, u64, u64)]) -> Option<(usize, usize)> {
    let mut order: Vec<usize> = (0..ranges.len())
        .filter(|&i| ranges[i].1 < ranges[i].2)
        .collect();
    order.sort_unstable_by_key(|&i| (ranges[i].0, ranges[i].1, i));
    // Sorted by start within a group, disjoint ranges each end before
    // the next starts, so the first overlap is between neighbours.
    order.windows(2).find_map(|w| {
        let (a, b) = (ranges[w[0]], ranges[w[1]]);
        (a.0 == b.0 && b.1 < a.2).then_some((w[0], w[1]))
    })
}

#[cfg(test)]
mod tests {
    use super::first_overlap;

    #[test]
    fn finds_the_first_pair_sharing_a_byte() {
        assert_eq!(first_overlap::<()>(&[]), None);
        // Touching ranges and empty ones share nothing.
        let touching = [((), 0, 4), ((), 4, 8), ((), 4, 4), ((), 2, 2)];
        assert_eq!(first_overlap(&touching), None);
        // Contained, listed out of order.
        assert_eq!(
            first_overlap(&[((), 8, 9), ((), 2, 3), ((), 0, 16)]),
            Some((2, 1))
        );
        // Equal ranges: the lower index first.
        assert_eq!(first_overlap(&[((), 5, 9), ((), 5, 9)]), Some((0, 1)));
        // Other groups never overlap.
        assert_eq!(first_overlap(&[(1, 0, 8), (2, 0, 8)]), None);
        assert_eq!(
            first_overlap(&[(1, 0, 8), (2, 0, 8), (1, 7, 9)]),
            Some((0, 2))
        );
    }
}
