//! Hugging Face sharded checkpoints, written ([`save_sharded`]): a dict
//! split in shards of at most N bytes, named as transformers'
//! `save_pretrained` names them, plus the index (`hf_shards.rs` reads
//! them back).

use super::dict::TensorDict;
use super::formats::Format;
use super::hf_shards::SAVE_ID_KEY;
use super::{FileFormat, SaveFlags};
use crate::error::Result;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// What a sharded save writes in one format: transformers' file names.
struct Naming {
    /// The shards' stem ("model", "pytorch_model").
    stem: &'static str,
    /// The extension ("safetensors", "bin").
    ext: &'static str,
    handler: &'static dyn FileFormat,
}

impl Naming {
    fn of(format: Format) -> Result<Naming> {
        Ok(match format {
            Format::Auto | Format::Safetensors => Naming {
                stem: "model",
                ext: "safetensors",
                handler: &super::safetensors_format::SAFETENSORS,
            },
            Format::Torch => Naming {
                stem: "pytorch_model",
                ext: "bin",
                handler: &super::torch_zip::TORCH_ZIP,
            },
            other => crate::bail!(
                InvalidArgument,
                "sharded saves write safetensors or torch shards: got the {} format ({}): \
                 expected TSR_FORMAT_SAFETENSORS, TSR_FORMAT_TORCH or TSR_FORMAT_AUTO \
                 (safetensors)",
                other.name(),
                other.raw()
            ),
        })
    }

    /// The one file of a checkpoint that fits in one shard.
    fn single(&self) -> String {
        format!("{}.{}", self.stem, self.ext)
    }

    /// Shard `i` (from 0) of `n`: `model-00001-of-00003.safetensors`.
    fn shard(&self, i: usize, n: usize) -> String {
        format!("{}-{:05}-of-{:05}.{}", self.stem, i + 1, n, self.ext)
    }

    fn index(&self) -> String {
        format!("{}.{}.index.json", self.stem, self.ext)
    }

    /// Whether `name` is a shard of this naming (any count).
    fn is_shard(&self, name: &str) -> bool {
        let Some(rest) = name
            .strip_prefix(self.stem)
            .and_then(|r| r.strip_prefix('-'))
            .and_then(|r| r.strip_suffix(self.ext))
            .and_then(|r| r.strip_suffix('.'))
        else {
            return false;
        };
        let b = rest.as_bytes();
        b.len() == 14 && b[5..9] == *b"-of-" && b[..5].iter().chain(&b[9..]).all(u8::is_ascii_digit)
    }
}

/// The shards of `dict`, as lists of its tensors' indices: tensors in
/// order, a shard closed when the next unit would take it past
/// `max_bytes` (a unit alone over the limit gets a shard of its own),
/// transformers' rule. A unit is a tensor (safetensors: its bytes), or
/// for torch files the tensors sharing one storage (its bytes, written
/// once), kept in one shard so that they share it again on load.
fn split(dict: &TensorDict, max_bytes: u64, by_storage: bool) -> Vec<Vec<usize>> {
    let mut units: Vec<(Vec<usize>, u64)> = Vec::new();
    let mut unit_of: HashMap<usize, usize> = HashMap::new();
    for (i, (_, t)) in dict.iter().enumerate() {
        if by_storage {
            let key = crate::refcount::Ref::as_ptr(&t.storage().0) as usize;
            if let Some(&u) = unit_of.get(&key) {
                units[u].0.push(i);
                continue;
            }
            unit_of.insert(key, units.len());
            units.push((vec![i], t.storage().nbytes() as u64));
        } else {
            let bytes = (t.numel().max(0) as u64).saturating_mul(t.itemsize() as u64);
            units.push((vec![i], bytes));
        }
    }
    let mut shards: Vec<Vec<usize>> = Vec::new();
    let mut size = 0u64;
    for (members, bytes) in units {
        if shards.is_empty() || size.saturating_add(bytes) > max_bytes && size > 0 {
            shards.push(Vec::new());
            size = 0;
        }
        size = size.saturating_add(bytes);
        shards.last_mut().expect("pushed").extend(members);
    }
    if shards.is_empty() {
        shards.push(Vec::new());
    }
    shards
}

/// Saves `dict` into the directory `dir` (made when missing; its parent
/// must exist) as a Hugging Face checkpoint: shards of at most
/// `max_shard_bytes` bytes of tensors each (a tensor larger than that
/// alone in its shard), in `format` (SAFETENSORS, or AUTO: safetensors
/// shards `model-00001-of-00003.safetensors` and the index
/// `model.safetensors.index.json`; TORCH: torch.save shards
/// `pytorch_model-00001-of-00003.bin` and `pytorch_model.bin.index.json`),
/// named as transformers' `save_pretrained` names them. When everything
/// fits in one shard it writes the one file `model.safetensors` /
/// `pytorch_model.bin` and no index, as transformers does. The dict's
/// metadata goes into every shard (safetensors' `__metadata__`, torch's
/// `tessera_metadata.pkl`); the index holds `metadata.total_size` (the
/// tensors' bytes) and the `weight_map`. A save of several shards also
/// puts one new save id ([`SAVE_ID_KEY`], 32 hex digits) into every
/// shard's metadata and the index's, which a load checks: the renames
/// below are one per file, so a save killed midway leaves the old index
/// beside some new shards, a mix a load refuses.
///
/// Nothing in `dir` changes until every file is written (beside them, in
/// a temporary directory inside `dir`); then each is renamed into place,
/// the index last, and the shards of an earlier save under the same
/// names that the new one does not use are removed (other files are left
/// alone). Returns the path to load: the index, or the one file.
///
/// Errors: `InvalidArgument` (another format, `max_shard_bytes` 0); what
/// the format's save refuses (dtypes, devices, shared memory for
/// safetensors); `Io`.
pub fn save_sharded(
    dict: &TensorDict,
    dir: &Path,
    format: Format,
    max_shard_bytes: u64,
    flags: SaveFlags,
) -> Result<PathBuf> {
    if let Some(url) = super::remote::url_of(dir) {
        // Written locally, then uploaded, the index last (remote/save.rs).
        return super::remote::save_to(url, |local| {
            save_sharded(dict, local, format, max_shard_bytes, flags)
        });
    }
    let naming = Naming::of(format)?;
    crate::ensure!(
        max_shard_bytes > 0,
        InvalidArgument,
        "max_shard_bytes is 0: expected the most bytes of tensors a shard may hold (> 0)"
    );
    let shards = split(dict, max_shard_bytes, naming.ext == "bin");
    let n = shards.len();
    let mut names: Vec<String> = if n == 1 {
        vec![naming.single()]
    } else {
        (0..n).map(|i| naming.shard(i, n)).collect()
    };
    // Shards are renamed into place one by one: the save id in every
    // shard and in the index lets a load tell a directory that mixes two
    // saves (one killed midway) from a checkpoint. One file needs none.
    let save_id = (n > 1).then(new_save_id);
    // The dicts of the shards, checked before any file is made.
    let mut parts = Vec::with_capacity(n);
    let mut weight_map = BTreeMap::new();
    let mut total: u64 = 0;
    for (members, file) in shards.iter().zip(&names) {
        let mut part = TensorDict::new();
        for &i in members {
            let name = dict.name(i).expect("an index of the dict");
            let t = dict.get(name).expect("a name of the dict");
            part.set(name, t.clone())?;
            weight_map.insert(name.to_owned(), serde_json::Value::from(file.as_str()));
            total =
                total.saturating_add((t.numel().max(0) as u64).saturating_mul(t.itemsize() as u64));
        }
        for (k, v) in dict.saved_metadata() {
            part.set_metadata(k, v)?;
        }
        // The values go with the first shard (a load of the index
        // gathers every shard's).
        if parts.is_empty() {
            for (name, v) in dict.values_iter() {
                part.set_value(name, v.clone())?;
            }
        }
        if let Some(id) = &save_id {
            part.set_metadata(SAVE_ID_KEY, id)?;
        }
        parts.push(part);
    }
    let index = if let Some(id) = &save_id {
        let json = serde_json::json!({
            "metadata": {"total_size": total, SAVE_ID_KEY: id},
            "weight_map": weight_map,
        });
        let mut text = serde_json::to_string_pretty(&json)
            .map_err(|e| crate::err!(InvalidArgument, "cannot write the shard index: {e}"))?;
        text.push('\n');
        names.push(naming.index());
        Some(text)
    } else {
        None
    };
    match std::fs::metadata(dir) {
        Ok(m) => crate::ensure!(
            m.is_dir(),
            Io,
            "cannot write the shards to '{}': it is {}, not a directory",
            dir.display(),
            crate::files::kind_name(m.file_type())
        ),
        Err(_) => std::fs::create_dir(dir).map_err(|e| {
            crate::err!(
                Io,
                "cannot create the directory '{}' for the shards: {}",
                dir.display(),
                crate::files::reason(&e)
            )
        })?,
    }
    crate::files::write_beside(dir, &names, flags.sync, "the shards", |temp| {
        for (part, file) in parts.iter().zip(&names) {
            let path = temp.join(file);
            let mut f = std::fs::File::create(&path)
                .map_err(|e| super::io_err(&path, "cannot create", e))?;
            crate::files::reserve(&f, naming.handler.size_floor(part))
                .map_err(|e| super::io_err(&dir.join(file), "cannot reserve space for", e))?;
            naming
                .handler
                .write_file(part, &mut f, &path, &dir.join(file))?;
        }
        if let Some(text) = &index {
            let path = temp.join(naming.index());
            std::fs::write(&path, text).map_err(|e| super::io_err(&path, "cannot write", e))?;
        }
        Ok(())
    })?;
    remove_stale(dir, &naming, &names)?;
    Ok(dir.join(names.last().expect("at least one file")))
}

/// A save id: 32 hex digits, from the process's random hash keys, the
/// time, the process id and a count, so that no two saves share one.
fn new_save_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let count = COUNT.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let half = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u128(now);
        h.write_u32(std::process::id());
        h.write_u64(count);
        h.finish()
    };
    format!("{:016x}{:016x}", half(0), half(1))
}

/// Removes what an earlier save under the same naming left that the new
/// one replaced by other names: its shards (another count), its index
/// when the new checkpoint is one file, its one file when the new one is
/// sharded (both would shadow the new files). Failures are ignored: the
/// new checkpoint is complete either way (Err only where a test stops
/// the save, `files::kill_point`).
fn remove_stale(dir: &Path, naming: &Naming, written: &[String]) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if written.iter().any(|w| w == name) {
            continue;
        }
        let stale = naming.is_shard(name) || name == naming.index() || name == naming.single();
        if stale && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
            if crate::files::kill_point::reached() {
                return Err(crate::files::kill_point::killed(&format!(
                    "removing '{name}'"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_are_transformers() {
        let n = Naming::of(Format::Safetensors).unwrap();
        assert_eq!(n.shard(0, 3), "model-00001-of-00003.safetensors");
        assert_eq!(n.index(), "model.safetensors.index.json");
        assert!(n.is_shard("model-00002-of-00007.safetensors"));
        assert!(!n.is_shard("model-0002-of-00007.safetensors"));
        assert!(!n.is_shard("model.safetensors"));
        let b = Naming::of(Format::Torch).unwrap();
        assert_eq!(b.shard(9, 12), "pytorch_model-00010-of-00012.bin");
        assert_eq!(b.single(), "pytorch_model.bin");
        assert!(Naming::of(Format::Npy).is_err());
    }
}
