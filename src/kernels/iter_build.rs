//! The iterator's build entry points: `IterConfig::build*` and the
//! `TensorIterator` presets run the build pipeline (iterator/build.rs)
//! with the copy kernel, which two of its steps need (an input that
//! overlaps an output is copied, a CPU scalar is converted). They live
//! here, above both, so that the iterator does not depend on the kernels
//! built on it.

use super::copy::CopyKernel;
use crate::error::Result;
use crate::iterator::{build, IterConfig, TensorIterator};
use crate::tensor::Tensor;

impl IterConfig {
    /// Runs the build pipeline on a copy of this config (which stays
    /// usable).
    pub fn build(&self) -> Result<TensorIterator> {
        build::build::<CopyKernel>(self.clone())
    }

    /// Runs the build pipeline, moving the operands into the iterator
    /// (saves a reference-count round trip per operand).
    pub fn build_owned(self) -> Result<TensorIterator> {
        build::build::<CopyKernel>(self)
    }

    /// As [`IterConfig::build_owned`], into a heap allocation that is never
    /// moved (the C API's handles), taking the operands out of this config
    /// (left without any) instead of consuming it: a config set up where
    /// it lies is then never copied (the C API's presets).
    pub fn build_boxed(&mut self) -> Result<Box<TensorIterator>> {
        build::build_boxed::<CopyKernel>(self)
    }

    /// As [`IterConfig::build_boxed`], leaving this config as it was (its
    /// operands are cloned into the iterator, not taken).
    pub fn build_boxed_from(&mut self) -> Result<Box<TensorIterator>> {
        build::build_boxed_from::<CopyKernel>(self)
    }

    /// Runs the general pipeline without the shortcut for trivial cases
    /// (the tests compare the two).
    #[cfg(test)]
    pub(crate) fn build_general(&self) -> Result<TensorIterator> {
        let mut c = self.clone();
        build::validate_flags(
            &c.flags,
            c.outputs.len() + c.inputs.len(),
            c.static_shape.as_ref(),
        )?;
        build::check_outputs_writable(&c.outputs)?;
        let mut it = TensorIterator::empty(
            c.outputs.len(),
            c.flags.is_reduction,
            c.flags.enforce_linear_iteration,
        );
        build::build_steps::<CopyKernel>(&mut it, &mut c)?;
        Ok(it)
    }
}

impl TensorIterator {
    /// Builds [`IterConfig::binary_op`].
    pub fn binary_op(out: Option<&Tensor>, a: &Tensor, b: &Tensor) -> Result<TensorIterator> {
        IterConfig::binary_op(out, a, b)?.build_owned()
    }

    /// Builds [`IterConfig::binary_float_op`].
    pub fn binary_float_op(out: Option<&Tensor>, a: &Tensor, b: &Tensor) -> Result<TensorIterator> {
        IterConfig::binary_float_op(out, a, b)?.build_owned()
    }

    /// Builds [`IterConfig::comparison_op`].
    pub fn comparison_op(out: Option<&Tensor>, a: &Tensor, b: &Tensor) -> Result<TensorIterator> {
        IterConfig::comparison_op(out, a, b)?.build_owned()
    }

    /// Builds [`IterConfig::unary_op`].
    pub fn unary_op(out: Option<&Tensor>, a: &Tensor) -> Result<TensorIterator> {
        IterConfig::unary_op(out, a)?.build_owned()
    }

    /// Builds [`IterConfig::unary_float_op`].
    pub fn unary_float_op(out: Option<&Tensor>, a: &Tensor) -> Result<TensorIterator> {
        IterConfig::unary_float_op(out, a)?.build_owned()
    }

    /// Builds [`IterConfig::nullary_op`].
    pub fn nullary_op(out: &Tensor) -> Result<TensorIterator> {
        IterConfig::nullary_op(out)?.build_owned()
    }

    /// Builds [`IterConfig::reduce_op`].
    pub fn reduce_op(out: &Tensor, a: &Tensor) -> Result<TensorIterator> {
        IterConfig::reduce_op(out, a)?.build_owned()
    }
}
