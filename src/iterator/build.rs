//! The build's entry points: a config checked before any operand is
//! touched, the calling thread's spare iterator, then the shortcut for
//! trivial cases (fast_setup.rs) or the general pipeline (steps.rs).

use super::config::{ConfigTensor, Flags, IterConfig};
use super::operand_copy::OperandCopy;
use super::TensorIterator;
use crate::error::Result;
use crate::tensor::Dims;

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
