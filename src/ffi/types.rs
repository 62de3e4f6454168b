//! Plain-data types and constants that cross the ABI, and every opaque
//! handle type (the area files re-export their own). The bottom of ffi:
//! names no other file of it.

use crate::device::{Device, DeviceType};
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::refcount::RcTarget;
use std::ffi::c_void;

/// Status of a fallible call: `TSR_OK` (0) or an error code. Codes are
/// never renumbered once released.
pub type TsrStatus = i32;
/// Success.
pub const TSR_OK: TsrStatus = 0;
/// An argument has a value outside what the function accepts.
pub const TSR_ERR_INVALID_ARGUMENT: TsrStatus = 1;
/// A required pointer argument was NULL.
pub const TSR_ERR_NULL_POINTER: TsrStatus = 2;
/// An allocation failed, or its size cannot be represented.
pub const TSR_ERR_OUT_OF_MEMORY: TsrStatus = 3;
/// Sizes, strides or dims do not fit together.
pub const TSR_ERR_SHAPE: TsrStatus = 4;
/// A dtype is not accepted, or two dtypes do not go together.
pub const TSR_ERR_DTYPE: TsrStatus = 5;
/// A device is not accepted or available, or two devices differ.
pub const TSR_ERR_DEVICE: TsrStatus = 6;
/// Operands overlap in memory in a way the operation refuses.
pub const TSR_ERR_OVERLAP: TsrStatus = 7;
/// A storage that is not resizable was asked to resize.
pub const TSR_ERR_NOT_RESIZABLE: TsrStatus = 8;
/// A valid request this build does not implement.
pub const TSR_ERR_UNSUPPORTED: TsrStatus = 9;
/// A bug in tessera (a broken invariant or a caught panic).
pub const TSR_ERR_INTERNAL: TsrStatus = 10;
/// A handle whose strong count already reached zero was used.
pub const TSR_ERR_DEAD_OBJECT: TsrStatus = 11;
/// An integer division by zero.
pub const TSR_ERR_ZERO_DIVISION: TsrStatus = 12;
/// A write into read-only memory (a read-only storage or tensor).
pub const TSR_ERR_READ_ONLY: TsrStatus = 13;
/// A file or shared-memory operation failed: the path and the OS reason are
/// in the message.
pub const TSR_ERR_IO: TsrStatus = 14;
/// A malformed, truncated or refused file or buffer.
pub const TSR_ERR_FORMAT: TsrStatus = 15;
/// The host cancelled the call (a load's progress callback returned
/// nonzero); nothing the call made is kept.
pub const TSR_ERR_CANCELLED: TsrStatus = 16;

/// How tsr_storage_from_file maps a file.
pub type TsrFileMode = i32;
/// Copy-on-write: the storage is writable, the file never changes.
pub const TSR_FILE_PRIVATE: TsrFileMode = 0;
/// Writes reach the file; it is created (mode 0600) or extended to nbytes.
pub const TSR_FILE_SHARED: TsrFileMode = 1;
/// A read-only mapping: a read-only storage.
pub const TSR_FILE_READ_ONLY: TsrFileMode = 2;

/// The bytes a buffer needs for the name tsr_storage_share_name writes
/// ("/tessera-" + 8 hex digits of the pid + "-" + 16 hex digits, and the
/// NUL): `char name[TSR_SHM_NAME_SIZE];`.
pub const TSR_SHM_NAME_SIZE: usize = 35;
const _: () = assert!(TSR_SHM_NAME_SIZE == crate::storage::shm::NEW_NAME_LEN + 1);

/// An element type: c10's ScalarType number, 8 bits wide; every number
/// 0..46 of PyTorch 2.15 is one. Arithmetic and fill: the integers, Bool,
/// the floating types Half / Float / Double / BFloat16 and the complex
/// types (BComplex32 as ComplexHalf). The float8 types and
/// Float4_e2m1fn_x2 have no arithmetic. The quantized, bits and sub-byte
/// integer types (UInt1..7, Int1..7) are storage-only: views and
/// same-dtype copies; anything else is TSR_ERR_UNSUPPORTED naming the
/// dtype. Numbers outside 0..46 are TSR_ERR_INVALID_ARGUMENT.
pub type TsrDType = i8;
/// uint8 (c10 Byte).
pub const TSR_BYTE: TsrDType = 0;
/// int8 (c10 Char).
pub const TSR_CHAR: TsrDType = 1;
/// int16 (c10 Short).
pub const TSR_SHORT: TsrDType = 2;
/// int32 (c10 Int).
pub const TSR_INT: TsrDType = 3;
/// int64 (c10 Long).
pub const TSR_LONG: TsrDType = 4;
/// IEEE float16 (c10 Half).
pub const TSR_HALF: TsrDType = 5;
/// float32 (c10 Float).
pub const TSR_FLOAT: TsrDType = 6;
/// float64 (c10 Double).
pub const TSR_DOUBLE: TsrDType = 7;
/// complex of float16.
pub const TSR_COMPLEX_HALF: TsrDType = 8;
/// complex of float32.
pub const TSR_COMPLEX_FLOAT: TsrDType = 9;
/// complex of float64.
pub const TSR_COMPLEX_DOUBLE: TsrDType = 10;
/// bool (one byte, 0 or 1).
pub const TSR_BOOL: TsrDType = 11;
/// quantized int8 (storage only).
pub const TSR_QINT8: TsrDType = 12;
/// quantized uint8 (storage only).
pub const TSR_QUINT8: TsrDType = 13;
/// quantized int32 (storage only).
pub const TSR_QINT32: TsrDType = 14;
/// bfloat16.
pub const TSR_BFLOAT16: TsrDType = 15;
/// quantized uint4, two per byte (c10 QUInt4x2; storage only).
pub const TSR_QUINT4X2: TsrDType = 16;
/// quantized uint2, four per byte (c10 QUInt2x4; storage only).
pub const TSR_QUINT2X4: TsrDType = 17;
/// eight 1-bit fields per byte (c10 Bits1x8; storage only).
pub const TSR_BITS1X8: TsrDType = 18;
/// four 2-bit fields per byte (c10 Bits2x4; storage only).
pub const TSR_BITS2X4: TsrDType = 19;
/// two 4-bit fields per byte (c10 Bits4x2; storage only).
pub const TSR_BITS4X2: TsrDType = 20;
/// one byte of bits (c10 Bits8; storage only).
pub const TSR_BITS8: TsrDType = 21;
/// two bytes of bits (c10 Bits16; storage only).
pub const TSR_BITS16: TsrDType = 22;
/// float8 e5m2 (bias 15, largest 57344, +-inf; converted to through float32
/// with nearest even, overflowing to inf; copy and fill, no arithmetic).
pub const TSR_FLOAT8_E5M2: TsrDType = 23;
/// float8 e4m3fn (bias 7, largest 448, no inf, NaN 0x7F / 0xFF; nearest
/// even, saturating at +-448, inf too; copy and fill, no arithmetic).
pub const TSR_FLOAT8_E4M3FN: TsrDType = 24;
/// float8 e5m2fnuz (bias 16, largest 57344, one NaN 0x80, no inf, no
/// negative zero; nearest even, overflow and inf to NaN; copy and fill).
pub const TSR_FLOAT8_E5M2FNUZ: TsrDType = 25;
/// float8 e4m3fnuz (bias 8, largest 240, one NaN 0x80, no inf, no negative
/// zero; nearest even, overflow and inf to NaN; copy and fill).
pub const TSR_FLOAT8_E4M3FNUZ: TsrDType = 26;
/// uint16.
pub const TSR_UINT16: TsrDType = 27;
/// uint32.
pub const TSR_UINT32: TsrDType = 28;
/// uint64.
pub const TSR_UINT64: TsrDType = 29;
/// 1-bit unsigned integer, one per byte (c10 UInt1; storage only).
pub const TSR_UINT1: TsrDType = 30;
/// 2-bit unsigned integer, one per byte (c10 UInt2; storage only).
pub const TSR_UINT2: TsrDType = 31;
/// 3-bit unsigned integer, one per byte (c10 UInt3; storage only).
pub const TSR_UINT3: TsrDType = 32;
/// 4-bit unsigned integer, one per byte (c10 UInt4; storage only).
pub const TSR_UINT4: TsrDType = 33;
/// 5-bit unsigned integer, one per byte (c10 UInt5; storage only).
pub const TSR_UINT5: TsrDType = 34;
/// 6-bit unsigned integer, one per byte (c10 UInt6; storage only).
pub const TSR_UINT6: TsrDType = 35;
/// 7-bit unsigned integer, one per byte (c10 UInt7; storage only).
pub const TSR_UINT7: TsrDType = 36;
/// 1-bit signed integer, one per byte (c10 Int1; storage only).
pub const TSR_INT1: TsrDType = 37;
/// 2-bit signed integer, one per byte (c10 Int2; storage only).
pub const TSR_INT2: TsrDType = 38;
/// 3-bit signed integer, one per byte (c10 Int3; storage only).
pub const TSR_INT3: TsrDType = 39;
/// 4-bit signed integer, one per byte (c10 Int4; storage only).
pub const TSR_INT4: TsrDType = 40;
/// 5-bit signed integer, one per byte (c10 Int5; storage only).
pub const TSR_INT5: TsrDType = 41;
/// 6-bit signed integer, one per byte (c10 Int6; storage only).
pub const TSR_INT6: TsrDType = 42;
/// 7-bit signed integer, one per byte (c10 Int7; storage only).
pub const TSR_INT7: TsrDType = 43;
/// float8 e8m0fnu (a power-of-two scale 2^(b-127): 8 exponent bits, no
/// sign, no zero, NaN 0xFF; the sign is dropped and the exponent rounds up
/// from a significand of 1.5, as c10; copy and fill).
pub const TSR_FLOAT8_E8M0FNU: TsrDType = 44;
/// two float4 e2m1fn values packed in one byte (c10 Float4_e2m1fn_x2):
/// storage only, as c10 (same-dtype copies; no conversion, no fill).
pub const TSR_FLOAT4_E2M1FN_X2: TsrDType = 45;
/// complex of two bfloat16 (c10 BComplex32).
pub const TSR_BCOMPLEX32: TsrDType = 46;
/// Alias of TSR_BYTE.
pub const TSR_UINT8: TsrDType = 0;
/// Alias of TSR_CHAR.
pub const TSR_INT8: TsrDType = 1;
/// Alias of TSR_SHORT.
pub const TSR_INT16: TsrDType = 2;
/// Alias of TSR_INT.
pub const TSR_INT32: TsrDType = 3;
/// Alias of TSR_LONG.
pub const TSR_INT64: TsrDType = 4;
/// Alias of TSR_HALF.
pub const TSR_FLOAT16: TsrDType = 5;
/// Alias of TSR_FLOAT.
pub const TSR_FLOAT32: TsrDType = 6;
/// Alias of TSR_DOUBLE.
pub const TSR_FLOAT64: TsrDType = 7;

/// A device type: c10's DeviceType number, 8 bits wide.
pub type TsrDeviceType = i8;
/// Host memory.
pub const TSR_CPU: TsrDeviceType = 0;
/// NVIDIA GPUs.
pub const TSR_CUDA: TsrDeviceType = 1;
/// AMD GPUs.
pub const TSR_HIP: TsrDeviceType = 6;
/// Intel GPUs.
pub const TSR_XPU: TsrDeviceType = 12;
/// Apple GPUs.
pub const TSR_MPS: TsrDeviceType = 13;
/// Metadata-only tensors.
pub const TSR_META: TsrDeviceType = 14;
/// Out-of-tree backends.
pub const TSR_PRIVATE_USE1: TsrDeviceType = 20;

/// A memory format: c10's MemoryFormat number, 32 bits wide.
pub type TsrMemoryFormat = i32;
/// Row-major contiguous.
pub const TSR_CONTIGUOUS: TsrMemoryFormat = 0;
/// Keep the input's layout (for copies).
pub const TSR_PRESERVE: TsrMemoryFormat = 1;
/// NHWC for 4-d tensors.
pub const TSR_CHANNELS_LAST: TsrMemoryFormat = 2;
/// NDHWC for 5-d tensors.
pub const TSR_CHANNELS_LAST_3D: TsrMemoryFormat = 3;
/// Alias of TSR_CONTIGUOUS (torch.contiguous_format).
pub const TSR_CONTIGUOUS_FORMAT: TsrMemoryFormat = 0;
/// Alias of TSR_PRESERVE (torch.preserve_format).
pub const TSR_PRESERVE_FORMAT: TsrMemoryFormat = 1;

/// The largest number of dims a tensor or iterator accepts.
pub const TSR_MAX_DIMS: i64 = 64;
// cbindgen writes only literals into the header, so TSR_MAX_DIMS stays one;
// this ties it to the core's limit at compile time.
const _: () = assert!(TSR_MAX_DIMS as usize == crate::tensor::MAX_DIMS);

/// A device: type and index (-1 = the current device of that type).
/// Two bytes.
///
/// cbindgen:field-names=[type, index]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsrDevice {
    /// The device type (TSR_CPU, TSR_CUDA, ...).
    pub device_type: TsrDeviceType,
    /// The index, -1 for the current device.
    pub index: i8,
}

/// A deleter: frees the context it receives. Must be callable from any
/// thread.
pub type TsrDeleterFn = Option<unsafe extern "C" fn(ctx: *mut c_void)>;

/// Memory with its owner (c10's DataPtr): `data` is the address used, `ctx`
/// what `deleter` receives. The deleter runs exactly once, with ctx, when
/// ctx is non-NULL; a NULL deleter frees nothing.
#[repr(C)]
#[derive(Debug)]
pub struct TsrDataPtr {
    /// The data address.
    pub data: *mut c_void,
    /// The context passed to the deleter.
    pub ctx: *mut c_void,
    /// The deleter, or NULL.
    pub deleter: TsrDeleterFn,
    /// Where the memory lives.
    pub device: TsrDevice,
}

/// Real and imaginary parts of a complex scalar.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TsrComplex {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

/// The value of a TsrScalar; which member is read depends on its dtype:
/// `b` for TSR_BOOL, `u` for TSR_UINT64 (and the other unsigned wide
/// types), `i` for the other integer types, `f` for floating types, `c` for
/// complex types.
#[repr(C)]
#[derive(Clone, Copy)]
pub union TsrScalarValue {
    /// Signed integers.
    pub i: i64,
    /// UInt16/32/64.
    pub u: u64,
    /// Floating values.
    pub f: f64,
    /// Complex values.
    pub c: TsrComplex,
    /// Bool.
    pub b: bool,
}

/// A tagged number (fill values, alpha). Build one with tsr_scalar_int,
/// tsr_scalar_float, tsr_scalar_bool or tsr_scalar_complex.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TsrScalar {
    /// The dtype that says which member of `v` holds the value.
    pub dtype: TsrDType,
    /// The value.
    pub v: TsrScalarValue,
}

impl TsrDevice {
    pub(crate) fn to_core(self) -> Result<Device> {
        Device::new(DeviceType::from_raw(self.device_type)?, self.index)
    }

    pub(crate) fn from_core(d: Device) -> TsrDevice {
        TsrDevice {
            device_type: d.device_type.raw(),
            index: d.index,
        }
    }
}

impl TsrScalar {
    pub(crate) fn to_core(self) -> Result<Scalar> {
        let dtype = DType::from_raw(self.dtype)?;
        // SAFETY: every member is plain old data of at most 16 bytes; the
        // dtype selects which one the host wrote. Bool is read through its
        // byte so any non-zero byte means true without an invalid bool.
        Ok(unsafe {
            if dtype == DType::Bool {
                Scalar::Bool(*(&self.v as *const TsrScalarValue as *const u8) != 0)
            } else if dtype.is_complex() {
                Scalar::Complex(self.v.c.re, self.v.c.im)
            } else if dtype.is_floating() {
                Scalar::Float(self.v.f)
            } else if dtype.is_barebones_unsigned() {
                Scalar::UInt(self.v.u)
            } else {
                Scalar::Int(self.v.i)
            }
        })
    }

    pub(crate) fn from_core(s: Scalar) -> TsrScalar {
        match s {
            Scalar::Bool(b) => TsrScalar {
                dtype: TSR_BOOL,
                v: TsrScalarValue { b },
            },
            Scalar::Int(i) => TsrScalar {
                dtype: TSR_LONG,
                v: TsrScalarValue { i },
            },
            Scalar::UInt(u) => TsrScalar {
                dtype: TSR_UINT64,
                v: TsrScalarValue { u },
            },
            Scalar::Float(f) => TsrScalar {
                dtype: TSR_DOUBLE,
                v: TsrScalarValue { f },
            },
            Scalar::Complex(re, im) => TsrScalar {
                dtype: TSR_COMPLEX_DOUBLE,
                v: TsrScalarValue {
                    c: TsrComplex { re, im },
                },
            },
        }
    }
}

// ---- Opaque handle types (the C side sees them only through pointers;
// ffi/handle.rs ties each to its Rust target and ownership). ----

/// A refcounted allocator (opaque).
pub struct TsrAllocator {
    _private: [u8; 0],
}

/// A weak reference to an allocator (opaque).
pub struct TsrWeakAllocator {
    _private: [u8; 0],
}

/// A refcounted storage: bytes plus the allocator that made them (opaque).
pub struct TsrStorage {
    _private: [u8; 0],
}

/// A weak reference to a storage (opaque). It does not keep the bytes:
/// they are freed when the last strong reference goes.
pub struct TsrWeakStorage {
    _private: [u8; 0],
}

/// A refcounted tensor: sizes, strides and an offset over a storage
/// (opaque). Metadata reads are thread-safe; tsr_tensor_set must not run
/// while other threads use the same tensor.
pub struct TsrTensor {
    _private: [u8; 0],
}

/// A weak reference to a tensor (opaque).
pub struct TsrWeakTensor {
    _private: [u8; 0],
}

/// An iterator configuration (opaque, single owner: free it with
/// tsr_iter_config_free). Not thread-safe.
pub struct TsrIterConfig {
    _private: [u8; 0],
}

/// A built iterator (opaque, single owner: free it with tsr_iter_free).
/// Queries and loops may run from several threads at once.
pub struct TsrIter {
    _private: [u8; 0],
}

/// An ordered name -> tensor dictionary with string metadata (opaque,
/// single owner: free it with tsr_dict_free). Not thread-safe.
pub struct TsrTensorDict {
    _private: [u8; 0],
}

/// A checkpoint opened with tsr_checkpoint_open (opaque): its index,
/// loaded from in parts. Thread-safe: loads may run from several threads
/// at once; close it once with tsr_checkpoint_close.
pub struct TsrCheckpoint {
    _private: [u8; 0],
}

/// A file format of tsr_save / tsr_load (TSR_FORMAT_*).
pub type TsrFormat = i32;
/// Load: detected from the bytes (the content decides, not the name);
/// save: the format the path's extension names (".safetensors", ".npy",
/// ".npz", ".gguf"), else TSR_FORMAT_TORCH.
pub const TSR_FORMAT_AUTO: TsrFormat = 0;
/// torch.save's zip archive (readable by torch.load and torch::pickle_load).
pub const TSR_FORMAT_TORCH: TsrFormat = 1;
/// The safetensors layout.
pub const TSR_FORMAT_SAFETENSORS: TsrFormat = 2;
/// NumPy's .npy: one array, named "arr_0" in the dict (every NumPy dtype
/// with a c10 twin; C or Fortran order; big-endian data swapped).
pub const TSR_FORMAT_NPY: TsrFormat = 3;
/// torch.save's legacy format (PyTorch before 1.6, or
/// `_use_new_zipfile_serialization=False`): read only; saving in it is
/// TSR_ERR_UNSUPPORTED.
pub const TSR_FORMAT_TORCH_LEGACY: TsrFormat = 4;
/// torch.jit.save's archives: the scripted module's tensors, named by
/// attribute path ("0.weight"); its code is never read. Read only.
pub const TSR_FORMAT_TORCHSCRIPT: TsrFormat = 5;
/// NumPy's .npz (np.savez / np.savez_compressed): entry "NAME.npy" is
/// tensor "NAME"; stored entries viewed in place (TSR_LOAD_MMAP: mapped),
/// deflated ones inflated. Saving writes stored entries, as np.savez.
pub const TSR_FORMAT_NPZ: TsrFormat = 6;
/// llama.cpp's GGUF (versions 3 and 2): key-value metadata as metadata
/// (arrays as JSON, types in "gguf.types"), dims reversed into c10's
/// order, F32/F16/BF16/F64/I8-I64 as their dtypes, quantized types as
/// uint8 raw blocks with "NAME.ggml_type" and "NAME.ggml_shape" metadata
/// (written back as that type). TSR_LOAD_MMAP views the file.
pub const TSR_FORMAT_GGUF: TsrFormat = 7;
/// torch.distributed.checkpoint: a directory of `.metadata` and
/// `__R_N.distcp` files. tsr_load of the directory (TSR_FORMAT_AUTO finds
/// it) gives full tensors whatever number of ranks wrote it, names joined
/// by '.', non-tensor items listed in "tessera.skipped"; tsr_save(dict,
/// directory, TSR_FORMAT_DCP) writes one torch.distributed.checkpoint.load
/// reads, replacing the directory atomically.
pub const TSR_FORMAT_DCP: TsrFormat = 8;
/// tsr_load flag: tensors view a private (copy-on-write) mapping of the
/// file, nothing copied (torch.load(mmap=True)).
pub const TSR_LOAD_MMAP: u32 = 1;
/// tsr_load flag: load the tensors around pickled objects whose globals
/// tessera's allowlist does not know (argparse.Namespace in a training
/// checkpoint); they are placeholders, never imported or called, each
/// listed with its global under the metadata key "tessera.skipped" (plain
/// values, a checkpoint's global_step, load as values: tsr_dict_value_json).
/// Without it such a file is TSR_ERR_FORMAT naming every unknown global.
pub const TSR_LOAD_SKIP_UNKNOWN: u32 = 2;
/// tsr_load flag, with TSR_LOAD_MMAP: a read-only mapping instead of a
/// private one, and read-only tensors (a write to one is refused). A
/// tsr_save of such tensors copies their bytes from the file inside the
/// kernel (copy_file_range) instead of through memory: a file converted
/// to another format this way costs about what `cp` of it costs. Without
/// TSR_LOAD_MMAP: TSR_ERR_INVALID_ARGUMENT.
pub const TSR_LOAD_READ_ONLY: u32 = 4;
/// tsr_save_flags flag: fsync the new file before it replaces the
/// destination, and the destination's directory after, so the save
/// survives a power loss once the call returns.
pub const TSR_SAVE_SYNC: u32 = 1;

/// Callbacks of a host object; both optional.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TsrObjectVTable {
    /// sizeof(TsrObjectVTable) as compiled by the host.
    pub struct_size: u32,
    /// Called with the object's data when the strong count reaches 0 while
    /// weak references remain (free expensive resources here). Not called
    /// when the object is destroyed with no weak references left.
    pub release_resources: Option<unsafe extern "C" fn(obj: *mut c_void)>,
    /// Called with the object's data when the object is destroyed (the
    /// weak count reached 0), just before its bytes are freed.
    pub destroy: Option<unsafe extern "C" fn(obj: *mut c_void)>,
}

/// A refcounted host object (opaque).
pub struct TsrObject {
    _private: [u8; 0],
}

/// A weak reference to a host object (opaque; a distinct type so a weak
/// handle cannot be passed where a strong one is needed).
pub struct TsrWeakObject {
    _private: [u8; 0],
}

#[doc(hidden)]
pub struct HostObject {
    pub(crate) data: *mut c_void,
    pub(crate) vtable: TsrObjectVTable,
}

// SAFETY: the data block is plain memory owned by this object; the host's
// callbacks are documented as callable from whichever thread drops the
// last reference.
unsafe impl Send for HostObject {}
// SAFETY: tessera never reads or writes the data block itself; hosts
// synchronize their own accesses to it.
unsafe impl Sync for HostObject {}

impl RcTarget for HostObject {
    fn release_resources(&mut self) {
        if let Some(f) = self.vtable.release_resources {
            // SAFETY: the host's callback receives the block it filled in.
            unsafe { f(self.data) };
        }
    }
}

impl Drop for HostObject {
    fn drop(&mut self) {
        if let Some(f) = self.vtable.destroy {
            // SAFETY: as release_resources; called once, before the free.
            unsafe { f(self.data) };
        }
        // SAFETY: data came from calloc in tsr_object_new.
        unsafe { libc::free(self.data) };
    }
}
