//! How each dtype is named by the file formats: torch's Python dtype
//! names and storage classes, libtorch's storage names, safetensors'
//! dtypes; all are columns of the dtype table (dtype/table.rs).

use crate::dtype::{table, DType};

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
    let info = dtype.info();
    info.torch.map(|py| (py, info.storage))
}

/// The dtype of the Python name `torch.<name>` (aliases included).
pub(crate) fn dtype_of_torch_name(name: &str) -> Option<DType> {
    let name = TORCH_ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canon)| canon);
    DType::ALL
        .into_iter()
        .find(|d| d.info().torch == Some(name))
}

/// The dtype of the storage class `torch.<name>`: a legacy class
/// (FloatStorage) or libtorch's "<c10 name>Storage" (UInt16Storage).
/// `Some(None)` for UntypedStorage (bytes; the dtype comes with the
/// rebuild call).
pub(crate) fn dtype_of_storage_name(name: &str) -> Option<Option<DType>> {
    if name == "UntypedStorage" {
        return Some(None);
    }
    if let Some(d) = DType::ALL
        .into_iter()
        .find(|d| d.info().storage == Some(name))
    {
        return Some(Some(d));
    }
    name.strip_suffix("Storage")
        .and_then(DType::from_name)
        .map(Some)
}

/// The dtype of PyTorch's legacy tensor type `torch.<name>` (FloatTensor,
/// LongTensor, ...: the storage class's name with "Tensor").
pub(crate) fn dtype_of_tensor_type(name: &str) -> Option<DType> {
    let stem = name.strip_suffix("Tensor")?;
    dtype_of_storage_name(&format!("{stem}Storage")).flatten()
}

/// Expands the dtype table's safetensors column into `SAFETENSORS`.
macro_rules! safetensors_column {
    ([] $( $kind:ident { $( ($variant:ident, $number:literal, $name:literal, $size:literal,
        $sign:ident, [$($elem:tt)*], $torch:tt, $storage:tt, $safetensors:tt, $dlpack:tt,
        $numpy:tt, $gguf:tt, $doc:literal) )* } )*) => {
        /// Every dtype with its safetensors dtype, if it has one.
        const SAFETENSORS: &[(DType, Option<safetensors::Dtype>)] = {
            #[allow(unused_imports)]
            use safetensors::Dtype::*;
            &[ $( $( (DType::$variant, table::column!($safetensors)), )* )* ]
        };
    };
}
table::dtype_table!(safetensors_column);

/// safetensors' dtype of `dtype`.
pub(crate) fn safetensors_dtype(dtype: DType) -> Option<safetensors::Dtype> {
    SAFETENSORS
        .iter()
        .find(|(d, _)| *d == dtype)
        .and_then(|(_, st)| *st)
}

/// The dtype of safetensors' `dtype`.
pub(crate) fn dtype_of_safetensors(dtype: safetensors::Dtype) -> Option<DType> {
    SAFETENSORS
        .iter()
        .find(|(_, st)| *st == Some(dtype))
        .map(|(d, _)| *d)
}
