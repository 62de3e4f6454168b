//! A URL's index. A prefix (a URL ending in `/`, or in `/.metadata`, or
//! any URL opened as DCP) is a DCP checkpoint: its `.metadata` object
//! and the `.distcp` objects beside it. Any other URL is one object,
//! indexed by reads like a file (`ckpt_open`: a header at its front, a
//! zip archive's directory read from its tail, a Hugging Face shard
//! index whose shards are the objects it names relative to its URL).
//! What cannot be indexed so (legacy torch's tar container, a DCP layout the
//! read index leaves to a mapping) is spooled: the objects copied by
//! ranged reads to a temporary directory (removed once the index is
//! made: the files stay open), mapped and indexed as files are, so that
//! every format loads from a URL.

use super::object::RemoteSource;
use super::settings::Settings;
use super::store::{locate, Located};
use super::RemoteSettings;
use crate::error::Result;
use crate::serialize::byte_source::ByteSource;
use crate::serialize::ckpt_index::Index;
use crate::serialize::ckpt_open::{index_file, Siblings};
use crate::serialize::dcp_items::{files_of, METADATA};
use crate::serialize::formats::Format;
use crate::serialize::{hf_shards, LoadFlags};
use object_store::path::Path as ObjPath;
use std::io::Write;
use std::sync::Arc;

/// What a URL names: a DCP checkpoint under a prefix, or one object.
enum Target {
    Dcp(Located, String),
    Object(Box<(RemoteSource, Relative)>),
}

/// What `url` names, opened.
fn target(url: &str, format: Format, settings: Settings, over: &RemoteSettings) -> Result<Target> {
    let located = locate(url, &settings, over)?;
    let key = located.key.as_ref();
    let is_prefix = url.ends_with('/') || key.is_empty();
    let dcp = matches!(format, Format::Auto | Format::Dcp)
        && (is_prefix || key == METADATA || key.ends_with(&format!("/{METADATA}")));
    if dcp || format == Format::Dcp {
        let dir = if is_prefix {
            key.to_owned()
        } else {
            key.strip_suffix(METADATA)
                .unwrap_or(key)
                .trim_end_matches('/')
                .to_owned()
        };
        return Ok(Target::Dcp(located, dir));
    }
    let source = RemoteSource::open(located.store.clone(), located.key.clone(), url, settings)?;
    let siblings = Relative {
        store: located.store.clone(),
        dir: parent(located.key.as_ref()),
        root: located.root.clone(),
        url: url.to_owned(),
        settings,
    };
    Ok(Target::Object(Box::new((source, siblings))))
}

/// The index of the checkpoint at `url`.
pub(super) fn open_index(
    url: &str,
    format: Format,
    flags: LoadFlags,
    over: &RemoteSettings,
) -> Result<Index> {
    let settings = Settings::with(over)?;
    let shown = super::shown(url);
    let indexed = match target(url, format, settings, over)? {
        Target::Dcp(located, dir) => dcp_index(&located, &dir, settings, flags),
        Target::Object(object) => {
            let (source, siblings) = *object;
            match index_file(source, &siblings, format, flags, true)? {
                Ok(index) => Ok(index),
                Err(source) => {
                    let (tmp, path) = spool_object(&source, &siblings)?;
                    tmp.index(&path, format, flags)
                }
            }
        }
    };
    indexed.map_err(|e| named(e, &shown))
}

/// The checkpoint at `url` copied to a temporary directory (its objects
/// as files, in their layout): the directory (removed when dropped) and
/// the path standing for `url` in it. What `verify` checks, reading every
/// byte anyway.
pub(super) fn download(url: &str, format: Format) -> Result<(Spool, std::path::PathBuf)> {
    let settings = Settings::from_env()?;
    let shown = super::shown(url);
    match target(url, format, settings, &RemoteSettings::default()).map_err(|e| named(e, &shown))? {
        Target::Dcp(located, dir) => {
            let tmp = spool_dcp(&located, &dir, settings).map_err(|e| named(e, &shown))?;
            let path = tmp.dir.clone();
            Ok((tmp, path))
        }
        Target::Object(object) => spool_object(&object.0, &object.1).map_err(|e| named(e, &shown)),
    }
}

/// `e` naming `shown` (once).
fn named(e: crate::error::Error, shown: &str) -> crate::error::Error {
    if e.message().contains(shown) {
        e
    } else {
        e.context(shown)
    }
}

/// The key's directory (`a/b` of `a/b/c`; empty at the root).
fn parent(key: &str) -> String {
    key.rsplit_once('/')
        .map(|(d, _)| d.to_owned())
        .unwrap_or_default()
}

/// Objects beside a shard index (or a DCP `.metadata`): its directory's
/// key joined with names checked to stay inside it.
struct Relative {
    store: Arc<dyn object_store::ObjectStore>,
    dir: String,
    root: String,
    url: String,
    settings: Settings,
}

impl Relative {
    /// The key and URL of the object `name` names, refused when it
    /// leaves the directory (as a local shard may not) or repeats a name
    /// already in `seen`.
    fn key_of(
        &self,
        name: &str,
        what: &str,
        seen: &mut std::collections::HashSet<String>,
    ) -> Result<(ObjPath, String)> {
        crate::files::check_relative(name, what)?;
        let parts: Vec<&str> = name
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        let joined = if self.dir.is_empty() {
            parts.join("/")
        } else {
            format!("{}/{}", self.dir, parts.join("/"))
        };
        crate::ensure!(
            seen.insert(joined.clone()),
            Format,
            "{what} names the object '{joined}' twice (as '{name}' and before): expected each \
             file under one name"
        );
        let key = ObjPath::parse(&joined)
            .map_err(|e| crate::err!(Format, "{what} names '{name}', not an object key ({e})"))?;
        Ok((key, format!("{}{joined}", self.root)))
    }

    fn open_keys(&self, names: &[String], what: &str) -> Result<Vec<RemoteSource>> {
        let mut seen = std::collections::HashSet::new();
        names
            .iter()
            .map(|name| {
                let (key, shown) = self.key_of(name, what, &mut seen)?;
                RemoteSource::open(self.store.clone(), key, &shown, self.settings)
            })
            .collect()
    }
}

impl Siblings for Relative {
    type Src = RemoteSource;

    fn what(&self) -> String {
        format!("the shard index '{}'", super::shown(&self.url))
    }

    fn open_all(&self, names: &[String], what: &str) -> Result<Vec<RemoteSource>> {
        self.open_keys(names, what)
    }
}

/// The DCP checkpoint under `dir` of the store: where messages name it,
/// what opens the objects beside its `.metadata`, and that object.
fn dcp_parts(
    located: &Located,
    dir: &str,
    settings: Settings,
) -> Result<(String, Relative, Arc<RemoteSource>)> {
    let base = if dir.is_empty() {
        located.root.clone()
    } else {
        format!("{}{dir}/", located.root)
    };
    let rel = Relative {
        store: located.store.clone(),
        dir: dir.to_owned(),
        root: located.root.clone(),
        url: base.clone(),
        settings,
    };
    let meta_key = ObjPath::parse(if dir.is_empty() {
        METADATA.to_owned()
    } else {
        format!("{dir}/{METADATA}")
    })
    .map_err(|e| crate::err!(InvalidArgument, "'{base}': not an object prefix ({e})"))?;
    let meta = Arc::new(RemoteSource::open(
        located.store.clone(),
        meta_key,
        &format!("{base}{METADATA}"),
        settings,
    )?);
    Ok((format!("the DCP checkpoint '{base}'"), rel, meta))
}

/// The index of the DCP checkpoint under `dir` of the store.
fn dcp_index(located: &Located, dir: &str, settings: Settings, flags: LoadFlags) -> Result<Index> {
    let (what, rel, meta) = dcp_parts(located, dir, settings)?;
    let open = |names: &[String], named_by: &str| -> Result<Vec<Arc<dyn ByteSource>>> {
        Ok(rel
            .open_keys(names, named_by)?
            .into_iter()
            .map(|s| Arc::new(s) as _)
            .collect())
    };
    if let Some(index) = crate::serialize::dcp_index::index_with(&what, meta, open, flags)? {
        return Ok(index);
    }
    // A layout the read index leaves to a mapping: spooled.
    let tmp = spool_dcp(located, dir, settings)?;
    tmp.index(&tmp.dir.clone(), Format::Dcp, flags)
}

/// The DCP checkpoint under `dir` copied to a temporary directory.
fn spool_dcp(located: &Located, dir: &str, settings: Settings) -> Result<Spool> {
    let (what, rel, meta) = dcp_parts(located, dir, settings)?;
    let tmp = Spool::new("tessera-remote")?;
    let path = tmp.copy(&*meta, METADATA)?;
    let bytes =
        std::fs::read(&path).map_err(|e| crate::serialize::io_err(&path, "cannot read", e))?;
    let parsed = crate::serialize::dcp_metadata::parse(&bytes).map_err(|e| e.context(&what))?;
    let names = files_of(&parsed);
    for (name, source) in names.iter().zip(rel.open_keys(&names, &what)?) {
        tmp.copy(&source, name)?;
    }
    Ok(tmp)
}

/// The object in `source` (and, for a shard index, its shards) copied to
/// a temporary directory: the directory and the object's path in it.
fn spool_object(source: &RemoteSource, siblings: &Relative) -> Result<(Spool, std::path::PathBuf)> {
    let tmp = Spool::new("tessera-remote")?;
    let name = source
        .name()
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
        .unwrap_or("checkpoint")
        .to_owned();
    let path = tmp.copy(source, &name)?;
    if source.len() <= hf_shards::MAX_INDEX_BYTES as u64 {
        let bytes =
            std::fs::read(&path).map_err(|e| crate::serialize::io_err(&path, "cannot read", e))?;
        if hf_shards::is_index(&bytes) {
            let what = siblings.what();
            let parsed = hf_shards::parse_index(&bytes, &what)?;
            for (shard, src) in parsed
                .files
                .iter()
                .zip(siblings.open_keys(&parsed.files, &what)?)
            {
                tmp.copy(&src, shard)?;
            }
        }
    }
    Ok((tmp, path))
}

/// A temporary directory objects are copied into, removed when dropped.
pub(crate) struct Spool {
    dir: std::path::PathBuf,
}

impl Spool {
    /// A new directory `PREFIX-PID-N` in the temporary directory.
    pub(super) fn new(prefix: &str) -> Result<Spool> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "{prefix}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir)
            .map_err(|e| crate::serialize::io_err(&dir, "cannot create", e))?;
        Ok(Spool { dir })
    }

    /// The directory.
    pub(super) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// `source` copied to `name` (relative, checked) inside the
    /// directory, by reads of the default request size: the file's path.
    fn copy(&self, source: &dyn ByteSource, name: &str) -> Result<std::path::PathBuf> {
        let rel = crate::files::check_relative(name, "a spooled object")?;
        let path = self.dir.join(rel);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)
                .map_err(|e| crate::serialize::io_err(d, "cannot create", e))?;
        }
        let mut file = std::fs::File::create(&path)
            .map_err(|e| crate::serialize::io_err(&path, "cannot create", e))?;
        let chunk = source
            .fetch_hints()
            .chunk
            .unwrap_or(super::settings::DEFAULT_CHUNK);
        let mut buf = vec![0u8; chunk.min(source.len()) as usize];
        let mut at = 0u64;
        while at < source.len() {
            let n = chunk.min(source.len() - at) as usize;
            source.read_at(at, &mut buf[..n])?;
            file.write_all(&buf[..n])
                .map_err(|e| crate::serialize::io_err(&path, "cannot write", e))?;
            at += n as u64;
        }
        Ok(path)
    }

    /// The index of the spooled checkpoint at `path`, made as a local
    /// one's is from a mapping.
    fn index(&self, path: &std::path::Path, format: Format, flags: LoadFlags) -> Result<Index> {
        let mapped = LoadFlags {
            mmap: true,
            read_only: true,
            skip_unknown: flags.skip_unknown,
        };
        let (format, dict) = crate::serialize::load_as(path, format, mapped)?;
        Index::from_mapped(format, &dict)
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
