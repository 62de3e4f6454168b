//! Scalar values written as one element of any dtype, with C-like
//! conversions (floats to integers truncate; out-of-range saturates;
//! half and bfloat16 round to nearest even through the `half` crate; the
//! float8 types go through f32 and their format's rounding, as c10's).

use super::float8::Float8Format;
use super::{DType, Scalar};
use crate::error::Result;

/// The bytes of one element of `dtype` holding `value` (little-endian, in
/// the first `dtype.itemsize()` bytes).
pub fn scalar_to_bytes(value: Scalar, dtype: DType) -> Result<[u8; 16]> {
    let mut out = [0u8; 16];
    macro_rules! put {
        ($v:expr) => {{
            let b = $v.to_ne_bytes();
            out[..b.len()].copy_from_slice(&b);
        }};
    }
    match dtype {
        DType::Bool => out[0] = value.to_bool() as u8,
        DType::Byte => put!(int_or_float(value, |i| i as u8, |f| f as u8)),
        DType::Char => put!(int_or_float(value, |i| i as i8, |f| f as i8)),
        DType::Short => put!(int_or_float(value, |i| i as i16, |f| f as i16)),
        DType::Int => put!(int_or_float(value, |i| i as i32, |f| f as i32)),
        DType::Long => put!(int_or_float(value, |i| i, |f| f as i64)),
        DType::UInt16 => put!(uint_or_float(value, |u| u as u16, |f| f as u16)),
        DType::UInt32 => put!(uint_or_float(value, |u| u as u32, |f| f as u32)),
        DType::UInt64 => put!(uint_or_float(value, |u| u, |f| f as u64)),
        DType::Half => put!(half::f16::from_f64(value.to_f64())),
        DType::BFloat16 => put!(half::bf16::from_f64(value.to_f64())),
        DType::Float => put!(value.to_f64() as f32),
        DType::Double => put!(value.to_f64()),
        DType::ComplexHalf => {
            let (re, im) = value.to_complex();
            out[..2].copy_from_slice(&half::f16::from_f64(re).to_ne_bytes());
            out[2..4].copy_from_slice(&half::f16::from_f64(im).to_ne_bytes());
        }
        DType::BComplex32 => {
            let (re, im) = value.to_complex();
            out[..2].copy_from_slice(&half::bf16::from_f64(re).to_ne_bytes());
            out[2..4].copy_from_slice(&half::bf16::from_f64(im).to_ne_bytes());
        }
        DType::ComplexFloat => {
            let (re, im) = value.to_complex();
            out[..4].copy_from_slice(&(re as f32).to_ne_bytes());
            out[4..8].copy_from_slice(&(im as f32).to_ne_bytes());
        }
        DType::ComplexDouble => {
            let (re, im) = value.to_complex();
            out[..8].copy_from_slice(&re.to_ne_bytes());
            out[8..16].copy_from_slice(&im.to_ne_bytes());
        }
        DType::Float8E5M2 => out[0] = Float8Format::E5M2.encode(scalar_f32(value)),
        DType::Float8E4M3Fn => out[0] = Float8Format::E4M3Fn.encode(scalar_f32(value)),
        DType::Float8E5M2Fnuz => out[0] = Float8Format::E5M2Fnuz.encode(scalar_f32(value)),
        DType::Float8E4M3Fnuz => out[0] = Float8Format::E4M3Fnuz.encode(scalar_f32(value)),
        DType::Float8E8M0Fnu => out[0] = Float8Format::E8M0Fnu.encode(scalar_f32(value)),
        _ => {
            crate::bail!(Unsupported, "writing a scalar as {dtype} is not supported")
        }
    }
    Ok(out)
}

/// The f32 c10 converts a scalar to on its way to a float8 type: integers
/// rounded once (as C's int -> float), doubles narrowed, complex's real
/// part.
fn scalar_f32(v: Scalar) -> f32 {
    match v {
        Scalar::Bool(b) => b as u8 as f32,
        Scalar::Int(i) => i as f32,
        Scalar::UInt(u) => u as f32,
        other => other.to_f64() as f32,
    }
}

fn int_or_float<T>(v: Scalar, from_int: impl Fn(i64) -> T, from_float: impl Fn(f64) -> T) -> T {
    if v.is_integral() {
        from_int(v.to_i64())
    } else {
        from_float(v.to_f64())
    }
}

fn uint_or_float<T>(v: Scalar, from_uint: impl Fn(u64) -> T, from_float: impl Fn(f64) -> T) -> T {
    if v.is_integral() {
        from_uint(v.to_u64())
    } else {
        from_float(v.to_f64())
    }
}

/// Reads one element of `dtype` at `p` as a Scalar (bool, integers,
/// floating and complex types).
///
/// # Safety
/// `p` must point at `dtype.itemsize()` readable bytes.
pub unsafe fn read_scalar(p: *const u8, dtype: DType) -> Result<Scalar> {
    macro_rules! rd {
        ($t:ty) => {
            // SAFETY: the arm's type has dtype's itemsize, and the caller
            // guarantees that many readable bytes at p; read_unaligned
            // needs no alignment, and every bit pattern of these types
            // (bool is not among them) is a valid value.
            unsafe { (p as *const $t).read_unaligned() }
        };
    }
    Ok(match dtype {
        DType::Bool => Scalar::Bool(rd!(u8) != 0),
        DType::Byte => Scalar::Int(rd!(u8) as i64),
        DType::Char => Scalar::Int(rd!(i8) as i64),
        DType::Short => Scalar::Int(rd!(i16) as i64),
        DType::Int => Scalar::Int(rd!(i32) as i64),
        DType::Long => Scalar::Int(rd!(i64)),
        DType::UInt16 => Scalar::UInt(rd!(u16) as u64),
        DType::UInt32 => Scalar::UInt(rd!(u32) as u64),
        DType::UInt64 => Scalar::UInt(rd!(u64)),
        DType::Half => Scalar::Float(rd!(half::f16).to_f64()),
        DType::BFloat16 => Scalar::Float(rd!(half::bf16).to_f64()),
        DType::Float => Scalar::Float(rd!(f32) as f64),
        DType::Double => Scalar::Float(rd!(f64)),
        DType::ComplexHalf => {
            let parts = rd!([half::f16; 2]);
            Scalar::Complex(parts[0].to_f64(), parts[1].to_f64())
        }
        DType::BComplex32 => {
            let parts = rd!([half::bf16; 2]);
            Scalar::Complex(parts[0].to_f64(), parts[1].to_f64())
        }
        DType::ComplexFloat => {
            let parts = rd!([f32; 2]);
            Scalar::Complex(parts[0] as f64, parts[1] as f64)
        }
        DType::ComplexDouble => {
            let parts = rd!([f64; 2]);
            Scalar::Complex(parts[0], parts[1])
        }
        DType::Float8E5M2 => Scalar::Float(Float8Format::E5M2.decode(rd!(u8)) as f64),
        DType::Float8E4M3Fn => Scalar::Float(Float8Format::E4M3Fn.decode(rd!(u8)) as f64),
        DType::Float8E5M2Fnuz => Scalar::Float(Float8Format::E5M2Fnuz.decode(rd!(u8)) as f64),
        DType::Float8E4M3Fnuz => Scalar::Float(Float8Format::E4M3Fnuz.decode(rd!(u8)) as f64),
        DType::Float8E8M0Fnu => Scalar::Float(Float8Format::E8M0Fnu.decode(rd!(u8)) as f64),
        _ => {
            crate::bail!(Unsupported, "reading a {dtype} element is not supported")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_bytes() {
        let b = scalar_to_bytes(Scalar::Int(-2), DType::Short).unwrap();
        assert_eq!(i16::from_ne_bytes([b[0], b[1]]), -2);
        let b = scalar_to_bytes(Scalar::Float(2.75), DType::Int).unwrap();
        assert_eq!(i32::from_ne_bytes(b[..4].try_into().unwrap()), 2);
        let b = scalar_to_bytes(Scalar::Float(1.0 / 3.0), DType::Half).unwrap();
        assert_eq!(
            half::f16::from_ne_bytes([b[0], b[1]]),
            half::f16::from_f64(1.0 / 3.0)
        );
        let b = scalar_to_bytes(Scalar::Complex(1.5, -2.0), DType::ComplexFloat).unwrap();
        assert_eq!(f32::from_ne_bytes(b[4..8].try_into().unwrap()), -2.0);
        let b = scalar_to_bytes(Scalar::Float(0.5), DType::Bool).unwrap();
        assert_eq!(b[0], 1);
        assert!(scalar_to_bytes(Scalar::Int(1), DType::QInt8).is_err());
        // float8: through f32 with the format's rules (e4m3fn saturates).
        let b = scalar_to_bytes(Scalar::Float(1e39), DType::Float8E4M3Fn).unwrap();
        assert_eq!(b[0], 0x7E);
        let b = scalar_to_bytes(Scalar::Int(-3), DType::Float8E5M2).unwrap();
        assert_eq!(b[0], 0xC2);
        // SAFETY: b holds one element of the dtype.
        let back = unsafe { read_scalar(b.as_ptr(), DType::Float8E5M2) }.unwrap();
        assert_eq!(back, Scalar::Float(-3.0));
    }
}
