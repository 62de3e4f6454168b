//! The build pipeline, one function per step, in c10's order. Each step is
//! one pass over the operands; the common case (same shapes, same dtypes,
//! dense layouts) touches each operand a handful of times.

use super::config::{ConfigTensor, Flags, IterConfig};
use super::operand_copy::OperandCopy;
use super::overlap::{self, MemOverlap, MemOverlapStatus};
use super::{LoopDims, Operand, TensorIterator};
use crate::device::Device;
use crate::dtype::{can_cast, DType, ResultTypeState};
use crate::error::Result;
use crate::tensor::{layout, shape, Dims, MemoryFormat, Tensor};
use crate::Allocator;
use smallvec::SmallVec;

/// Builds an iterator from a config, moving its operands in.
pub(crate) fn build<K: OperandCopy>(mut config: IterConfig) -> Result<TensorIterator> {
    let mut it = TensorIterator::empty(
        config.outputs.len(),
        config.flags.is_reduction,
        config.flags.enforce_linear_iteration,
    );
    build_into::<K>(&mut it, &mut config)?;
    Ok(it)
}

/// As [`build`], into a heap allocation made first, so the iterator is
/// never moved (what the C API hands out). The allocation is the calling
/// thread's spare iterator when [`recycle_boxed`] left one there, reset
/// field by field (writing a fresh iterator over it would copy the whole
/// struct).
///
/// The operands are taken out of `config`, which is left without any.
pub(crate) fn build_boxed<K: OperandCopy>(config: &mut IterConfig) -> Result<Box<TensorIterator>> {
    let mut it = spare_or_new(config);
    build_into::<K>(&mut it, config)?;
    Ok(it)
}

/// The calling thread's spare iterator reset for `config`, or a new one.
#[inline(always)]
fn spare_or_new(config: &IterConfig) -> Box<TensorIterator> {
    let (num_outputs, flags) = (config.outputs.len(), &config.flags);
    match SPARE.try_with(|s| s.take()).ok().flatten() {
        Some(mut spare) => {
            spare.reset(
                num_outputs,
                flags.is_reduction,
                flags.enforce_linear_iteration,
            );
            spare
        }
        None => Box::new(TensorIterator::empty(
            num_outputs,
            flags.is_reduction,
            flags.enforce_linear_iteration,
        )),
    }
}

thread_local! {
    /// One freed iterator per thread, without operands, reused by the next
    /// boxed build (saves a malloc/free pair per C-API iterator).
    static SPARE: std::cell::Cell<Option<Box<TensorIterator>>> =
        const { std::cell::Cell::new(None) };
}

/// Drops a boxed iterator's operands, keeping the iterator as the thread's
/// spare.
pub(crate) fn recycle_boxed(mut it: Box<TensorIterator>) {
    // Tensors go first: dropping them may run deleters that build or free
    // iterators themselves.
    it.release_operands();
    let _ = SPARE.try_with(|s| {
        let previous = s.replace(Some(it));
        drop(previous);
    });
}

/// Fills `it` (fresh from `TensorIterator::empty`) with the operands taken
/// out of a config. The config's parts are used in place (not moved out:
/// each move of its SmallVecs is a copy).
fn build_into<K: OperandCopy>(it: &mut TensorIterator, c: &mut IterConfig) -> Result<()> {
    let static_shape = check_config(c)?;
    if super::fast_setup::try_build::<true>(
        it,
        &mut c.outputs,
        &mut c.inputs,
        &c.flags,
        static_shape,
    )? {
        return Ok(());
    }
    build_steps::<K>(it, c)
}

/// As [`build_boxed`], leaving `config` as it was (the C API's
/// `tsr_iter_build`, whose config stays usable): the operands are cloned
/// straight into the iterator, for the shortcut and the general pipeline
/// alike.
pub(crate) fn build_boxed_from<K: OperandCopy>(
    config: &mut IterConfig,
) -> Result<Box<TensorIterator>> {
    let c = config;
    let static_shape = check_config(c)?;
    let mut it = spare_or_new(c);
    if super::fast_setup::try_build::<false>(
        &mut it,
        &mut c.outputs,
        &mut c.inputs,
        &c.flags,
        static_shape,
    )? {
        return Ok(it);
    }
    it.populate_operands_cloned(&c.outputs, &c.inputs);
    build_populated::<K>(&mut it, c)?;
    Ok(it)
}

/// The checks of a config before any operand is touched. Returns whether
/// the shortcut must be skipped: a static shape, or an output allocator
/// of the config's own (the shortcut allocates from the registry).
#[inline(always)]
fn check_config(c: &IterConfig) -> Result<bool> {
    validate_flags(
        &c.flags,
        c.outputs.len() + c.inputs.len(),
        c.static_shape.as_ref(),
    )?;
    check_outputs_writable(&c.outputs)?;
    Ok(c.static_shape.is_some() || c.output_allocator.is_some())
}

/// Refuses an output on a read-only storage, before anything is written
/// or resized.
pub(crate) fn check_outputs_writable(outputs: &[Option<ConfigTensor>]) -> Result<()> {
    for (i, t) in outputs.iter().enumerate() {
        if let Some(t) = t {
            let s = t.storage();
            crate::ensure!(
                !s.is_read_only(),
                ReadOnly,
                "output {i} is on a read-only storage of {} bytes: the iterator would write it \
                 (expected a writable output)",
                s.nbytes()
            );
        }
    }
    Ok(())
}

/// The general pipeline, filling `it` (fresh from `TensorIterator::empty`)
/// with the operands taken out of `config`.
pub(crate) fn build_steps<K: OperandCopy>(
    it: &mut TensorIterator,
    config: &mut IterConfig,
) -> Result<()> {
    it.populate_operands(&mut config.outputs, &mut config.inputs);
    build_populated::<K>(it, config)
}

/// The pipeline after step 1 (`it` holds the config's operands).
fn build_populated<K: OperandCopy>(it: &mut TensorIterator, config: &IterConfig) -> Result<()> {
    let flags = &config.flags;
    it.mark_outputs();
    it.compute_mem_overlaps::<K>(flags)?;
    it.compute_shape(flags, config.static_shape.as_deref())?;
    it.mark_resize_outputs(flags)?;
    it.compute_types::<K>(flags)?;
    let allocator = config.output_allocator.as_ref();
    if !it.fast_set_up(allocator)? {
        it.compute_strides();
        it.reorder_dimensions();
        it.allocate_or_resize_outputs(allocator)?;
        it.coalesce_dimensions();
    }
    it.set_data_ptrs()
}

/// Refuses flag combinations that cannot work, whatever order the
/// setters were called in.
pub(crate) fn validate_flags(
    f: &Flags,
    noperands: usize,
    static_shape: Option<&Dims>,
) -> Result<()> {
    crate::ensure!(
        noperands > 0,
        InvalidArgument,
        "the iterator has no operands: add at least one output or input"
    );
    crate::ensure!(
        !f.promote_integer_inputs_to_float || f.promote_inputs_to_common_dtype,
        InvalidArgument,
        "promote_integer_inputs_to_float needs promote_inputs_to_common_dtype to be on"
    );
    crate::ensure!(
        f.static_dtype.is_none() || !f.check_all_same_dtype,
        InvalidArgument,
        "declare_static_dtype needs check_all_same_dtype(false)"
    );
    if let Some(s) = static_shape {
        crate::ensure!(
            !f.resize_outputs,
            InvalidArgument,
            "declare_static_shape needs resize_outputs(false)"
        );
        crate::ensure!(
            s.len() <= crate::tensor::MAX_DIMS && s.iter().all(|&x| x >= 0),
            Shape,
            "static shape {s:?} is invalid: expected at most {} non-negative sizes",
            crate::tensor::MAX_DIMS
        );
    }
    Ok(())
}

fn describe(op: &Operand, i: usize, num_outputs: usize) -> String {
    if op.is_output {
        format!("output {i}")
    } else {
        format!("input {}", i - num_outputs)
    }
}

impl TensorIterator {
    /// Step 1: one operand per output, then per input, taken out of the
    /// config's lists.
    fn populate_operands(
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
    fn populate_operands_cloned(
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
    fn mark_outputs(&mut self) {
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
    fn compute_mem_overlaps<K: OperandCopy>(&mut self, flags: &Flags) -> Result<()> {
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
    fn compute_shape(&mut self, flags: &Flags, static_shape: Option<&[i64]>) -> Result<()> {
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
    fn mark_resize_outputs(&mut self, flags: &Flags) -> Result<()> {
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

    /// c10's result_type over the inputs (dimensioned, 0-dim and wrapped
    /// scalar buckets).
    fn compute_common_dtype(&self) -> Result<Option<DType>> {
        let mut state = ResultTypeState::default();
        for op in self.operands.iter().filter(|op| !op.is_output) {
            let t = op.tensor.as_ref().expect("inputs are defined");
            if t.is_wrapped_number() {
                state.update_wrapped(t.dtype())?;
            } else {
                state.update_tensor(t.dtype(), t.ndim())?;
            }
        }
        state.result()
    }

    /// Step 6: the common dtype and device, the dtype and device checks,
    /// and the CPU temporaries for casts.
    fn compute_types<K: OperandCopy>(&mut self, flags: &Flags) -> Result<()> {
        let n = self.num_outputs;
        let mut common_device = Device::CPU;
        let mut common: Option<DType> = None;
        let mut output_dtype: Option<DType> = None;
        let (mut diff_inputs, mut diff_outputs, mut undefined_outputs) = (false, false, false);

        for (i, op) in self.operands.iter_mut().enumerate() {
            let Some(t) = op.tensor.as_ref() else {
                match flags.static_dtype {
                    Some(d) => op.target_dtype = Some(d),
                    None => undefined_outputs = true,
                }
                match flags.static_device {
                    Some(d) => op.device = Some(d),
                    None => crate::ensure!(
                        flags.check_all_same_device,
                        InvalidArgument,
                        "output {i} is NULL and check_all_same_device is off: declare_static_device \
                         to say where to allocate it"
                    ),
                }
                continue;
            };
            let d = t.dtype();
            let dev = op.device.expect("defined operands know their device");
            if common_device.is_cpu() && !dev.is_cpu() {
                common_device = dev;
            }
            let (slot, differs) = if op.is_output {
                (&mut output_dtype, &mut diff_outputs)
            } else {
                (&mut common, &mut diff_inputs)
            };
            match *slot {
                None => *slot = Some(d),
                Some(prev) if prev != d => *differs = true,
                _ => {}
            }
        }

        if diff_inputs
            && !flags.promote_inputs_to_common_dtype
            && (undefined_outputs
                || flags.enforce_safe_casting_to_output
                || flags.cast_common_dtype_to_outputs)
        {
            crate::bail!(
                DType,
                "the inputs have different dtypes ({}) and promote_inputs_to_common_dtype is off: \
                 there is no common dtype to {}",
                self.input_dtype_list(),
                if undefined_outputs {
                    "allocate outputs in"
                } else {
                    "cast outputs from"
                }
            );
        }
        if flags.check_all_same_dtype
            && (diff_inputs
                || diff_outputs
                || (output_dtype.is_some() && common.is_some() && common != output_dtype))
        {
            self.report_dtype_mismatch(common.or(output_dtype).expect("some operand has a dtype"))?;
        }
        if !undefined_outputs
            && !flags.check_all_same_device
            && !flags.promote_inputs_to_common_dtype
            && !flags.cast_common_dtype_to_outputs
            && !flags.enforce_safe_casting_to_output
        {
            self.common_dtype = if diff_inputs { None } else { common };
            return Ok(());
        }
        let input_dtype = common;
        if (diff_inputs || self.all_ops_are_scalars) && flags.promote_inputs_to_common_dtype {
            common = self.compute_common_dtype()?;
        }
        if flags.promote_integer_inputs_to_float && common.is_some_and(|d| d.is_integral(true)) {
            common = Some(DType::Float);
        }
        self.common_dtype = common;
        // Nothing else to do when every operand already has the common
        // dtype on one device (the common case).
        let uniform = !undefined_outputs
            && !diff_inputs
            && !diff_outputs
            && common.is_some()
            && input_dtype == common
            && output_dtype.is_none_or(|d| Some(d) == common)
            && self
                .operands
                .iter()
                .all(|op| op.device == Some(common_device));
        if uniform {
            return Ok(());
        }
        for i in 0..self.operands.len() {
            self.review_operand::<K>(i, n, flags, common, common_device)?;
        }
        Ok(())
    }

    /// Step 6, second half, for one operand: dtype and device of outputs
    /// to allocate, device and safe-cast checks, CPU cast temporaries.
    fn review_operand<K: OperandCopy>(
        &mut self,
        i: usize,
        n: usize,
        flags: &Flags,
        common: Option<DType>,
        common_device: Device,
    ) -> Result<()> {
        let op = &mut self.operands[i];
        let type_defined = op.target_dtype.is_some();
        let device_defined = op.device.is_some();
        if !type_defined {
            op.target_dtype = Some(common.ok_or_else(|| {
                crate::err!(
                    DType,
                    "cannot infer the dtype of output {i}: it is NULL and there is no input or \
                     static dtype to take it from"
                )
            })?);
        }
        if !device_defined {
            op.device = Some(common_device);
        }
        let Some(t) = op.tensor.as_ref() else {
            return Ok(());
        };
        let current = t.dtype();
        if flags.check_all_same_device {
            let cpu_scalar =
                flags.allow_cpu_scalars && !op.is_output && t.ndim() == 0 && t.device().is_cpu();
            if !cpu_scalar || common_device.is_cpu() {
                crate::ensure!(
                    t.device().same_as(common_device),
                    Device,
                    "expected all operands on the same device, but {} is on {} and another on \
                     {common_device}",
                    describe(op, i, n),
                    t.device()
                );
            }
        }
        let Some(common) = common else { return Ok(()) };
        if current == common {
            return Ok(());
        }
        if flags.enforce_safe_casting_to_output && op.is_output {
            crate::ensure!(
                can_cast(common, current),
                DType,
                "result type {common} can't be cast to the desired output type {current} of output {i}"
            );
        }
        if common_device.is_cpu() {
            if flags.cast_common_dtype_to_outputs && op.is_output {
                let temp = t.empty_like_dtype(MemoryFormat::Contiguous, common)?;
                op.original = op.tensor.replace(temp);
                op.current_dtype = Some(common);
                op.target_dtype = Some(common);
            } else if flags.promote_inputs_to_common_dtype && !op.is_output {
                let converted = K::to_dtype(t, common)?;
                op.tensor = Some(converted);
                op.current_dtype = Some(common);
                op.target_dtype = Some(common);
            }
        }
        Ok(())
    }

    fn report_dtype_mismatch(&self, expected: DType) -> Result<()> {
        for (i, op) in self.operands.iter().enumerate() {
            if let Some(d) = op.tensor.as_ref().map(|t| t.dtype()) {
                crate::ensure!(
                    d == expected,
                    DType,
                    "found dtype {d} for {} but expected {expected}: all operands must have the same \
                     dtype (turn off check_all_same_dtype, or promote inputs)",
                    describe(op, i, self.num_outputs)
                );
            }
        }
        Ok(())
    }

    fn input_dtype_list(&self) -> String {
        self.operands
            .iter()
            .filter(|op| !op.is_output)
            .filter_map(|op| op.tensor.as_ref().map(|t| t.dtype().name()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Step 7: when every operand has the loop shape and one dense layout
    /// (contiguous, channels-last, or identical dense strides), allocate
    /// outputs in it and use a single dim of numel elements.
    fn fast_set_up(&mut self, allocator: Option<&Allocator>) -> Result<bool> {
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
    fn allocate_or_resize_outputs(&mut self, allocator: Option<&Allocator>) -> Result<()> {
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
    fn set_data_ptrs(&mut self) -> Result<()> {
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
/// storage if it is resizable (c10's resize_output).
fn resize_output(t: &Tensor, sizes: &[i64], strides: &[i64]) -> Result<()> {
    let offset = t.storage_offset();
    let needed = layout::storage_nbytes_needed(sizes, strides, offset, t.itemsize())?;
    let storage = t.storage().clone();
    if needed > storage.nbytes() {
        crate::ensure!(
            storage.resizable(),
            NotResizable,
            "shape {:?} must become {sizes:?}, which needs {needed} bytes, but its storage has {} \
             bytes and is not resizable",
            t.sizes(),
            storage.nbytes()
        );
        // SAFETY: an output handed to an iterator that resizes outputs must
        // not be used by other threads during the build (c10's out= rule,
        // documented on the C API).
        unsafe { storage.resize(needed)? };
    }
    // SAFETY: the same out= rule: no other thread uses this output during
    // the build; `sizes` and `strides` are the iterator's own buffers, and
    // no slice of t's sizes()/strides() is held across the call.
    unsafe { t.set_(&storage, offset, sizes, Some(strides)) }
}
