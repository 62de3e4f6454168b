//! The builder of an iterator: operands and flags, with c10's defaults and
//! interactions.

use super::MAX_OPERANDS;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::{Dims, Tensor};
use smallvec::SmallVec;
use std::mem::ManuallyDrop;

/// A config's operand, as c10's `MaybeOwned<TensorBase>`: a reference the
/// config holds, or the caller's tensor borrowed without a count (the C
/// API's `tsr_iter_config_add_borrowed_*`, whose caller keeps the tensor
/// alive until the build returns). Dropping a borrowed one does nothing:
/// the config never touches it after the build, not even when freed.
///
/// A flag beside the handle rather than an enum: reading the tensor (the
/// build does it often) is then one load with no branch.
#[derive(Debug)]
pub(crate) struct ConfigTensor {
    tensor: ManuallyDrop<Tensor>,
    owned: bool,
}

impl ConfigTensor {
    /// An operand the config holds a reference of.
    #[inline(always)]
    pub(crate) fn owned(t: Tensor) -> ConfigTensor {
        ConfigTensor {
            tensor: ManuallyDrop::new(t),
            owned: true,
        }
    }

    /// An operand borrowed from the caller: the `ManuallyDrop` is the
    /// caller's promise, made where the tensor was borrowed (the C API's
    /// checked handle view), that it outlives every read of the config.
    #[inline(always)]
    pub(crate) fn borrowed(t: ManuallyDrop<Tensor>) -> ConfigTensor {
        ConfigTensor {
            tensor: t,
            owned: false,
        }
    }

    /// The tensor as a reference of its own: moved out when owned, a new
    /// count when borrowed.
    #[inline(always)]
    pub(crate) fn into_owned(self) -> Tensor {
        let mut this = ManuallyDrop::new(self);
        if this.owned {
            // SAFETY: `this` is never dropped (ManuallyDrop), so the count
            // the config held moves out exactly once, here.
            unsafe { ManuallyDrop::take(&mut this.tensor) }
        } else {
            Tensor::clone(&this.tensor)
        }
    }

    /// A new reference to the tensor (the iterator's own).
    #[inline(always)]
    pub(crate) fn to_owned_tensor(&self) -> Tensor {
        Tensor::clone(&self.tensor)
    }
}

impl Drop for ConfigTensor {
    #[inline(always)]
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: an owned operand's count is the config's, given up
            // once, here (into_owned never drops the operand it moves).
            unsafe { ManuallyDrop::drop(&mut self.tensor) }
        }
    }
}

impl std::ops::Deref for ConfigTensor {
    type Target = Tensor;
    #[inline(always)]
    fn deref(&self) -> &Tensor {
        &self.tensor
    }
}

impl Clone for ConfigTensor {
    /// A copy of a config holds its own references, borrowed or not.
    fn clone(&self) -> Self {
        ConfigTensor::owned(self.to_owned_tensor())
    }
}

/// The flags of a config (a plain copy travels into the build).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flags {
    pub(crate) check_mem_overlap: bool,
    pub(crate) allow_cpu_scalars: bool,
    pub(crate) is_reduction: bool,
    pub(crate) resize_outputs: bool,
    pub(crate) check_all_same_dtype: bool,
    pub(crate) check_all_same_device: bool,
    pub(crate) enforce_safe_casting_to_output: bool,
    pub(crate) enforce_linear_iteration: bool,
    pub(crate) promote_inputs_to_common_dtype: bool,
    pub(crate) promote_integer_inputs_to_float: bool,
    pub(crate) cast_common_dtype_to_outputs: bool,
    pub(crate) resolve_overlap_by_copy: bool,
    pub(crate) static_dtype: Option<DType>,
    pub(crate) static_device: Option<Device>,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            check_mem_overlap: true,
            allow_cpu_scalars: false,
            is_reduction: false,
            resize_outputs: true,
            check_all_same_dtype: true,
            check_all_same_device: true,
            enforce_safe_casting_to_output: false,
            enforce_linear_iteration: false,
            promote_inputs_to_common_dtype: false,
            promote_integer_inputs_to_float: false,
            cast_common_dtype_to_outputs: false,
            resolve_overlap_by_copy: false,
            static_dtype: None,
            static_device: None,
        }
    }
}

/// Operands (outputs first) and flags of an iterator to build.
///
/// Defaults as c10: check_mem_overlap, check_all_same_dtype,
/// check_all_same_device and resize_outputs on; everything else off.
/// Turning on promote_inputs_to_common_dtype or
/// cast_common_dtype_to_outputs turns check_all_same_dtype off.
#[derive(Clone, Default)]
pub struct IterConfig {
    pub(crate) outputs: SmallVec<[Option<ConfigTensor>; 2]>,
    pub(crate) inputs: SmallVec<[ConfigTensor; 4]>,
    pub(crate) flags: Flags,
    pub(crate) static_shape: Option<Dims>,
    /// Where the outputs the build allocates come from (None: the
    /// registry's allocator for their device).
    pub(crate) output_allocator: Option<crate::Allocator>,
}

impl std::fmt::Debug for IterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IterConfig")
            .field("noutputs", &self.outputs.len())
            .field("ninputs", &self.inputs.len())
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

macro_rules! flag_setter {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub fn $name(&mut self, value: bool) -> &mut Self {
            self.flags.$name = value;
            self
        }
    };
}

thread_local! {
    /// One freed boxed config per thread, reused by the next
    /// [`IterConfig::new_boxed`] (saves a malloc/free pair per C-API
    /// config).
    static SPARE: std::cell::Cell<Option<Box<IterConfig>>> = const { std::cell::Cell::new(None) };
}

impl IterConfig {
    /// An empty config with c10's defaults.
    pub fn new() -> IterConfig {
        IterConfig::default()
    }

    /// An empty boxed config with c10's defaults: the calling thread's
    /// spare allocation when [`IterConfig::recycle`] left one.
    pub fn new_boxed() -> Box<IterConfig> {
        SPARE
            .try_with(|s| s.take())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Drops a boxed config (and its references to its tensors), keeping
    /// the allocation, reset to the defaults, as the thread's spare.
    pub fn recycle(mut config: Box<IterConfig>) {
        // Reset in place (moving the whole config out and a default one in
        // would copy it twice), while the box is not yet the spare:
        // dropping a tensor may run a deleter that makes or frees configs.
        // (The pattern names every field, so a new one cannot be missed.)
        let IterConfig {
            outputs,
            inputs,
            flags,
            static_shape,
            output_allocator,
        } = &mut *config;
        outputs.clear();
        inputs.clear();
        *flags = Flags::default();
        *static_shape = None;
        *output_allocator = None;
        let _ = SPARE.try_with(|s| drop(s.replace(Some(config))));
    }

    #[inline]
    fn check_room(&self) -> Result<()> {
        let n = self.outputs.len() + self.inputs.len();
        crate::ensure!(
            n < MAX_OPERANDS,
            InvalidArgument,
            "the iterator already has {n} operands: at most {MAX_OPERANDS} are supported"
        );
        Ok(())
    }

    /// Adds an output: a tensor, or None to let the build allocate it.
    /// Outputs must be added before any input.
    #[inline]
    pub fn add_output(&mut self, tensor: Option<Tensor>) -> Result<&mut Self> {
        self.push_output(tensor.map(ConfigTensor::owned))
    }

    /// Adds an output borrowed from the caller (None: allocated by the
    /// build), as c10's `add_borrowed_output`: the config takes no count.
    /// The `ManuallyDrop` is the caller's promise, made where the tensor
    /// was borrowed (the C API's handle view), that the tensor outlives the
    /// build; the config only reads it until then.
    #[inline]
    pub(crate) fn add_borrowed_output(
        &mut self,
        tensor: Option<ManuallyDrop<Tensor>>,
    ) -> Result<&mut Self> {
        self.push_output(tensor.map(ConfigTensor::borrowed))
    }

    #[inline]
    fn push_output(&mut self, tensor: Option<ConfigTensor>) -> Result<&mut Self> {
        crate::ensure!(
            self.inputs.is_empty(),
            InvalidArgument,
            "an output was added after {} input(s): add every output before the inputs",
            self.inputs.len()
        );
        self.check_room()?;
        self.outputs.push(tensor);
        Ok(self)
    }

    /// Adds an input.
    #[inline]
    pub fn add_input(&mut self, tensor: Tensor) -> Result<&mut Self> {
        self.push_input(ConfigTensor::owned(tensor))
    }

    /// Adds an input borrowed from the caller, as c10's
    /// `add_borrowed_input` (see [`IterConfig::add_borrowed_output`]).
    #[inline]
    pub(crate) fn add_borrowed_input(&mut self, tensor: ManuallyDrop<Tensor>) -> Result<&mut Self> {
        self.push_input(ConfigTensor::borrowed(tensor))
    }

    #[inline]
    fn push_input(&mut self, tensor: ConfigTensor) -> Result<&mut Self> {
        self.check_room()?;
        self.inputs.push(tensor);
        Ok(self)
    }

    /// Adds an input that is a wrapped number: a 0-dim CPU tensor that takes
    /// part in type promotion as a scalar (int32 tensor + 2.5 -> Float).
    pub fn add_input_scalar(&mut self, value: crate::dtype::Scalar) -> Result<&mut Self> {
        let t = Tensor::wrapped_scalar(value)?;
        self.add_input(t)
    }

    flag_setter!(
        /// Refuse outputs that overlap themselves or partially overlap an input.
        check_mem_overlap
    );
    flag_setter!(
        /// Accept 0-dim CPU inputs when the common device is not the CPU.
        allow_cpu_scalars
    );
    flag_setter!(
        /// Build a reduction: outputs keep stride 0 along reduced dims.
        is_reduction
    );
    flag_setter!(
        /// Resize defined outputs whose shape differs from the broadcast shape.
        resize_outputs
    );
    flag_setter!(
        /// Require every operand to have the same dtype.
        check_all_same_dtype
    );
    flag_setter!(
        /// Require every operand to be on the same device.
        check_all_same_device
    );
    flag_setter!(
        /// Refuse outputs the common dtype cannot be safely cast to.
        enforce_safe_casting_to_output
    );
    flag_setter!(
        /// Keep the tensors' own dim order (no reordering by strides).
        enforce_linear_iteration
    );
    flag_setter!(
        /// Widen integer (and bool) common dtypes to Float; needs
        /// promote_inputs_to_common_dtype.
        promote_integer_inputs_to_float
    );
    flag_setter!(
        /// tessera's own (NumPy's COPY_IF_OVERLAP): copy an input that
        /// partially overlaps an output to a temporary instead of refusing.
        resolve_overlap_by_copy
    );

    /// Compute in the common dtype of the inputs (converting inputs on the
    /// CPU); turns check_all_same_dtype off when on.
    pub fn promote_inputs_to_common_dtype(&mut self, value: bool) -> &mut Self {
        self.flags.promote_inputs_to_common_dtype = value;
        if value {
            self.flags.check_all_same_dtype = false;
        }
        self
    }

    /// Write the common dtype into outputs of other dtypes (through
    /// temporaries on the CPU); turns check_all_same_dtype off when on.
    pub fn cast_common_dtype_to_outputs(&mut self, value: bool) -> &mut Self {
        self.flags.cast_common_dtype_to_outputs = value;
        if value {
            self.flags.check_all_same_dtype = false;
        }
        self
    }

    /// Fixes the common dtype (and the dtype of allocated outputs); needs
    /// check_all_same_dtype(false).
    pub fn declare_static_dtype(&mut self, dtype: DType) -> &mut Self {
        self.flags.static_dtype = Some(dtype);
        self
    }

    /// Fixes the device of allocated outputs.
    pub fn declare_static_device(&mut self, device: Device) -> &mut Self {
        self.flags.static_device = Some(device);
        self
    }

    /// Fixes the loop shape instead of broadcasting; needs
    /// resize_outputs(false).
    pub fn declare_static_shape(&mut self, shape: &[i64]) -> &mut Self {
        self.static_shape = Some(Dims::from_slice(shape));
        self
    }

    /// Outputs the build allocates (undefined outputs) come from
    /// `allocator` instead of the registry's allocator for their device
    /// (a host's arena); None restores the registry. The allocator must
    /// allocate on the outputs' device type.
    pub fn output_allocator(&mut self, allocator: Option<crate::Allocator>) -> &mut Self {
        self.output_allocator = allocator;
        self
    }

    /// Fixes the loop shape with the dims in `squash_dims` set to 1.
    pub fn declare_static_shape_squashed(
        &mut self,
        shape: &[i64],
        squash_dims: &[i64],
    ) -> Result<&mut Self> {
        let mut s: Dims = Dims::from_slice(shape);
        for &d in squash_dims {
            let w = crate::tensor::shape::wrap_dim(d, s.len())?;
            if !s.is_empty() {
                s[w] = 1;
            }
        }
        self.static_shape = Some(s);
        Ok(self)
    }

    /// The number of outputs added.
    pub fn noutputs(&self) -> usize {
        self.outputs.len()
    }

    /// The number of inputs added.
    pub fn ninputs(&self) -> usize {
        self.inputs.len()
    }
}
