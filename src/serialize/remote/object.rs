//! One object behind a URL as a byte source: its length, ETag and
//! modification time taken by a HEAD at open, then each read one ranged
//! GET (If-Match the ETag) whose body is copied chunk by chunk straight
//! into the caller's buffer. What a server sends is checked, never
//! trusted: a 200 for a range, a Content-Range other than the one asked
//! (object_store refuses both), an ETag or modification time other than
//! at open (the object changed), more or fewer bytes than asked, a
//! request past the timeout: each an error naming the URL and what was
//! wrong, and the buffer's bytes are never handed on as a read. Memory:
//! the caller's buffer and the body chunks in flight (hyper's buffers),
//! whatever the server sends.

use super::settings::Settings;
use super::store::{redact, runtime};
use crate::error::{Error, Result};
use crate::serialize::byte_source::{ByteSource, FetchHints};
use futures_util::StreamExt;
use object_store::path::Path as ObjPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An object read by ranged GETs.
pub(crate) struct RemoteSource {
    store: Arc<dyn ObjectStore>,
    key: ObjPath,
    /// The URL without credentials.
    shown: String,
    /// The URL as given (for redacting messages).
    url: String,
    len: u64,
    etag: Option<String>,
    /// Milliseconds since the epoch.
    modified: i64,
    settings: Settings,
    read: AtomicU64,
}

impl RemoteSource {
    /// Opens the object `key` of `store` (`url` names it): a HEAD.
    /// Errors: `Io` naming the URL (not found, refused, timed out).
    pub(super) fn open(
        store: Arc<dyn ObjectStore>,
        key: ObjPath,
        url: &str,
        settings: Settings,
    ) -> Result<RemoteSource> {
        let shown = super::shown(url);
        let head = GetOptions {
            head: true,
            ..GetOptions::default()
        };
        let meta = block_on(settings, &shown, url, "HEAD", async {
            store.get_opts(&key, head).await.map(|r| r.meta)
        })?;
        Ok(RemoteSource {
            store,
            key,
            shown,
            url: url.to_owned(),
            len: meta.size,
            etag: meta.e_tag,
            modified: meta.last_modified.timestamp_millis(),
            settings,
            read: AtomicU64::new(0),
        })
    }
}

impl ByteSource for RemoteSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let want = buf.len() as u64;
        let end = offset.checked_add(want);
        crate::ensure!(
            end.is_some_and(|e| e <= self.len),
            Format,
            "{}: bytes [{offset}, +{want}) lie past its end: it is {} bytes",
            self.shown,
            self.len
        );
        if buf.is_empty() {
            return Ok(());
        }
        let end = offset + want;
        let options = GetOptions {
            range: Some(GetRange::Bounded(offset..end)),
            if_match: self.etag.clone(),
            ..GetOptions::default()
        };
        let what = format!("GET bytes {offset}-{}", end - 1);
        block_on(self.settings, &self.shown, &self.url, &what, async {
            let got = self.store.get_opts(&self.key, options).await?;
            Ok(got)
        })
        .and_then(|got| {
            self.check_same(&got.meta)?;
            let mut at = 0usize;
            let mut body = got.into_stream();
            block_on(self.settings, &self.shown, &self.url, &what, async {
                while let Some(piece) = body.next().await {
                    let piece = piece?;
                    let Some(dst) = buf.get_mut(at..at + piece.len()) else {
                        return Ok(Err(at + piece.len()));
                    };
                    dst.copy_from_slice(&piece);
                    at += piece.len();
                }
                Ok(Ok(()))
            })?
            .map_err(|sent| {
                crate::err!(
                    Format,
                    "{}: the server sent more than the {want} bytes asked at {offset} (at \
                     least {sent}): expected exactly the range asked",
                    self.shown
                )
            })?;
            crate::ensure!(
                at == buf.len(),
                Format,
                "{}: the server sent {at} of the {want} bytes asked at {offset} (the body \
                 ended early): expected exactly the range asked",
                self.shown
            );
            Ok(())
        })?;
        self.read.fetch_add(want, Ordering::Relaxed);
        Ok(())
    }

    fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    fn name(&self) -> &str {
        &self.shown
    }

    /// Every read checks the object's ETag and modification time against
    /// those at open: nothing more to ask the server here.
    fn check_unchanged(&self) -> Result<()> {
        Ok(())
    }

    fn fetch_hints(&self) -> FetchHints {
        FetchHints {
            threads: Some(self.settings.concurrency),
            chunk: Some(self.settings.chunk),
            join_gap: Some(self.settings.join_gap),
        }
    }
}

impl RemoteSource {
    /// Refuses a response for an object other than the one opened.
    fn check_same(&self, meta: &object_store::ObjectMeta) -> Result<()> {
        let etag_differs = self.etag.is_some() && meta.e_tag != self.etag;
        let modified = meta.last_modified.timestamp_millis();
        let time_differs = self.etag.is_none() && modified != self.modified;
        crate::ensure!(
            !etag_differs && !time_differs && meta.size == self.len,
            Format,
            "{} changed since it was opened (then {} bytes, ETag {:?}, modified at {} ms; now \
             {} bytes, ETag {:?}, modified at {} ms): expected the object as it was: open it \
             again",
            self.shown,
            self.len,
            self.etag,
            self.modified,
            meta.size,
            meta.e_tag,
            modified
        );
        Ok(())
    }
}

/// Runs `work` on the runtime, bounded by the timeout (per attempt,
/// retries included: the timeout times the attempts); its error as
/// tessera's, naming `shown` and what was asked (`what`), credentials
/// out.
pub(super) fn block_on<T>(
    settings: Settings,
    shown: &str,
    url: &str,
    what: &str,
    work: impl std::future::Future<Output = object_store::Result<T>>,
) -> Result<T> {
    let bound = settings.timeout.saturating_mul(settings.retries as u32 + 2);
    let rt = runtime()?;
    match rt.block_on(async { tokio::time::timeout(bound, work).await }) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(store_error(&e, shown, url, what)),
        Err(_) => Err(crate::err!(
            Io,
            "{shown}: {what} timed out: it took longer than {} ms ({} tries of \
             TSR_REMOTE_TIMEOUT_MS={}): \
             expected a server that answers in time",
            bound.as_millis(),
            settings.retries + 1,
            settings.timeout.as_millis()
        )),
    }
}

/// object_store's error `e` as tessera's.
pub(super) fn store_error(e: &object_store::Error, shown: &str, url: &str, what: &str) -> Error {
    use object_store::Error as E;
    let reason = redact(&full_chain(e), url);
    match e {
        E::NotFound { .. } => crate::err!(Io, "{shown}: no such object ({what}): {reason}"),
        E::Precondition { .. } => crate::err!(
            Format,
            "{shown} changed since it was opened (the server refused the ETag it gave then, \
             {what}): expected the object as it was: open it again"
        ),
        _ => crate::err!(Io, "{shown}: {what} failed: {reason}"),
    }
}

/// `e`'s message with its sources' (object_store's own names only the
/// outermost cause).
fn full_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cause = c.source();
    }
    out
}
