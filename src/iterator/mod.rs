//! The tensor iterator: c10's TensorIteratorConfig + build(), and the loops
//! that run a 2-D kernel callback over the result.
//!
//! [`IterConfig`] collects operands (outputs first) and flags; `build`
//! runs the steps of c10's pipeline (see `steps.rs`), each a separate
//! function: operands, outputs, memory overlap, broadcast shape, outputs
//! to resize, common dtype and device (with CPU cast temporaries), fast
//! set-up, byte strides, dimension reordering, output allocation and
//! dimension coalescing. The iterator's dims are stored innermost first,
//! as in c10.
//!
//! The two steps that copy an operand reach the copy kernel through the
//! `OperandCopy` trait (operand_copy.rs), so this module does not depend
//! on the kernels built on it; the public build entry points
//! (`IterConfig::build*`, the `TensorIterator` presets) pass the copy
//! kernel and are defined in kernels/iter_build.rs.

pub(crate) mod build;
mod config;
mod dims;
mod fast_setup;
mod loop_dims;
mod loops;
mod operand_copy;
mod overlap;
mod presets;
mod reduce;
mod split;
mod steps;
mod types;

pub use config::IterConfig;
pub(crate) use operand_copy::OperandCopy;

/// Drops an iterator from [`IterConfig::build_boxed`], keeping its
/// allocation for the calling thread's next boxed build.
pub fn recycle(it: Box<TensorIterator>) {
    build::recycle_boxed(it)
}
pub use loops::{Loop2d, SerialLoop2d, DEFAULT_GRAIN_SIZE};
pub use overlap::{get_overlap_status, has_internal_overlap, MemOverlap, MemOverlapStatus};

use crate::device::Device;
use crate::dtype::DType;
pub(crate) use loop_dims::LoopDims;

use crate::error::Result;
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::ffi::c_void;

/// The most operands an iterator accepts.
pub const MAX_OPERANDS: usize = 64;

/// One operand of a built iterator.
#[derive(Clone)]
pub struct Operand {
    /// The tensor iterated over (a cast temporary when one was needed).
    pub(crate) tensor: Option<Tensor>,
    /// The caller's output when `tensor` is a cast temporary written back
    /// after the loop.
    pub(crate) original: Option<Tensor>,
    /// Byte strides per iterator dim (innermost first after reordering).
    pub(crate) stride_bytes: LoopDims,
    /// Address of the first element visited (moved by sub-iterators).
    pub(crate) data: *mut u8,
    /// The storage's data address when `data` was set: a run from C
    /// checks that it has not moved since ([`TensorIterator::check_memory`]).
    pub(crate) base: *mut c_void,
    /// The dtype of `tensor` (None for an output still to be allocated).
    pub(crate) current_dtype: Option<DType>,
    /// The dtype the operand is computed in.
    pub(crate) target_dtype: Option<DType>,
    /// The device the operand lives on (None until known).
    pub(crate) device: Option<Device>,
    pub(crate) is_output: bool,
    /// An output that is also an input.
    pub(crate) is_read_write: bool,
    /// A defined output whose shape will be replaced.
    pub(crate) will_resize: bool,
}

impl Operand {
    /// An operand with no tensor yet.
    fn unset() -> Operand {
        Operand {
            tensor: None,
            original: None,
            stride_bytes: LoopDims::new(),
            data: std::ptr::null_mut(),
            base: std::ptr::null_mut(),
            current_dtype: None,
            target_dtype: None,
            device: None,
            is_output: false,
            is_read_write: false,
            will_resize: false,
        }
    }

    /// Makes this slot the operand of `tensor` (None: an output to
    /// allocate), field by field where it lies: an operand assembled
    /// first and moved in would be reloaded with wider loads than its
    /// stores, which stalls. (The pattern names every field, so a new one
    /// cannot be forgotten here.)
    #[inline]
    pub(crate) fn assign(&mut self, tensor: Option<Tensor>, output: bool) {
        let Operand {
            tensor: slot,
            original,
            stride_bytes,
            data,
            base,
            current_dtype,
            target_dtype,
            device,
            is_output,
            is_read_write,
            will_resize,
        } = self;
        let dtype = tensor.as_ref().map(|t| t.dtype());
        *device = tensor.as_ref().map(|t| t.device());
        *current_dtype = dtype;
        *target_dtype = dtype;
        *slot = tensor;
        *original = None;
        stride_bytes.clear();
        *data = std::ptr::null_mut();
        *base = std::ptr::null_mut();
        *is_output = output;
        *is_read_write = false;
        *will_resize = false;
    }

    /// Sets `data` to the tensor's first element, after checking that its
    /// storage still holds it, and records the storage's address.
    #[inline]
    pub(crate) fn set_data(&mut self) -> Result<()> {
        match &self.tensor {
            Some(t) => {
                self.data = t.data_in_storage()? as *mut u8;
                self.base = t.storage().data();
            }
            None => {
                self.data = std::ptr::null_mut();
                self.base = std::ptr::null_mut();
            }
        }
        Ok(())
    }

    /// Lets go of the tensors, keeping the slot for a later build.
    fn release(&mut self) {
        self.tensor = None;
        self.original = None;
    }
}

/// A built iterator: the shape to loop over, each operand's byte strides
/// and data pointer, and the dtypes to compute in.
#[derive(Clone)]
pub struct TensorIterator {
    pub(crate) operands: SmallVec<[Operand; 3]>,
    pub(crate) num_outputs: usize,
    /// Loop shape, innermost dim first.
    pub(crate) shape: LoopDims,
    /// perm[i] = the tensor dim (outermost-first numbering) at iterator dim i.
    pub(crate) perm: LoopDims,
    pub(crate) common_dtype: Option<DType>,
    pub(crate) is_reduction: bool,
    pub(crate) enforce_linear_iteration: bool,
    pub(crate) has_coalesced_dimensions: bool,
    pub(crate) all_ops_same_shape: bool,
    pub(crate) all_ops_are_scalars: bool,
    /// Whether the loop shape was declared (not broadcast).
    pub(crate) shape_is_static: bool,
    /// Whether this (sub-)iterator's output elements are final (split).
    pub(crate) final_output: bool,
    /// Whether the output must be accumulated into (split of a reduced dim).
    pub(crate) accumulate: bool,
}

// SAFETY: the raw data pointers point into storages the iterator keeps
// alive through its operands' tensors; the iterator itself never writes
// through them. Loops hand them to callbacks, whose writes are the
// caller's responsibility (as in c10).
unsafe impl Send for TensorIterator {}
// SAFETY: shared access only reads the iterator's fields.
unsafe impl Sync for TensorIterator {}

impl TensorIterator {
    /// Checks, before a run that follows the build at the host's pace (the
    /// C run calls), that every operand's memory is where the build found
    /// it: a storage resized or given other memory since then would hand
    /// the loop freed addresses, and one shrunk under its tensor addresses
    /// past its end. A few loads and compares per operand; the kernels,
    /// which run right after their own build, need no check.
    ///
    /// Errors: Shape (a storage shrunk below its tensor), InvalidArgument
    /// (a storage's memory moved: build the iterator again).
    pub fn check_memory(&self) -> Result<()> {
        for (i, op) in self.operands.iter().enumerate() {
            let Some(t) = &op.tensor else { continue };
            t.data_in_storage()
                .map_err(|e| e.context(format!("operand {i}")))?;
            let now = t.storage().data();
            crate::ensure!(
                now == op.base,
                InvalidArgument,
                "operand {i}: its storage's memory moved from {:p} to {now:p} since the iterator \
                 was built (a resize or a new data pointer): expected the storage unchanged \
                 until the iterator is freed (build it again)",
                op.base
            );
        }
        Ok(())
    }

    pub(crate) fn empty(
        num_outputs: usize,
        is_reduction: bool,
        enforce_linear_iteration: bool,
    ) -> TensorIterator {
        TensorIterator {
            operands: SmallVec::new(),
            num_outputs,
            shape: LoopDims::new(),
            perm: LoopDims::new(),
            common_dtype: None,
            is_reduction,
            enforce_linear_iteration,
            has_coalesced_dimensions: false,
            all_ops_same_shape: false,
            all_ops_are_scalars: false,
            shape_is_static: false,
            final_output: true,
            accumulate: false,
        }
    }

    /// Puts a used iterator whose operands hold no tensors (see
    /// [`TensorIterator::release_operands`]) back in the state of
    /// [`TensorIterator::empty`], but for the operand slots, which the
    /// build assigns before reading them. Buffers are kept. (The pattern
    /// names every field, so a new one cannot be forgotten here.)
    pub(crate) fn reset(
        &mut self,
        num_outputs: usize,
        is_reduction: bool,
        enforce_linear_iteration: bool,
    ) {
        let TensorIterator {
            operands,
            num_outputs: outputs,
            shape,
            perm,
            common_dtype,
            is_reduction: reduction,
            enforce_linear_iteration: linear,
            has_coalesced_dimensions,
            all_ops_same_shape,
            all_ops_are_scalars,
            shape_is_static,
            final_output,
            accumulate,
        } = self;
        debug_assert!(operands.iter().all(|op| op.tensor.is_none()));
        *outputs = num_outputs;
        shape.clear();
        perm.clear();
        *common_dtype = None;
        *reduction = is_reduction;
        *linear = enforce_linear_iteration;
        *has_coalesced_dimensions = false;
        *all_ops_same_shape = false;
        *all_ops_are_scalars = false;
        *shape_is_static = false;
        *final_output = true;
        *accumulate = false;
    }

    /// Gives the iterator exactly `n` operand slots to [`Operand::assign`],
    /// reusing those a recycled iterator kept.
    #[inline]
    pub(crate) fn set_operand_count(&mut self, n: usize) {
        self.operands.truncate(n);
        while self.operands.len() < n {
            self.operands.push(Operand::unset());
        }
    }

    /// Lets go of every operand's tensors, keeping the slots for the next
    /// build (see [`TensorIterator::reset`]).
    pub(crate) fn release_operands(&mut self) {
        for op in self.operands.iter_mut() {
            op.release();
        }
    }

    /// Number of loop dims.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The loop shape, innermost dim first.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// The number of elements visited.
    pub fn numel(&self) -> i64 {
        self.shape.iter().product()
    }

    /// Operands: outputs first, then inputs.
    pub fn ntensors(&self) -> usize {
        self.operands.len()
    }

    /// The number of outputs.
    pub fn noutputs(&self) -> usize {
        self.num_outputs
    }

    /// The number of inputs.
    pub fn ninputs(&self) -> usize {
        self.operands.len() - self.num_outputs
    }

    /// Byte strides of operand `arg` per loop dim.
    pub fn strides(&self, arg: usize) -> &[i64] {
        &self.operands[arg].stride_bytes
    }

    /// The dtype operand `arg` is iterated in.
    pub fn dtype(&self, arg: usize) -> DType {
        self.operands[arg]
            .current_dtype
            .expect("a built iterator knows every operand's dtype")
    }

    /// The common dtype computed by the build, if any.
    pub fn common_dtype(&self) -> Option<DType> {
        self.common_dtype
    }

    /// The device of operand `arg`.
    pub fn device(&self, arg: usize) -> Device {
        self.operands[arg].device.unwrap_or(Device::CPU)
    }

    /// The address of operand `arg`'s first visited element (NULL when the
    /// iterator is empty).
    pub fn data_ptr(&self, arg: usize) -> *mut u8 {
        self.operands[arg].data
    }

    /// Output `i` as the caller sees it: the given tensor (never the cast
    /// temporary) or the allocated one.
    pub fn output(&self, i: usize) -> Tensor {
        let op = &self.operands[i];
        op.original
            .clone()
            .or_else(|| op.tensor.clone())
            .expect("a built iterator has every output")
    }

    /// The tensor operand `arg` iterates over (a cast temporary if one was
    /// made).
    pub fn tensor(&self, arg: usize) -> &Tensor {
        self.operands[arg]
            .tensor
            .as_ref()
            .expect("a built iterator has every operand")
    }

    /// Input `i` as iterated (a promoted temporary if one was made).
    pub fn input(&self, i: usize) -> &Tensor {
        self.tensor(self.num_outputs + i)
    }

    /// Whether operand `arg` is an output that is also an input.
    pub fn is_read_write(&self, arg: usize) -> bool {
        self.operands[arg].is_read_write
    }

    /// One element, or one loop dim along which every operand is
    /// contiguous.
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 1 {
            return true;
        }
        self.ndim() == 1 && self.has_contiguous_first_dim()
    }

    /// Whether the innermost loop dim is contiguous for every operand.
    pub fn has_contiguous_first_dim(&self) -> bool {
        if self.ndim() == 0 {
            return true;
        }
        (0..self.ntensors())
            .all(|arg| self.operands[arg].stride_bytes[0] == self.dtype(arg).itemsize() as i64)
    }

    /// Whether the loop has a single dim.
    pub fn is_trivial_1d(&self) -> bool {
        self.ndim() == 1
    }

    /// Whether `dim` is reduced (some output has stride 0 along it).
    pub fn is_dim_reduced(&self, dim: usize) -> bool {
        self.operands[..self.num_outputs]
            .iter()
            .any(|op| op.stride_bytes[dim] == 0 && self.shape[dim] > 1)
    }

    /// Whether output elements computed by this (sub-)iterator are final.
    pub fn is_final_output(&self) -> bool {
        self.final_output
    }

    /// Whether a kernel must accumulate into the output (a sub-iterator of a
    /// reduction split along a reduced dim).
    pub fn should_accumulate(&self) -> bool {
        self.accumulate
    }

    /// The permutation from loop dims to tensor dims (valid before
    /// coalescing; empty after the fast set-up).
    pub fn perm(&self) -> &[i64] {
        &self.perm
    }
}

impl std::fmt::Debug for TensorIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let strides: Vec<&[i64]> = self
            .operands
            .iter()
            .map(|op| &op.stride_bytes[..])
            .collect();
        f.debug_struct("TensorIterator")
            .field("shape", &self.shape)
            .field("noutputs", &self.num_outputs)
            .field("strides", &strides)
            .field("common_dtype", &self.common_dtype)
            .finish()
    }
}

#[cfg(test)]
mod tests;
