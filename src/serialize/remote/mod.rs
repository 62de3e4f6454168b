//! Checkpoints behind URLs: `http://`, `https://` and `s3://BUCKET/KEY`
//! read wherever a path is (docs/FORMATS.md, "Remote checkpoints").
//! A URL is told from a path by its scheme; with the `remote` feature it
//! is opened through object_store ([`object::RemoteSource`], a
//! [`super::byte_source::ByteSource`] fetching ranges with concurrent
//! GETs) and indexed from its first bytes (and a zip's tail) like a file
//! ([`open`]); without it, refused.
//!
//! - [`settings`]: the environment's settings (concurrency, request size,
//!   timeout, retries).
//! - [`store`]: the lazily started runtime and the object stores.
//! - [`object`]: one object as a byte source.
//! - [`open`]: a URL's index: one object, a shard index and its shards, a
//!   DCP prefix; any other file spooled to a temporary file.
//! - [`save`]: saves to `s3://` URLs: written locally, then uploaded.

#[cfg(all(feature = "remote", target_os = "linux"))]
mod object;
#[cfg(all(feature = "remote", target_os = "linux"))]
mod open;
#[cfg(all(feature = "remote", target_os = "linux"))]
mod save;
#[cfg(all(feature = "remote", target_os = "linux"))]
mod settings;
#[cfg(all(feature = "remote", target_os = "linux"))]
mod store;

use super::ckpt_index::Index;
use super::formats::Format;
use super::LoadFlags;
use crate::error::Result;
use std::path::Path;

/// The schemes read as URLs.
const SCHEMES: [&str; 3] = ["http://", "https://", "s3://"];

/// `path` as a URL when it starts with a scheme tessera reads
/// (case-insensitive), else None (a local path).
pub(crate) fn url_of(path: &Path) -> Option<&str> {
    let s = path.to_str()?;
    SCHEMES
        .iter()
        .any(|p| s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p))
        .then_some(s)
}

/// The index of the checkpoint at `url` (module documentation). Errors
/// name the URL (its credentials, if it holds any, left out).
#[cfg(all(feature = "remote", target_os = "linux"))]
pub(crate) fn open_index(url: &str, format: Format, flags: LoadFlags) -> Result<Index> {
    open::open_index(url, format, flags)
}

/// The checkpoint at `url` copied to a temporary directory (removed when
/// the guard is dropped), and the path standing for `url` in it: what
/// `verify` checks.
#[cfg(all(feature = "remote", target_os = "linux"))]
pub(crate) fn download(url: &str, format: Format) -> Result<(open::Spool, std::path::PathBuf)> {
    open::download(url, format)
}

/// Saves through `save` (writing the checkpoint at the local path it is
/// given) to `url` (`s3://` only): the path `save` returned, as a URL.
#[cfg(all(feature = "remote", target_os = "linux"))]
pub(crate) fn save_to(
    url: &str,
    save: impl FnOnce(&Path) -> Result<std::path::PathBuf>,
) -> Result<std::path::PathBuf> {
    save::save_to(url, save).map_err(|e| {
        let shown = shown(url);
        if e.message().contains(&shown) {
            e
        } else {
            e.context(&shown)
        }
    })
}

/// Without the `remote` feature: refused.
#[cfg(not(all(feature = "remote", target_os = "linux")))]
pub(crate) fn save_to(
    url: &str,
    _save: impl FnOnce(&Path) -> Result<std::path::PathBuf>,
) -> Result<std::path::PathBuf> {
    Err(without("save to", url))
}

/// Without the `remote` feature: refused.
#[cfg(not(all(feature = "remote", target_os = "linux")))]
pub(crate) fn open_index(url: &str, _format: Format, _flags: LoadFlags) -> Result<Index> {
    Err(without("open", url))
}

/// Without the `remote` feature: refused.
#[cfg(not(all(feature = "remote", target_os = "linux")))]
pub(crate) fn download(url: &str, _format: Format) -> Result<((), std::path::PathBuf)> {
    Err(without("open", url))
}

#[cfg(not(all(feature = "remote", target_os = "linux")))]
fn without(verb: &str, url: &str) -> crate::error::Error {
    let scheme = url.split("://").next().unwrap_or(url);
    crate::err!(
        Unsupported,
        "cannot {verb} {}: this tessera was built without the `remote` feature (Linux only): expected a \
         local path, or a build with `--features remote` ({scheme}:// URLs)",
        shown(url)
    )
}

/// `url` as messages show it: any user and password left out.
pub(crate) fn shown(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        assert!(url_of(Path::new("http://h/x")).is_some());
        assert!(url_of(Path::new("HTTPS://h/x")).is_some());
        assert!(url_of(Path::new("s3://b/k")).is_some());
        assert!(url_of(Path::new("./http://x")).is_none());
        assert!(url_of(Path::new("s3:/b")).is_none());
        assert!(url_of(Path::new("model.safetensors")).is_none());
    }

    #[test]
    fn credentials_are_left_out_of_shown_urls() {
        assert_eq!(shown("http://u:secret@h:1/a@b"), "http://h:1/a@b");
        assert_eq!(shown("s3://bucket/k"), "s3://bucket/k");
    }
}
