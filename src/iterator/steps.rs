//! The build pipeline, one function per step, in c10's order (build.rs
//! runs them; step 6, the dtypes, is types.rs). Each step is one pass over
//! the operands; the common case (same shapes, same dtypes, dense
//! layouts) touches each operand a handful of times.

use super::config::{ConfigTensor, Flags};
use super::operand_copy::OperandCopy;
use super::overlap::{self, MemOverlap, MemOverlapStatus};
use super::{LoopDims, Operand, TensorIterator};
use crate::device::Device;
use crate::error::Result;
use crate::tensor::{layout, shape, Dims, MemoryFormat, Tensor};
use crate::Allocator;
use smallvec::SmallVec;

pub(super) fn describe(op: &Operand, i: usize, num_outputs: usize) -> String {
    if op.is_output {
        format!("output {i}")
    } else {
        format!("input {}", i - num_outputs)
    }
}

impl TensorIterator {
    /// Step 1: one operand per output, then per input, taken out of the
    /// config's lists.
    pub(super) fn populate_operands(
        &mut self,
        outputs: &mut SmallVec<[Option<ConfigTensor>; 2]>,
        inputs: &mut SmallVec<[ConfigTensor; 4]>,
    ) {
        let n = outputs.len() + inputs.len();
        self.populate_from(
            n,
            outputs.drain(..).map(|t| t.map(ConfigTensor::into_owned)),
            inputs.drain(..).map(ConfigTensor::into_owned),
        );
    }

    /// Step 1 for a config that stays usable: the iterator takes its own
    /// references.
    pub(super) fn populate_operands_cloned(
        &mut self,
        outputs: &[Option<ConfigTensor>],
        inputs: &[ConfigTensor],
    ) {
        let n = outputs.len() + inputs.len();
        self.populate_from(
            n,
            outputs
                .iter()
                .map(|t| t.as_ref().map(|t| t.to_owned_tensor())),
            inputs.iter().map(ConfigTensor::to_owned_tensor),
        );
    }

    /// Step 1's operands, `n` of them: the outputs, then the inputs.
    #[inline(always)]
    fn populate_from(
        &mut self,
        n: usize,
        outputs: impl Iterator<Item = Option<Tensor>>,
        inputs: impl Iterator<Item = Tensor>,
    ) {
        self.set_operand_count(n);
        let tensors = outputs
            .map(|t| (t, true))
            .chain(inputs.map(|t| (Some(t), false)));
        for (op, (tensor, is_output)) in self.operands.iter_mut().zip(tensors) {
            op.assign(tensor, is_output);
        }
    }

    /// Step 2: an output that is the same tensor as an input is read-write.
    pub(super) fn mark_outputs(&mut self) {
        let n = self.num_outputs;
        let (outs, ins) = self.operands.split_at_mut(n);
        for out in outs.iter_mut() {
            if let Some(t) = &out.tensor {
                out.is_read_write = ins
                    .iter()
                    .any(|op| op.tensor.as_ref().is_some_and(|x| Tensor::ptr_eq(x, t)));
            }
        }
    }

    /// Step 3: refuse outputs that write one location twice, and inputs
    /// that partially overlap an output (or copy them, with
    /// resolve_overlap_by_copy). Exact aliasing is allowed.
    pub(super) fn compute_mem_overlaps<K: OperandCopy>(&mut self, flags: &Flags) -> Result<()> {
        if !flags.check_mem_overlap {
            return Ok(());
        }
        let n = self.num_outputs;
        for i in 0..n {
            let Some(out) = self.operands[i].tensor.clone() else {
                continue;
            };
            crate::ensure!(
                overlap::has_internal_overlap(&out) != MemOverlap::Yes,
                Overlap,
                "output {i} (sizes {:?}, strides {:?}) refers to one memory location through \
                 several elements: clone it before writing to it",
                out.sizes(),
                out.strides()
            );
            for j in n..self.operands.len() {
                let input = self.operands[j]
                    .tensor
                    .as_ref()
                    .expect("inputs are defined");
                if Tensor::ptr_eq(input, &out) {
                    continue;
                }
                if flags.resolve_overlap_by_copy {
                    if overlap::may_partially_overlap(&out, input) {
                        let copy = K::clone_tensor(input, MemoryFormat::Preserve)?;
                        self.operands[j].tensor = Some(copy);
                    }
                    continue;
                }
                crate::ensure!(
                    overlap::get_overlap_status(&out, input) != MemOverlapStatus::Partial,
                    Overlap,
                    "input {} partially overlaps output {i} in memory: clone the input, or turn on \
                     resolve_overlap_by_copy",
                    j - n
                );
            }
        }
        Ok(())
    }

    /// Step 4: the broadcast shape of the operands that take part (outputs
    /// being resized do not), or the static shape.
    pub(super) fn compute_shape(
        &mut self,
        flags: &Flags,
        static_shape: Option<&[i64]>,
    ) -> Result<()> {
        if let Some(s) = static_shape {
            // The loop walks every operand with its own strides over the
            // static shape: each must have that many dims, none smaller.
            for (i, op) in self.operands.iter().enumerate() {
                let Some(t) = op.tensor.as_ref() else {
                    continue;
                };
                let sizes = t.sizes();
                crate::ensure!(
                    sizes.len() == s.len()
                        && sizes.iter().zip(s).all(|(&have, &want)| want <= have),
                    Shape,
                    "static shape {s:?} does not fit {} (sizes {sizes:?}): expected {} dims, \
                     none smaller than the static shape's",
                    describe(op, i, self.num_outputs),
                    s.len()
                );
            }
            self.shape.clear();
            self.shape.extend_from_slice(s);
            self.shape_is_static = true;
            self.all_ops_same_shape = false;
            return Ok(());
        }
        self.all_ops_same_shape = true;
        let (mut has_scalars, mut has_tensors, mut first) = (false, false, true);
        for (i, op) in self.operands.iter().enumerate() {
            let Some(t) = op.tensor.as_ref() else {
                continue;
            };
            if flags.resize_outputs && op.is_output {
                continue;
            }
            let sizes = t.sizes();
            if sizes.is_empty() {
                has_scalars = true;
            } else {
                has_tensors = true;
            }
            if first {
                self.shape.clear();
                self.shape.extend_from_slice(sizes);
                first = false;
            } else if sizes != &self.shape[..] {
                self.all_ops_same_shape = false;
                if self.shape.len() < sizes.len() {
                    self.shape.prepend_ones(sizes.len() - self.shape.len());
                }
                shape::broadcast_in_place(&mut self.shape, sizes).map_err(|e| {
                    e.context(format!(
                        "cannot broadcast {} (sizes {sizes:?}) with the shape of the operands before it",
                        describe(op, i, self.num_outputs)
                    ))
                })?;
            }
        }
        if has_scalars && has_tensors {
            self.all_ops_same_shape = false;
        }
        self.all_ops_are_scalars = !has_tensors;
        crate::ensure!(
            self.shape.len() <= crate::tensor::MAX_DIMS,
            Shape,
            "the broadcast shape has {} dims: at most {} are supported",
            self.shape.len(),
            crate::tensor::MAX_DIMS
        );
        Ok(())
    }

    /// Step 5: defined outputs whose shape differs get resized (unless
    /// read-write); without resize_outputs only reductions may differ.
    pub(super) fn mark_resize_outputs(&mut self, flags: &Flags) -> Result<()> {
        if self.shape_is_static {
            return Ok(());
        }
        for i in 0..self.num_outputs {
            let op = &self.operands[i];
            let Some(t) = op.tensor.as_ref() else {
                continue;
            };
            if t.sizes() == &self.shape[..] {
                continue;
            }
            if flags.resize_outputs && !op.is_read_write {
                self.operands[i].will_resize = true;
                continue;
            }
            crate::ensure!(
                self.is_reduction,
                Shape,
                "output {i} with shape {:?} doesn't match the broadcast shape {:?}",
                t.sizes(),
                self.shape
            );
        }
        Ok(())
    }

    /// Step 7: when every operand has the loop shape and one dense layout
    /// (contiguous, channels-last, or identical dense strides), allocate
    /// outputs in it and use a single dim of numel elements.
    pub(super) fn fast_set_up(&mut self, allocator: Option<&Allocator>) -> Result<bool> {
        if self.is_reduction || !self.all_ops_same_shape {
            return Ok(false);
        }
        let (mut contiguous, mut channels_last, mut dense) = (true, true, true);
        for op in self.operands.iter().filter(|op| !op.will_resize) {
            if let Some(t) = &op.tensor {
                let f = t.layout_flags();
                contiguous &= f.contiguous;
                channels_last &= f.channels_last;
                dense &= f.non_overlapping_and_dense;
            }
        }
        let strides: Option<Dims> = if contiguous {
            None
        } else if self.enforce_linear_iteration {
            return Ok(false);
        } else if channels_last {
            let s = layout::strides_for_format(&self.shape, MemoryFormat::ChannelsLast)?;
            Some(s)
        } else if dense {
            // Inputs first (from the back), then outputs: all strides equal.
            let mut reference: Option<&Tensor> = None;
            for op in self.operands.iter().rev().filter(|op| !op.will_resize) {
                let Some(t) = &op.tensor else { continue };
                match reference {
                    None => reference = Some(t),
                    Some(r) if r.strides() != t.strides() => return Ok(false),
                    Some(_) => {}
                }
            }
            match reference {
                Some(r) => Some(Dims::from_slice(r.strides())),
                None => return Ok(false),
            }
        } else {
            return Ok(false);
        };

        for i in 0..self.num_outputs {
            let op = &self.operands[i];
            if op.tensor.is_some() && !op.will_resize {
                continue;
            }
            let strides = match &strides {
                Some(s) => s.clone(),
                None => layout::contiguous_strides(&self.shape),
            };
            let shape = self.shape.clone();
            self.set_output(i, &shape, &strides, allocator)?;
        }
        if self.shape.len() > 1 {
            self.has_coalesced_dimensions = true;
        }
        if !self.shape.is_empty() {
            let numel = self.numel();
            self.shape = LoopDims::from_slice(&[numel]);
        }
        let ndim = self.shape.len();
        for op in self.operands.iter_mut() {
            let item = op
                .tensor
                .as_ref()
                .expect("outputs are allocated")
                .itemsize() as i64;
            op.stride_bytes = LoopDims::from_elem(item, ndim);
        }
        Ok(true)
    }

    /// Step 9: allocate undefined outputs (and resize outputs marked so)
    /// with contiguous strides in the loop's dim order, so their layout
    /// follows the inputs'.
    pub(super) fn allocate_or_resize_outputs(
        &mut self,
        allocator: Option<&Allocator>,
    ) -> Result<()> {
        let ndim = self.shape.len();
        let inverted = self
            .perm
            .iter()
            .enumerate()
            .all(|(j, &p)| p as usize == ndim - 1 - j);
        // Plain arrays, not SmallVecs moved around (each move of a SmallVec
        // just written costs a store-forwarding stall).
        let (mut small_shape, mut big_shape) = ([0i64; 8], Vec::new());
        let tensor_shape = zeros(&mut small_shape, &mut big_shape, ndim);
        for (&p, &size) in self.perm.iter().zip(&self.shape) {
            tensor_shape[p as usize] = size;
        }
        for i in 0..self.num_outputs {
            let op = &self.operands[i];
            if op.tensor.is_some() && !op.will_resize {
                continue;
            }
            let dtype = op
                .target_dtype
                .expect("compute_types gave every output a dtype");
            let item = dtype.itemsize() as i64;
            // Contiguous in loop order: the same strides in elements per
            // tensor dim (c10 leaves them to the contiguous default when
            // the loop order is the reversed tensor order).
            let (mut small_strides, mut big_strides) = ([0i64; 8], Vec::new());
            let strides = zeros(&mut small_strides, &mut big_strides, ndim);
            if inverted {
                let mut acc = 1i64;
                for (s, &size) in strides.iter_mut().zip(tensor_shape.iter()).rev() {
                    *s = acc;
                    acc = acc.saturating_mul(size.max(1));
                }
            } else {
                let mut next = 1i64;
                for (&size, &p) in self.shape.iter().zip(&self.perm) {
                    strides[p as usize] = next;
                    next *= size;
                }
            }
            self.set_output(i, tensor_shape, strides, allocator)?;
            let op = &mut self.operands[i];
            op.stride_bytes.clear();
            let mut next = item;
            op.stride_bytes.extend(self.shape.iter().map(|&size| {
                let s = next;
                next *= size;
                s
            }));
            op.current_dtype = Some(dtype);
        }
        Ok(())
    }

    /// Gives output `i` the sizes and strides: allocates it when undefined,
    /// resizes it when marked.
    fn set_output(
        &mut self,
        i: usize,
        sizes: &[i64],
        strides: &[i64],
        allocator: Option<&Allocator>,
    ) -> Result<()> {
        let op = &mut self.operands[i];
        match op.tensor.clone() {
            None => {
                let dtype = op.target_dtype.expect("output dtype known");
                let device = op.device.unwrap_or(Device::CPU);
                // Both callers give dense strides (contiguous in some dim
                // order) over the checked loop shape.
                op.tensor = Some(match allocator {
                    None => Tensor::empty_dense(sizes, strides, dtype, device)?,
                    Some(a) => Tensor::empty_dense_from(sizes, strides, dtype, device, a)
                        .map_err(|e| e.context(format!("output {i}")))?,
                });
                op.current_dtype = Some(dtype);
            }
            Some(t) => {
                debug_assert!(op.will_resize);
                resize_output(&t, sizes, strides).map_err(|e| e.context(format!("output {i}")))?;
                if let Some(orig) = &op.original {
                    resize_output(orig, sizes, &layout::contiguous_strides(sizes))
                        .map_err(|e| e.context(format!("output {i}")))?;
                }
            }
        }
        Ok(())
    }

    /// Step 11: every operand's first element.
    pub(super) fn set_data_ptrs(&mut self) -> Result<()> {
        for op in self.operands.iter_mut() {
            op.set_data()?;
        }
        Ok(())
    }
}

/// `ndim` zeros: in `small` for up to 8 dims (zeroing an array of
/// MAX_DIMS would cost a memset call per build), in `big` beyond.
fn zeros<'a>(small: &'a mut [i64; 8], big: &'a mut Vec<i64>, ndim: usize) -> &'a mut [i64] {
    if ndim <= small.len() {
        &mut small[..ndim]
    } else {
        big.resize(ndim, 0);
        big
    }
}

/// Gives an existing output new sizes and strides in place, growing its
/// storage if it is resizable (c10's resize_output): the path of
/// `Tensor::resize_` (and `tsr_tensor_resize`), with the loop order's
/// strides.
fn resize_output(t: &Tensor, sizes: &[i64], strides: &[i64]) -> Result<()> {
    // SAFETY: an output handed to an iterator that resizes outputs must
    // not be used by other threads during the build (c10's out= rule,
    // documented on the C API); `sizes` and `strides` are the iterator's
    // own buffers, and no slice of t's sizes()/strides() is held across
    // the call.
    unsafe { t.resize_strided(sizes, Dims::from_slice(strides)) }
}
