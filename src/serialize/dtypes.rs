//! How each dtype is named by the file formats: torch's Python dtype
//! names and storage classes, libtorch's storage names, safetensors'
//! dtype strings. Looked up by c10 name, so dtypes this build lacks are
//! simply absent.

use crate::dtype::DType;

/// c10 name, torch's Python name, legacy storage class (None: saved as an
/// UntypedStorage with the dtype, torch._utils._rebuild_tensor_v3).
const TORCH: &[(&str, &str, Option<&str>)] = &[
    ("Byte", "uint8", Some("ByteStorage")),
    ("Char", "int8", Some("CharStorage")),
    ("Short", "int16", Some("ShortStorage")),
    ("Int", "int32", Some("IntStorage")),
    ("Long", "int64", Some("LongStorage")),
    ("Half", "float16", Some("HalfStorage")),
    ("Float", "float32", Some("FloatStorage")),
    ("Double", "float64", Some("DoubleStorage")),
    ("ComplexHalf", "complex32", None),
    ("ComplexFloat", "complex64", Some("ComplexFloatStorage")),
    ("ComplexDouble", "complex128", Some("ComplexDoubleStorage")),
    ("Bool", "bool", Some("BoolStorage")),
    ("BFloat16", "bfloat16", Some("BFloat16Storage")),
    ("Float8_e5m2", "float8_e5m2", None),
    ("Float8_e4m3fn", "float8_e4m3fn", None),
    ("Float8_e5m2fnuz", "float8_e5m2fnuz", None),
    ("Float8_e4m3fnuz", "float8_e4m3fnuz", None),
    ("Float8_e8m0fnu", "float8_e8m0fnu", None),
    ("Float4_e2m1fn_x2", "float4_e2m1fn_x2", None),
    ("Bits1x8", "bits1x8", None),
    ("Bits2x4", "bits2x4", None),
    ("Bits4x2", "bits4x2", None),
    ("Bits8", "bits8", None),
    ("Bits16", "bits16", None),
    ("BComplex32", "bcomplex32", None),
    ("UInt16", "uint16", None),
    ("UInt32", "uint32", None),
    ("UInt64", "uint64", None),
];

/// Other Python names of the same dtypes (torch.float is torch.float32).
const TORCH_ALIASES: &[(&str, &str)] = &[
    ("float", "float32"),
    ("double", "float64"),
    ("half", "float16"),
    ("long", "int64"),
    ("int", "int32"),
    ("short", "int16"),
    ("cfloat", "complex64"),
    ("cdouble", "complex128"),
    ("chalf", "complex32"),
];

/// How torch.save writes a tensor of `dtype`: (Python dtype name, legacy
/// storage class or None for an UntypedStorage). None when torch has no
/// plain rebuild for it (quantized dtypes).
pub(crate) fn torch_names(dtype: DType) -> Option<(&'static str, Option<&'static str>)> {
    TORCH
        .iter()
        .find(|(c10, _, _)| *c10 == dtype.name())
        .map(|(_, py, st)| (*py, *st))
}

/// The dtype of the Python name `torch.<name>` (aliases included).
pub(crate) fn dtype_of_torch_name(name: &str) -> Option<DType> {
    let name = TORCH_ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canon)| canon);
    TORCH
        .iter()
        .find(|(_, py, _)| *py == name)
        .and_then(|(c10, _, _)| DType::from_name(c10))
}

/// The dtype of the storage class `torch.<name>`: a legacy class
/// (FloatStorage) or libtorch's "<c10 name>Storage" (UInt16Storage).
/// `Some(None)` for UntypedStorage (bytes; the dtype comes with the
/// rebuild call).
pub(crate) fn dtype_of_storage_name(name: &str) -> Option<Option<DType>> {
    if name == "UntypedStorage" {
        return Some(None);
    }
    if let Some((c10, _, _)) = TORCH.iter().find(|(_, _, st)| *st == Some(name)) {
        return DType::from_name(c10).map(Some);
    }
    name.strip_suffix("Storage")
        .and_then(DType::from_name)
        .map(Some)
}

/// safetensors' dtype of `dtype`.
pub(crate) fn safetensors_dtype(dtype: DType) -> Option<safetensors::Dtype> {
    use safetensors::Dtype as S;
    Some(match dtype.name() {
        "Bool" => S::BOOL,
        "Byte" => S::U8,
        "Char" => S::I8,
        "Float8_e5m2" => S::F8_E5M2,
        "Float8_e4m3fn" => S::F8_E4M3,
        "Float8_e8m0fnu" => S::F8_E8M0,
        "Short" => S::I16,
        "UInt16" => S::U16,
        "Half" => S::F16,
        "BFloat16" => S::BF16,
        "Int" => S::I32,
        "UInt32" => S::U32,
        "Float" => S::F32,
        "ComplexFloat" => S::C64,
        "Double" => S::F64,
        "Long" => S::I64,
        "UInt64" => S::U64,
        _ => return None,
    })
}

/// The dtype of safetensors' `dtype`.
pub(crate) fn dtype_of_safetensors(dtype: safetensors::Dtype) -> Option<DType> {
    DType::ALL
        .iter()
        .copied()
        .find(|d| safetensors_dtype(*d) == Some(dtype))
}
