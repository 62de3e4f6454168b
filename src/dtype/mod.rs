//! Element types, numbered as c10's `ScalarType`.

pub mod convert;
pub mod float4;
pub mod float8;
mod promote;
mod scalar;

pub use promote::{can_cast, promote_types, Category, ResultTypeState};
pub use scalar::Scalar;

use crate::error::Result;

/// An element type. The numbers are c10's `ScalarType` numbers.
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
    /// float8, 5 exponent bits, 2 mantissa bits
    Float8E5M2 = 23,
    /// float8, 4 exponent bits, 3 mantissa bits, finite
    Float8E4M3Fn = 24,
    /// uint16 ("barebones": promotes only with floating types)
    UInt16 = 27,
    /// uint32 ("barebones": promotes only with floating types)
    UInt32 = 28,
    /// uint64 ("barebones": promotes only with floating types)
    UInt64 = 29,
}

impl DType {
    /// Every supported dtype, in c10's numbering order.
    pub const ALL: [DType; 21] = [
        DType::Byte,
        DType::Char,
        DType::Short,
        DType::Int,
        DType::Long,
        DType::Half,
        DType::Float,
        DType::Double,
        DType::ComplexHalf,
        DType::ComplexFloat,
        DType::ComplexDouble,
        DType::Bool,
        DType::QInt8,
        DType::QUInt8,
        DType::QInt32,
        DType::BFloat16,
        DType::Float8E5M2,
        DType::Float8E4M3Fn,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
    ];

    /// The dtype with c10's number `raw`, if tessera supports it.
    pub fn try_from_raw(raw: i8) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| *d as i8 == raw)
    }

    /// The dtype with c10's number `raw`, or an error naming the number.
    pub fn from_raw(raw: i8) -> Result<DType> {
        DType::try_from_raw(raw).ok_or_else(|| {
            crate::err!(
                InvalidArgument,
                "unknown dtype {raw}: expected a c10 ScalarType number (0-15, 23, 24, 27-29)"
            )
        })
    }

    /// c10's number of this dtype.
    pub fn raw(self) -> i8 {
        self as i8
    }

    /// Bytes per element.
    pub fn itemsize(self) -> usize {
        use DType::*;
        match self {
            Byte | Char | Bool | QInt8 | QUInt8 | Float8E5M2 | Float8E4M3Fn => 1,
            Short | Half | BFloat16 | UInt16 => 2,
            Int | Float | QInt32 | UInt32 | ComplexHalf => 4,
            Long | Double | ComplexFloat | UInt64 => 8,
            ComplexDouble => 16,
        }
    }

    /// c10's name ("Float", "BFloat16", "ComplexFloat", ...).
    pub fn name(self) -> &'static str {
        use DType::*;
        match self {
            Byte => "Byte",
            Char => "Char",
            Short => "Short",
            Int => "Int",
            Long => "Long",
            Half => "Half",
            Float => "Float",
            Double => "Double",
            ComplexHalf => "ComplexHalf",
            ComplexFloat => "ComplexFloat",
            ComplexDouble => "ComplexDouble",
            Bool => "Bool",
            QInt8 => "QInt8",
            QUInt8 => "QUInt8",
            QInt32 => "QInt32",
            BFloat16 => "BFloat16",
            Float8E5M2 => "Float8_e5m2",
            Float8E4M3Fn => "Float8_e4m3fn",
            UInt16 => "UInt16",
            UInt32 => "UInt32",
            UInt64 => "UInt64",
        }
    }

    /// The dtype whose c10 name is `name`.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.name() == name)
    }

    /// Real floating types (c10's isFloatingType): Half, Float, Double,
    /// BFloat16 and the float8 types.
    pub fn is_floating(self) -> bool {
        use DType::*;
        matches!(
            self,
            Half | Float | Double | BFloat16 | Float8E5M2 | Float8E4M3Fn
        )
    }

    /// Complex types.
    pub fn is_complex(self) -> bool {
        matches!(
            self,
            DType::ComplexHalf | DType::ComplexFloat | DType::ComplexDouble
        )
    }

    /// Integer types, optionally counting Bool as one (c10's isIntegralType).
    pub fn is_integral(self, include_bool: bool) -> bool {
        use DType::*;
        match self {
            Byte | Char | Short | Int | Long | UInt16 | UInt32 | UInt64 => true,
            Bool => include_bool,
            _ => false,
        }
    }

    /// Signed types (integers, floating and complex).
    pub fn is_signed(self) -> bool {
        use DType::*;
        !matches!(self, Byte | Bool | UInt16 | UInt32 | UInt64 | QUInt8)
    }

    /// Quantized types (QInt8, QUInt8, QInt32).
    pub fn is_quantized(self) -> bool {
        matches!(self, DType::QInt8 | DType::QUInt8 | DType::QInt32)
    }

    /// The float8 types.
    pub fn is_float8(self) -> bool {
        matches!(self, DType::Float8E5M2 | DType::Float8E4M3Fn)
    }

    /// UInt16, UInt32 and UInt64, which c10 promotes only with floating types.
    pub fn is_barebones_unsigned(self) -> bool {
        matches!(self, DType::UInt16 | DType::UInt32 | DType::UInt64)
    }

    /// The complex type with this real type's precision (Float ->
    /// ComplexFloat); complex types map to themselves.
    pub fn to_complex(self) -> Option<DType> {
        use DType::*;
        match self {
            Half => Some(ComplexHalf),
            Float => Some(ComplexFloat),
            Double => Some(ComplexDouble),
            ComplexHalf | ComplexFloat | ComplexDouble => Some(self),
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
        let expected: [(DType, i8, usize); 21] = [
            (DType::Byte, 0, 1),
            (DType::Char, 1, 1),
            (DType::Short, 2, 2),
            (DType::Int, 3, 4),
            (DType::Long, 4, 8),
            (DType::Half, 5, 2),
            (DType::Float, 6, 4),
            (DType::Double, 7, 8),
            (DType::ComplexHalf, 8, 4),
            (DType::ComplexFloat, 9, 8),
            (DType::ComplexDouble, 10, 16),
            (DType::Bool, 11, 1),
            (DType::QInt8, 12, 1),
            (DType::QUInt8, 13, 1),
            (DType::QInt32, 14, 4),
            (DType::BFloat16, 15, 2),
            (DType::Float8E5M2, 23, 1),
            (DType::Float8E4M3Fn, 24, 1),
            (DType::UInt16, 27, 2),
            (DType::UInt32, 28, 4),
            (DType::UInt64, 29, 8),
        ];
        for (d, raw, size) in expected {
            assert_eq!(d.raw(), raw, "{d}");
            assert_eq!(d.itemsize(), size, "{d}");
            assert_eq!(DType::from_raw(raw).unwrap(), d);
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        for raw in [-1i8, 16, 22, 25, 26, 30, 127] {
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
    }
}
