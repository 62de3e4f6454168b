//! Reductions over a built iterator: the reduced dims, per-thread
//! accumulators, and a loop over groups of elements that reduce into one
//! output element.

use super::TensorIterator;
use crate::parallel;
use crate::tensor::Dims;

impl TensorIterator {
    /// Loop dims along which output 0 does not move (reduced dims), which
    /// reorder_dimensions put first.
    pub fn num_reduce_dims(&self) -> usize {
        self.operands[0]
            .stride_bytes
            .iter()
            .filter(|&&s| s == 0)
            .count()
    }

    /// The number of output elements a reduction writes.
    pub fn num_output_elements(&self) -> i64 {
        let op = &self.operands[0];
        self.shape
            .iter()
            .zip(&op.stride_bytes)
            .filter(|(&size, &stride)| stride != 0 || size == 0)
            .map(|(&size, _)| size)
            .product()
    }

    /// Runs `f` over chunks of the elements with one accumulator per chunk
    /// (made by `init`), in parallel, then combines the accumulators in
    /// chunk order with `combine`, so a fixed thread count gives a
    /// reproducible result.
    pub fn parallel_reduce<A: Send>(
        &self,
        grain_size: i64,
        init: impl Fn() -> A + Sync,
        f: impl Fn(&mut A, &mut [*mut u8], &[i64], i64, i64) + Sync,
        combine: impl Fn(A, A) -> A,
    ) -> A {
        let grain = if grain_size <= 0 {
            super::DEFAULT_GRAIN_SIZE
        } else {
            grain_size
        };
        let chunks = parallel::chunks(0, self.numel(), grain);
        let results = parallel::map_chunks(&chunks, |b, e| {
            let acc = std::cell::RefCell::new(init());
            self.serial_for_each(
                &|d: &mut [*mut u8], s: &[i64], n0: i64, n1: i64| {
                    f(&mut acc.borrow_mut(), d, s, n0, n1)
                },
                b,
                e,
            );
            acc.into_inner()
        });
        results.into_iter().fold(init(), combine)
    }

    /// Calls `f` once per group of elements that reduce into the same
    /// output elements, each group a sub-iterator whose non-reduced dims
    /// are fixed. Large reductions split over threads along a non-reduced
    /// dim when `parallelize` is on (a single output element runs whole).
    pub fn foreach_reduced_elt(&self, f: &(dyn Fn(&TensorIterator) + Sync), parallelize: bool) {
        let out_numel = self.output(0).numel();
        if out_numel == 0 {
            return;
        }
        if out_numel == 1 {
            f(self);
            return;
        }
        if self.numel() < super::DEFAULT_GRAIN_SIZE
            || parallel::get_num_threads() == 1
            || parallel::in_parallel_region()
            || !parallelize
        {
            let reduce_dims = self.num_reduce_dims();
            let outer: Dims = Dims::from_slice(&self.shape[reduce_dims..]);
            let count: i64 = outer.iter().product();
            let mut index: Dims = smallvec::SmallVec::from_elem(0, outer.len());
            for _ in 0..count {
                let mut sub = self.clone();
                sub.select_all_keeping_dim(reduce_dims, &index);
                f(&sub);
                for (v, &s) in index.iter_mut().zip(&outer) {
                    *v += 1;
                    if *v < s {
                        break;
                    }
                    *v = 0;
                }
            }
            return;
        }
        let dim = self.split_dim_for_reduction();
        let cols = self.shape[dim];
        parallel::parallel_for(0, cols, 1, |b, e| {
            let mut sub = self.clone();
            sub.narrow_keep_dims(dim, b, e - b);
            sub.foreach_reduced_elt(f, false);
        });
    }

    /// The non-reduced dim with the most elements (the dim to hand out to
    /// threads); the largest dim if all are reduced.
    fn split_dim_for_reduction(&self) -> usize {
        let strides = &self.operands[0].stride_bytes;
        (0..self.ndim())
            .filter(|&d| strides[d] != 0)
            .max_by_key(|&d| self.shape[d])
            .unwrap_or_else(|| (0..self.ndim()).max_by_key(|&d| self.shape[d]).unwrap_or(0))
    }

    /// narrow without coalescing (keeps dim numbering for reductions).
    fn narrow_keep_dims(&mut self, dim: usize, start: i64, size: i64) {
        self.shape[dim] = size;
        for op in self.operands.iter_mut() {
            op.data = op
                .data
                .wrapping_offset((op.stride_bytes[dim] * start) as isize);
        }
    }
}
