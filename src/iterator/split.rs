//! Sub-iterators: narrowing a dim, fixing the non-reduced dims, and the
//! halving split that yields pieces addressable with 32-bit offsets.

use super::TensorIterator;

impl TensorIterator {
    /// Restricts loop dim `dim` to [start, start + size).
    pub fn narrow(&mut self, dim: usize, start: i64, size: i64) {
        assert!(dim < self.ndim() && start >= 0 && size >= 0 && start + size <= self.shape[dim]);
        self.shape[dim] = size;
        for op in self.operands.iter_mut() {
            op.data = op
                .data
                .wrapping_offset((op.stride_bytes[dim] * start) as isize);
        }
        if size == 1 && !self.is_reduction {
            self.coalesce_dimensions();
        }
    }

    /// Fixes loop dims start_dim.. at `indices` (their size becomes 1).
    pub fn select_all_keeping_dim(&mut self, start_dim: usize, indices: &[i64]) {
        for (k, i) in (start_dim..self.ndim()).enumerate() {
            for op in self.operands.iter_mut() {
                op.data = op
                    .data
                    .wrapping_offset((op.stride_bytes[i] * indices[k]) as isize);
            }
            self.shape[i] = 1;
        }
    }

    /// Whether every operand's offsets and the element count fit in i32.
    pub fn can_use_32bit_indexing(&self) -> bool {
        let max = i32::MAX as i64;
        let numel = self.numel();
        if numel > max {
            return false;
        }
        if numel == 0 {
            // Nothing is addressed (the strides of an empty tensor may be
            // anything, even i64::MAX).
            return true;
        }
        self.operands.iter().all(|op| {
            let span: i64 = self
                .shape
                .iter()
                .zip(&op.stride_bytes)
                .map(|(&s, &st)| (s - 1).max(0).saturating_mul(st.saturating_abs()))
                .fold(1, i64::saturating_add);
            span <= max
        })
    }

    /// The dim with the largest byte extent over all operands.
    pub fn dim_to_split(&self) -> usize {
        let mut best = (-1i64, 0usize);
        for dim in (0..self.ndim()).rev() {
            let size = self.shape[dim];
            if size == 0 {
                continue;
            }
            for op in &self.operands {
                let extent = (size - 1).saturating_mul(op.stride_bytes[dim].saturating_abs());
                if extent > best.0 {
                    best = (extent, dim);
                }
            }
        }
        best.1
    }

    /// Splits `dim` in two: returns the first half and keeps the second.
    pub fn split(&mut self, dim: usize) -> TensorIterator {
        let overlaps = self.is_dim_reduced(dim);
        let first = self.shape[dim] / 2;
        let second = self.shape[dim] - first;
        let mut copy = self.clone();
        copy.narrow(dim, 0, first);
        copy.final_output &= !overlaps;
        self.narrow(dim, first, second);
        self.accumulate |= overlaps;
        copy
    }

    /// Pieces of this iterator, each addressable with 32-bit offsets, made
    /// by halving the dim with the largest extent until every piece fits.
    /// Calls `f` on each piece in order.
    pub fn for_each_32bit_piece(&self, f: &mut dyn FnMut(&TensorIterator)) {
        let mut stack = vec![self.clone()];
        while let Some(mut it) = stack.pop() {
            if it.can_use_32bit_indexing() || it.ndim() == 0 {
                f(&it);
                continue;
            }
            let dim = it.dim_to_split();
            if it.shape[dim] < 2 {
                // Cannot split further (one element spans more than 2^31
                // bytes of strides): hand the piece over as it is.
                f(&it);
                continue;
            }
            let first = it.split(dim);
            stack.push(it);
            stack.push(first);
        }
    }
}
