//! Hugging Face sharded checkpoints, read: a JSON index
//! (`model.safetensors.index.json`, `pytorch_model.bin.index.json`) whose
//! `weight_map` names each tensor's shard file, and `metadata.total_size`
//! the bytes of all tensors. `tsr_load` of an index loads every shard
//! (read in parallel, or mapped) into one dict, checked against the
//! index: every tensor it names is in its shard, no shard holds a tensor
//! the index puts elsewhere or does not name (so none is in two), the
//! sizes add up to `total_size`, every shard path stays inside the
//! index's directory, and every shard carries the index's save id
//! ([`SAVE_ID_KEY`], none for files from other tools). Writing is
//! `hf_save.rs`.

use super::dict::TensorDict;
use super::formats::Format;
use super::shard_files;
use super::values::{parse_values, VALUES_KEY};
use super::{LoadFlags, SKIPPED_KEY};
use crate::error::Result;
use std::collections::HashMap;
use std::path::Path;

/// The largest file taken for an index (real ones are a few hundred KiB).
pub(crate) const MAX_INDEX_BYTES: usize = 64 << 20;

/// The key of the save id tessera's sharded save puts in every shard's
/// metadata and in the index's `metadata` (`hf_save.rs`): a load refuses
/// shards whose id is not the index's, the files of two saves. Files from
/// other tools carry none and load as before; the key is not passed on
/// into the loaded dict.
pub(crate) const SAVE_ID_KEY: &str = "tessera.save_id";

/// A parsed index.
#[derive(Debug)]
pub(crate) struct Index {
    /// `metadata.total_size`, when the index gives it.
    pub total_size: Option<u64>,
    /// `metadata["tessera.save_id"]`, when the index gives it.
    pub save_id: Option<String>,
    /// (tensor name, shard file) in the index's order.
    pub weight_map: Vec<(String, String)>,
    /// The shard files, each once, in the order first named.
    pub files: Vec<String>,
}

/// Whether `bytes` are a shard index: a JSON object (of at most 64 MiB)
/// with a `weight_map` key. Only a file whose first non-blank byte is
/// `{` is parsed: no tensor format starts so.
pub(crate) fn is_index(bytes: &[u8]) -> bool {
    let start = bytes.iter().position(|b| !b" \t\r\n".contains(b));
    if bytes.len() > MAX_INDEX_BYTES || start.is_none_or(|i| bytes[i] != b'{') {
        return false;
    }
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .is_some_and(|v| v.get("weight_map").is_some())
}

/// Parses a shard index (`what` names it in messages).
///
/// Errors: `Format`, naming what is wrong: not JSON, no `weight_map`
/// object, a shard that is not a string, a `total_size` that is not a
/// non-negative integer.
pub(crate) fn parse_index(bytes: &[u8], what: &str) -> Result<Index> {
    let v: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| crate::err!(Format, "{what} is not valid JSON: {e}"))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| {
            crate::err!(
                Format,
                "{what} has no \"weight_map\" object: expected a shard index mapping tensor \
                 names to shard files"
            )
        })?;
    let total_size = match v.get("metadata").and_then(|m| m.get("total_size")) {
        None | Some(serde_json::Value::Null) => None,
        Some(t) => Some(
            t.as_u64()
                .or_else(|| {
                    t.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 2f64.powi(63))
                        .map(|f| f as u64)
                })
                .ok_or_else(|| {
                    crate::err!(
                        Format,
                        "{what}: metadata.total_size is {t}: expected a number of bytes"
                    )
                })?,
        ),
    };
    let save_id = match v.get("metadata").and_then(|m| m.get(SAVE_ID_KEY)) {
        None => None,
        Some(serde_json::Value::String(id)) => Some(id.clone()),
        Some(other) => crate::bail!(
            Format,
            "{what}: metadata.{SAVE_ID_KEY} is {other}: expected a string (the id of the save \
             that wrote it)"
        ),
    };
    let mut weight_map = Vec::with_capacity(map.len());
    let mut files: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (name, file) in map {
        let file = file.as_str().ok_or_else(|| {
            crate::err!(
                Format,
                "{what}: the shard of tensor '{name}' is {file}: expected a file name"
            )
        })?;
        crate::files::check_relative(file, what)?;
        if seen.insert(file.to_owned()) {
            files.push(file.to_owned());
        }
        weight_map.push((name.clone(), file.to_owned()));
    }
    Ok(Index {
        total_size,
        save_id,
        weight_map,
        files,
    })
}

/// What a shard holds, as the index's checks see it: its file (an index
/// into [`Index::files`]), its tensors (name, what stands for the tensor,
/// its bytes) and its metadata pairs.
pub(crate) struct Shard<T> {
    pub file: usize,
    pub tensors: Vec<(String, T, u64)>,
    pub metadata: Vec<(String, String)>,
}

/// Named tensors and metadata pairs, as [`merge`] gives them.
pub(crate) type Merged<T> = (Vec<(String, T)>, Vec<(String, String)>);

/// The tensors of `shards` in the index's order and their metadata,
/// checked against `index` (`what` names it): every shard carries the
/// index's save id, every tensor of a shard is one the weight_map puts
/// there, every tensor the weight_map names is in its shard, the bytes
/// add up to `total_size`. Each shard's skipped list is kept, its
/// entries named with their shard; other metadata keys are taken from
/// the first shard that gives them. One set of checks for a load of the
/// shards and for an index of them.
pub(crate) fn merge<T>(index: &Index, what: &str, shards: Vec<Shard<T>>) -> Result<Merged<T>> {
    let shard_of: HashMap<&str, &str> = index
        .weight_map
        .iter()
        .map(|(n, f)| (n.as_str(), f.as_str()))
        .collect();
    let mut found: HashMap<String, (T, u64)> = HashMap::new();
    let mut metadata: Vec<(String, String)> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let mut values: Vec<(String, serde_json::Value)> = Vec::new();
    let mut value_at: HashMap<String, usize> = HashMap::new();
    for shard in shards {
        let file = &index.files[shard.file];
        let id = shard
            .metadata
            .iter()
            .find(|(k, _)| k == SAVE_ID_KEY)
            .map(|(_, v)| v.as_str());
        if id != index.save_id.as_deref() {
            let shown = |id: Option<&str>| id.map_or("none".to_owned(), |i| format!("'{i}'"));
            crate::bail!(
                Format,
                "shard '{file}' has save id {} but {what} has save id {}: the directory mixes \
                 the files of two saves (a save killed midway replaces shards one by one): \
                 expected every shard from the index's save",
                shown(id),
                shown(index.save_id.as_deref())
            );
        }
        for (name, t, nbytes) in shard.tensors {
            match shard_of.get(name.as_str()) {
                None => crate::bail!(
                    Format,
                    "shard '{file}' holds tensor '{name}', which {what} does not list: expected \
                     every tensor of a shard in the weight_map"
                ),
                Some(&listed) if listed != file => crate::bail!(
                    Format,
                    "shard '{file}' holds tensor '{name}', which {what} puts in '{listed}': a \
                     tensor must be in one shard, the one the weight_map names"
                ),
                Some(_) => {}
            }
            found.insert(name, (t, nbytes));
        }
        for (k, v) in shard.metadata {
            if k == SAVE_ID_KEY {
                continue;
            } else if k == VALUES_KEY {
                // Every shard's values (a save puts them in the first).
                let pairs = parse_values(&v).map_err(|e| {
                    crate::err!(Format, "shard '{file}': '{VALUES_KEY}': {}", e.message())
                })?;
                for (name, value) in pairs {
                    match value_at.get(&name) {
                        Some(&i) => crate::ensure!(
                            values[i].1 == value,
                            Format,
                            "shard '{file}' holds the value '{name}' = {value}, which an \
                             earlier shard gives another: expected one value per name"
                        ),
                        None => {
                            value_at.insert(name.clone(), values.len());
                            values.push((name, value));
                        }
                    }
                }
            } else if k == SKIPPED_KEY {
                skipped.extend(v.lines().map(|l| format!("{l} (in shard '{file}')")));
            } else if !metadata.iter().any(|(have, _)| *have == k) {
                metadata.push((k, v));
            }
        }
    }
    let mut total: u64 = 0;
    let mut tensors = Vec::with_capacity(index.weight_map.len());
    for (name, file) in &index.weight_map {
        let Some((t, nbytes)) = found.remove(name) else {
            crate::bail!(
                Format,
                "{what} puts tensor '{name}' in shard '{file}', which does not hold it"
            );
        };
        total = total.saturating_add(nbytes);
        tensors.push((name.clone(), t));
    }
    if let Some(expected) = index.total_size {
        crate::ensure!(
            expected == total,
            Format,
            "{what} gives metadata.total_size {expected}, but its {} tensors hold {total} bytes",
            index.weight_map.len()
        );
    }
    if !skipped.is_empty() {
        metadata.push((SKIPPED_KEY.to_owned(), skipped.join("\n")));
    }
    if !values.is_empty() {
        let mut all = TensorDict::new();
        for (name, v) in values {
            all.set_value(&name, v)?;
        }
        metadata.extend(
            all.values_text(|_| true)
                .map(|t| (VALUES_KEY.to_owned(), t)),
        );
    }
    Ok((tensors, metadata))
}

/// The format of a checkpoint whose first shard's bytes tell `first`
/// (every shard's format is its own: a mixed checkpoint loads), or with
/// no shard `format`, Safetensors for Auto (what transformers writes).
/// Never the index's file name: `model.index.json` over safetensors
/// shards is safetensors.
pub(crate) fn told(first: Option<Format>, format: Format) -> Format {
    first.unwrap_or(match format {
        Format::Auto => Format::Safetensors,
        f => f,
    })
}

/// The index's directory and the roots its shards may lie in.
pub(crate) fn shard_dir(path: &Path) -> Result<(&Path, Vec<std::path::PathBuf>)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok((dir, shard_files::roots(dir, path)?))
}

/// How messages name the index at `path`.
pub(crate) fn what(path: &Path) -> String {
    format!("the shard index '{}'", path.display())
}

/// Loads every shard the index at `path` (its bytes `bytes`) names, each
/// in `format` (Auto: told by its bytes), into one dict in the index's
/// order, checked by [`merge`], and gives the shards' format ([`told`]).
/// Shards are read in parallel (or mapped with `flags.mmap`).
pub(crate) fn load(
    path: &Path,
    bytes: &[u8],
    format: Format,
    flags: LoadFlags,
) -> Result<(Format, TensorDict)> {
    let what = what(path);
    let index = parse_index(bytes, &what)?;
    let (dir, roots) = shard_dir(path)?;
    let storages = shard_files::load_files(dir, &roots, &index.files, &what, flags)?;
    let mut first: Option<Format> = None;
    let mut shards = Vec::with_capacity(storages.len());
    for (i, (file, storage)) in index.files.iter().zip(&storages).enumerate() {
        let (shard_format, shard) = super::load_backed(storage, format, false, flags)
            .map_err(|e| e.context(format!("shard '{file}' of {what}")))?;
        first.get_or_insert(shard_format);
        shards.push(Shard {
            file: i,
            tensors: shard
                .iter()
                .map(|(n, t)| {
                    let nbytes = (t.numel().max(0) as u64).saturating_mul(t.itemsize() as u64);
                    (n.to_owned(), t.clone(), nbytes)
                })
                .collect(),
            metadata: shard.stored_metadata(),
        });
    }
    let (tensors, metadata) = merge(&index, &what, shards)?;
    let mut out = TensorDict::new();
    for (name, t) in tensors {
        out.set(&name, t)?;
    }
    for (k, v) in metadata {
        out.set_stored_metadata(&k, &v)?;
    }
    Ok((told(first, format), out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_is_told_by_its_content() {
        assert!(is_index(
            br#" {"metadata": {}, "weight_map": {"a": "x.safetensors"}}"#
        ));
        assert!(!is_index(br#"{"weights": {}}"#));
        assert!(!is_index(b"PK\x03\x04"));
        assert!(!is_index(b"{ not json"));
    }

    #[test]
    fn paths_out_of_the_directory_are_refused() {
        for (file, says) in [
            ("../x.safetensors", "'..'"),
            ("/etc/passwd", "absolute path"),
            ("", "empty path"),
        ] {
            let json = format!(r#"{{"weight_map": {{"a": "{file}"}}}}"#);
            let err = parse_index(json.as_bytes(), "the index").unwrap_err();
            assert!(err.to_string().contains(says), "{file}: {err}");
        }
        let err = parse_index(br#"{"weight_map": {"a": 3}}"#, "the index").unwrap_err();
        assert!(err.to_string().contains("tensor 'a'"), "{err}");
        let err = parse_index(
            br#"{"metadata": {"total_size": -1}, "weight_map": {}}"#,
            "the index",
        )
        .unwrap_err();
        assert!(err.to_string().contains("total_size is -1"), "{err}");
    }

    #[test]
    fn a_float_total_size_of_whole_bytes_is_read() {
        let i = parse_index(
            br#"{"metadata": {"total_size": 1024.0}, "weight_map": {"b": "s2", "a": "s1", "c": "s1"}}"#,
            "the index",
        )
        .unwrap();
        assert_eq!(i.total_size, Some(1024));
        assert_eq!(i.files, vec!["s1".to_owned(), "s2".to_owned()]);
    }
}
