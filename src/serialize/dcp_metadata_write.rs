//! A torch.distributed.checkpoint `.metadata` written ([`write`]): the
//! pickle of a [`Metadata`] that Python's `pickle.load` rebuilds into
//! DCP's classes (`dcp_metadata` reads it).

use super::dcp_metadata::{Item, Location, Metadata, FS, META};
use super::dtypes;
use crate::error::Result;
use crate::pickle::{self, Value};
/// `module.name`, rebuilt by `copyreg.__newobj__(cls)` and given `state`
/// by BUILD: how Python's pickle rebuilds a dataclass.
fn new_object(module: &str, name: &str, state: Value) -> Value {
    Value::Reduce {
        callable: Box::new(Value::global("copyreg", "__newobj__")),
        args: Box::new(Value::Tuple(vec![Value::global(module, name)])),
        items: Vec::new(),
        state: Some(Box::new(state)),
    }
}

fn dict(items: Vec<(&str, Value)>) -> Value {
    Value::Dict(items.into_iter().map(|(k, v)| (Value::str(k), v)).collect())
}

fn torch_size(v: &[i64]) -> Value {
    Value::call(
        Value::global("torch", "Size"),
        vec![Value::Tuple(v.iter().map(|&i| Value::Int(i)).collect())],
    )
}

/// The `.metadata` pickle of `meta` (protocol 2): each tensor with its
/// chunks, each item's `MetadataIndex` -> `_StorageInfo`, `planner_data`
/// mapping each name to itself (a flat state dict), version "1.0.0".
///
/// Errors: `DType` for a dtype torch has no name for.
pub(crate) fn write(meta: &Metadata) -> Result<Vec<u8>> {
    let mut sdm = Vec::with_capacity(meta.entries.len());
    let mut storage = Vec::new();
    let mut planner = Vec::with_capacity(meta.entries.len());
    let info = |at: &Location| {
        new_object(
            FS,
            "_StorageInfo",
            dict(vec![
                ("relative_path", Value::str(&at.file)),
                ("offset", Value::Int(at.offset as i64)),
                ("length", Value::Int(at.length as i64)),
            ]),
        )
    };
    let index = |fqn: &str, offset: Value, i: Value| {
        new_object(
            META,
            "MetadataIndex",
            dict(vec![
                ("fqn", Value::str(fqn)),
                ("offset", offset),
                ("index", i),
            ]),
        )
    };
    for (name, item) in &meta.entries {
        planner.push((Value::str(name), Value::Tuple(vec![Value::str(name)])));
        match item {
            Item::Bytes(at) => {
                sdm.push((
                    Value::str(name),
                    new_object(META, "BytesStorageMetadata", dict(vec![])),
                ));
                storage.push((index(name, Value::None, Value::None), info(at)));
            }
            Item::Tensor {
                dtype,
                size,
                chunks,
            } => {
                let Some((py, _)) = dtypes::torch_names(*dtype) else {
                    crate::bail!(
                        DType,
                        "tensor '{name}' has dtype {}, which torch cannot name",
                        dtype.name()
                    );
                };
                // TensorProperties' 5-item state, read by every torch
                // since 2.0 (2.5 and later also read a 6th, the strides).
                let props = new_object(
                    META,
                    "TensorProperties",
                    Value::Tuple(vec![
                        Value::global("torch", py),
                        Value::call(
                            Value::global("torch.serialization", "_get_layout"),
                            vec![Value::str("torch.strided")],
                        ),
                        Value::Bool(false),
                        Value::call(
                            Value::global(META, "_MEM_FORMAT_ENCODING"),
                            vec![Value::Int(0)],
                        ),
                        Value::Bool(false),
                    ]),
                );
                let mut list = Vec::with_capacity(chunks.len());
                for (i, c) in chunks.iter().enumerate() {
                    list.push(new_object(
                        META,
                        "ChunkStorageMetadata",
                        dict(vec![
                            ("offsets", torch_size(&c.offsets)),
                            ("sizes", torch_size(&c.sizes)),
                        ]),
                    ));
                    storage.push((
                        index(name, torch_size(&c.offsets), Value::Int(i as i64)),
                        info(&c.at),
                    ));
                }
                let tsm = new_object(
                    META,
                    "TensorStorageMetadata",
                    dict(vec![
                        ("properties", props),
                        ("size", torch_size(size)),
                        ("chunks", Value::List(list)),
                    ]),
                );
                sdm.push((Value::str(name), tsm));
            }
        }
    }
    let root = new_object(
        META,
        "Metadata",
        dict(vec![
            ("state_dict_metadata", Value::Dict(sdm)),
            ("planner_data", Value::Dict(planner)),
            ("storage_data", Value::Dict(storage)),
            ("storage_meta", Value::None),
            ("version", Value::str("1.0.0")),
        ]),
    );
    pickle::write(&root)
}
