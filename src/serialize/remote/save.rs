//! Saves to S3: the local save writes the checkpoint into a temporary
//! directory, then each file it made is uploaded (a multipart upload of
//! parts of the request size, several in flight, for a file over one
//! part; one PUT otherwise). An object appears only when its upload
//! completes, so a failed save leaves the old object, if any, as it was
//! (a multipart upload that fails is aborted). A directory's files (a
//! sharded save, a DCP checkpoint) go up with their index last (the
//! shard index, DCP's `.metadata`), so that a reader never finds an
//! index naming files not there yet.

use super::object::store_error;
use super::open::Spool;
use super::settings::Settings;
use super::store::{locate, runtime};
use crate::error::Result;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// S3's smallest part but the last, and its most parts.
const MIN_PART: u64 = 5 << 20;
const MAX_PARTS: u64 = 10_000;

/// Saves through `save` (which writes the checkpoint to the local path it
/// is given: a file, or a directory of files) to `url`, returning what
/// `save` returned with the local path mapped to its URL.
pub(crate) fn save_to(url: &str, save: impl FnOnce(&Path) -> Result<PathBuf>) -> Result<PathBuf> {
    let shown = super::shown(url);
    let settings = Settings::from_env()?;
    crate::ensure!(
        url.len() >= 5 && url[..5].eq_ignore_ascii_case("s3://"),
        Unsupported,
        "cannot save to {shown}: HTTP servers take no uploads from tessera: expected an \
         s3://BUCKET/KEY URL or a local path"
    );
    let located = locate(url, &settings, &super::RemoteSettings::default())?;
    let key = located.key.as_ref().trim_end_matches('/').to_owned();
    let name = key.rsplit('/').next().unwrap_or_default().to_owned();
    crate::ensure!(
        !name.is_empty(),
        InvalidArgument,
        "cannot save to {shown}: it names no object: expected s3://BUCKET/KEY"
    );
    let spool = Spool::new("tessera-upload")?;
    let local = spool.dir().join(&name);
    let made = save(&local)?;
    let files = files_in_order(&local)?;
    let parent = key[..key.len() - name.len()].to_owned();
    for (path, rel) in &files {
        let object = ObjPath::from(format!("{parent}{rel}"));
        upload(&*located.store, &object, path, &settings, (url, &shown))?;
    }
    let rel = made
        .strip_prefix(spool.dir())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or(name);
    Ok(PathBuf::from(format!("{}{parent}{rel}", located.root)))
}

/// The files at `local` (itself, or those under it), each with its path
/// relative to `local`'s directory, the index files last.
fn files_in_order(local: &Path) -> Result<Vec<(PathBuf, String)>> {
    let base = local.parent().unwrap_or(local).to_path_buf();
    let mut out = Vec::new();
    let mut stack = vec![local.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta =
            std::fs::metadata(&p).map_err(|e| crate::serialize::io_err(&p, "cannot read", e))?;
        if meta.is_dir() {
            let entries = std::fs::read_dir(&p)
                .map_err(|e| crate::serialize::io_err(&p, "cannot list", e))?;
            for e in entries {
                stack.push(
                    e.map_err(|e| crate::serialize::io_err(&p, "cannot list", e))?
                        .path(),
                );
            }
        } else {
            let rel = p
                .strip_prefix(&base)
                .expect("under the spool")
                .to_string_lossy()
                .into_owned();
            out.push((p, rel));
        }
    }
    let is_index = |rel: &str| rel.ends_with(".index.json") || rel.ends_with(".metadata");
    out.sort_by(|a, b| (is_index(&a.1), &a.1).cmp(&(is_index(&b.1), &b.1)));
    Ok(out)
}

/// What can stop an upload.
enum Stop {
    Store(object_store::Error),
    Read(std::io::Error),
    TimedOut,
}

/// `file` uploaded as `object`.
fn upload(
    store: &dyn ObjectStore,
    object: &ObjPath,
    file: &Path,
    settings: &Settings,
    (url, shown): (&str, &str),
) -> Result<()> {
    let len = std::fs::metadata(file)
        .map_err(|e| crate::serialize::io_err(file, "cannot read", e))?
        .len();
    let part = settings.chunk.max(MIN_PART).max(len.div_ceil(MAX_PARTS));
    // Each request's bound: the timeout times the tries.
    let bound = settings.timeout.saturating_mul(settings.retries as u32 + 2);
    let what = format!("upload of {object}");
    let done = runtime()?.block_on(async {
        if len < part {
            let bytes = std::fs::read(file).map_err(Stop::Read)?;
            return timed(bound, store.put(object, PutPayload::from(bytes)))
                .await
                .map(|_| ());
        }
        let started = timed(bound, store.put_multipart(object)).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(started, part as usize);
        match parts(&mut writer, file, part, settings.concurrency, bound).await {
            Ok(()) => timed(bound, writer.finish()).await.map(|_| ()),
            Err(stop) => {
                // Best effort: a part upload the store keeps is not an
                // object; the abort frees it.
                let _ = tokio::time::timeout(bound, writer.abort()).await;
                Err(stop)
            }
        }
    });
    done.map_err(|stop| match stop {
        Stop::Store(e) => store_error(&e, shown, url, &what),
        Stop::Read(e) => crate::serialize::io_err(file, "cannot read", e),
        Stop::TimedOut => crate::err!(
            Io,
            "{shown}: {what} timed out: a request took longer than {} ms ({} tries of \
             TSR_REMOTE_TIMEOUT_MS={}): expected a server that answers in time",
            bound.as_millis(),
            settings.retries + 1,
            settings.timeout.as_millis()
        ),
    })
}

/// The file's bytes written into `writer` in parts of `part` bytes, at
/// most `in_flight` uploading at once.
async fn parts(
    writer: &mut WriteMultipart,
    file: &Path,
    part: u64,
    in_flight: usize,
    bound: Duration,
) -> std::result::Result<(), Stop> {
    let mut f = std::fs::File::open(file).map_err(Stop::Read)?;
    let mut buf = vec![0u8; part as usize];
    loop {
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..]).map_err(Stop::Read)? {
                0 => break,
                k => n += k,
            }
        }
        if n == 0 {
            return Ok(());
        }
        timed(bound, writer.wait_for_capacity(in_flight.max(1))).await?;
        writer.write(&buf[..n]);
    }
}

/// `work`, bounded by `bound`.
async fn timed<T>(
    bound: Duration,
    work: impl std::future::Future<Output = object_store::Result<T>>,
) -> std::result::Result<T, Stop> {
    match tokio::time::timeout(bound, work).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Stop::Store(e)),
        Err(_) => Err(Stop::TimedOut),
    }
}
