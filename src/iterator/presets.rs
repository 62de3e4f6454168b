//! The configurations of c10's common operators.

use super::config::ConfigTensor;
use super::IterConfig;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

impl IterConfig {
    /// Element-wise binary op (add, mul, ...): inputs promoted to their
    /// common dtype, written to the output with a safe cast.
    pub fn binary_op(out: Option<&Tensor>, a: &Tensor, b: &Tensor) -> Result<IterConfig> {
        let mut c = IterConfig::new();
        c.set_up_binary_op(out, a, b)?;
        Ok(c)
    }

    /// Makes this new config [`IterConfig::binary_op`]'s, where it lies
    /// (returning a config copies it).
    pub(crate) fn set_up_binary_op(
        &mut self,
        out: Option<&Tensor>,
        a: &Tensor,
        b: &Tensor,
    ) -> Result<&mut Self> {
        // A new config has room for three operands: no checks needed.
        crate::ensure!(
            self.outputs.is_empty() && self.inputs.is_empty(),
            Internal,
            "a binary op's config is set up on a new config, not one with operands"
        );
        self.outputs.push(out.cloned().map(ConfigTensor::owned));
        self.inputs.push(ConfigTensor::owned(a.clone()));
        self.inputs.push(ConfigTensor::owned(b.clone()));
        Ok(self
            .allow_cpu_scalars(true)
            .promote_inputs_to_common_dtype(true)
            .cast_common_dtype_to_outputs(true)
            .enforce_safe_casting_to_output(true))
    }

    /// As binary_op, with integer inputs computed in Float (true division).
    pub fn binary_float_op(out: Option<&Tensor>, a: &Tensor, b: &Tensor) -> Result<IterConfig> {
        let mut c = IterConfig::binary_op(out, a, b)?;
        c.promote_integer_inputs_to_float(true);
        Ok(c)
    }

    /// Comparison: inputs promoted; a NULL output is allocated as Bool, a
    /// given non-bool output receives the common dtype cast.
    pub fn comparison_op(out: Option<&Tensor>, a: &Tensor, b: &Tensor) -> Result<IterConfig> {
        let mut c = IterConfig::new();
        c.add_output(out.cloned())?
            .add_input(a.clone())?
            .add_input(b.clone())?;
        c.allow_cpu_scalars(true)
            .promote_inputs_to_common_dtype(true);
        match out {
            None => {
                c.declare_static_dtype(DType::Bool);
            }
            Some(o) if o.dtype() != DType::Bool => {
                c.cast_common_dtype_to_outputs(true);
            }
            Some(_) => {}
        }
        Ok(c)
    }

    /// Element-wise unary op in the input's dtype.
    pub fn unary_op(out: Option<&Tensor>, a: &Tensor) -> Result<IterConfig> {
        let mut c = IterConfig::new();
        c.add_output(out.cloned())?.add_input(a.clone())?;
        c.cast_common_dtype_to_outputs(false)
            .enforce_safe_casting_to_output(false)
            .check_all_same_dtype(true);
        Ok(c)
    }

    /// Unary op computed in a floating dtype (integers promote to Float).
    pub fn unary_float_op(out: Option<&Tensor>, a: &Tensor) -> Result<IterConfig> {
        let mut c = IterConfig::new();
        c.add_output(out.cloned())?.add_input(a.clone())?;
        c.promote_inputs_to_common_dtype(true)
            .cast_common_dtype_to_outputs(true)
            .enforce_safe_casting_to_output(true)
            .promote_integer_inputs_to_float(true);
        Ok(c)
    }

    /// An op with one output and no input (fill, random): the output is
    /// not resized.
    pub fn nullary_op(out: &Tensor) -> Result<IterConfig> {
        let mut c = IterConfig::new();
        c.check_all_same_dtype(false)
            .add_output(Some(out.clone()))?;
        c.resize_outputs(false);
        Ok(c)
    }

    /// Reduction of `a` into `out`, which has size 1 (or stride 0) along
    /// the reduced dims.
    pub fn reduce_op(out: &Tensor, a: &Tensor) -> Result<IterConfig> {
        let mut c = IterConfig::new();
        c.check_mem_overlap(false)
            .add_output(Some(out.clone()))?
            .add_input(a.clone())?;
        c.resize_outputs(false)
            .is_reduction(true)
            .promote_inputs_to_common_dtype(true);
        Ok(c)
    }
}
