//! Element types, numbered as c10's `ScalarType`.

pub mod convert;
pub mod float4;
pub mod float8;
mod promote;
mod scalar;

pub use promote::{can_cast, promote_types, Category, ResultTypeState};
pub use scalar::Scalar;

use crate::error::Result;

/// An element type. The numbers are c10's `ScalarType` numbers (PyTorch
/// 2.15: every number 0..46 is a dtype).
#[repr(i8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// uint8
    Byte = 0,
    /// int8
    Char = 1,
    /// int16
    Short = 2,
    /// int32
    Int = 3,
    /// int64
    Long = 4,
    /// IEEE float16
    Half = 5,
    /// float32
    Float = 6,
    /// float64
    Double = 7,
    /// complex of two float16
    ComplexHalf = 8,
    /// complex of two float32
    ComplexFloat = 9,
    /// complex of two float64
    ComplexDouble = 10,
    /// bool, one byte holding 0 or 1
    Bool = 11,
    /// quantized int8 (storage only)
    QInt8 = 12,
    /// quantized uint8 (storage only)
    QUInt8 = 13,
    /// quantized int32 (storage only)
    QInt32 = 14,
    /// bfloat16
    BFloat16 = 15,
    /// quantized uint4, two per byte (storage only)
    QUInt4x2 = 16,
    /// quantized uint2, four per byte (storage only)
    QUInt2x4 = 17,
    /// eight 1-bit fields in a byte, no meaning attached (storage only)
    Bits1x8 = 18,
    /// four 2-bit fields in a byte (storage only)
    Bits2x4 = 19,
    /// two 4-bit fields in a byte (storage only)
    Bits4x2 = 20,
    /// one byte of bits (storage only)
    Bits8 = 21,
    /// two bytes of bits (storage only)
    Bits16 = 22,
    /// float8, 5 exponent bits, 2 mantissa bits
    Float8E5M2 = 23,
    /// float8, 4 exponent bits, 3 mantissa bits, finite
    Float8E4M3Fn = 24,
    /// float8, 5 exponent bits, 2 mantissa bits, finite, one NaN, no -0
    Float8E5M2Fnuz = 25,
    /// float8, 4 exponent bits, 3 mantissa bits, finite, one NaN, no -0
    Float8E4M3Fnuz = 26,
    /// uint16 ("barebones": promotes only with floating types)
    UInt16 = 27,
    /// uint32 ("barebones": promotes only with floating types)
    UInt32 = 28,
    /// uint64 ("barebones": promotes only with floating types)
    UInt64 = 29,
    /// 1-bit unsigned integer in a byte (storage only)
    UInt1 = 30,
    /// 2-bit unsigned integer in a byte (storage only)
    UInt2 = 31,
    /// 3-bit unsigned integer in a byte (storage only)
    UInt3 = 32,
    /// 4-bit unsigned integer in a byte (storage only)
    UInt4 = 33,
    /// 5-bit unsigned integer in a byte (storage only)
    UInt5 = 34,
    /// 6-bit unsigned integer in a byte (storage only)
    UInt6 = 35,
    /// 7-bit unsigned integer in a byte (storage only)
    UInt7 = 36,
    /// 1-bit signed integer in a byte (storage only)
    Int1 = 37,
    /// 2-bit signed integer in a byte (storage only)
    Int2 = 38,
    /// 3-bit signed integer in a byte (storage only)
    Int3 = 39,
    /// 4-bit signed integer in a byte (storage only)
    Int4 = 40,
    /// 5-bit signed integer in a byte (storage only)
    Int5 = 41,
    /// 6-bit signed integer in a byte (storage only)
    Int6 = 42,
    /// 7-bit signed integer in a byte (storage only)
    Int7 = 43,
    /// float8 scale type: 8 exponent bits, no sign, no mantissa
    Float8E8M0Fnu = 44,
    /// two float4 e2m1 values packed in a byte
    Float4E2M1FnX2 = 45,
    /// complex of two bfloat16
    BComplex32 = 46,
}

/// c10's name and element size of each dtype, indexed by its number.
const INFO: [(&std::ffi::CStr, usize); 47] = [
    (c"Byte", 1),
    (c"Char", 1),
    (c"Short", 2),
    (c"Int", 4),
    (c"Long", 8),
    (c"Half", 2),
    (c"Float", 4),
    (c"Double", 8),
    (c"ComplexHalf", 4),
    (c"ComplexFloat", 8),
    (c"ComplexDouble", 16),
    (c"Bool", 1),
    (c"QInt8", 1),
    (c"QUInt8", 1),
    (c"QInt32", 4),
    (c"BFloat16", 2),
    (c"QUInt4x2", 1),
    (c"QUInt2x4", 1),
    (c"Bits1x8", 1),
    (c"Bits2x4", 1),
    (c"Bits4x2", 1),
    (c"Bits8", 1),
    (c"Bits16", 2),
    (c"Float8_e5m2", 1),
    (c"Float8_e4m3fn", 1),
    (c"Float8_e5m2fnuz", 1),
    (c"Float8_e4m3fnuz", 1),
    (c"UInt16", 2),
    (c"UInt32", 4),
    (c"UInt64", 8),
    (c"UInt1", 1),
    (c"UInt2", 1),
    (c"UInt3", 1),
    (c"UInt4", 1),
    (c"UInt5", 1),
    (c"UInt6", 1),
    (c"UInt7", 1),
    (c"Int1", 1),
    (c"Int2", 1),
    (c"Int3", 1),
    (c"Int4", 1),
    (c"Int5", 1),
    (c"Int6", 1),
    (c"Int7", 1),
    (c"Float8_e8m0fnu", 1),
    (c"Float4_e2m1fn_x2", 1),
    (c"BComplex32", 4),
];

impl DType {
    /// Every dtype, in c10's numbering order (`ALL[n]` has number `n`).
    pub const ALL: [DType; 47] = {
        use DType::*;
        [
            Byte,
            Char,
            Short,
            Int,
            Long,
            Half,
            Float,
            Double,
            ComplexHalf,
            ComplexFloat,
            ComplexDouble,
            Bool,
            QInt8,
            QUInt8,
            QInt32,
            BFloat16,
            QUInt4x2,
            QUInt2x4,
            Bits1x8,
            Bits2x4,
            Bits4x2,
            Bits8,
            Bits16,
            Float8E5M2,
            Float8E4M3Fn,
            Float8E5M2Fnuz,
            Float8E4M3Fnuz,
            UInt16,
            UInt32,
            UInt64,
            UInt1,
            UInt2,
            UInt3,
            UInt4,
            UInt5,
            UInt6,
            UInt7,
            Int1,
            Int2,
            Int3,
            Int4,
            Int5,
            Int6,
            Int7,
            Float8E8M0Fnu,
            Float4E2M1FnX2,
            BComplex32,
        ]
    };

    /// The dtype with c10's number `raw`, if there is one (0..=46).
    pub fn try_from_raw(raw: i8) -> Option<DType> {
        usize::try_from(raw)
            .ok()
            .and_then(|i| DType::ALL.get(i).copied())
    }

    /// The dtype with c10's number `raw`, or an error naming the number.
    pub fn from_raw(raw: i8) -> Result<DType> {
        DType::try_from_raw(raw).ok_or_else(|| {
            crate::err!(
                InvalidArgument,
                "unknown dtype {raw}: expected a c10 ScalarType number (0-46)"
            )
        })
    }

    /// c10's number of this dtype.
    pub fn raw(self) -> i8 {
        self as i8
    }

    /// Bytes per element (c10's elementSize: the packed sub-byte types
    /// count one byte per element).
    pub fn itemsize(self) -> usize {
        INFO[self as usize].1
    }

    /// c10's name ("Float", "BFloat16", "Float8_e4m3fn", ...).
    pub fn name(self) -> &'static str {
        // The table holds ASCII literals only.
        INFO[self as usize].0.to_str().unwrap_or("Undefined")
    }

    /// c10's name as a NUL-terminated static string.
    pub fn c_name(self) -> &'static std::ffi::CStr {
        INFO[self as usize].0
    }

    /// The dtype whose c10 name is `name`.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.name() == name)
    }

    /// Real floating types (c10's isFloatingType): Half, Float, Double,
    /// BFloat16, the five float8 types and Float4_e2m1fn_x2.
    pub fn is_floating(self) -> bool {
        use DType::*;
        matches!(self, Half | Float | Double | BFloat16 | Float4E2M1FnX2) || self.is_float8()
    }

    /// Complex types (ComplexHalf, ComplexFloat, ComplexDouble, BComplex32).
    pub fn is_complex(self) -> bool {
        matches!(
            self,
            DType::ComplexHalf | DType::ComplexFloat | DType::ComplexDouble | DType::BComplex32
        )
    }

    /// Integer types, optionally counting Bool as one (c10's
    /// isIntegralType: the sub-byte integers UInt1..7 / Int1..7 are not).
    pub fn is_integral(self, include_bool: bool) -> bool {
        use DType::*;
        match self {
            Byte | Char | Short | Int | Long | UInt16 | UInt32 | UInt64 => true,
            Bool => include_bool,
            _ => false,
        }
    }

    /// Signed types (c10's isSignedType; the bits and quantized types,
    /// for which c10 raises, count as unsigned).
    pub fn is_signed(self) -> bool {
        use DType::*;
        match self {
            Char | Short | Int | Long | Half | Float | Double | BFloat16 | ComplexHalf
            | ComplexFloat | ComplexDouble | BComplex32 | QInt8 | QInt32 | Float8E5M2
            | Float8E4M3Fn | Float8E5M2Fnuz | Float8E4M3Fnuz | Float4E2M1FnX2 | Int1 | Int2
            | Int3 | Int4 | Int5 | Int6 | Int7 => true,
            Byte | Bool | UInt16 | UInt32 | UInt64 | UInt1 | UInt2 | UInt3 | UInt4 | UInt5
            | UInt6 | UInt7 | QUInt8 | QUInt4x2 | QUInt2x4 | Bits1x8 | Bits2x4 | Bits4x2
            | Bits8 | Bits16 | Float8E8M0Fnu => false,
        }
    }

    /// Quantized types (c10's isQIntType: QInt8, QUInt8, QInt32, QUInt4x2,
    /// QUInt2x4).
    pub fn is_quantized(self) -> bool {
        use DType::*;
        matches!(self, QInt8 | QUInt8 | QInt32 | QUInt4x2 | QUInt2x4)
    }

    /// The bits types (c10's isBitsType: Bits1x8, Bits2x4, Bits4x2, Bits8,
    /// Bits16).
    pub fn is_bits(self) -> bool {
        use DType::*;
        matches!(self, Bits1x8 | Bits2x4 | Bits4x2 | Bits8 | Bits16)
    }

    /// The sub-byte integers UInt1..UInt7 and Int1..Int7.
    pub fn is_sub_byte_integer(self) -> bool {
        (30..=43).contains(&self.raw())
    }

    /// The five float8 types (c10's isFloat8Type): Float8_e5m2,
    /// Float8_e4m3fn, Float8_e5m2fnuz, Float8_e4m3fnuz, Float8_e8m0fnu.
    pub fn is_float8(self) -> bool {
        use DType::*;
        matches!(
            self,
            Float8E5M2 | Float8E4M3Fn | Float8E5M2Fnuz | Float8E4M3Fnuz | Float8E8M0Fnu
        )
    }

    /// The dtypes with no arithmetic, as in c10: quantized, bits and
    /// sub-byte integer types. Views, same-dtype copies and DLPack (where
    /// DLPack has a code) work; arithmetic is refused naming the dtype.
    pub fn is_storage_only(self) -> bool {
        self.is_quantized() || self.is_bits() || self.is_sub_byte_integer()
    }

    /// c10's isBarebonesUnsignedType: UInt1..UInt7 and UInt16/32/64, which
    /// promote only with floating types.
    pub fn is_barebones_unsigned(self) -> bool {
        use DType::*;
        matches!(self, UInt16 | UInt32 | UInt64) || (30..=36).contains(&self.raw())
    }

    /// The complex type with this real type's precision (Float ->
    /// ComplexFloat, BFloat16 -> BComplex32); complex types map to
    /// themselves.
    pub fn to_complex(self) -> Option<DType> {
        use DType::*;
        match self {
            Half => Some(ComplexHalf),
            Float => Some(ComplexFloat),
            Double => Some(ComplexDouble),
            BFloat16 => Some(BComplex32),
            ComplexHalf | ComplexFloat | ComplexDouble | BComplex32 => Some(self),
            _ => None,
        }
    }

    /// The real type of a complex type's components; real types map to
    /// themselves.
    pub fn to_real(self) -> DType {
        use DType::*;
        match self {
            ComplexHalf => Half,
            ComplexFloat => Float,
            ComplexDouble => Double,
            BComplex32 => BFloat16,
            other => other,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_matches_c10() {
        for (n, d) in DType::ALL.iter().enumerate() {
            assert_eq!(d.raw() as usize, n, "{d}");
            assert_eq!(DType::from_raw(n as i8).unwrap(), *d);
            assert_eq!(DType::from_name(d.name()), Some(*d));
            assert_eq!(d.c_name().to_str().unwrap(), d.name());
        }
        assert_eq!(DType::Float4E2M1FnX2.raw(), 45);
        assert_eq!(DType::BComplex32.itemsize(), 4);
        for raw in [-128i8, -1, 47, 48, 127] {
            let e = DType::from_raw(raw).unwrap_err();
            assert!(e.message().contains(&format!("unknown dtype {raw}")), "{e}");
        }
    }

    #[test]
    fn categories() {
        assert!(DType::BFloat16.is_floating());
        assert!(!DType::ComplexFloat.is_floating());
        assert!(DType::ComplexHalf.is_complex());
        assert!(DType::Bool.is_integral(true));
        assert!(!DType::Bool.is_integral(false));
        assert_eq!(DType::ComplexDouble.to_real(), DType::Double);
        assert_eq!(DType::Float.to_complex(), Some(DType::ComplexFloat));
        assert_eq!(DType::Long.to_complex(), None);
        assert_eq!(DType::BFloat16.to_complex(), Some(DType::BComplex32));
        assert_eq!(DType::BComplex32.to_real(), DType::BFloat16);
        assert!(DType::Bits8.is_storage_only() && DType::Int4.is_storage_only());
        assert!(!DType::Float8E8M0Fnu.is_storage_only());
        assert!(DType::UInt3.is_barebones_unsigned() && !DType::Int3.is_barebones_unsigned());
    }
}
