//! `TensorDict`: an ordered name -> tensor map plus string metadata, what
//! a checkpoint file holds (SEMANTICS.md, Serialization).

use super::name_index::NameIndex;
use crate::error::Result;
use crate::tensor::Tensor;
use std::ffi::{CStr, CString};

/// One entry: its name (kept NUL-terminated too, so the C layer can lend
/// it) and its tensor.
#[derive(Clone)]
struct Entry {
    name: CString,
    tensor: Tensor,
}

/// An ordered name -> tensor map with string metadata. Names and keys
/// keep their insertion order; setting an existing name (key) replaces
/// its tensor (value) in place. Each ordered list has a map beside it, so
/// a lookup or a set costs O(1) whatever the number of names.
#[derive(Clone, Default)]
pub struct TensorDict {
    entries: Vec<Entry>,
    index: NameIndex,
    metadata: Vec<(CString, CString)>,
    metadata_index: NameIndex,
}

fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        crate::err!(
            InvalidArgument,
            "{what} {s:?} holds a NUL byte: expected a string without one"
        )
    })
}

impl TensorDict {
    /// An empty dict.
    pub fn new() -> TensorDict {
        TensorDict::default()
    }

    /// Adds `tensor` under `name`, or replaces the tensor already there
    /// (its position is kept).
    pub fn set(&mut self, name: &str, tensor: Tensor) -> Result<()> {
        // The name is checked before it is recorded.
        let c_name = c_string("tensor name", name)?;
        if let Some(i) = self.index.get_or_insert(name, self.entries.len()) {
            self.entries[i].tensor = tensor;
            return Ok(());
        }
        self.entries.push(Entry {
            name: c_name,
            tensor,
        });
        Ok(())
    }

    /// The number of tensors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the dict holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `i`-th name in insertion order.
    pub fn name(&self, i: usize) -> Option<&str> {
        self.entries.get(i).map(|e| e.name.to_str().unwrap_or(""))
    }

    /// The `i`-th name, NUL-terminated (for the C layer).
    pub fn name_c(&self, i: usize) -> Option<&CStr> {
        self.entries.get(i).map(|e| e.name.as_c_str())
    }

    /// The tensor stored under `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.index.get(name).map(|i| &self.entries[i].tensor)
    }

    /// The (name, tensor) pairs in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.entries
            .iter()
            .map(|e| (e.name.to_str().unwrap_or(""), &e.tensor))
    }

    /// Sets the metadata value of `key` (replacing any previous one).
    pub fn set_metadata(&mut self, key: &str, value: &str) -> Result<()> {
        let value = c_string("metadata value", value)?;
        if let Some(i) = self.metadata_index.get(key) {
            self.metadata[i].1 = value;
            return Ok(());
        }
        let key_c = c_string("metadata key", key)?;
        self.metadata_index.insert(key, self.metadata.len());
        self.metadata.push((key_c, value));
        Ok(())
    }

    /// The metadata value of `key`.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata_c(key).map(|v| v.to_str().unwrap_or(""))
    }

    /// The metadata value of `key`, NUL-terminated (for the C layer).
    pub fn metadata_c(&self, key: &str) -> Option<&CStr> {
        self.metadata_index
            .get(key)
            .map(|i| self.metadata[i].1.as_c_str())
    }

    /// The number of metadata keys.
    pub fn metadata_len(&self) -> usize {
        self.metadata.len()
    }

    /// The `i`-th metadata key in the order first set, NUL-terminated
    /// (for the C layer).
    pub fn metadata_key_c(&self, i: usize) -> Option<&CStr> {
        self.metadata.get(i).map(|(k, _)| k.as_c_str())
    }

    /// Every metadata (key, value) pair, in the order first set.
    pub fn metadata_iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.metadata
            .iter()
            .map(|(k, v)| (k.to_str().unwrap_or(""), v.to_str().unwrap_or("")))
    }
}

impl std::fmt::Debug for TensorDict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}
