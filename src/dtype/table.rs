//! The one table of dtypes, as c10's X-macros (AT_FORALL_SCALAR_TYPES_...):
//! every row names a dtype once, with each column a site needs. The enum,
//! its names and sizes, `DType::ALL`, the kernels' dispatch sets, the file
//! formats' names and DLPack's codes are all expanded from it, so adding a
//! dtype is one row here (plus kernels, if it computes).
//!
//! `dtype_table!(callback)` (or `dtype_table!(callback, args)`, or
//! `dtype_table!([path::to::callback], args)` from a macro) invokes
//! `callback! { [args] Group { (row) ... } ... }` with the groups below, in
//! this order; a callback picks the groups and columns it needs. The group
//! is the dtype's `Kind`. Each row is
//!
//! | column | meaning |
//! |---|---|
//! | variant, number | the `DType` variant and c10's ScalarType number |
//! | name | c10's name (`toString(ScalarType)`) |
//! | size | c10's elementSize (a packed sub-byte type counts one byte) |
//! | sign | `s` signed or `u` unsigned (c10's isSignedType) |
//! | [element] | the kernels' element type (`elem::` is `crate::kernels::elem`), `[]` when it has no arithmetic |
//! | torch | Python's `torch.<name>`, `-` when torch.save has no name for it |
//! | storage | the legacy typed storage class torch.save writes, `-` for an UntypedStorage |
//! | safetensors | safetensors' dtype (`safetensors::Dtype::<this>`) |
//! | dlpack | (DLPack type code, bits, lanes) of `dlpack::type_code` |
//! | numpy | NumPy's type string without its byte-order character |
//! | gguf | ggml's type number (GGMLQuantizationType) of a plain (unquantized) GGUF tensor |
//! | doc | what the variant documents |
//!
//! A `-` is "none". The callbacks live with their users (dtype/mod.rs,
//! kernels/dispatch.rs, dlpack.rs, serialize/dtypes.rs).

/// Invokes `$callback! { [$args] groups... }` with every dtype (see the
/// module documentation for the columns).
macro_rules! dtype_table {
    ($callback:ident $(, $($args:tt)*)?) => {
        $crate::dtype::table::dtype_table! { [$callback] $(, $($args)*)? }
    };
    ([$($callback:tt)*] $(, $($args:tt)*)?) => {
        $($callback)*! { [$($($args)*)?]
            Bool {
                (Bool, 11, "Bool", 1, u, [elem::Bool], "bool", "BoolStorage", BOOL, (BOOL, 8, 1), "b1", -, "bool, one byte holding 0 or 1")
            }
            Int {
                (Byte, 0, "Byte", 1, u, [u8], "uint8", "ByteStorage", U8, (UINT, 8, 1), "u1", -, "uint8")
                (Char, 1, "Char", 1, s, [i8], "int8", "CharStorage", I8, (INT, 8, 1), "i1", 24, "int8")
                (Short, 2, "Short", 2, s, [i16], "int16", "ShortStorage", I16, (INT, 16, 1), "i2", 25, "int16")
                (Int, 3, "Int", 4, s, [i32], "int32", "IntStorage", I32, (INT, 32, 1), "i4", 26, "int32")
                (Long, 4, "Long", 8, s, [i64], "int64", "LongStorage", I64, (INT, 64, 1), "i8", 27, "int64")
            }
            UInt {
                (UInt16, 27, "UInt16", 2, u, [u16], "uint16", -, U16, (UINT, 16, 1), "u2", -, "uint16 (\"barebones\": promotes only with floating types)")
                (UInt32, 28, "UInt32", 4, u, [u32], "uint32", -, U32, (UINT, 32, 1), "u4", -, "uint32 (\"barebones\": promotes only with floating types)")
                (UInt64, 29, "UInt64", 8, u, [u64], "uint64", -, U64, (UINT, 64, 1), "u8", -, "uint64 (\"barebones\": promotes only with floating types)")
            }
            Float {
                (Half, 5, "Half", 2, s, [half::f16], "float16", "HalfStorage", F16, (FLOAT, 16, 1), "f2", 1, "IEEE float16")
                (Float, 6, "Float", 4, s, [f32], "float32", "FloatStorage", F32, (FLOAT, 32, 1), "f4", 0, "float32")
                (Double, 7, "Double", 8, s, [f64], "float64", "DoubleStorage", F64, (FLOAT, 64, 1), "f8", 28, "float64")
                (BFloat16, 15, "BFloat16", 2, s, [half::bf16], "bfloat16", "BFloat16Storage", BF16, (BFLOAT, 16, 1), -, 30, "bfloat16")
            }
            Complex {
                (ComplexHalf, 8, "ComplexHalf", 4, s, [elem::Complex<half::f16>], "complex32", -, -, (COMPLEX, 32, 1), -, -, "complex of two float16")
                (ComplexFloat, 9, "ComplexFloat", 8, s, [elem::Complex<f32>], "complex64", "ComplexFloatStorage", C64, (COMPLEX, 64, 1), "c8", -, "complex of two float32")
                (ComplexDouble, 10, "ComplexDouble", 16, s, [elem::Complex<f64>], "complex128", "ComplexDoubleStorage", -, (COMPLEX, 128, 1), "c16", -, "complex of two float64")
                (BComplex32, 46, "BComplex32", 4, s, [elem::Complex<half::bf16>], "bcomplex32", -, -, -, -, -, "complex of two bfloat16")
            }
            Float8 {
                (Float8E5M2, 23, "Float8_e5m2", 1, s, [elem::Float8E5M2], "float8_e5m2", -, F8_E5M2, (FLOAT8_E5M2, 8, 1), -, -, "float8, 5 exponent bits, 2 mantissa bits")
                (Float8E4M3Fn, 24, "Float8_e4m3fn", 1, s, [elem::Float8E4M3Fn], "float8_e4m3fn", -, F8_E4M3, (FLOAT8_E4M3FN, 8, 1), -, -, "float8, 4 exponent bits, 3 mantissa bits, finite")
                (Float8E5M2Fnuz, 25, "Float8_e5m2fnuz", 1, s, [elem::Float8E5M2Fnuz], "float8_e5m2fnuz", -, -, (FLOAT8_E5M2FNUZ, 8, 1), -, -, "float8, 5 exponent bits, 2 mantissa bits, finite, one NaN, no -0")
                (Float8E4M3Fnuz, 26, "Float8_e4m3fnuz", 1, s, [elem::Float8E4M3Fnuz], "float8_e4m3fnuz", -, -, (FLOAT8_E4M3FNUZ, 8, 1), -, -, "float8, 4 exponent bits, 3 mantissa bits, finite, one NaN, no -0")
                (Float8E8M0Fnu, 44, "Float8_e8m0fnu", 1, u, [elem::Float8E8M0Fnu], "float8_e8m0fnu", -, F8_E8M0, (FLOAT8_E8M0FNU, 8, 1), -, -, "float8 scale type: 8 exponent bits, no sign, no mantissa")
            }
            Float4 {
                (Float4E2M1FnX2, 45, "Float4_e2m1fn_x2", 1, s, [], "float4_e2m1fn_x2", -, -, (FLOAT4_E2M1FN, 4, 2), -, -, "two float4 e2m1 values packed in a byte")
            }
            Quant {
                (QInt8, 12, "QInt8", 1, s, [], -, -, -, -, -, -, "quantized int8 (storage only)")
                (QUInt8, 13, "QUInt8", 1, u, [], -, -, -, -, -, -, "quantized uint8 (storage only)")
                (QInt32, 14, "QInt32", 4, s, [], -, -, -, -, -, -, "quantized int32 (storage only)")
                (QUInt4x2, 16, "QUInt4x2", 1, u, [], -, -, -, -, -, -, "quantized uint4, two per byte (storage only)")
                (QUInt2x4, 17, "QUInt2x4", 1, u, [], -, -, -, -, -, -, "quantized uint2, four per byte (storage only)")
            }
            Bits {
                (Bits1x8, 18, "Bits1x8", 1, u, [], "bits1x8", -, -, -, -, -, "eight 1-bit fields in a byte, no meaning attached (storage only)")
                (Bits2x4, 19, "Bits2x4", 1, u, [], "bits2x4", -, -, -, -, -, "four 2-bit fields in a byte (storage only)")
                (Bits4x2, 20, "Bits4x2", 1, u, [], "bits4x2", -, -, -, -, -, "two 4-bit fields in a byte (storage only)")
                (Bits8, 21, "Bits8", 1, u, [], "bits8", -, -, -, -, -, "one byte of bits (storage only)")
                (Bits16, 22, "Bits16", 2, u, [], "bits16", -, -, -, -, -, "two bytes of bits (storage only)")
            }
            SubUInt {
                (UInt1, 30, "UInt1", 1, u, [], -, -, -, -, -, -, "1-bit unsigned integer in a byte (storage only)")
                (UInt2, 31, "UInt2", 1, u, [], -, -, -, -, -, -, "2-bit unsigned integer in a byte (storage only)")
                (UInt3, 32, "UInt3", 1, u, [], -, -, -, -, -, -, "3-bit unsigned integer in a byte (storage only)")
                (UInt4, 33, "UInt4", 1, u, [], -, -, -, -, -, -, "4-bit unsigned integer in a byte (storage only)")
                (UInt5, 34, "UInt5", 1, u, [], -, -, -, -, -, -, "5-bit unsigned integer in a byte (storage only)")
                (UInt6, 35, "UInt6", 1, u, [], -, -, -, -, -, -, "6-bit unsigned integer in a byte (storage only)")
                (UInt7, 36, "UInt7", 1, u, [], -, -, -, -, -, -, "7-bit unsigned integer in a byte (storage only)")
            }
            SubInt {
                (Int1, 37, "Int1", 1, s, [], -, -, -, -, -, -, "1-bit signed integer in a byte (storage only)")
                (Int2, 38, "Int2", 1, s, [], -, -, -, -, -, -, "2-bit signed integer in a byte (storage only)")
                (Int3, 39, "Int3", 1, s, [], -, -, -, -, -, -, "3-bit signed integer in a byte (storage only)")
                (Int4, 40, "Int4", 1, s, [], -, -, -, -, -, -, "4-bit signed integer in a byte (storage only)")
                (Int5, 41, "Int5", 1, s, [], -, -, -, -, -, -, "5-bit signed integer in a byte (storage only)")
                (Int6, 42, "Int6", 1, s, [], -, -, -, -, -, -, "6-bit signed integer in a byte (storage only)")
                (Int7, 43, "Int7", 1, s, [], -, -, -, -, -, -, "7-bit signed integer in a byte (storage only)")
            }
        }
    };
}

/// A column's value: `-` is None, anything else `Some` of it.
macro_rules! column {
    (-) => {
        None
    };
    ($value:expr) => {
        Some($value)
    };
}

/// `s` / `u` of the sign column.
macro_rules! signed {
    (s) => {
        true
    };
    (u) => {
        false
    };
}

pub(crate) use {column, dtype_table, signed};
