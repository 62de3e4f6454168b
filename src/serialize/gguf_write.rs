//! Writing GGUF version 3 (see `gguf.rs`): every metadata entry becomes a
//! key-value pair of the type `gguf.types` gives it (a string when none),
//! every tensor a tensor of its ggml type: F32, F16, BF16, F64, I8, I16,
//! I32, I64 for those dtypes, and a uint8 tensor with `NAME.ggml_type`
//! and `NAME.ggml_shape` metadata is written as those raw blocks of that
//! type and logical shape (a loaded quantized tensor saves back as it
//! was). Dims are written in ggml's order (c10's reversed; a 0-dim
//! tensor as one dim of 1); data aligned to `general.alignment` (32 when
//! absent).

use super::dict::TensorDict;
use super::gguf_types::{
    ggml_type, ggml_type_named, FullType, GgmlType, ValueType, ALIGNMENT_KEY, DEFAULT_ALIGNMENT,
    GGML_SHAPE_SUFFIX, GGML_TYPE_SUFFIX, MAGIC, MAX_DIMS, TYPES_KEY,
};
use super::safetensors_format::row_major;
use super::values::{GGUF_VALUE_PREFIX, VALUES_KEY};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use serde_json::Value;
use std::io::Write;

fn bad(key: &str, text: &str, t: &FullType) -> Error {
    crate::err!(
        InvalidArgument,
        "gguf: metadata '{key}' = {:?}: expected a {} value (its type in '{TYPES_KEY}')",
        text.chars().take(60).collect::<String>(),
        t.text()
    )
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Encodes one scalar of type `t` from its text (top level) or JSON value.
fn put_scalar(out: &mut Vec<u8>, t: ValueType, text: Option<&str>, json: Option<&Value>) -> bool {
    let int = || match (text, json) {
        (Some(s), _) => s.trim().parse::<i128>().ok(),
        (_, Some(v)) => v
            .as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from)),
        _ => None,
    };
    let float = || match (text, json) {
        (Some(s), _) => s.trim().parse::<f64>().ok(),
        (_, Some(Value::String(s))) => s.parse::<f64>().ok().filter(|v| !v.is_finite()),
        (_, Some(v)) => v.as_f64(),
        _ => None,
    };
    macro_rules! int_as {
        ($ty:ty) => {
            match int().and_then(|i| <$ty>::try_from(i).ok()) {
                Some(v) => out.extend_from_slice(&v.to_le_bytes()),
                None => return false,
            }
        };
    }
    match t {
        ValueType::U8 => int_as!(u8),
        ValueType::I8 => int_as!(i8),
        ValueType::U16 => int_as!(u16),
        ValueType::I16 => int_as!(i16),
        ValueType::U32 => int_as!(u32),
        ValueType::I32 => int_as!(i32),
        ValueType::U64 => int_as!(u64),
        ValueType::I64 => int_as!(i64),
        ValueType::F32 => match float() {
            Some(v) => out.extend_from_slice(&(v as f32).to_le_bytes()),
            None => return false,
        },
        ValueType::F64 => match float() {
            Some(v) => out.extend_from_slice(&v.to_le_bytes()),
            None => return false,
        },
        ValueType::Bool => {
            let b = match (text, json) {
                (Some("true"), _) | (_, Some(Value::Bool(true))) => 1u8,
                (Some("false"), _) | (_, Some(Value::Bool(false))) => 0,
                _ => return false,
            };
            out.push(b);
        }
        ValueType::String => match (text, json) {
            (Some(s), _) => put_str(out, s),
            (_, Some(Value::String(s))) => put_str(out, s),
            _ => return false,
        },
        ValueType::Array => return false,
    }
    true
}

/// Encodes a JSON array's elements of type `t` (type, count, items).
fn put_array(out: &mut Vec<u8>, t: &FullType, items: &[Value]) -> bool {
    let inner = match t {
        FullType::Scalar(s) => *s,
        FullType::Array(_) => ValueType::Array,
    };
    out.extend_from_slice(&(inner as u32).to_le_bytes());
    out.extend_from_slice(&(items.len() as u64).to_le_bytes());
    items.iter().all(|v| match (t, v) {
        (FullType::Array(inner), Value::Array(items)) => put_array(out, inner, items),
        (FullType::Scalar(s), v) => put_scalar(out, *s, None, Some(v)),
        _ => false,
    })
}

/// Encodes the key-value pair `key` = `text` of type `t`.
fn put_kv(out: &mut Vec<u8>, key: &str, text: &str, t: &FullType) -> Result<()> {
    put_str(out, key);
    let ok = match t {
        FullType::Scalar(s) => {
            out.extend_from_slice(&(*s as u32).to_le_bytes());
            put_scalar(out, *s, Some(text), None)
        }
        FullType::Array(inner) => {
            out.extend_from_slice(&(ValueType::Array as u32).to_le_bytes());
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Array(items)) => put_array(out, inner, &items),
                _ => false,
            }
        }
    };
    if ok {
        Ok(())
    } else {
        Err(bad(key, text, t))
    }
}

/// The GGUF types of the metadata keys (`gguf.types`).
fn value_types(dict: &TensorDict) -> Result<serde_json::Map<String, Value>> {
    let Some(text) = dict.metadata(TYPES_KEY) else {
        return Ok(serde_json::Map::new());
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        _ => crate::bail!(
            InvalidArgument,
            "gguf: metadata '{TYPES_KEY}' is not a JSON object of key -> type name"
        ),
    }
}

/// One tensor to write: its ggml type, dims (ggml's order) and bytes.
struct Plan {
    name: String,
    ty: GgmlType,
    ne: Vec<u64>,
    tensor: Tensor,
    nbytes: u64,
}

fn plan(dict: &TensorDict, name: &str, t: &Tensor) -> Result<Plan> {
    super::torch_write::check_saveable(name, t)?;
    let quant = dict.metadata(&format!("{name}{GGML_TYPE_SUFFIX}"));
    let (ty, logical) = match (quant, t.dtype()) {
        (Some(q), DType::Byte) => {
            let ty = ggml_type_named(q).ok_or_else(|| {
                crate::err!(
                    InvalidArgument,
                    "gguf: tensor '{name}': {name}{GGML_TYPE_SUFFIX} is {q:?}: expected a ggml \
                     type name (Q4_0, Q8_0, Q4_K, ...)"
                )
            })?;
            let key = format!("{name}{GGML_SHAPE_SUFFIX}");
            let shape = dict
                .metadata(&key)
                .and_then(|s| serde_json::from_str::<Vec<u64>>(s).ok())
                .ok_or_else(|| {
                    crate::err!(
                        InvalidArgument,
                        "gguf: tensor '{name}' of ggml type {q}: metadata '{key}' is missing or \
                         not a JSON list of sizes"
                    )
                })?;
            (ty, shape)
        }
        (_, dtype) => {
            let ty = dtype.info().gguf.and_then(ggml_type).ok_or_else(|| {
                crate::err!(
                    DType,
                    "gguf: tensor '{name}' has dtype {dtype}, which GGUF has no type for: \
                     expected float32/16/64, bfloat16, int8/16/32/64, or uint8 raw blocks with \
                     '{name}{GGML_TYPE_SUFFIX}' and '{name}{GGML_SHAPE_SUFFIX}' metadata"
                )
            })?;
            (ty, t.sizes().iter().map(|&s| s as u64).collect())
        }
    };
    crate::ensure!(
        logical.len() <= MAX_DIMS,
        InvalidArgument,
        "gguf: tensor '{name}' has {} dims: expected at most {MAX_DIMS} (ggml's GGML_MAX_DIMS)",
        logical.len()
    );
    let mut ne: Vec<u64> = logical.iter().rev().copied().collect();
    if ne.is_empty() {
        ne.push(1);
    }
    let row = ne[0];
    let nbytes = (row % ty.block == 0)
        .then(|| {
            ne[1..]
                .iter()
                .try_fold((row / ty.block) * ty.size, |n, &d| n.checked_mul(d))
        })
        .flatten();
    let have = t.numel() as u64 * t.itemsize() as u64;
    crate::ensure!(
        nbytes == Some(have),
        InvalidArgument,
        "gguf: tensor '{name}': {have} bytes: a {} tensor of shape {logical:?} needs {} \
         (rows a multiple of its block of {})",
        ty.name,
        nbytes.map_or("an overflowing size".to_string(), |n| n.to_string()),
        ty.block
    );
    Ok(Plan {
        name: name.to_string(),
        ty,
        ne,
        tensor: t.clone(),
        nbytes: have,
    })
}

/// The GGUF type of a value its typed keys hold: a bool, an int64 (a
/// uint64 past it), a float64, a string, or a non-empty array of one of
/// them (ints among floats as floats); None for the rest.
fn value_type(v: &Value) -> Option<FullType> {
    let scalar = |v: &Value| match v {
        Value::Bool(_) => Some(ValueType::Bool),
        Value::Number(n) if n.is_i64() => Some(ValueType::I64),
        Value::Number(n) if n.is_u64() => Some(ValueType::U64),
        Value::Number(_) => Some(ValueType::F64),
        Value::String(_) => Some(ValueType::String),
        _ => None,
    };
    match v {
        Value::Array(items) if !items.is_empty() => {
            let mut types = items.iter().map(scalar);
            let first = types.next().flatten()?;
            let numeric = |t: ValueType| matches!(t, ValueType::I64 | ValueType::F64);
            let t = types.try_fold(first, |t, u| match u? {
                u if u == t => Some(t),
                u if numeric(t) && numeric(u) => Some(ValueType::F64),
                _ => None,
            })?;
            Some(FullType::Array(Box::new(FullType::Scalar(t))))
        }
        v => scalar(v).map(FullType::Scalar),
    }
}

/// Writes the dict's values: each one GGUF can type as the key
/// `tessera.values.NAME`, the rest as one JSON object under the string
/// key `tessera.values`. Gives the number of keys written.
fn put_values(kv: &mut Vec<u8>, dict: &TensorDict) -> Result<u64> {
    let mut n = 0;
    for (name, v) in dict.values_iter() {
        let Some(t) = value_type(v) else { continue };
        let text = match v {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        put_kv(kv, &format!("{GGUF_VALUE_PREFIX}{name}"), &text, &t)?;
        n += 1;
    }
    if let Some(rest) = dict.values_text(|v| value_type(v).is_none()) {
        let t = FullType::Scalar(ValueType::String);
        put_kv(kv, VALUES_KEY, &rest, &t)?;
        n += 1;
    }
    Ok(n)
}

/// The JSON value of a GGUF key `tessera.values.NAME` read as `text` of
/// type `t` (`gguf_values`' text: strings as they are, the rest as JSON;
/// floats kept floats).
pub(crate) fn typed_value(key: &str, text: &str, t: &FullType) -> Result<Value> {
    let float = |v: Value| match v.as_f64() {
        Some(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(v),
        None => v,
    };
    let is_float = |t: &ValueType| matches!(t, ValueType::F32 | ValueType::F64);
    let parsed = match t {
        FullType::Scalar(ValueType::String) => return Ok(Value::String(text.to_owned())),
        _ => serde_json::from_str::<Value>(text).map_err(|e| {
            crate::err!(
                Format,
                "gguf: key '{key}' = {:?} ({}): not a value tessera reads ({e})",
                text.chars().take(60).collect::<String>(),
                t.text()
            )
        })?,
    };
    Ok(match (t, parsed) {
        (FullType::Scalar(s), v) if is_float(s) => float(v),
        (FullType::Array(inner), Value::Array(items)) if matches!(&**inner, FullType::Scalar(s) if is_float(s)) => {
            Value::Array(items.into_iter().map(float).collect())
        }
        (_, v) => v,
    })
}

/// Writes `dict` as a GGUF version 3 file to `out`.
pub(crate) fn write(dict: &TensorDict, out: &mut dyn Write) -> Result<()> {
    let types = value_types(dict)?;
    let is_tensor_key = |k: &str| {
        [GGML_TYPE_SUFFIX, GGML_SHAPE_SUFFIX]
            .iter()
            .any(|s| k.strip_suffix(s).is_some_and(|n| dict.get(n).is_some()))
    };
    let mut alignment = DEFAULT_ALIGNMENT;
    let mut kv = Vec::new();
    let mut n_kv = 0u64;
    for (key, text) in dict.saved_metadata() {
        if key == TYPES_KEY || is_tensor_key(key) {
            continue;
        }
        let mut t = match types.get(key) {
            Some(Value::String(s)) => FullType::parse(s).ok_or_else(|| {
                crate::err!(
                    InvalidArgument,
                    "gguf: '{TYPES_KEY}' gives '{key}' the type {s:?}: expected uint8 .. \
                     float64, string, bool or array[...]"
                )
            })?,
            _ => FullType::Scalar(ValueType::String),
        };
        if key == ALIGNMENT_KEY {
            t = FullType::Scalar(ValueType::U32);
            alignment = text
                .parse::<u32>()
                .ok()
                .filter(|a| a.is_power_of_two())
                .ok_or_else(|| bad(key, text, &t))? as u64;
        }
        put_kv(&mut kv, key, text, &t)?;
        n_kv += 1;
    }
    n_kv += put_values(&mut kv, dict)?;
    let plans = dict
        .iter()
        .map(|(name, t)| plan(dict, name, t))
        .collect::<Result<Vec<Plan>>>()?;
    let mut head = Vec::with_capacity(kv.len() + 64 + plans.len() * 64);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&3u32.to_le_bytes());
    head.extend_from_slice(&(plans.len() as u64).to_le_bytes());
    head.extend_from_slice(&n_kv.to_le_bytes());
    head.extend_from_slice(&kv);
    let mut offset = 0u64;
    for p in &plans {
        put_str(&mut head, &p.name);
        head.extend_from_slice(&(p.ne.len() as u32).to_le_bytes());
        for d in &p.ne {
            head.extend_from_slice(&d.to_le_bytes());
        }
        head.extend_from_slice(&p.ty.number.to_le_bytes());
        head.extend_from_slice(&offset.to_le_bytes());
        offset += p.nbytes.div_ceil(alignment) * alignment;
    }
    let padded = (head.len() as u64).div_ceil(alignment) * alignment;
    head.resize(padded as usize, 0);
    let io = |e: std::io::Error| crate::err!(Io, "{}", crate::files::reason(&e));
    out.write_all(&head).map_err(io)?;
    let zeros = [0u8; 4096];
    for p in &plans {
        out.write_all(&row_major(&p.tensor)).map_err(io)?;
        let mut pad = p.nbytes.div_ceil(alignment) * alignment - p.nbytes;
        while pad > 0 {
            let n = pad.min(zeros.len() as u64);
            out.write_all(&zeros[..n as usize]).map_err(io)?;
            pad -= n;
        }
    }
    Ok(())
}
