//! Copy with dtype conversion and broadcasting (`tsr_tensor_copy`); also
//! what contiguous(), clone(), to_dtype(), the iterator's cast temporaries
//! and resolve_overlap_by_copy use.
//!
//! Paths, fastest first:
//! 1. Same sizes and strides, both non-overlapping and dense: one flat run
//!    over the memory both occupy (memcpy for equal dtypes, a typed cast
//!    loop otherwise), split across threads. No iterator is built.
//! 2. Transpose-like layouts (the source's innermost dim is not the
//!    destination's): cache-blocked tiles (blocked.rs).
//! 3. Anything else: the iterator's 2-D loop with typed runs that
//!    specialise contiguous and broadcast (stride 0) sources.

use super::blocked;
use super::cast::cast_run;
use super::dispatch::{dispatch, dispatch_width};
use super::elem::Elem;
use super::loops::map_run;
use super::simd;
use crate::dtype::DType;
use crate::error::Result;
use crate::iterator::DEFAULT_GRAIN_SIZE as GRAIN;
use crate::iterator::{
    get_overlap_status, IterConfig, MemOverlapStatus, OperandCopy, TensorIterator,
};
use crate::parallel;
use crate::tensor::{MemoryFormat, Tensor};

/// The copy kernel as the iterator's build pipeline sees it
/// ([`OperandCopy`]): the build entry points (iter_build.rs) pass this.
pub(crate) struct CopyKernel;

impl OperandCopy for CopyKernel {
    #[inline]
    fn copy_(dst: &Tensor, src: &Tensor) -> Result<()> {
        copy_(dst, src)
    }
}

impl TensorIterator {
    /// Writes outputs computed in a temporary of the common dtype back to
    /// the caller's tensors (with conversion).
    pub fn cast_outputs(&self) -> Result<()> {
        for op in &self.operands[..self.num_outputs] {
            if let (Some(orig), Some(temp)) = (&op.original, &op.tensor) {
                copy_(orig, temp)?;
            }
        }
        Ok(())
    }
}

/// Copies `src` into `dst`, converting dtypes and broadcasting `src` to
/// `dst`'s shape. Bumps dst's version.
///
/// Errors: Device (non-CPU tensors: device copies go through the
/// allocators), Shape (not broadcastable), Unsupported (a conversion to or
/// from a quantized dtype; equal dtypes copy bytes), Overlap
/// (dst writes one location through several elements), ReadOnly (dst on
/// a read-only storage).
pub fn copy_(dst: &Tensor, src: &Tensor) -> Result<()> {
    dst.storage()
        .check_writable("a copy into the destination tensor")?;
    crate::ensure!(
        dst.device().is_cpu() && src.device().is_cpu(),
        Device,
        "copy from {} to {}: only host copies run here (device copies go through the allocators)",
        src.device(),
        dst.device()
    );
    if dst.dtype() != src.dtype() {
        check_convertible(src.dtype())?;
        check_convertible(dst.dtype())?;
    }
    if Tensor::ptr_eq(dst, src) || dst.numel() == 0 {
        return Ok(());
    }
    if dst.sizes() == src.sizes()
        && dst.strides() == src.strides()
        && dst.is_non_overlapping_and_dense()
        && matches!(
            get_overlap_status(dst, src),
            MemOverlapStatus::No | MemOverlapStatus::Full
        )
    {
        flat_copy(dst, src)?;
    } else {
        let mut config = IterConfig::new();
        config
            .add_output(Some(dst.clone()))?
            .add_input(src.clone())?
            .resize_outputs(false)
            .check_all_same_dtype(false)
            .check_mem_overlap(true)
            .resolve_overlap_by_copy(true);
        let it = config.build()?;
        copy_iter(&it)?;
    }
    dst.bump_version();
    Ok(())
}

fn check_convertible(d: DType) -> Result<()> {
    // Float4_e2m1fn_x2 packs two values in one element: c10 converts it to
    // and from no other dtype (its copy kernel raises), and neither does
    // tessera; dtype::float4 has the nibble conversions for hosts.
    crate::ensure!(
        d != DType::Float4E2M1FnX2,
        Unsupported,
        "conversion to or from {d} is not supported: an element packs two 4-bit values, \
         and c10 converts it to no other dtype (copies between equal dtypes are)"
    );
    crate::ensure!(
        !d.is_quantized(),
        Unsupported,
        "conversion to or from {d} is not supported (copies between equal dtypes are)"
    );
    Ok(())
}

/// Two dense tensors with identical sizes and strides: element k in memory
/// order of one matches element k of the other.
fn flat_copy(dst: &Tensor, src: &Tensor) -> Result<()> {
    let n = dst.numel();
    let (d0, s0) = (
        dst.data_in_storage()? as usize,
        src.data_in_storage()? as usize,
    );
    let (dt, st) = (dst.dtype(), src.dtype());
    if dt == st {
        if d0 == s0 {
            return Ok(());
        }
        let item = dt.itemsize();
        let stream = simd::should_stream(n as usize * item);
        parallel::parallel_for(0, n, GRAIN, |b, e| {
            let off = b as usize * item;
            let (d, s, bytes) = (
                (d0 + off) as *mut u8,
                (s0 + off) as *const u8,
                (e - b) as usize * item,
            );
            // SAFETY: both tensors own n dense elements from their data
            // pointers, and they are disjoint (equal pointers returned
            // above; a partial overlap never reaches the flat path).
            unsafe {
                if stream {
                    simd::stream_copy(d, s, bytes)
                } else {
                    std::ptr::copy_nonoverlapping(s, d, bytes)
                }
            };
        });
        return Ok(());
    }
    let (ss, ds) = (st.itemsize(), dt.itemsize());
    let runs = cast_runs(st, dt)?;
    let stream = simd::should_stream(n as usize * ds);
    parallel::parallel_for(0, n, GRAIN, |b, e| {
        let mut data = [
            (d0 + b as usize * ds) as *mut u8,
            (s0 + b as usize * ss) as *mut u8,
        ];
        // SAFETY: elements [b, e) of both dense runs; the memory is
        // disjoint or exactly shared (equal itemsizes), which the cast
        // runs allow.
        unsafe { runs(&mut data, &[ds as i64, ss as i64, 0, 0], e - b, 1, stream) };
    });
    Ok(())
}

/// Runs a copy over a built two-operand iterator (output 0, input 1).
pub(crate) fn copy_iter(it: &TensorIterator) -> Result<()> {
    let (dt, st) = (it.dtype(0), it.dtype(1));
    if let Some(b) = blocked::transposed_dim(it) {
        if dt == st {
            dispatch_width!(dt.itemsize(), T => blocked::copy_tiled::<T>(it, b));
        } else {
            // Transpose into a temporary of the source dtype laid out as
            // the destination (tiled), then convert densely: one tiled
            // kernel per itemsize instead of one per dtype pair.
            let dst = it.tensor(0);
            let temp = dst.empty_like_dtype(MemoryFormat::Preserve, st)?;
            copy_(&temp, it.tensor(1))?;
            copy_(dst, &temp)?;
        }
        return Ok(());
    }
    if dt == st {
        let item = dt.itemsize() as i64;
        it.for_each(
            &|data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64| {
                for j in 0..n1 {
                    // SAFETY: the iterator keeps data + i*stride0 + j*stride1
                    // inside each operand for i < n0, j < n1.
                    unsafe {
                        let d = data[0].offset((j * strides[2]) as isize);
                        let s = data[1].offset((j * strides[3]) as isize);
                        same_run(d, strides[0], s, strides[1], n0, item);
                    }
                }
            },
            0,
        );
        return Ok(());
    }
    let runs = cast_runs(st, dt)?;
    let stream = simd::should_stream(it.numel() as usize * dt.itemsize());
    it.for_each(
        // SAFETY: the iterator keeps every (i, j) < (n0, n1) inside both
        // operands, which are disjoint or exactly aliased.
        &|data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64| unsafe {
            runs(data, strides, n0, n1, stream)
        },
        0,
    );
    Ok(())
}

/// A 2-D conversion loop over two operands (output first), with the
/// iterator's stride layout; the flag asks for streaming stores.
type CastRuns = unsafe fn(&mut [*mut u8], &[i64], i64, i64, bool);

/// The 2-D conversion loop from `st` to `dt`: one instance per dtype pair.
fn cast_runs(st: DType, dt: DType) -> Result<CastRuns> {
    Ok(
        dispatch!(convert, st, "copy", S => dispatch!(convert, dt, "copy", D => {
            cast_2d::<S, D> as CastRuns
        })),
    )
}

/// # Safety
/// `data`/`strides` as an iterator hands them to a 2-D loop: every
/// (i, j) < (n0, n1) addresses valid elements; the operands are disjoint
/// or exactly aliased.
unsafe fn cast_2d<S: Elem, D: Elem>(
    data: &mut [*mut u8],
    strides: &[i64],
    n0: i64,
    n1: i64,
    stream: bool,
) {
    for j in 0..n1 {
        // SAFETY: per the caller.
        unsafe {
            let d = data[0].offset((j * strides[2]) as isize);
            let s = data[1].offset((j * strides[3]) as isize);
            cast_run::<S, D>(
                d,
                strides[0] as isize,
                s,
                strides[1] as isize,
                n0 as usize,
                stream,
            );
        }
    }
}

/// Copies `n` elements of `item` bytes with byte strides: memmove for
/// contiguous runs, typed moves otherwise.
///
/// # Safety
/// Every element addressed must be valid; the runs are disjoint or exactly
/// the same.
unsafe fn same_run(d: *mut u8, ds: i64, s: *const u8, ss: i64, n: i64, item: i64) {
    if ds == item && ss == item {
        // SAFETY: contiguous runs of n * item bytes, per the caller.
        unsafe { std::ptr::copy(s, d, (n * item) as usize) };
        return;
    }
    let (ds, ss, n) = (ds as isize, ss as isize, n as usize);
    // SAFETY: T has `item` bytes, so the caller's runs of n valid elements,
    // disjoint or the same, are map_run's requirement.
    dispatch_width!(item as usize, T => unsafe { map_run::<T, T>(d, ds, s, ss, n, false, |v| v) })
}
