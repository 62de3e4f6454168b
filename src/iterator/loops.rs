//! Running a 2-D loop callback over a built iterator, serially over a
//! range of the flattened loop or split across threads.

use super::TensorIterator;
use crate::parallel;
use smallvec::SmallVec;

/// c10's default grain size: the fewest elements one thread gets, for
/// the iterator's loops and the kernels' flat parallel loops alike (the
/// one definition of the figure).
pub const DEFAULT_GRAIN_SIZE: i64 = 32768;

/// A 2-D loop body: `(data, strides, size0, size1)` (the body may change
/// its copy of `data`). `data[arg]` is operand
/// arg's first element; `strides` holds the dim-0 byte strides of every
/// operand, then the dim-1 strides. The body visits
/// `data[arg] + i * strides[arg] + j * strides[ntensors + arg]` for
/// i < size0, j < size1.
pub type Loop2d<'a> = dyn Fn(&mut [*mut u8], &[i64], i64, i64) + Sync + 'a;

/// A 2-D loop body run on the calling thread only (need not be Sync).
pub type SerialLoop2d<'a> = dyn Fn(&mut [*mut u8], &[i64], i64, i64) + 'a;

/// Walks a multi-index over the loop shape (innermost dim first) in the
/// biggest 2-D steps that stay inside [offset, end).
struct DimCounter<'a> {
    shape: &'a [i64],
    values: SmallVec<[i64; 6]>,
    offset: i64,
    end: i64,
}

impl<'a> DimCounter<'a> {
    fn new(shape: &'a [i64], begin: i64, end: i64) -> Self {
        let mut values = SmallVec::from_elem(0, shape.len());
        let mut rest = begin;
        for (v, &s) in values.iter_mut().zip(shape) {
            if s > 0 {
                *v = rest % s;
                rest /= s;
            }
        }
        DimCounter {
            shape,
            values,
            offset: begin,
            end,
        }
    }

    fn is_done(&self) -> bool {
        self.offset >= self.end
    }

    fn max_2d_step(&self) -> (i64, i64) {
        let step0 = (self.shape[0] - self.values[0]).min(self.end - self.offset);
        let mut step1 = 1;
        if step0 == self.shape[0] && self.shape.len() > 1 {
            step1 = (self.shape[1] - self.values[1]).min((self.end - self.offset) / self.shape[0]);
        }
        (step0, step1)
    }

    fn increment(&mut self, (step0, step1): (i64, i64)) {
        self.offset += step0 * step1;
        let (mut i, mut carry) = if step1 != 1 { (1, step1) } else { (0, step0) };
        while i < self.values.len() && carry > 0 {
            let value = self.values[i] + carry;
            if value >= self.shape[i] {
                self.values[i] = value - self.shape[i];
                carry = 1;
            } else {
                self.values[i] = value;
                carry = 0;
            }
            i += 1;
        }
    }
}

impl TensorIterator {
    /// Byte strides laid out for a 2-D loop: dim-0 of every operand, then
    /// dim-1, ...; at least two dims (zeros pad).
    pub(crate) fn loop_strides(&self) -> SmallVec<[i64; 16]> {
        let nt = self.ntensors();
        let ndim = self.ndim().max(2);
        let mut strides = SmallVec::from_elem(0, nt * ndim);
        for (arg, op) in self.operands.iter().enumerate() {
            for (dim, &s) in op.stride_bytes.iter().enumerate() {
                strides[dim * nt + arg] = s;
            }
        }
        strides
    }

    /// Runs `f` over the flattened elements [begin, end) on the calling
    /// thread.
    pub fn serial_for_each(&self, f: &SerialLoop2d<'_>, begin: i64, end: i64) {
        let end = end.min(self.numel());
        if begin >= end {
            return;
        }
        let nt = self.ntensors();
        if self.ndim() <= 1 && nt <= 8 {
            // The common case, on stack arrays: one call for the range.
            let mut ptrs = [std::ptr::null_mut::<u8>(); 8];
            let mut strides = [0i64; 16];
            for (arg, op) in self.operands.iter().enumerate() {
                let s0 = op.stride_bytes.first().copied().unwrap_or(0);
                strides[arg] = s0;
                ptrs[arg] = op.data.wrapping_offset((begin * s0) as isize);
            }
            f(&mut ptrs[..nt], &strides[..2 * nt], end - begin, 1);
            return;
        }
        let strides = self.loop_strides();
        let mut ptrs: SmallVec<[*mut u8; 8]> = self.operands.iter().map(|op| op.data).collect();
        if self.ndim() <= 1 {
            if begin > 0 {
                for (arg, p) in ptrs.iter_mut().enumerate() {
                    *p = p.wrapping_offset((begin * strides[arg]) as isize);
                }
            }
            f(&mut ptrs, &strides, end - begin, 1);
            return;
        }
        let mut counter = DimCounter::new(&self.shape, begin, end);
        while !counter.is_done() {
            for (arg, p) in ptrs.iter_mut().enumerate() {
                let off: i64 = counter
                    .values
                    .iter()
                    .enumerate()
                    .map(|(dim, &v)| v * strides[dim * nt + arg])
                    .sum();
                *p = self.operands[arg].data.wrapping_offset(off as isize);
            }
            let step = counter.max_2d_step();
            f(&mut ptrs, &strides, step.0, step.1);
            counter.increment(step);
        }
    }

    /// Runs `f` over every element, split across the thread pool in chunks
    /// of at least `grain_size` elements (<= 0: [`DEFAULT_GRAIN_SIZE`]). Does not write cast
    /// temporaries back: call [`TensorIterator::cast_outputs`] after.
    pub fn for_each(&self, f: &Loop2d<'_>, grain_size: i64) {
        let grain = if grain_size <= 0 {
            DEFAULT_GRAIN_SIZE
        } else {
            grain_size
        };
        let numel = self.numel();
        if numel == 0 {
            return;
        }
        if numel < grain || parallel::get_num_threads() == 1 {
            self.serial_for_each(f, 0, numel);
            return;
        }
        parallel::parallel_for(0, numel, grain, |b, e| self.serial_for_each(f, b, e));
    }
}
