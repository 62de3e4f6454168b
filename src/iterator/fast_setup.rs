//! The shortcut for the commonest build: every input has the same sizes
//! and dtype, all are contiguous host tensors, and every output is either
//! to be allocated or already has those sizes, dtype and layout. Each step
//! of the pipeline is then a no-op or takes its trivial branch (no
//! broadcasting, no resizing, no dtype promotion or temporaries, c10's
//! contiguous fast set-up), so this builds the same iterator directly.
//! `build_general` in the tests checks the equivalence.

use super::config::{ConfigTensor, Flags};
use super::overlap::{self, MemOverlapStatus};
use super::TensorIterator;
use crate::device::DeviceType;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::{layout, Tensor};

/// Element-wise equality of two short dim lists (no memcmp call).
#[inline]
fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Whether `t` matches the common sizes, dtype and dense layout.
#[inline]
fn matches(t: &Tensor, sizes: &[i64], dtype: DType) -> bool {
    t.dtype() == dtype
        && same_dims(t.sizes(), sizes)
        && t.layout_flags().contiguous
        && t.device().device_type == DeviceType::Cpu
        && !t.is_wrapped_number()
}

/// The sizes and dtype every operand shares, if the shortcut applies.
#[inline(always)]
fn trivial_case<'a>(
    outputs: &[Option<ConfigTensor>],
    inputs: &'a [ConfigTensor],
    f: &Flags,
    static_shape: bool,
) -> Option<(&'a [i64], DType)> {
    if f.is_reduction || static_shape || f.static_dtype.is_some() || f.static_device.is_some() {
        return None;
    }
    let first = inputs.first()?;
    let (sizes, dtype) = (first.sizes(), first.dtype());
    if f.promote_integer_inputs_to_float && dtype.is_integral(true) {
        return None;
    }
    if !inputs.iter().all(|t| matches(t, sizes, dtype)) {
        return None;
    }
    if !outputs.iter().flatten().all(|t| matches(t, sizes, dtype)) {
        return None;
    }
    Some((sizes, dtype))
}

/// Fills `it` (fresh from `TensorIterator::empty`) directly when the
/// shortcut applies and returns true; returns false otherwise, leaving the
/// operands in place for the general pipeline.
///
/// `TAKE`: the operands are taken out of the lists (the presets' own
/// configs: no reference-count traffic); otherwise they are cloned and the
/// lists stay as they were (the C API's `tsr_iter_build`, whose config
/// stays usable).
pub(crate) fn try_build<const TAKE: bool>(
    it: &mut TensorIterator,
    outputs: &mut smallvec::SmallVec<[Option<ConfigTensor>; 2]>,
    inputs: &mut smallvec::SmallVec<[ConfigTensor; 4]>,
    f: &Flags,
    static_shape: bool,
) -> Result<bool> {
    let Some((sizes, dtype)) = trivial_case(outputs, inputs, f, static_shape) else {
        return Ok(false);
    };
    // Memory overlap: contiguous outputs have no internal overlap; an
    // input partially overlapping an output goes to the general path
    // (which copies it or refuses).
    let mut read_write = [false; 2];
    for (o, out) in outputs.iter().enumerate() {
        let Some(out) = out else { continue };
        for input in inputs.iter() {
            if Tensor::ptr_eq(out, input) {
                if let Some(rw) = read_write.get_mut(o) {
                    *rw = true;
                }
            } else if f.check_mem_overlap
                && overlap::get_overlap_status(out, input) == MemOverlapStatus::Partial
            {
                return Ok(false);
            }
        }
    }
    if outputs.len() > read_write.len() {
        // Rare: more than two outputs; the general path marks them.
        return Ok(false);
    }
    let ndim = sizes.len();
    let device = inputs[0].device();
    let item = dtype.itemsize() as i64;
    let numel = inputs[0].numel();
    let sizes: crate::tensor::Dims = crate::tensor::Dims::from_slice(sizes);
    // Written in place (a SmallVec moved in stalls).
    it.shape.clear();
    if ndim > 0 {
        it.shape.push(numel);
    }
    it.has_coalesced_dimensions = ndim > 1;
    it.all_ops_same_shape = true;
    it.common_dtype = Some(dtype);
    let noutputs = outputs.len();
    it.set_operand_count(noutputs + inputs.len());
    let (out_ops, in_ops) = it.operands.split_at_mut(noutputs);
    let allocate = |out: Option<Tensor>| match out {
        Some(t) => Ok(t),
        None => Tensor::empty_strided(&sizes, &layout::contiguous_strides(&sizes), dtype, device),
    };
    if TAKE {
        for ((op, out), rw) in out_ops.iter_mut().zip(outputs.drain(..)).zip(read_write) {
            op.assign(Some(allocate(out.map(ConfigTensor::into_owned))?), true);
            op.is_read_write = rw;
        }
        for (op, t) in in_ops.iter_mut().zip(inputs.drain(..)) {
            op.assign(Some(t.into_owned()), false);
        }
    } else {
        for ((op, out), rw) in out_ops.iter_mut().zip(outputs.iter()).zip(read_write) {
            op.assign(
                Some(allocate(out.as_ref().map(|t| t.to_owned_tensor()))?),
                true,
            );
            op.is_read_write = rw;
        }
        for (op, t) in in_ops.iter_mut().zip(inputs.iter()) {
            op.assign(Some(t.to_owned_tensor()), false);
        }
    }
    for op in it.operands.iter_mut() {
        if ndim > 0 {
            op.stride_bytes.push(item);
        }
        op.set_data()?;
    }
    Ok(true)
}
