//! A torch.distributed.checkpoint directory's `.metadata`: a pickle of
//! `torch.distributed.checkpoint.metadata.Metadata`, read with its own
//! allowlist (nothing is imported or called: each object is a call of its
//! class, interpreted here) into [`Metadata`]; `dcp_metadata_write`
//! writes one back so that Python's `pickle.load` rebuilds the same
//! classes.
//!
//! What is read: `state_dict_metadata` (per flattened name, a
//! `TensorStorageMetadata`: dtype, layout, size and chunks (offsets and
//! sizes), or a `BytesStorageMetadata`) and `storage_data` (per
//! `MetadataIndex(fqn, offset)`, a `_StorageInfo`: the file relative to
//! the directory, the offset and length of the item's bytes there, and
//! the transforms applied to them). `planner_data`, `storage_meta` and
//! `version` are not needed. The chunks' geometry is checked by
//! `dcp_chunks`; that no two items use one byte of a file by
//! [`check_bytes_disjoint`] (on load, once the files' sizes are known),
//! so the storages of a load never alias and what a load stitches is
//! bounded by the files' bytes.

use super::dcp_chunks;
use super::dtypes;
use crate::dtype::DType;
use crate::error::Result;
use crate::pickle::{self, Kind, Limits, Pairs, Val};
use std::collections::HashMap;

/// Where an item's bytes lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Location {
    /// The file, relative to the checkpoint's directory.
    pub file: String,
    pub offset: u64,
    pub length: u64,
}

/// One chunk of a tensor: its place in the full tensor and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub offsets: Vec<i64>,
    pub sizes: Vec<i64>,
    pub at: Location,
}

/// What an entry of the state dict is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A tensor, in chunks.
    Tensor {
        dtype: DType,
        size: Vec<i64>,
        chunks: Vec<Chunk>,
    },
    /// Anything else DCP saved (an int, a list, bytes): torch.save'd bytes.
    Bytes(Location),
}

/// A read `.metadata`: the entries in the file's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Metadata {
    pub entries: Vec<(String, Item)>,
}

pub(crate) const META: &str = "torch.distributed.checkpoint.metadata";
pub(crate) const FS: &str = "torch.distributed.checkpoint.filesystem";
/// torch 1.13-2.0 kept TensorProperties there.
const OLD_META: &str = "torch.distributed._shard.sharded_tensor.metadata";

/// The globals a `.metadata` pickle may name (never imported or called).
fn allowed(module: &str, name: &str) -> bool {
    match module {
        META => matches!(
            name,
            "Metadata"
                | "TensorStorageMetadata"
                | "BytesStorageMetadata"
                | "ChunkStorageMetadata"
                | "TensorProperties"
                | "MetadataIndex"
                | "StorageMeta"
                | "_MEM_FORMAT_ENCODING"
        ),
        OLD_META => matches!(name, "TensorProperties" | "MEM_FORMAT_ENCODING"),
        FS => name == "_StorageInfo",
        "torch" => {
            name == "Size"
                || name.ends_with("_format")
                || name == "strided"
                || dtypes::dtype_of_torch_name(name).is_some()
        }
        "torch.serialization" => name == "_get_layout",
        "pathlib" => matches!(name, "PosixPath" | "PurePosixPath" | "Path" | "WindowsPath"),
        "copyreg" => matches!(name, "__newobj__" | "_reconstructor"),
        "collections" => name == "OrderedDict",
        _ => false,
    }
}

fn bad(what: impl std::fmt::Display) -> crate::error::Error {
    crate::err!(Format, "the DCP metadata: {what}")
}

/// The class a value is an object of, and its state: NEWOBJ's class,
/// or the class `copyreg.__newobj__` / `_reconstructor` is given.
fn object<'p>(v: Val<'p>) -> Option<((&'p str, &'p str), Call<'p>)> {
    let c = v.as_call()?;
    if c.module == "copyreg" {
        let cls = c.args.get(0)?.as_global()?;
        return Some((cls, c));
    }
    Some(((c.module, c.name), c))
}

use crate::pickle::Call;

/// An object of class `META.name` (or `module.name`): its BUILD state as
/// dict items (a dataclass's fields).
fn fields<'p>(v: Val<'p>, module: &str, name: &str, what: &str) -> Result<Pairs<'p>> {
    match object(v) {
        Some(((m, n), c)) if m == module && n == name => match c.state.map(|s| s.kind()) {
            Some(Kind::Dict(d)) => Ok(d),
            // A dataclass whose fields are all defaults may carry no state.
            None => Ok(c.items),
            Some(_) => Err(bad(format_args!(
                "{what}: the state of its {name} is {}: expected a dict of its fields",
                c.state.map_or("nothing".into(), |s| s.describe())
            ))),
        },
        _ => Err(bad(format_args!(
            "{what} is {}: expected a {module}.{name}",
            v.describe()
        ))),
    }
}

fn field<'p>(d: Pairs<'p>, key: &str, what: &str) -> Result<Val<'p>> {
    d.get(key)
        .ok_or_else(|| bad(format_args!("{what} has no field '{key}'")))
}

/// The ints of a torch.Size (or a plain tuple / list of ints).
fn size_of(v: Val<'_>, what: &str) -> Result<Vec<i64>> {
    let seq = match v.as_call() {
        Some(c) if (c.module, c.name) == ("torch", "Size") => c.args.get(0),
        Some(_) => None,
        None => Some(v),
    }
    .and_then(|s| s.as_seq())
    .ok_or_else(|| {
        bad(format_args!(
            "{what} is {}: expected a torch.Size",
            v.describe()
        ))
    })?;
    crate::ensure!(
        seq.len() <= 64,
        Format,
        "the DCP metadata: {what} has {} dims: expected at most 64",
        seq.len()
    );
    seq.iter()
        .map(|x| {
            x.as_int().filter(|&i| i >= 0).ok_or_else(|| {
                bad(format_args!(
                    "{what} holds {}: expected sizes and offsets >= 0",
                    x.describe()
                ))
            })
        })
        .collect()
}

/// A tensor's dtype, from its TensorProperties (a tuple state of 5 or 6
/// items, or a dict of fields), refusing a layout other than strided.
fn properties(v: Val<'_>, what: &str) -> Result<DType> {
    let Some(((m, n), c)) =
        object(v).filter(|((m, n), _)| (*m == META || *m == OLD_META) && *n == "TensorProperties")
    else {
        crate::bail!(
            Format,
            "the DCP metadata: {what}: properties are {}: expected a TensorProperties",
            v.describe()
        );
    };
    let _ = (m, n);
    let (dtype, layout) = match c.state.map(|s| s.kind()) {
        Some(Kind::Tuple(t)) if t.len() == 5 || t.len() == 6 => (t.get(0), t.get(1)),
        Some(Kind::Dict(d)) => (d.get("dtype"), d.get("layout")),
        _ => crate::bail!(
            Format,
            "the DCP metadata: {what}: the TensorProperties' state is {}: expected (dtype, \
             layout, requires_grad, memory_format, pin_memory[, strides])",
            c.state.map_or("nothing".into(), |s| s.describe())
        ),
    };
    let dtype = dtype
        .and_then(|d| d.as_global())
        .filter(|(m, _)| *m == "torch")
        .and_then(|(_, n)| dtypes::dtype_of_torch_name(n))
        .ok_or_else(|| {
            bad(format_args!(
                "{what}: dtype {}: expected a torch dtype tessera holds",
                dtype.map_or("missing".into(), |d| d.describe())
            ))
        })?;
    let layout_name = layout.and_then(|l| match l.kind() {
        Kind::Call(c) if (c.module, c.name) == ("torch.serialization", "_get_layout") => {
            c.args.get(0).and_then(|a| a.as_str()).map(str::to_owned)
        }
        Kind::Global(m, n) => Some(format!("{m}.{n}")),
        _ => None,
    });
    match layout_name.as_deref() {
        Some("torch.strided") => Ok(dtype),
        other => crate::bail!(
            Format,
            "the DCP metadata: {what}: storage layout {}: tessera reads dense strided tensors \
             only (torch.strided)",
            other.unwrap_or("missing or unknown")
        ),
    }
}

/// A `_StorageInfo`.
fn location(v: Val<'_>, what: &str) -> Result<Location> {
    let d = fields(v, FS, "_StorageInfo", what)?;
    let file = field(d, "relative_path", what)?
        .as_str()
        .ok_or_else(|| bad(format_args!("{what}: relative_path is not a str")))?
        .to_owned();
    crate::files::check_relative(&file, &format!("the DCP metadata ({what})"))?;
    let uint = |key: &str| -> Result<u64> {
        let x = field(d, key, what)?;
        x.as_int()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| {
                bad(format_args!(
                    "{what}: {key} is {}: expected an int >= 0",
                    x.describe()
                ))
            })
    };
    let (offset, length) = (uint("offset")?, uint("length")?);
    if let Some(t) = d.get("transform_descriptors").filter(|t| !t.is_none()) {
        let names: Vec<String> = t
            .as_seq()
            .map(|s| {
                s.iter()
                    .map(|x| x.as_str().unwrap_or("?").to_owned())
                    .collect()
            })
            .unwrap_or_default();
        crate::ensure!(
            t.as_seq().is_some_and(|s| s.is_empty()),
            Format,
            "the DCP metadata: {what}: its bytes were transformed ({}): tessera reads items \
             stored as torch.save wrote them only (no compression or other extension)",
            if names.is_empty() {
                t.describe()
            } else {
                names.join(", ")
            }
        );
    }
    Ok(Location {
        file,
        offset,
        length,
    })
}

/// A `MetadataIndex`: the item's name and, for a tensor chunk, its
/// offsets.
type StorageKey = (String, Option<Vec<i64>>);

/// Parses a `.metadata` pickle.
///
/// Errors: `Format`, naming the entry and what is wrong (a global outside
/// the allowlist, a class where another is expected, an unknown storage
/// layout or transform, a chunk without storage or storage without a
/// chunk, chunks overlapping or leaving part of their tensor uncovered).
pub(crate) fn parse(bytes: &[u8]) -> Result<Metadata> {
    let p = pickle::parse(bytes, &allowed, Limits::default())
        .map_err(|e| e.context("the DCP metadata (.metadata)"))?;
    let root = fields(p.root(), META, "Metadata", "the root")?;
    let sdm = field(root, "state_dict_metadata", "Metadata")?;
    let Kind::Dict(sdm) = sdm.kind() else {
        return Err(bad("state_dict_metadata is not a dict"));
    };
    let sd = field(root, "storage_data", "Metadata")?;
    let Kind::Dict(sd) = sd.kind() else {
        return Err(bad(format_args!(
            "storage_data is {}: expected a dict (torch's FileSystemWriter layout)",
            sd.describe()
        )));
    };
    // (fqn, offsets or None) -> location, each used once.
    let mut storage: HashMap<StorageKey, (Location, bool)> = HashMap::new();
    for (k, v) in sd.iter() {
        let what = format!("storage_data key {}", k.describe());
        let kf = fields(k, META, "MetadataIndex", &what)?;
        let fqn = field(kf, "fqn", &what)?
            .as_str()
            .ok_or_else(|| bad(format_args!("{what}: fqn is not a str")))?
            .to_owned();
        let offset = match kf.get("offset").filter(|o| !o.is_none()) {
            Some(o) => Some(size_of(o, &format!("the storage offset of '{fqn}'"))?),
            None => None,
        };
        let loc = location(v, &format!("the storage of '{fqn}'"))?;
        let key = (fqn, offset);
        crate::ensure!(
            !storage.contains_key(&key),
            Format,
            "the DCP metadata: storage_data names '{}' at {:?} twice",
            key.0,
            key.1
        );
        storage.insert(key, (loc, false));
    }
    let mut entries = Vec::with_capacity(sdm.len());
    let mut names = std::collections::HashSet::new();
    for (k, v) in sdm.iter() {
        let name = k
            .as_str()
            .ok_or_else(|| {
                bad(format_args!(
                    "a state_dict_metadata key is {}: expected a str",
                    k.describe()
                ))
            })?
            .to_owned();
        crate::ensure!(
            names.insert(name.clone()),
            Format,
            "the DCP metadata: entry '{name}' is listed twice"
        );
        let what = format!("entry '{name}'");
        let mut take = |offsets: Option<Vec<i64>>| -> Result<Location> {
            let shown = offsets.clone();
            match storage.get_mut(&(name.clone(), offsets)) {
                Some((loc, used)) => {
                    *used = true;
                    Ok(loc.clone())
                }
                None => Err(bad(format_args!(
                    "{what}: {} has no entry in storage_data: its bytes are nowhere",
                    shown.map_or("the item".into(), |o| format!("the chunk at offsets {o:?}"))
                ))),
            }
        };
        let item = match object(v) {
            Some(((META, "BytesStorageMetadata"), _)) => Item::Bytes(take(None)?),
            Some(((META, "TensorStorageMetadata"), _)) => {
                let d = fields(v, META, "TensorStorageMetadata", &what)?;
                let dtype = properties(field(d, "properties", &what)?, &what)?;
                let size = size_of(field(d, "size", &what)?, &format!("{what}: size"))?;
                let list = field(d, "chunks", &what)?;
                let list = list.as_seq().ok_or_else(|| {
                    bad(format_args!(
                        "{what}: chunks is {}: expected a list",
                        list.describe()
                    ))
                })?;
                let mut chunks = Vec::with_capacity(list.len());
                for (i, c) in list.iter().enumerate() {
                    let cw = format!("{what}, chunk {i}");
                    let cd = fields(c, META, "ChunkStorageMetadata", &cw)?;
                    let offsets = size_of(field(cd, "offsets", &cw)?, &format!("{cw}: offsets"))?;
                    let sizes = size_of(field(cd, "sizes", &cw)?, &format!("{cw}: sizes"))?;
                    let at = take(Some(offsets.clone()))?;
                    chunks.push(Chunk { offsets, sizes, at });
                }
                let extents: Vec<dcp_chunks::Extent<'_>> = chunks
                    .iter()
                    .map(|c| dcp_chunks::Extent {
                        offsets: &c.offsets,
                        sizes: &c.sizes,
                    })
                    .collect();
                dcp_chunks::check_tiling(&name, &size, &extents)?;
                Item::Tensor {
                    dtype,
                    size,
                    chunks,
                }
            }
            _ => crate::bail!(
                Format,
                "the DCP metadata: {what} is {}: unknown storage layout (expected a \
                 TensorStorageMetadata or a BytesStorageMetadata)",
                v.describe()
            ),
        };
        entries.push((name, item));
    }
    if let Some(((fqn, off), _)) = storage.iter().find(|(_, (_, used))| !used) {
        crate::bail!(
            Format,
            "the DCP metadata: storage_data has bytes for '{fqn}'{}, which no entry of \
             state_dict_metadata has",
            off.as_ref()
                .map_or(String::new(), |o| format!(" at offsets {o:?}"))
        );
    }
    Ok(Metadata { entries })
}

/// Checks that no two items' bytes share a byte of one file: each chunk
/// and each non-tensor item has bytes of its own, as torch's writer lays
/// them out one after another (two items over one range would load as two
/// storages over one memory, and let a few bytes stand for a tensor of
/// any size). Empty ranges share nothing. Files are told by name: the
/// loader refuses one file under two names (`shard_files::load_files`).
/// The load calls it once every item is known to lie inside its file.
///
/// Errors: `Format`, naming both items, their ranges and the file.
pub(crate) fn check_bytes_disjoint(entries: &[(String, Item)]) -> Result<()> {
    // (entry, chunk index or None for a bytes item, its location)
    let mut items: Vec<(&str, Option<&Chunk>, &Location)> = Vec::new();
    for (name, item) in entries {
        match item {
            Item::Bytes(at) => items.push((name, None, at)),
            Item::Tensor { chunks, .. } => {
                items.extend(chunks.iter().map(|c| (name.as_str(), Some(c), &c.at)))
            }
        }
    }
    let mut files: HashMap<&str, usize> = HashMap::new();
    let mut ranges = Vec::with_capacity(items.len());
    for &(_, _, at) in &items {
        let next = files.len();
        let group = *files.entry(at.file.as_str()).or_insert(next);
        // Past the end of u64: refused as past the end of the file later.
        ranges.push((group, at.offset, at.offset.saturating_add(at.length)));
    }
    let Some((a, b)) = super::ranges::first_overlap(&ranges) else {
        return Ok(());
    };
    let what = |i: usize| {
        let (name, chunk, at) = items[i];
        let part = chunk.map_or(String::new(), |c| {
            format!(" (chunk at offsets {:?})", c.offsets)
        });
        format!("'{name}'{part} at bytes {}..{}", at.offset, ranges[i].2)
    };
    crate::bail!(
        Format,
        "the DCP metadata: items {} and {} share bytes of '{}': expected each item's bytes of \
         its own (two items over one range would load as two tensors over one memory)",
        what(a),
        what(b),
        items[a].2.file
    )
}

#[cfg(test)]
mod tests {
    use super::super::dcp_metadata_write::write;
    use super::*;

    fn at(offset: u64) -> Location {
        Location {
            file: "__0_0.distcp".into(),
            offset,
            length: 10,
        }
    }

    fn two_chunks() -> Metadata {
        Metadata {
            entries: vec![
                (
                    "model.w".into(),
                    Item::Tensor {
                        dtype: DType::BFloat16,
                        size: vec![5, 3],
                        chunks: vec![
                            Chunk {
                                offsets: vec![0, 0],
                                sizes: vec![3, 3],
                                at: at(0),
                            },
                            Chunk {
                                offsets: vec![3, 0],
                                sizes: vec![2, 3],
                                at: at(10),
                            },
                        ],
                    },
                ),
                ("step".into(), Item::Bytes(at(20))),
                (
                    "s".into(),
                    Item::Tensor {
                        dtype: DType::Long,
                        size: vec![],
                        chunks: vec![Chunk {
                            offsets: vec![],
                            sizes: vec![],
                            at: at(30),
                        }],
                    },
                ),
            ],
        }
    }

    #[test]
    fn what_is_written_reads_back() {
        let m = two_chunks();
        assert_eq!(parse(&write(&m).unwrap()).unwrap(), m);
    }

    /// Metadata with one thing changed, written and read back.
    fn refused(change: impl FnOnce(&mut Metadata)) -> String {
        let mut m = two_chunks();
        change(&mut m);
        parse(&write(&m).unwrap()).unwrap_err().to_string()
    }

    fn chunks(m: &mut Metadata) -> &mut Vec<Chunk> {
        match &mut m.entries[0].1 {
            Item::Tensor { chunks, .. } => chunks,
            _ => unreachable!(),
        }
    }

    #[test]
    fn bad_geometry_and_paths_are_named() {
        let e = refused(|m| chunks(m)[1].offsets = vec![2, 0]);
        assert!(e.contains("'model.w'") && e.contains("overlap"), "{e}");
        let e = refused(|m| chunks(m)[1].sizes = vec![1, 3]);
        assert!(
            e.contains("not fully covered") && e.contains("[4, 0]"),
            "{e}"
        );
        let e = refused(|m| chunks(m)[1].at.file = "../x.distcp".into());
        assert!(e.contains("'..'"), "{e}");
        let e = refused(|m| chunks(m)[1].at.file = "/abs.distcp".into());
        assert!(e.contains("absolute"), "{e}");
        let e = refused(|m| chunks(m).pop().map(|_| ()).unwrap_or(()));
        assert!(e.contains("not fully covered"), "{e}");
    }

    #[test]
    fn items_over_the_same_bytes_are_refused_naming_both() {
        // Issue 65: an entry whose _StorageInfo repeats another's loaded
        // as two storages over one memory.
        let refused = |change: fn(&mut Metadata)| {
            let mut m = two_chunks();
            change(&mut m);
            let m = parse(&write(&m).unwrap()).unwrap();
            check_bytes_disjoint(&m.entries).unwrap_err().to_string()
        };
        let e = refused(|m| chunks(m)[1].at = at(0));
        assert!(
            e.contains("'model.w' (chunk at offsets [0, 0]) at bytes 0..10")
                && e.contains("'model.w' (chunk at offsets [3, 0]) at bytes 0..10")
                && e.contains("'__0_0.distcp'"),
            "{e}"
        );
        // A bytes item reaching into a chunk's bytes, another entry's.
        let e = refused(|m| m.entries[1].1 = Item::Bytes(at(35)));
        assert!(
            e.contains("'step' at bytes 35..45") && e.contains("'s'"),
            "{e}"
        );
        // The same range of another file, and touching or empty ranges,
        // share nothing.
        let mut m = two_chunks();
        chunks(&mut m)[1].at.file = "__1_0.distcp".into();
        chunks(&mut m)[1].at.offset = 0;
        m.entries[1].1 = Item::Bytes(Location {
            file: "__0_0.distcp".into(),
            offset: 10,
            length: 0,
        });
        check_bytes_disjoint(&m.entries).unwrap();
        check_bytes_disjoint(&two_chunks().entries).unwrap();
    }

    #[test]
    fn other_globals_are_refused_never_called() {
        // The writer's own pickle with a global swapped for os.system.
        let mut bytes = write(&two_chunks()).unwrap();
        let from = b"copyreg\n__newobj__\n";
        let i = bytes.windows(from.len()).position(|w| w == from).unwrap();
        bytes.splice(
            i..i + from.len(),
            b"os\nsystem\n\n\n\n\n\n\n\n\n\n".iter().copied(),
        );
        let e = parse(&bytes).unwrap_err().to_string();
        assert!(e.contains("os.system"), "{e}");
    }
}
