//! The facts of GGUF (llama.cpp's format) that its reader and writer
//! share: ggml's tensor types with their block geometry, GGUF's value
//! types, and the metadata keys tessera adds to a loaded dict.
//!
//! The block sizes and type sizes are ggml's (ggml-common.h; the `gguf`
//! package's GGML_QUANT_SIZES): a row of `ne[0]` elements of a type
//! holds `ne[0] / block` blocks of `size` bytes.

/// The first four bytes of every GGUF file.
pub(crate) const MAGIC: &[u8; 4] = b"GGUF";
/// The data alignment when `general.alignment` is absent.
pub(crate) const DEFAULT_ALIGNMENT: u64 = 32;
/// The metadata key that sets the alignment (a uint32).
pub(crate) const ALIGNMENT_KEY: &str = "general.alignment";
/// ggml's most dims of a tensor (GGML_MAX_DIMS).
pub(crate) const MAX_DIMS: usize = 4;
/// The dict's metadata key holding each GGUF key's value type, as a JSON
/// object (`{"general.alignment": "uint32", "tokenizer.ggml.tokens":
/// "array[string]"}`), so that a loaded dict saves back with its types.
/// A metadata key without an entry here is written as a string.
pub(crate) const TYPES_KEY: &str = "gguf.types";
/// Suffix of the metadata key naming a quantized tensor's ggml type.
pub(crate) const GGML_TYPE_SUFFIX: &str = ".ggml_type";
/// Suffix of the metadata key holding a quantized tensor's logical shape
/// (c10 order, a JSON list).
pub(crate) const GGML_SHAPE_SUFFIX: &str = ".ggml_shape";

/// One ggml tensor type: its number, name, elements per block and bytes
/// per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GgmlType {
    pub number: u32,
    pub name: &'static str,
    pub block: u64,
    pub size: u64,
}

const fn t(number: u32, name: &'static str, block: u64, size: u64) -> GgmlType {
    GgmlType {
        number,
        name,
        block,
        size,
    }
}

const QK_K: u64 = 256;

/// Every ggml type a GGUF file may hold (numbers 4, 5, 31-33 and 36-38
/// were removed from ggml and are refused).
pub(crate) const GGML_TYPES: &[GgmlType] = &[
    t(0, "F32", 1, 4),
    t(1, "F16", 1, 2),
    t(2, "Q4_0", 32, 2 + 16),
    t(3, "Q4_1", 32, 2 + 2 + 16),
    t(6, "Q5_0", 32, 2 + 4 + 16),
    t(7, "Q5_1", 32, 2 + 2 + 4 + 16),
    t(8, "Q8_0", 32, 2 + 32),
    // ggml's block_q8_1 is two halves and 32 bytes (gguf-py before 0.20
    // listed 4 + 4 + 32, fixed upstream).
    t(9, "Q8_1", 32, 2 + 2 + 32),
    t(10, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4),
    t(11, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12),
    t(12, "Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12),
    t(13, "Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12),
    t(14, "Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16),
    t(15, "Q8_K", QK_K, 4 + QK_K + QK_K / 8),
    t(16, "IQ2_XXS", QK_K, 2 + QK_K / 4),
    t(17, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32),
    t(18, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8),
    t(19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16),
    t(20, "IQ4_NL", 32, 2 + 16),
    t(21, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4),
    t(22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16),
    t(23, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64),
    t(24, "I8", 1, 1),
    t(25, "I16", 1, 2),
    t(26, "I32", 1, 4),
    t(27, "I64", 1, 8),
    t(28, "F64", 1, 8),
    t(29, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
    t(30, "BF16", 1, 2),
    t(34, "TQ1_0", QK_K, 2 + 4 * 13),
    t(35, "TQ2_0", QK_K, 2 + 64),
    t(39, "MXFP4", 32, 1 + 16),
    t(40, "NVFP4", 64, 4 + 32),
    t(41, "Q1_0", 128, 2 + 16),
];

/// The ggml type numbered `number`.
pub(crate) fn ggml_type(number: u32) -> Option<GgmlType> {
    GGML_TYPES.iter().copied().find(|t| t.number == number)
}

/// The ggml type named `name` ("Q4_0").
pub(crate) fn ggml_type_named(name: &str) -> Option<GgmlType> {
    GGML_TYPES.iter().copied().find(|t| t.name == name)
}

/// GGUF's metadata value types (GGUFValueType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

/// The value types, in number order.
const VALUE_TYPES: [(ValueType, &str); 13] = [
    (ValueType::U8, "uint8"),
    (ValueType::I8, "int8"),
    (ValueType::U16, "uint16"),
    (ValueType::I16, "int16"),
    (ValueType::U32, "uint32"),
    (ValueType::I32, "int32"),
    (ValueType::F32, "float32"),
    (ValueType::Bool, "bool"),
    (ValueType::String, "string"),
    (ValueType::Array, "array"),
    (ValueType::U64, "uint64"),
    (ValueType::I64, "int64"),
    (ValueType::F64, "float64"),
];

impl ValueType {
    /// The value type numbered `n`.
    pub fn from_u32(n: u32) -> Option<ValueType> {
        VALUE_TYPES.get(n as usize).map(|(t, _)| *t)
    }

    /// The value type named `name` ("uint32").
    pub fn named(name: &str) -> Option<ValueType> {
        VALUE_TYPES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(t, _)| *t)
    }

    /// Its name in `gguf.types` ("uint32").
    pub fn name(self) -> &'static str {
        VALUE_TYPES[self as usize].1
    }

    /// The bytes of one value (strings and arrays: their smallest, the
    /// 8-byte length or the 4-byte type and 8-byte count).
    pub fn min_size(self) -> u64 {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::String => 8,
            ValueType::Array => 12,
        }
    }
}

/// A value's full type: a scalar type, or an array of one (nested
/// arrays allowed): "array[array[int32]]".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FullType {
    Scalar(ValueType),
    Array(Box<FullType>),
}

impl FullType {
    /// Its text in `gguf.types`.
    pub fn text(&self) -> String {
        match self {
            FullType::Scalar(t) => t.name().to_string(),
            FullType::Array(inner) => format!("array[{}]", inner.text()),
        }
    }

    /// Parses the text of [`FullType::text`].
    pub fn parse(text: &str) -> Option<FullType> {
        if let Some(inner) = text
            .strip_prefix("array[")
            .and_then(|r| r.strip_suffix(']'))
        {
            return FullType::parse(inner).map(|t| FullType::Array(Box::new(t)));
        }
        ValueType::named(text)
            .filter(|t| *t != ValueType::Array)
            .map(FullType::Scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_unique_and_round_trip() {
        for (i, a) in GGML_TYPES.iter().enumerate() {
            assert!(GGML_TYPES[i + 1..]
                .iter()
                .all(|b| b.number != a.number && b.name != a.name));
            assert_eq!(ggml_type_named(a.name), Some(*a));
        }
        // The K-quants' sizes as ggml-common.h's static asserts give them.
        assert_eq!(ggml_type(12).unwrap().size, 144);
        assert_eq!(ggml_type(14).unwrap().size, 210);
        for text in ["uint32", "array[string]", "array[array[float32]]"] {
            assert_eq!(FullType::parse(text).unwrap().text(), text);
        }
        assert!(FullType::parse("array").is_none());
        assert!(FullType::parse("array[nope]").is_none());
    }
}
