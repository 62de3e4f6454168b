//! DLPack exchange, the safe half: DLPack's numbering of device types and
//! type codes, the mapping to tessera's devices and dtypes, and the checks
//! an imported tensor passes before tessera wraps its memory.
//!
//! The C structs that carry raw pointers (DLTensor, DLManagedTensor,
//! DLManagedTensorVersioned) and everything that reads or frees them live
//! in `ffi::dlpack`; this module only sees plain values and addresses it
//! never dereferences.
//!
//! Facts (numbers and layouts) follow dlpack.h 1.1
//! (<https://github.com/dmlc/dlpack>).

use crate::device::{Device, DeviceType};
use crate::dtype::{table, DType};
use crate::error::Result;
use crate::tensor::layout::{checked_numel, storage_nbytes_needed};
use crate::tensor::{Dims, MAX_DIMS};

/// The DLPack major version tessera reads and writes. A different major
/// version means a different struct layout.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// The DLPack minor version tessera writes (1.1 added the float8 codes).
pub const DLPACK_MINOR_VERSION: u32 = 1;

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write.
pub const FLAG_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer made a copy the consumer
/// owns alone.
pub const FLAG_IS_COPIED: u64 = 1 << 1;
/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`: sub-byte elements are
/// padded to a byte (irrelevant to tessera, which has no sub-byte types).
pub const FLAG_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// `DLDeviceType` numbers.
pub mod device_code {
    /// kDLCPU
    pub const CPU: i32 = 1;
    /// kDLCUDA
    pub const CUDA: i32 = 2;
    /// kDLCUDAHost: pinned host memory (cudaMallocHost).
    pub const CUDA_HOST: i32 = 3;
    /// kDLOpenCL
    pub const OPENCL: i32 = 4;
    /// kDLVulkan
    pub const VULKAN: i32 = 7;
    /// kDLMetal
    pub const METAL: i32 = 8;
    /// kDLVPI
    pub const VPI: i32 = 9;
    /// kDLROCM
    pub const ROCM: i32 = 10;
    /// kDLROCMHost
    pub const ROCM_HOST: i32 = 11;
    /// kDLExtDev
    pub const EXT_DEV: i32 = 12;
    /// kDLCUDAManaged: unified memory (cudaMallocManaged).
    pub const CUDA_MANAGED: i32 = 13;
    /// kDLOneAPI
    pub const ONE_API: i32 = 14;
    /// kDLWebGPU
    pub const WEBGPU: i32 = 15;
    /// kDLHexagon
    pub const HEXAGON: i32 = 16;
    /// kDLMAIA
    pub const MAIA: i32 = 17;
    /// kDLTrn
    pub const TRN: i32 = 18;
}

/// `DLDataTypeCode` numbers.
pub mod type_code {
    /// kDLInt
    pub const INT: u8 = 0;
    /// kDLUInt
    pub const UINT: u8 = 1;
    /// kDLFloat
    pub const FLOAT: u8 = 2;
    /// kDLOpaqueHandle
    pub const OPAQUE_HANDLE: u8 = 3;
    /// kDLBfloat
    pub const BFLOAT: u8 = 4;
    /// kDLComplex
    pub const COMPLEX: u8 = 5;
    /// kDLBool
    pub const BOOL: u8 = 6;
    /// kDLFloat8_e3m4
    pub const FLOAT8_E3M4: u8 = 7;
    /// kDLFloat8_e4m3
    pub const FLOAT8_E4M3: u8 = 8;
    /// kDLFloat8_e4m3b11fnuz
    pub const FLOAT8_E4M3B11FNUZ: u8 = 9;
    /// kDLFloat8_e4m3fn
    pub const FLOAT8_E4M3FN: u8 = 10;
    /// kDLFloat8_e4m3fnuz
    pub const FLOAT8_E4M3FNUZ: u8 = 11;
    /// kDLFloat8_e5m2
    pub const FLOAT8_E5M2: u8 = 12;
    /// kDLFloat8_e5m2fnuz
    pub const FLOAT8_E5M2FNUZ: u8 = 13;
    /// kDLFloat8_e8m0fnu
    pub const FLOAT8_E8M0FNU: u8 = 14;
    /// kDLFloat6_e2m3fn
    pub const FLOAT6_E2M3FN: u8 = 15;
    /// kDLFloat6_e3m2fn
    pub const FLOAT6_E3M2FN: u8 = 16;
    /// kDLFloat4_e2m1fn
    pub const FLOAT4_E2M1FN: u8 = 17;
}

/// The dlpack.h name of a device type number, if it is one.
pub fn device_code_name(code: i32) -> Option<&'static str> {
    use device_code::*;
    Some(match code {
        CPU => "kDLCPU",
        CUDA => "kDLCUDA",
        CUDA_HOST => "kDLCUDAHost",
        OPENCL => "kDLOpenCL",
        VULKAN => "kDLVulkan",
        METAL => "kDLMetal",
        VPI => "kDLVPI",
        ROCM => "kDLROCM",
        ROCM_HOST => "kDLROCMHost",
        EXT_DEV => "kDLExtDev",
        CUDA_MANAGED => "kDLCUDAManaged",
        ONE_API => "kDLOneAPI",
        WEBGPU => "kDLWebGPU",
        HEXAGON => "kDLHexagon",
        MAIA => "kDLMAIA",
        TRN => "kDLTrn",
        _ => return None,
    })
}

/// The dlpack.h name of a type code, if it is one.
pub fn type_code_name(code: u8) -> Option<&'static str> {
    use type_code::*;
    Some(match code {
        INT => "kDLInt",
        UINT => "kDLUInt",
        FLOAT => "kDLFloat",
        OPAQUE_HANDLE => "kDLOpaqueHandle",
        BFLOAT => "kDLBfloat",
        COMPLEX => "kDLComplex",
        BOOL => "kDLBool",
        FLOAT8_E3M4 => "kDLFloat8_e3m4",
        FLOAT8_E4M3 => "kDLFloat8_e4m3",
        FLOAT8_E4M3B11FNUZ => "kDLFloat8_e4m3b11fnuz",
        FLOAT8_E4M3FN => "kDLFloat8_e4m3fn",
        FLOAT8_E4M3FNUZ => "kDLFloat8_e4m3fnuz",
        FLOAT8_E5M2 => "kDLFloat8_e5m2",
        FLOAT8_E5M2FNUZ => "kDLFloat8_e5m2fnuz",
        FLOAT8_E8M0FNU => "kDLFloat8_e8m0fnu",
        FLOAT6_E2M3FN => "kDLFloat6_e2m3fn",
        FLOAT6_E3M2FN => "kDLFloat6_e3m2fn",
        FLOAT4_E2M1FN => "kDLFloat4_e2m1fn",
        _ => return None,
    })
}

/// `DLDevice`: a DLPack device type and index (layout of dlpack.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    /// A [`device_code`] number (a C enum, int-sized).
    pub device_type: i32,
    /// The device index; 0 for host memory.
    pub device_id: i32,
}

/// `DLDataType`: type code, bits per lane and lanes (layout of dlpack.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    /// A [`type_code`] number.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (1 for scalars; tessera has no vector types).
    pub lanes: u16,
}

/// Expands the dtype table's DLPack column into `DTYPE_CODES`.
macro_rules! dlpack_column {
    ([] $( $kind:ident { $( ($variant:ident, $number:literal, $name:literal, $size:literal,
        $sign:ident, [$($elem:tt)*], $torch:tt, $storage:tt, $safetensors:tt, $dlpack:tt,
        $numpy:tt, $gguf:tt, $doc:literal) )* } )*) => {
        /// The (type code, bits, lanes) of every dtype that has a DLPack
        /// type (DLPack 1.1 codes). Float4_e2m1fn_x2 is two 4-bit lanes of
        /// kDLFloat4_e2m1fn in its byte. The quantized, bits and sub-byte
        /// integer types and BComplex32 have none.
        const DTYPE_CODES: &[(DType, Option<(u8, u8, u16)>)] = {
            use type_code::*;
            &[ $( $( (DType::$variant, table::column!($dlpack)), )* )* ]
        };
    };
}
table::dtype_table!(dlpack_column);

/// The dtypes that have a DLPack type, with (code, bits, lanes).
fn dlpack_codes() -> impl Iterator<Item = (DType, u8, u8, u16)> {
    DTYPE_CODES
        .iter()
        .filter_map(|&(d, code)| code.map(|(c, b, l)| (d, c, b, l)))
}

impl DLDataType {
    /// The DLPack type of a tessera dtype. The quantized, bits and
    /// sub-byte integer types and BComplex32 have no DLPack type:
    /// TSR_ERR_DTYPE naming the dtype.
    pub fn from_dtype(dtype: DType) -> Result<DLDataType> {
        dlpack_codes()
            .find(|(d, _, _, _)| *d == dtype)
            .map(|(_, code, bits, lanes)| DLDataType { code, bits, lanes })
            .ok_or_else(|| {
                crate::err!(
                    DType,
                    "dtype {dtype} has no DLPack type code: quantized, bits, sub-byte integer \
                     and BComplex32 tensors cannot be exported"
                )
            })
    }

    /// The tessera dtype of a DLPack type: one lane, a known code and a bit
    /// width tessera has for that code.
    pub fn to_dtype(self) -> Result<DType> {
        let DLDataType { code, bits, lanes } = self;
        if let Some((dtype, _, _, _)) =
            dlpack_codes().find(|&(_, c, b, l)| c == code && b == bits && l == lanes)
        {
            return Ok(dtype);
        }
        crate::ensure!(
            lanes == 1,
            DType,
            "DLPack dtype (code {code}, bits {bits}) has {lanes} lanes: tessera supports only \
             lanes == 1 (no vector types), and 2 lanes of 4-bit kDLFloat4_e2m1fn \
             (Float4_e2m1fn_x2)"
        );
        let Some(name) = type_code_name(code) else {
            crate::bail!(
                DType,
                "unknown DLPack type code {code}: expected a DLDataTypeCode of DLPack 1.1 (0-17)"
            )
        };
        let widths: Vec<String> = dlpack_codes()
            .filter(|&(_, c, _, _)| c == code)
            .map(|(_, _, b, l)| {
                if l == 1 {
                    b.to_string()
                } else {
                    format!("{b} with {l} lanes")
                }
            })
            .collect();
        if widths.is_empty() {
            crate::bail!(
                DType,
                "DLPack type code {code} ({name}) has no tessera dtype"
            )
        }
        crate::bail!(
            DType,
            "DLPack type {name} with {bits} bits has no tessera dtype: expected bits {}",
            widths.join(", ")
        )
    }
}

impl DLDevice {
    /// The DLPack device of a tessera device: CPU is kDLCPU 0; CUDA is
    /// kDLCUDA with the device index, where index -1 (the unresolved
    /// "current device") is exported as 0. Other device types have no
    /// DLPack mapping in tessera: TSR_ERR_UNSUPPORTED.
    pub fn from_device(device: Device) -> Result<DLDevice> {
        match device.device_type {
            DeviceType::Cpu => Ok(DLDevice {
                device_type: device_code::CPU,
                device_id: 0,
            }),
            DeviceType::Cuda => Ok(DLDevice {
                device_type: device_code::CUDA,
                device_id: i32::from(device.index.max(0)),
            }),
            _ => crate::bail!(
                Unsupported,
                "device {device} cannot be exported through DLPack: only cpu and cuda tensors can"
            ),
        }
    }

    /// The tessera device of a DLPack device: kDLCPU and kDLCUDAHost
    /// (pinned host memory, which c10 also treats as CPU) become CPU;
    /// kDLCUDA and kDLCUDAManaged become CUDA with `device_id` (0..=127).
    /// Other DLPack devices: TSR_ERR_UNSUPPORTED; numbers that are not a
    /// DLPack device type: TSR_ERR_INVALID_ARGUMENT.
    pub fn to_device(self) -> Result<Device> {
        let DLDevice {
            device_type,
            device_id,
        } = self;
        match device_type {
            device_code::CPU | device_code::CUDA_HOST => Ok(Device::CPU),
            device_code::CUDA | device_code::CUDA_MANAGED => {
                let index = i8::try_from(device_id)
                    .ok()
                    .filter(|i| *i >= 0)
                    .ok_or_else(|| {
                        crate::err!(
                            InvalidArgument,
                            "DLPack CUDA device_id {device_id} is out of range: expected 0..=127"
                        )
                    })?;
                Device::new(DeviceType::Cuda, index)
            }
            _ => match device_code_name(device_type) {
                Some(name) => crate::bail!(
                    Unsupported,
                    "DLPack device {name} ({device_type}) is not supported: tessera imports \
                     kDLCPU, kDLCUDAHost, kDLCUDA and kDLCUDAManaged tensors"
                ),
                None => crate::bail!(
                    InvalidArgument,
                    "unknown DLPack device type {device_type}: expected a DLDeviceType (1-18)"
                ),
            },
        }
    }
}

/// Checks the version of an imported DLManagedTensorVersioned: the major
/// version must be [`DLPACK_MAJOR_VERSION`] (any minor version is read:
/// unknown enum values are refused where they appear).
pub fn check_version(major: u32, minor: u32) -> Result<()> {
    crate::ensure!(
        major == DLPACK_MAJOR_VERSION,
        Unsupported,
        "DLPack version {major}.{minor} is not supported: tessera reads major version \
         {DLPACK_MAJOR_VERSION} (it implements DLPack {DLPACK_MAJOR_VERSION}.{DLPACK_MINOR_VERSION})"
    );
    Ok(())
}

/// Checks a DLTensor's `ndim` and returns it as a length.
pub fn check_ndim(ndim: i32) -> Result<usize> {
    crate::ensure!(
        (0..=MAX_DIMS as i64).contains(&i64::from(ndim)),
        Shape,
        "DLPack tensor has ndim {ndim}: expected 0..={MAX_DIMS}"
    );
    Ok(ndim as usize)
}

/// The memory alignment a dtype's elements need: the itemsize, or for a
/// complex type that of its component.
fn element_alignment(dtype: DType) -> usize {
    dtype.to_real().itemsize()
}

/// What an imported DLTensor becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportPlan {
    /// The element type.
    pub dtype: DType,
    /// The device.
    pub device: Device,
    /// Sizes.
    pub sizes: Dims,
    /// Strides in elements (filled in when the DLTensor had none).
    pub strides: Dims,
    /// Bytes from `data` to the first element: the storage starts there.
    pub first_byte: usize,
    /// Bytes the view spans from its first element: the storage size.
    pub nbytes: usize,
}

/// Validates a DLTensor's fields and plans the tessera tensor that views
/// its memory. `data` is the address of the DLTensor's data (never read);
/// `strides` None means compact row-major (as legacy producers send).
///
/// Refused: negative sizes (TSR_ERR_SHAPE); a negative stride on a dim
/// that addresses more than one element (TSR_ERR_UNSUPPORTED: tessera has
/// no negative strides; on dims of size 0 or 1, or in empty tensors, such
/// strides address nothing and are replaced by row-major ones); NULL data
/// with elements, or a first element not aligned for the dtype
/// (TSR_ERR_INVALID_ARGUMENT); a span that overflows the address space
/// (TSR_ERR_OUT_OF_MEMORY); dtype and device errors of
/// [`DLDataType::to_dtype`] and [`DLDevice::to_device`].
pub fn plan_import(
    dtype: DLDataType,
    device: DLDevice,
    shape: &[i64],
    strides: Option<&[i64]>,
    data: usize,
    byte_offset: u64,
) -> Result<ImportPlan> {
    let dtype = dtype.to_dtype()?;
    let device = device.to_device()?;
    let numel = checked_numel(shape)?;
    let mut strides: Dims = match strides {
        Some(s) => s.iter().copied().collect(),
        None => crate::tensor::layout::contiguous_strides(shape),
    };
    if numel == 0 {
        // An empty tensor addresses nothing: only its sizes matter.
        strides = crate::tensor::layout::contiguous_strides(shape);
    } else {
        let compact = crate::tensor::layout::contiguous_strides(shape);
        for (d, stride) in strides.iter_mut().enumerate() {
            if *stride >= 0 {
                continue;
            }
            crate::ensure!(
                shape[d] <= 1,
                Unsupported,
                "DLPack tensor has negative stride {stride} in dim {d} (shape {shape:?}): tessera \
                 does not support negative strides"
            );
            *stride = compact[d];
        }
    }
    let first_byte = usize::try_from(byte_offset).map_err(|_| {
        crate::err!(
            OutOfMemory,
            "DLPack byte_offset {byte_offset} does not fit in the address space"
        )
    })?;
    let nbytes = storage_nbytes_needed(shape, &strides, 0, dtype.itemsize())?;
    if numel > 0 {
        crate::ensure!(
            data != 0,
            InvalidArgument,
            "DLPack tensor data is NULL but the tensor has {numel} elements"
        );
        let first = data.checked_add(first_byte);
        let end = first.and_then(|f| f.checked_add(nbytes));
        crate::ensure!(
            end.is_some(),
            OutOfMemory,
            "DLPack tensor at {data:#x} + byte_offset {byte_offset} spanning {nbytes} bytes \
             overflows the address space"
        );
        let first = first.unwrap_or_default();
        let align = element_alignment(dtype);
        crate::ensure!(
            first % align == 0,
            InvalidArgument,
            "DLPack tensor's first element at {first:#x} (data {data:#x} + byte_offset \
             {byte_offset}) is not aligned to {align} bytes as {dtype} needs"
        );
    }
    Ok(ImportPlan {
        dtype,
        device,
        sizes: shape.iter().copied().collect(),
        strides,
        first_byte,
        nbytes,
    })
}

#[cfg(test)]
mod tests;
