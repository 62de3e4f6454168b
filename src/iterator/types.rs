//! Step 6 of the build: the common dtype and device, their checks, and
//! the CPU temporaries through which operands of other dtypes are cast.

use super::config::Flags;
use super::operand_copy::OperandCopy;
use super::steps::describe;
use super::TensorIterator;
use crate::device::Device;
use crate::dtype::{can_cast, DType, ResultTypeState};
use crate::error::Result;
use crate::tensor::MemoryFormat;

impl TensorIterator {
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
    pub(super) fn compute_types<K: OperandCopy>(&mut self, flags: &Flags) -> Result<()> {
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
}
