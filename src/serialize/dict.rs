//! `TensorDict`: an ordered name -> tensor map plus string metadata and
//! non-tensor values (JSON, `values.rs`), what a checkpoint file holds
//! (SEMANTICS.md, Serialization).

use super::name_index::NameIndex;
use super::torch_pickle::SKIPPED_KEY;
use super::values::{checked_text, parse_values, VALUES_KEY};
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
    values: Vec<ValueEntry>,
    values_index: NameIndex,
}

/// One non-tensor value: its name, the value and its JSON text (both
/// NUL-terminated, so the C layer can lend them).
#[derive(Clone)]
struct ValueEntry {
    name: CString,
    value: serde_json::Value,
    json: CString,
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

/// Non-tensor values, and the metadata a save writes.
impl TensorDict {
    /// Sets the value `name` (replacing any previous one; its position is
    /// kept). Refused: a name a tensor has, a value nested more than
    /// [`MAX_DEPTH`](super::values::MAX_DEPTH) deep or longer than
    /// [`MAX_BYTES`](super::values::MAX_BYTES) of JSON.
    pub fn set_value(&mut self, name: &str, value: serde_json::Value) -> Result<()> {
        crate::ensure!(
            self.get(name).is_none(),
            InvalidArgument,
            "value '{name}': a tensor has this name: expected a name of no tensor"
        );
        let text = checked_text(name, &value)?;
        let json = CString::new(text).expect("JSON text escapes NUL");
        if let Some(i) = self.values_index.get(name) {
            self.values[i].value = value;
            self.values[i].json = json;
            return Ok(());
        }
        let c_name = c_string("value name", name)?;
        self.values_index.insert(name, self.values.len());
        self.values.push(ValueEntry {
            name: c_name,
            value,
            json,
        });
        Ok(())
    }

    /// Sets the value `name` from its JSON text.
    pub fn set_value_json(&mut self, name: &str, json: &str) -> Result<()> {
        let value = serde_json::from_str(json).map_err(|e| {
            crate::err!(
                InvalidArgument,
                "value '{name}': {:?} is not JSON ({e}): expected one JSON value",
                json.chars().take(60).collect::<String>()
            )
        })?;
        self.set_value(name, value)
    }

    /// The value `name`.
    pub fn value(&self, name: &str) -> Option<&serde_json::Value> {
        self.values_index.get(name).map(|i| &self.values[i].value)
    }

    /// The JSON text of the value `name`, NUL-terminated (for the C layer).
    pub fn value_json_c(&self, name: &str) -> Option<&CStr> {
        self.values_index
            .get(name)
            .map(|i| self.values[i].json.as_c_str())
    }

    /// The number of values.
    pub fn value_count(&self) -> usize {
        self.values.len()
    }

    /// The `i`-th value's name, NUL-terminated (for the C layer).
    pub fn value_name_c(&self, i: usize) -> Option<&CStr> {
        self.values.get(i).map(|v| v.name.as_c_str())
    }

    /// Every (name, value) pair, in the order first set.
    pub fn values_iter(&self) -> impl Iterator<Item = (&str, &serde_json::Value)> {
        self.values
            .iter()
            .map(|v| (v.name.to_str().unwrap_or(""), &v.value))
    }

    /// The values `keep` accepts as the text of one JSON object of name
    /// -> value, in the dict's order (what safetensors and GGUF hold under
    /// [`VALUES_KEY`]); None when there are none.
    pub(crate) fn values_text(&self, keep: impl Fn(&serde_json::Value) -> bool) -> Option<String> {
        let items: Vec<String> = self
            .values
            .iter()
            .filter(|v| keep(&v.value))
            .map(|v| {
                let name = serde_json::Value::from(v.name.to_str().unwrap_or(""));
                format!("{name}:{}", v.json.to_str().unwrap_or("null"))
            })
            .collect();
        (!items.is_empty()).then(|| format!("{{{}}}", items.join(",")))
    }

    /// The metadata pairs with the values as the one pair
    /// [`VALUES_KEY`] a load reads back as them: what an index of a file
    /// keeps ([`set_stored_metadata`](Self::set_stored_metadata) undoes
    /// it).
    pub(crate) fn stored_metadata(&self) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = self
            .metadata_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        pairs.extend(
            self.values_text(|_| true)
                .map(|v| (VALUES_KEY.to_owned(), v)),
        );
        pairs
    }

    /// A metadata pair as a file holds it: [`VALUES_KEY`] (a JSON object)
    /// sets values, any other key metadata.
    pub(crate) fn set_stored_metadata(&mut self, key: &str, value: &str) -> Result<()> {
        if key != VALUES_KEY {
            return self.set_metadata(key, value);
        }
        let map = parse_values(value)
            .map_err(|e| crate::err!(Format, "metadata '{VALUES_KEY}': {}", e.message()))?;
        for (name, v) in map {
            self.set_value(&name, v)
                .map_err(|e| crate::err!(Format, "metadata '{VALUES_KEY}': {}", e.message()))?;
        }
        Ok(())
    }

    /// The metadata a save writes: all but [`SKIPPED_KEY`], which tells
    /// what the load of the file the dict came from left out, not what the
    /// new file holds (a conversion's provenance goes under
    /// `tessera.source`).
    pub fn saved_metadata(&self) -> impl Iterator<Item = (&str, &str)> {
        self.metadata_iter()
            .filter(|(k, _)| *k != SKIPPED_KEY && *k != VALUES_KEY)
    }

    /// Whether a save has metadata or values to write (formats that hold
    /// neither refuse them).
    pub(crate) fn has_saved_metadata(&self) -> bool {
        self.saved_metadata().next().is_some() || !self.values.is_empty()
    }

    /// The number of metadata pairs and values a save writes.
    pub(crate) fn saved_metadata_count(&self) -> usize {
        self.saved_metadata().count() + self.values.len()
    }
}

impl std::fmt::Debug for TensorDict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}
