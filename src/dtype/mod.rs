//! Element types, numbered as c10's `ScalarType`.

pub mod convert;
pub mod float4;
pub mod float8;
mod promote;
mod scalar;
pub(crate) mod table;

pub use promote::{can_cast, promote_types, Category, ResultTypeState};
pub use scalar::Scalar;

use crate::error::Result;
use std::ffi::CStr;

/// A column's value as a NUL-terminated string: `-` is None.
macro_rules! c_column {
    (-) => {
        None
    };
    ($value:literal) => {
        Some(c_str(concat!($value, "\0")))
    };
}

/// Expands the dtype table (table.rs) into the enum, its per-dtype facts
/// in table order (`ROWS`) and the `Kind` of each group.
macro_rules! define_dtypes {
    ([] $( $kind:ident { $( ($variant:ident, $number:literal, $name:literal, $size:literal,
        $sign:ident, [$($elem:tt)*], $torch:tt, $storage:tt, $safetensors:tt, $dlpack:tt,
        $numpy:tt, $gguf:tt, $doc:literal) )* } )*) => {
        /// An element type. The numbers are c10's `ScalarType` numbers
        /// (PyTorch 2.15: every number below `DType::COUNT` is a dtype).
        #[repr(i8)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum DType {
            $( $( #[doc = $doc] $variant = $number, )* )*
        }

        /// The groups of the dtype table: what a dtype is for the kernels
        /// and the category queries.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Kind {
            $( $kind, )*
        }

        /// Every dtype's facts, in the table's order.
        const ROWS: &[Info] = &[
            $( $( Info {
                dtype: DType::$variant,
                name: c_str(concat!($name, "\0")),
                itemsize: $size,
                kind: Kind::$kind,
                signed: table::signed!($sign),
                torch: table::column!($torch),
                torch_c: c_column!($torch),
                storage: table::column!($storage),
                numpy: table::column!($numpy),
                numpy_c: c_column!($numpy),
                gguf: table::column!($gguf),
            }, )* )*
        ];
    };
}
table::dtype_table!(define_dtypes);

/// One dtype's facts from the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Info {
    dtype: DType,
    name: &'static CStr,
    itemsize: usize,
    kind: Kind,
    signed: bool,
    /// Python's `torch.<name>`.
    pub(crate) torch: Option<&'static str>,
    /// The same, NUL-terminated (for C).
    pub(crate) torch_c: Option<&'static CStr>,
    /// The legacy typed storage class torch.save writes (None: an
    /// UntypedStorage).
    pub(crate) storage: Option<&'static str>,
    /// NumPy's type string without its byte-order character.
    pub(crate) numpy: Option<&'static str>,
    /// The same, NUL-terminated (for C).
    pub(crate) numpy_c: Option<&'static CStr>,
    /// ggml's type number of a plain GGUF tensor of this dtype
    /// (GGMLQuantizationType: F32 0, F16 1, I8 24, ..., BF16 30).
    pub(crate) gguf: Option<u32>,
}

/// A NUL-terminated literal as a CStr, at compile time.
const fn c_str(with_nul: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(with_nul.as_bytes()) {
        Ok(name) => name,
        Err(_) => panic!("a dtype name holds a NUL byte"),
    }
}

/// The table's rows indexed by c10 number. Compiling fails unless the
/// numbers are 0..COUNT-1, each once.
const INFO: [Info; ROWS.len()] = {
    let mut out = [ROWS[0]; ROWS.len()];
    let mut seen = [false; ROWS.len()];
    let mut i = 0;
    while i < ROWS.len() {
        let n = ROWS[i].dtype as usize;
        assert!(n < ROWS.len(), "dtype numbers must run 0..COUNT-1");
        assert!(!seen[n], "two dtypes share a number");
        seen[n] = true;
        out[n] = ROWS[i];
        i += 1;
    }
    out
};

impl DType {
    /// How many dtypes there are (c10 numbers run 0..COUNT-1).
    pub const COUNT: usize = ROWS.len();

    /// Every dtype, in c10's numbering order (`ALL[n]` has number `n`).
    pub const ALL: [DType; DType::COUNT] = {
        let mut all = [DType::Byte; DType::COUNT];
        let mut i = 0;
        while i < DType::COUNT {
            all[i] = INFO[i].dtype;
            i += 1;
        }
        all
    };

    /// This dtype's row of the table.
    pub(crate) fn info(self) -> &'static Info {
        &INFO[self as usize]
    }

    /// The group of the table this dtype is in.
    pub(crate) fn kind(self) -> Kind {
        self.info().kind
    }

    /// The dtype with c10's number `raw`, if there is one (0..COUNT-1).
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
                "unknown dtype {raw}: expected a c10 ScalarType number (0-{})",
                DType::COUNT - 1
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
        self.info().itemsize
    }

    /// c10's name ("Float", "BFloat16", "Float8_e4m3fn", ...).
    pub fn name(self) -> &'static str {
        // The table holds ASCII literals only.
        self.info().name.to_str().unwrap_or("Undefined")
    }

    /// c10's name as a NUL-terminated static string.
    pub fn c_name(self) -> &'static std::ffi::CStr {
        self.info().name
    }

    /// The dtype whose c10 name is `name`.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.name() == name)
    }

    /// Real floating types (c10's isFloatingType): Half, Float, Double,
    /// BFloat16, the five float8 types and Float4_e2m1fn_x2.
    pub fn is_floating(self) -> bool {
        matches!(self.kind(), Kind::Float | Kind::Float8 | Kind::Float4)
    }

    /// Complex types (ComplexHalf, ComplexFloat, ComplexDouble, BComplex32).
    pub fn is_complex(self) -> bool {
        self.kind() == Kind::Complex
    }

    /// Integer types, optionally counting Bool as one (c10's
    /// isIntegralType: the sub-byte integers UInt1..7 / Int1..7 are not).
    pub fn is_integral(self, include_bool: bool) -> bool {
        match self.kind() {
            Kind::Int | Kind::UInt => true,
            Kind::Bool => include_bool,
            _ => false,
        }
    }

    /// Signed types (c10's isSignedType; the bits and quantized types,
    /// for which c10 raises, count as unsigned unless the table says
    /// otherwise: QInt8 and QInt32 are signed).
    pub fn is_signed(self) -> bool {
        self.info().signed
    }

    /// Quantized types (c10's isQIntType: QInt8, QUInt8, QInt32, QUInt4x2,
    /// QUInt2x4).
    pub fn is_quantized(self) -> bool {
        self.kind() == Kind::Quant
    }

    /// The bits types (c10's isBitsType: Bits1x8, Bits2x4, Bits4x2, Bits8,
    /// Bits16).
    pub fn is_bits(self) -> bool {
        self.kind() == Kind::Bits
    }

    /// The sub-byte integers UInt1..UInt7 and Int1..Int7.
    pub fn is_sub_byte_integer(self) -> bool {
        matches!(self.kind(), Kind::SubUInt | Kind::SubInt)
    }

    /// The five float8 types (c10's isFloat8Type): Float8_e5m2,
    /// Float8_e4m3fn, Float8_e5m2fnuz, Float8_e4m3fnuz, Float8_e8m0fnu.
    pub fn is_float8(self) -> bool {
        self.kind() == Kind::Float8
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
        matches!(self.kind(), Kind::UInt | Kind::SubUInt)
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
