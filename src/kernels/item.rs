//! `Tensor::item`: the one element of a one-element tensor as a
//! [`Scalar`] (c10's `Tensor::item()`), through the copy kernel so every
//! dtype with arithmetic converts as a copy to the scalar's type would.

use crate::device::DeviceType;
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::tensor::Tensor;

impl Tensor {
    /// The tensor's one element (any number of dims of size 1, or 0-dim),
    /// as a scalar of its kind: Bool for bool; Complex for complex dtypes;
    /// Float for floating ones (half, bfloat16, float8 and float4
    /// included); UInt for UInt16/32/64; Int for the other integers.
    ///
    /// Errors: `Shape` when the tensor does not hold exactly one element;
    /// `Device` off the CPU; `DType` for the storage-only dtypes
    /// (quantized, bits, sub-byte integers), which c10 cannot read as
    /// numbers either.
    pub fn item(&self) -> Result<Scalar> {
        crate::ensure!(
            self.numel() == 1,
            Shape,
            "item() of a tensor of {} elements (sizes {:?}): expected exactly one element",
            self.numel(),
            self.sizes()
        );
        crate::ensure!(
            self.device().device_type == DeviceType::Cpu,
            Device,
            "item() of a tensor on {}: expected a CPU tensor (copy it to the CPU first)",
            self.device()
        );
        let dtype = self.dtype();
        crate::ensure!(
            !dtype.is_storage_only(),
            DType,
            "item() of a {} tensor: a storage-only dtype has no numeric value",
            dtype.name()
        );
        let (wide, read): (DType, fn(&[u8]) -> Scalar) = if dtype == DType::Bool {
            (DType::Bool, |b| Scalar::Bool(b[0] != 0))
        } else if dtype.is_complex() {
            (DType::ComplexDouble, |b| {
                Scalar::Complex(f64_at(b, 0), f64_at(b, 8))
            })
        } else if dtype.is_floating() {
            (DType::Double, |b| Scalar::Float(f64_at(b, 0)))
        } else if dtype.is_barebones_unsigned() {
            (DType::UInt64, |b| {
                Scalar::UInt(u64::from_ne_bytes(b[..8].try_into().unwrap()))
            })
        } else {
            (DType::Long, |b| {
                Scalar::Int(i64::from_ne_bytes(b[..8].try_into().unwrap()))
            })
        };
        let t = self.to_dtype(wide)?;
        let p = t.data_in_storage()? as *const u8;
        // SAFETY: t is a CPU tensor of one element of `wide` (at most 16
        // bytes) whose extent data_in_storage checked lies in its storage,
        // which t keeps alive while the bytes are copied out.
        let bytes = unsafe { std::slice::from_raw_parts(p, wide.itemsize()) };
        Ok(read(bytes))
    }
}

fn f64_at(b: &[u8], at: usize) -> f64 {
    f64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
